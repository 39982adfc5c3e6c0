/* Work messages: TASK, COMPLETION and the DATA_CHUNK frames that stream
 * tensor bytes for both. */
#include "codec.h"
#include "wire/args.h"

#include <string.h>

/* Tensor indexes announced by TASK and COMPLETION: strictly ascending,
 * below STRATA_MAX_TENSORS (and below the args' tensor count, if known). */
static strata_err check_data_tensors(const struct wire_dec *d,
                                     const uint32_t *v, size_t n,
                                     uint32_t num_tensors)
{
    WIRE_TRY(wire_check_array(d, "data_tensors", v, n, STRATA_MAX_TENSORS));
    WIRE_TRY(wire_check_u32_set(d, "data_tensors", v, n, STRATA_MAX_TENSORS - 1,
                                true));
    if (n && v[n - 1] >= num_tensors)
        return wire_dec_fail(d, "data_tensors",
                             "names tensor %u of a task with %u tensors",
                             v[n - 1], num_tensors);
    return STRATA_OK;
}

static strata_err read_data_tensors(const struct wire_dec *d,
                                    const struct wire_body *b, unsigned key,
                                    const uint32_t **out, size_t *n)
{
    if (!b->val[key])
        return STRATA_OK;
    return wire_get_u32_list(d, WIRE_FIELD(b, key), 0, STRATA_MAX_TENSORS,
                             STRATA_MAX_TENSORS - 1, out, n);
}

static void write_data_tensors(struct wire_pk *p, unsigned key,
                               const uint32_t *v, size_t n)
{
    if (n) {
        wire_pk_uint(p, key);
        wire_pk_u32_list(p, v, n);
    }
}

/* ---- TASK --------------------------------------------------------------- */

enum {
    TASK_REQUEST_ID = 1,
    TASK_RUN_ID = 2,
    TASK_DIGEST = 3,
    TASK_ARGS = 4,
    TASK_TARGET = 5,
    TASK_CHIP = 6,
    TASK_DEADLINE_MS = 7,
    TASK_DATA_TENSORS = 8,
};

static const unsigned task_nkeys = TASK_DATA_TENSORS;
static const char *const task_names[] = {
    [TASK_REQUEST_ID] = "request_id",   [TASK_RUN_ID] = "run_id",
    [TASK_DIGEST] = "digest",           [TASK_ARGS] = "args",
    [TASK_TARGET] = "target",           [TASK_CHIP] = "chip",
    [TASK_DEADLINE_MS] = "deadline_ms", [TASK_DATA_TENSORS] = "data_tensors",
};

/* The args blob's own header must account for its length exactly; the
 * tensors themselves are checked by wire_args_decode on the receiver. */
static strata_err check_args(const struct wire_dec *d, const uint8_t *args,
                             size_t len, uint32_t *num_tensors)
{
    struct wire_args_header h;
    size_t need;

    if (!args || len < sizeof(h) || len > WIRE_ARGS_MAX)
        return wire_dec_fail(d, "args", "must be bin of %zu..%zu bytes",
                             sizeof(h), (size_t)WIRE_ARGS_MAX);
    memcpy(&h, args, sizeof(h));
    if (h.num_tensors > STRATA_MAX_TENSORS ||
        h.num_scalars > STRATA_MAX_SCALARS)
        return wire_dec_fail(d, "args", "declares %u tensors, %u scalars",
                             h.num_tensors, h.num_scalars);
    need = sizeof(h) + h.num_tensors * sizeof(struct wire_tensor) +
           h.num_scalars * sizeof(uint64_t);
    if (len != need)
        return wire_dec_fail(d, "args", "is %zu bytes, its header says %zu",
                             len, need);
    *num_tensors = h.num_tensors;
    return STRATA_OK;
}

static strata_err task_check(struct wire_dec *d, const void *vm)
{
    const struct wire_task *m = vm;
    uint32_t num_tensors = 0;

    if (m->request_id == 0)
        return wire_dec_fail(d, "request_id", "is 0");
    WIRE_TRY(check_args(d, m->args, m->args_len, &num_tensors));
    if (m->target < WIRE_TARGET_WORKER || m->target > WIRE_TARGET_SUB)
        return wire_dec_fail(d, "target", "has unknown value %u", m->target);
    if (m->target != WIRE_TARGET_CHIP && m->chip != 0)
        return wire_dec_fail(d, "chip", "is set for a non-chip target");
    if (m->chip > INT32_MAX)
        return wire_dec_fail(d, "chip", "is %u, not a chip id", m->chip);
    return check_data_tensors(d, m->data_tensors, m->num_data_tensors,
                              num_tensors);
}

static strata_err task_read(struct wire_dec *d, const struct wire_body *b,
                            void *vm)
{
    struct wire_task *m = vm;
    const uint8_t *digest;
    size_t n;

    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, TASK_REQUEST_ID), 1, UINT64_MAX,
                           &m->request_id));
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, TASK_RUN_ID), 0, UINT64_MAX,
                           &m->run_id));
    WIRE_TRY(wire_get_bin(d, WIRE_FIELD(b, TASK_DIGEST), sizeof(m->digest),
                          sizeof(m->digest), &digest, &n));
    memcpy(m->digest, digest, sizeof(m->digest));
    WIRE_TRY(wire_get_bin(d, WIRE_FIELD(b, TASK_ARGS),
                          sizeof(struct wire_args_header), WIRE_ARGS_MAX,
                          &m->args, &m->args_len));
    WIRE_TRY(wire_get_enum(d, WIRE_FIELD(b, TASK_TARGET), WIRE_TARGET_WORKER,
                           WIRE_TARGET_SUB, &m->target));
    if (m->target == WIRE_TARGET_CHIP)
        WIRE_TRY(
            wire_get_u32(d, WIRE_FIELD(b, TASK_CHIP), 0, INT32_MAX, &m->chip));
    else if (b->val[TASK_CHIP])
        return wire_dec_fail(d, "chip", "not allowed unless target is CHIP");
    if (b->val[TASK_DEADLINE_MS])
        WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, TASK_DEADLINE_MS), 1,
                               UINT64_MAX, &m->deadline_ms));
    return read_data_tensors(d, b, TASK_DATA_TENSORS, &m->data_tensors,
                             &m->num_data_tensors);
}

static void task_write(struct wire_pk *p, const struct wire_task *m)
{
    bool chip = m->target == WIRE_TARGET_CHIP;

    wire_pk_map(p,
                5 + chip + (m->deadline_ms != 0) + (m->num_data_tensors != 0));
    wire_pk_key_uint(p, TASK_REQUEST_ID, m->request_id);
    wire_pk_key_uint(p, TASK_RUN_ID, m->run_id);
    wire_pk_key_bin(p, TASK_DIGEST, m->digest, sizeof(m->digest));
    wire_pk_key_bin(p, TASK_ARGS, m->args, m->args_len);
    wire_pk_key_uint(p, TASK_TARGET, m->target);
    if (chip)
        wire_pk_key_uint(p, TASK_CHIP, m->chip);
    if (m->deadline_ms)
        wire_pk_key_uint(p, TASK_DEADLINE_MS, m->deadline_ms);
    write_data_tensors(p, TASK_DATA_TENSORS, m->data_tensors,
                       m->num_data_tensors);
}

WIRE_DEFINE_CODEC(task, TASK)

/* ---- COMPLETION --------------------------------------------------------- */

enum {
    COMPLETION_REQUEST_ID = 1,
    COMPLETION_ERROR = 2,
    COMPLETION_MESSAGE = 3,
    COMPLETION_DATA_TENSORS = 4,
    COMPLETION_NOT_RUN = 5,
};

static const unsigned completion_nkeys = COMPLETION_NOT_RUN;
static const char *const completion_names[] = {
    [COMPLETION_REQUEST_ID] = "request_id",
    [COMPLETION_ERROR] = "error",
    [COMPLETION_MESSAGE] = "message",
    [COMPLETION_DATA_TENSORS] = "data_tensors",
    [COMPLETION_NOT_RUN] = "not_run",
};

static strata_err completion_check(struct wire_dec *d, const void *vm)
{
    const struct wire_completion *m = vm;

    if (m->request_id == 0)
        return wire_dec_fail(d, "request_id", "is 0");
    WIRE_TRY(wire_check_err(d, "error", m->error));
    WIRE_TRY(wire_check_opt_str(d, "message", m->message, WIRE_MESSAGE_MAX));
    if (m->error != STRATA_OK && m->num_data_tensors)
        return wire_dec_fail(d, "data_tensors",
                             "not allowed in a failed completion");
    if (m->not_run && m->error == STRATA_OK)
        return wire_dec_fail(d, "not_run", "set in a successful completion");
    return check_data_tensors(d, m->data_tensors, m->num_data_tensors,
                              STRATA_MAX_TENSORS);
}

static strata_err completion_read(struct wire_dec *d, const struct wire_body *b,
                                  void *vm)
{
    struct wire_completion *m = vm;

    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, COMPLETION_REQUEST_ID), 1,
                           UINT64_MAX, &m->request_id));
    WIRE_TRY(wire_get_err(d, WIRE_FIELD(b, COMPLETION_ERROR), &m->error));
    WIRE_TRY(wire_get_opt_str(d, WIRE_FIELD(b, COMPLETION_MESSAGE),
                              WIRE_MESSAGE_MAX, &m->message));
    if (b->val[COMPLETION_NOT_RUN])
        WIRE_TRY(
            wire_get_bool(d, WIRE_FIELD(b, COMPLETION_NOT_RUN), &m->not_run));
    return read_data_tensors(d, b, COMPLETION_DATA_TENSORS, &m->data_tensors,
                             &m->num_data_tensors);
}

static void completion_write(struct wire_pk *p, const struct wire_completion *m)
{
    bool msg = WIRE_HAS_STR(m->message);

    wire_pk_map(p, 2 + msg + (m->num_data_tensors != 0) + m->not_run);
    wire_pk_key_uint(p, COMPLETION_REQUEST_ID, m->request_id);
    wire_pk_key_uint(p, COMPLETION_ERROR, (uint64_t)m->error);
    if (msg)
        wire_pk_key_str(p, COMPLETION_MESSAGE, m->message);
    if (m->not_run)
        wire_pk_key_bool(p, COMPLETION_NOT_RUN, true);
    write_data_tensors(p, COMPLETION_DATA_TENSORS, m->data_tensors,
                       m->num_data_tensors);
}

WIRE_DEFINE_CODEC(completion, COMPLETION)

/* ---- DATA_CHUNK --------------------------------------------------------- */

enum {
    DATA_CHUNK_REQUEST_ID = 1,
    DATA_CHUNK_TENSOR = 2,
    DATA_CHUNK_OFFSET = 3,
    DATA_CHUNK_DATA = 4,
    DATA_CHUNK_LAST = 5,
};

static const unsigned data_chunk_nkeys = DATA_CHUNK_LAST;
static const char *const data_chunk_names[] = {
    [DATA_CHUNK_REQUEST_ID] = "request_id",
    [DATA_CHUNK_TENSOR] = "tensor",
    [DATA_CHUNK_OFFSET] = "offset",
    [DATA_CHUNK_DATA] = "data",
    [DATA_CHUNK_LAST] = "last",
};

static strata_err data_chunk_check(struct wire_dec *d, const void *vm)
{
    const struct wire_data_chunk *m = vm;

    if (m->request_id == 0)
        return wire_dec_fail(d, "request_id", "is 0");
    if (m->tensor >= STRATA_MAX_TENSORS)
        return wire_dec_fail(d, "tensor", "is %u, outside 0..%d", m->tensor,
                             STRATA_MAX_TENSORS - 1);
    if (m->len > WIRE_CHUNK_MAX || (m->len && !m->data))
        return wire_dec_fail(d, "data", "must be bin of 0..%u bytes",
                             WIRE_CHUNK_MAX);
    if (m->len == 0 && !m->last)
        return wire_dec_fail(d, "data",
                             "is empty in a chunk that is not "
                             "the last");
    if (m->offset > UINT64_MAX - m->len)
        return wire_dec_fail(d, "offset", "plus the data length overflows");
    return STRATA_OK;
}

static strata_err data_chunk_read(struct wire_dec *d, const struct wire_body *b,
                                  void *vm)
{
    struct wire_data_chunk *m = vm;

    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, DATA_CHUNK_REQUEST_ID), 1,
                           UINT64_MAX, &m->request_id));
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, DATA_CHUNK_TENSOR), 0,
                          STRATA_MAX_TENSORS - 1, &m->tensor));
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, DATA_CHUNK_OFFSET), 0, UINT64_MAX,
                           &m->offset));
    WIRE_TRY(wire_get_bin(d, WIRE_FIELD(b, DATA_CHUNK_DATA), 0, WIRE_CHUNK_MAX,
                          &m->data, &m->len));
    return wire_get_bool(d, WIRE_FIELD(b, DATA_CHUNK_LAST), &m->last);
}

static void data_chunk_write(struct wire_pk *p, const struct wire_data_chunk *m)
{
    wire_pk_map(p, 5);
    wire_pk_key_uint(p, DATA_CHUNK_REQUEST_ID, m->request_id);
    wire_pk_key_uint(p, DATA_CHUNK_TENSOR, m->tensor);
    wire_pk_key_uint(p, DATA_CHUNK_OFFSET, m->offset);
    wire_pk_key_bin(p, DATA_CHUNK_DATA, m->data, m->len);
    wire_pk_key_bool(p, DATA_CHUNK_LAST, m->last);
}

WIRE_DEFINE_CODEC(data_chunk, DATA_CHUNK)
