/*
 * Kernels, submit helpers and resource probes shared by the domain tests.
 */
#define _GNU_SOURCE
#include "dom_kit.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

strata_callable dom_k_probe, dom_k_allreduce, dom_k_zero_check;
strata_callable dom_k_fail, dom_k_read_window, dom_k_write_window;

static const strata_comm_context *ctx_or_fail(strata_chip *chip,
                                              const strata_args *a)
{
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(a, 0));

    if (!cc)
        strata_errmsg_set("chip %d: no comm context for device_ctx %#llx",
                          strata_chip_id(chip),
                          (unsigned long long)strata_args_scalar(a, 0));
    return cc;
}

static strata_err probe_kernel(strata_chip *chip, const strata_args *a)
{
    struct dom_probe *p = strata_args_tensor_data(a, 0);
    const strata_comm_context *cc =
        strata_chip_comm_context(chip, strata_args_scalar(a, 0));
    const uint64_t bogus[DOM_PROBE_BOGUS] = {0, 1, 0xdeadbeefull,
                                             ~strata_args_scalar(a, 0)};

    if (strata_args_tensor_nbytes(a, 0) != sizeof(*p)) {
        strata_errmsg_set("probe: record of %zu bytes",
                          strata_args_tensor_nbytes(a, 0));
        return STRATA_EINVAL;
    }
    memset(p, 0, sizeof(*p));
    p->chip = strata_chip_id(chip);
    for (size_t i = 0; i < DOM_PROBE_BOGUS; i++)
        p->bogus_null += strata_chip_comm_context(chip, bogus[i]) == NULL;
    if (!cc)
        return STRATA_OK;
    p->found = 1;
    p->version = cc->version;
    p->rank = cc->rank;
    p->rank_count = cc->rank_count;
    p->window_size = cc->window_size;
    if (cc->rank < cc->rank_count)
        p->own_base = (uint64_t)(uintptr_t)cc->window_base[cc->rank];
    for (uint32_t r = 0; r < cc->rank_count; r++)
        p->bases_seen += cc->window_base[r] != NULL;
    return STRATA_OK;
}

uint32_t dom_ar_expect(uint32_t seed, uint32_t ranks, uint32_t i)
{
    uint32_t s = 0;

    for (uint32_t r = 0; r < ranks; r++)
        s += dom_ar_value(seed, r, i);
    return s;
}

static strata_err allreduce_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc = ctx_or_fail(chip, a);
    size_t data_off = (size_t)strata_args_scalar(a, 1);
    uint32_t n = (uint32_t)strata_args_scalar(a, 2);
    size_t flag_off = (size_t)strata_args_scalar(a, 3);
    uint32_t seed = (uint32_t)strata_args_scalar(a, 4);
    uint32_t *out = it_arg_u32(a, 0);
    uint32_t *mine;
    strata_err e;

    if (!cc)
        return STRATA_ENOENT;
    if (it_arg_count(a, 0) != n || data_off + (size_t)n * 4 > cc->window_size ||
        flag_off + 4 > cc->window_size) {
        strata_errmsg_set("allreduce: bad layout");
        return STRATA_EINVAL;
    }
    if (strata_args_num_tensors(a) == 2) {
        /* Meet every member of every group first: proves they overlap. */
        uint32_t *meet = it_arg_u32(a, 1);
        testutil_add_u32(meet, 1);
        if (!testutil_wait_u32_ge(meet, (uint32_t)strata_args_scalar(a, 5),
                                  DOM_WAIT_S)) {
            strata_errmsg_set("allreduce rank %u on chip %d: met only %u of "
                              "%u",
                              cc->rank, strata_chip_id(chip),
                              testutil_load_u32(meet),
                              (uint32_t)strata_args_scalar(a, 5));
            return STRATA_ETIMEDOUT;
        }
    }
    mine = (uint32_t *)((char *)cc->window_base[cc->rank] + data_off);
    for (uint32_t i = 0; i < n; i++)
        mine[i] = dom_ar_value(seed, cc->rank, i);
    for (uint32_t r = 0; r < cc->rank_count; r++)
        strata_signal_add(
            (volatile uint32_t *)((char *)cc->window_base[r] + flag_off), 1);
    e = strata_signal_wait(
        (volatile uint32_t *)((char *)cc->window_base[cc->rank] + flag_off),
        cc->rank_count, DOM_WAIT_S);
    if (e != STRATA_OK) {
        char msg[STRATA_ERRMSG_MAX];
        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        strata_errmsg_set("allreduce rank %u on chip %d: %s", cc->rank,
                          strata_chip_id(chip), msg);
        return e;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = 0;
        for (uint32_t r = 0; r < cc->rank_count; r++)
            s += ((const uint32_t *)((const char *)cc->window_base[r] +
                                     data_off))[i];
        out[i] = s;
    }
    return STRATA_OK;
}

/* Bytes in [p, p + n) that are not zero. */
static uint64_t nonzero_bytes(const unsigned char *p, size_t n)
{
    uint64_t bad = 0;
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        if (v == 0)
            continue;
        for (size_t j = 0; j < 8; j++)
            bad += p[i + j] != 0;
    }
    for (; i < n; i++)
        bad += p[i] != 0;
    return bad;
}

static strata_err zero_check_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc = ctx_or_fail(chip, a);
    uint32_t *barrier = it_arg_u32(a, 0);
    uint32_t *res = it_arg_u32(a, 1);
    unsigned char base = (unsigned char)strata_args_scalar(a, 1);
    uint64_t before = 0, after = 0;

    if (!cc)
        return STRATA_ENOENT;
    /* Nobody writes before everyone has checked every window. */
    for (uint32_t r = 0; r < cc->rank_count; r++)
        before += nonzero_bytes(cc->window_base[r], cc->window_size);
    testutil_add_u32(&barrier[0], 1);
    if (!testutil_wait_u32_ge(&barrier[0], cc->rank_count, DOM_WAIT_S)) {
        strata_errmsg_set("zero_check: barrier 0 timed out");
        return STRATA_ETIMEDOUT;
    }
    memset(cc->window_base[cc->rank], (int)(unsigned char)(base + cc->rank),
           cc->window_size);
    testutil_add_u32(&barrier[1], 1);
    if (!testutil_wait_u32_ge(&barrier[1], cc->rank_count, DOM_WAIT_S)) {
        strata_errmsg_set("zero_check: barrier 1 timed out");
        return STRATA_ETIMEDOUT;
    }
    for (uint32_t r = 0; r < cc->rank_count; r++) {
        const unsigned char *p = cc->window_base[r];
        unsigned char want = (unsigned char)(base + r);
        for (size_t i = 0; i < cc->window_size; i++)
            after += p[i] != want;
    }
    res[0] = (uint32_t)(before > UINT32_MAX ? UINT32_MAX : before);
    res[1] = (uint32_t)(after > UINT32_MAX ? UINT32_MAX : after);
    return STRATA_OK;
}

static strata_err fail_kernel(strata_chip *chip, const strata_args *a)
{
    (void)a;
    strata_errmsg_set("dom fail kernel on chip %d", strata_chip_id(chip));
    return STRATA_EIO;
}

static strata_err read_window_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc = ctx_or_fail(chip, a);
    uint64_t rank = strata_args_scalar(a, 1);
    uint64_t off = strata_args_scalar(a, 2);
    size_t n = strata_args_tensor_nbytes(a, 0);

    if (!cc)
        return STRATA_ENOENT;
    if (rank >= cc->rank_count || off > cc->window_size ||
        n > cc->window_size - off) {
        strata_errmsg_set("read_window: out of range");
        return STRATA_EINVAL;
    }
    memcpy(strata_args_tensor_data(a, 0),
           (const char *)cc->window_base[rank] + off, n);
    return STRATA_OK;
}

static strata_err write_window_kernel(strata_chip *chip, const strata_args *a)
{
    const strata_comm_context *cc = ctx_or_fail(chip, a);
    uint64_t off = strata_args_scalar(a, 1);
    size_t n = strata_args_tensor_nbytes(a, 0);

    if (!cc)
        return STRATA_ENOENT;
    testutil_busy((double)strata_args_scalar(a, 2) * 1e-6);
    if (off > cc->window_size || n > cc->window_size - off) {
        strata_errmsg_set("write_window: out of range");
        return STRATA_EINVAL;
    }
    memcpy((char *)cc->window_base[cc->rank] + off,
           strata_args_tensor_data(a, 0), n);
    return STRATA_OK;
}

int dom_kit_register(void)
{
    if (it_kernels_register() != 0)
        return -1;
    it_register(kernel, "dom.probe", probe_kernel, &dom_k_probe);
    it_register(kernel, "dom.allreduce", allreduce_kernel, &dom_k_allreduce);
    it_register(kernel, "dom.zero_check", zero_check_kernel, &dom_k_zero_check);
    it_register(kernel, "dom.fail", fail_kernel, &dom_k_fail);
    it_register(kernel, "dom.read_window", read_window_kernel,
                &dom_k_read_window);
    it_register(kernel, "dom.write_window", write_window_kernel,
                &dom_k_write_window);
    return 0;
}

int dom_setup(void **state)
{
    (void)state;
    return dom_kit_register();
}

void dom_spec_init(struct dom_spec *s, const char *name, const int *ids,
                   size_t n, size_t window_size)
{
    memset(s, 0, sizeof(*s));
    for (size_t i = 0; i < n && i < 128; i++)
        s->workers[i] = ids[i];
    s->spec.name = name;
    s->spec.workers = s->workers;
    s->spec.num_workers = n;
    s->spec.window_size = window_size;
    s->spec.buffers = s->bufs;
    s->spec.num_buffers = 0;
}

void dom_spec_buf(struct dom_spec *s, const char *name, strata_dtype dtype,
                  size_t count)
{
    strata_comm_buffer_spec *b = &s->bufs[s->spec.num_buffers++];

    b->name = name;
    b->dtype = dtype;
    b->count = count;
    b->nbytes = count * strata_dtype_size(dtype);
}

/* Builds one args list per member with make(), submits them as a group. */
typedef strata_err (*member_args_fn)(strata_args *a, size_t r,
                                     const strata_chip_domain_ctx *ctx,
                                     void *arg);

static strata_err submit_group(strata_orch *o, strata_callable c,
                               const strata_domain *d, const int *ids, size_t n,
                               member_args_fn make, void *arg)
{
    strata_args **a = calloc(n, sizeof(*a));
    strata_err e = a ? STRATA_OK : STRATA_ENOMEM;

    for (size_t r = 0; r < n && e == STRATA_OK; r++) {
        strata_chip_domain_ctx ctx;
        e = strata_domain_context(d, ids[r], &ctx);
        if (e == STRATA_OK)
            e = strata_args_create(&a[r]);
        if (e == STRATA_OK)
            e = make(a[r], r, &ctx, arg);
    }
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level_group(
            o, c, (const strata_args *const *)a, ids, n);
    for (size_t r = 0; a && r < n; r++)
        strata_args_destroy(a[r]);
    free(a);
    return e;
}

static strata_err probe_args(strata_args *a, size_t r,
                             const strata_chip_domain_ctx *ctx, void *arg)
{
    size_t shape[1] = {sizeof(struct dom_probe)};

    it_try(strata_args_add_tensor(a, arg, r * sizeof(struct dom_probe),
                                  STRATA_U8, 1, shape, STRATA_OUT));
    return strata_args_add_scalar(a, ctx->device_ctx);
}

strata_err dom_submit_probe(strata_orch *o, const strata_domain *d,
                            const int *ids, size_t n, strata_buffer *out)
{
    return submit_group(o, dom_k_probe, d, ids, n, probe_args, out);
}

struct ar_arg {
    strata_buffer *out;
    size_t data_off, count, flag_off;
    uint32_t seed;
    strata_buffer *meet;
    uint32_t meet_total;
};

static strata_err ar_args(strata_args *a, size_t r,
                          const strata_chip_domain_ctx *ctx, void *arg)
{
    const struct ar_arg *x = arg;

    it_try(it_add_u32(a, x->out, r * x->count, x->count, STRATA_OUT));
    it_try(strata_args_add_scalar(a, ctx->device_ctx));
    it_try(strata_args_add_scalar(a, x->data_off));
    it_try(strata_args_add_scalar(a, x->count));
    it_try(strata_args_add_scalar(a, x->flag_off));
    it_try(strata_args_add_scalar(a, x->seed));
    if (!x->meet)
        return STRATA_OK;
    it_try(it_add_u32(a, x->meet, 0, 1, STRATA_NO_DEP));
    return strata_args_add_scalar(a, x->meet_total);
}

strata_err dom_submit_allreduce(strata_orch *o, const strata_domain *d,
                                const int *ids, size_t n, size_t data_off,
                                size_t count, size_t flag_off, uint32_t seed,
                                strata_buffer *out)
{
    struct ar_arg x = {out, data_off, count, flag_off, seed, NULL, 0};

    return submit_group(o, dom_k_allreduce, d, ids, n, ar_args, &x);
}

strata_err dom_submit_allreduce_meet(strata_orch *o, const strata_domain *d,
                                     const int *ids, size_t n, size_t data_off,
                                     size_t count, size_t flag_off,
                                     uint32_t seed, strata_buffer *out,
                                     strata_buffer *meet, uint32_t meet_total)
{
    struct ar_arg x = {out, data_off, count, flag_off, seed, meet, meet_total};

    return submit_group(o, dom_k_allreduce, d, ids, n, ar_args, &x);
}

size_t dom_check_allreduce(strata_buffer *out, size_t n, size_t count,
                           uint32_t seed)
{
    const uint32_t *v = strata_buffer_data(out);
    size_t bad = 0;

    for (size_t r = 0; r < n; r++) {
        for (size_t i = 0; i < count; i++) {
            uint32_t want = dom_ar_expect(seed, (uint32_t)n, (uint32_t)i);
            if (v[r * count + i] == want)
                continue;
            if (bad++ == 0)
                print_message("allreduce: member %zu [%zu] = %u, want %u\n", r,
                              i, v[r * count + i], want);
        }
    }
    return bad;
}

/* Whether a maps line names a window segment: ".../strata-U-P-dN-rM". */
static bool window_line(const char *line, unsigned long long *id_out)
{
    const char *p = strstr(line, "/dev/shm/strata-");
    unsigned uid, rank;
    int pid;
    unsigned long long id;

    if (!p)
        return false;
    if (sscanf(p, "/dev/shm/strata-%u-%d-d%llu-r%u", &uid, &pid, &id, &rank) !=
        4)
        return false;
    if (id_out)
        *id_out = id;
    return true;
}

size_t dom_window_maps(pid_t pid)
{
    char path[64], line[512];
    size_t n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        n += window_line(line, NULL);
    fclose(f);
    return n;
}

size_t dom_chip_window_maps(const strata_worker *w, const int *ids, size_t n)
{
    size_t total = 0;

    for (size_t i = 0; i < n; i++) {
        int pid = strata_worker_chip_pid(w, ids[i]);
        if (pid > 0)
            total += dom_window_maps(pid);
    }
    return total;
}

size_t dom_shm_windows(void)
{
    char prefix[64];
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    size_t n = 0;

    if (!d)
        return 0;
    snprintf(prefix, sizeof(prefix), "strata-%u-%d-d", (unsigned)getuid(),
             (int)getpid());
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

unsigned long long dom_window_alloc_id(pid_t pid, uint64_t base)
{
    char path[64], line[512];
    unsigned long long id = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        uint64_t lo, hi;
        unsigned long long cand;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) == 2 && base >= lo &&
            base < hi && window_line(line, &cand)) {
            id = cand;
            break;
        }
    }
    fclose(f);
    return id;
}
