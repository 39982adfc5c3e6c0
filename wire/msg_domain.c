/* The global domain command (version 2): members, the attachment matrix,
 * buffers and the descriptor table, with the phase rules, plus the
 * descriptor helpers DOMAIN_REPLY shares. */
#include "base/alloc.h"
#include "base/err.h"
#include "codec.h"

#include <stdlib.h>
#include <string.h>

static const char *const phase_names[] = {
    [WIRE_PHASE_PREPARE_EXPORT] = "PREPARE_EXPORT",
    [WIRE_PHASE_IMPORT] = "IMPORT",
    [WIRE_PHASE_COMMIT] = "COMMIT",
    [WIRE_PHASE_ABORT] = "ABORT",
};

const char *wire_phase_name(unsigned phase)
{
    return phase >= WIRE_PHASE_PREPARE_EXPORT && phase <= WIRE_PHASE_ABORT
               ? phase_names[phase]
               : "unknown";
}

static bool phase_has_descriptors(unsigned phase)
{
    return phase == WIRE_PHASE_IMPORT || phase == WIRE_PHASE_COMMIT;
}

/* ---- Descriptors -------------------------------------------------------- */

enum { DESC_FIELDS = 6 };

strata_err wire_descriptor_read(const struct wire_dec *d,
                                const msgpack_object *o,
                                struct wire_descriptor *out)
{
    const msgpack_object *f;

    WIRE_TRY(wire_get_tuple(d, NULL, o, DESC_FIELDS, &f));
    WIRE_TRY(wire_get_u32(d, "version", &f[0], 1, UINT32_MAX, &out->version));
    WIRE_TRY(
        wire_get_str(d, "profile", &f[1], 1, WIRE_PROFILE_MAX, &out->profile));
    WIRE_TRY(wire_get_u32(d, "domain_rank", &f[2], 0, WIRE_MAX_RANKS - 1,
                          &out->domain_rank));
    WIRE_TRY(wire_get_u32(d, "rank_count", &f[3], 1, WIRE_MAX_RANKS,
                          &out->rank_count));
    WIRE_TRY(wire_get_uint(d, "mapping_size", &f[4], 1, UINT64_MAX,
                           &out->mapping_size));
    return wire_get_str(d, "handle", &f[5], 1, WIRE_NAME_MAX, &out->handle);
}

strata_err wire_descriptor_check(const struct wire_dec *d,
                                 const struct wire_descriptor *v)
{
    if (v->version != WIRE_DESCRIPTOR_VERSION)
        return wire_dec_fail(d, "version", "is %u, this build speaks %d",
                             v->version, WIRE_DESCRIPTOR_VERSION);
    WIRE_TRY(wire_check_str(d, "profile", v->profile, 1, WIRE_PROFILE_MAX));
    if (v->rank_count < 1 || v->rank_count > WIRE_MAX_RANKS)
        return wire_dec_fail(d, "rank_count", "is %u, outside 1..%d",
                             v->rank_count, WIRE_MAX_RANKS);
    if (v->domain_rank >= v->rank_count)
        return wire_dec_fail(d, "domain_rank", "is %u, rank_count is %u",
                             v->domain_rank, v->rank_count);
    if (v->mapping_size == 0)
        return wire_dec_fail(d, "mapping_size", "is 0");
    return wire_check_str(d, "handle", v->handle, 1, WIRE_NAME_MAX);
}

void wire_descriptor_pack(struct wire_pk *p, const struct wire_descriptor *v)
{
    wire_pk_array(p, DESC_FIELDS);
    wire_pk_uint(p, v->version);
    wire_pk_str(p, v->profile);
    wire_pk_uint(p, v->domain_rank);
    wire_pk_uint(p, v->rank_count);
    wire_pk_uint(p, v->mapping_size);
    wire_pk_str(p, v->handle);
}

strata_err wire_descriptors_read(struct wire_dec *d, const char *field,
                                 const msgpack_object *o, size_t min,
                                 size_t max, const struct wire_descriptor **out,
                                 size_t *n)
{
    const msgpack_object *items;
    struct wire_descriptor *v;
    size_t count;

    WIRE_TRY(wire_get_array(d, field, o, min, max, &items, &count));
    v = wire_arena_alloc(d->arena, count * sizeof(*v));
    if (!v)
        return base_fail(STRATA_ENOMEM, "%s: out of memory", d->msg);
    for (size_t k = 0; k < count; k++) {
        wire_dec_enter(d, field, (long)k);
        WIRE_TRY(wire_descriptor_read(d, &items[k], &v[k]));
    }
    wire_dec_leave(d);
    *out = v;
    *n = count;
    return STRATA_OK;
}

/* The rank-ordered table rules, under d's message and code. */
static strata_err table_check(struct wire_dec *d, const char *field,
                              const struct wire_descriptor *t, size_t n,
                              const char *profile, uint64_t window_size)
{
    if (n < 1 || n > WIRE_MAX_RANKS || !t)
        return wire_dec_fail(d, field, "must be array of 1..%d elements",
                             WIRE_MAX_RANKS);
    for (size_t k = 0; k < n; k++) {
        wire_dec_enter(d, field, (long)k);
        WIRE_TRY(wire_descriptor_check(d, &t[k]));
        if (t[k].domain_rank != k)
            return wire_dec_fail(d, "domain_rank", "is %u, expected %zu",
                                 t[k].domain_rank, k);
        if (t[k].rank_count != n)
            return wire_dec_fail(d, "rank_count", "is %u in a table of %zu",
                                 t[k].rank_count, n);
        if (profile && strcmp(t[k].profile, profile) != 0)
            return wire_dec_fail(d, "profile",
                                 "is \"%s\", the domain's is "
                                 "\"%s\"",
                                 t[k].profile, profile);
        if (t[k].mapping_size != t[0].mapping_size)
            return wire_dec_fail(d, "mapping_size", "is %llu, rank 0 maps %llu",
                                 (unsigned long long)t[k].mapping_size,
                                 (unsigned long long)t[0].mapping_size);
        if (t[k].mapping_size < window_size)
            return wire_dec_fail(d, "mapping_size",
                                 "is %llu, below the window size %llu",
                                 (unsigned long long)t[k].mapping_size,
                                 (unsigned long long)window_size);
    }
    wire_dec_leave(d);
    return STRATA_OK;
}

strata_err wire_descriptor_table_check(const struct wire_descriptor *table,
                                       size_t n, const char *profile,
                                       uint64_t window_size)
{
    struct wire_dec d;

    wire_dec_init(&d, 0, STRATA_EINVAL, NULL);
    d.msg = "descriptor table";
    return table_check(&d, "descriptors", table, n, profile, window_size);
}

/* ---- Members ------------------------------------------------------------ */

enum { MEMBER_FIELDS = 4, ENTRY_FIELDS = 4, BUFFER_FIELDS = 4 };

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The distinct nodes of the members, ascending, after checking that no
 * (node, chip) pair repeats. *nodes_out is base_malloc'ed. */
static strata_err member_nodes(struct wire_dec *d,
                               const struct wire_domain_member *mem, size_t n,
                               uint32_t **nodes_out, size_t *count_out)
{
    uint64_t *keys = base_malloc(n * (sizeof(uint64_t) + sizeof(uint32_t)));
    uint32_t *nodes;
    size_t count = 0;

    if (!keys)
        return base_fail(STRATA_ENOMEM, "%s: out of memory", d->msg);
    nodes = (uint32_t *)(keys + n);
    for (size_t k = 0; k < n; k++)
        keys[k] =
            (uint64_t)mem[k].node_worker_id << 32 | mem[k].local_worker_id;
    qsort(keys, n, sizeof(*keys), cmp_u64);
    for (size_t k = 0; k < n; k++) {
        if (k && keys[k] == keys[k - 1]) {
            strata_err err =
                wire_dec_fail(d, "members", "names node %u chip %u twice",
                              (unsigned)(keys[k] >> 32), (unsigned)keys[k]);

            base_free(keys);
            return err;
        }
        if (!count || nodes[count - 1] != (uint32_t)(keys[k] >> 32))
            nodes[count++] = (uint32_t)(keys[k] >> 32);
    }
    /* nodes lives inside keys' block: move it to the front. */
    memmove(keys, nodes, count * sizeof(*nodes));
    *nodes_out = (uint32_t *)keys;
    *count_out = count;
    return STRATA_OK;
}

static strata_err members_check(struct wire_dec *d,
                                const struct wire_domain_cmd *m)
{
    uint32_t *nodes;
    size_t num_nodes;

    WIRE_TRY(wire_check_array(d, "members", m->members, m->num_members,
                              WIRE_MAX_RANKS));
    if (m->num_members == 0)
        return wire_dec_fail(d, "members", "must be array of 1..%d elements",
                             WIRE_MAX_RANKS);
    for (size_t k = 0; k < m->num_members; k++) {
        const struct wire_domain_member *v = &m->members[k];

        wire_dec_enter(d, "members", (long)k);
        if (v->node_worker_id > INT32_MAX)
            return wire_dec_fail(d, "node_worker_id", "is %u, not an id",
                                 v->node_worker_id);
        if (v->local_worker_id > INT32_MAX)
            return wire_dec_fail(d, "local_worker_id", "is %u, not an id",
                                 v->local_worker_id);
        if (v->global_device_rank > WIRE_DEVICE_RANK_MAX)
            return wire_dec_fail(d, "global_device_rank", "is %u, not a rank",
                                 v->global_device_rank);
        if (v->domain_rank != k)
            return wire_dec_fail(d, "domain_rank",
                                 "is %u, members are in rank order (%zu)",
                                 v->domain_rank, k);
    }
    wire_dec_leave(d);
    WIRE_TRY(member_nodes(d, m->members, m->num_members, &nodes, &num_nodes));
    base_free(nodes);
    return STRATA_OK;
}

/* ---- Attachments -------------------------------------------------------- */

static strata_err entry_check(const struct wire_dec *d,
                              const struct wire_attach_entry *e)
{
    if (e->address_space < WIRE_SPACE_HOST ||
        e->address_space > WIRE_SPACE_DEVICE)
        return wire_dec_fail(d, "address_space", "has unknown value %u",
                             e->address_space);
    if (e->role < WIRE_ROLE_PROVIDER || e->role > WIRE_ROLE_CONSUMER)
        return wire_dec_fail(d, "role", "has unknown value %u", e->role);
    if (e->adapter > WIRE_ADAPTER_MAX)
        return wire_dec_fail(d, "adapter_kind", "has unknown value %u",
                             e->adapter);
    WIRE_TRY(wire_check_str(d, "adapter_profile", e->adapter_profile, 0,
                            WIRE_PROFILE_MAX));
    if (e->adapter == WIRE_ADAPTER_NONE && e->adapter_profile[0])
        return wire_dec_fail(d, "adapter_profile",
                             "must be empty without an adapter");
    return STRATA_OK;
}

static int find_node(const uint32_t *nodes, size_t n, uint32_t node)
{
    size_t lo = 0;
    size_t hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (nodes[mid] == node)
            return (int)mid;
        if (nodes[mid] < node)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* One row per distinct member node, each row one valid entry per member. */
static strata_err attach_rows_check(struct wire_dec *d,
                                    const struct wire_domain_cmd *m,
                                    const uint32_t *nodes, size_t num_nodes,
                                    uint8_t *seen)
{
    for (size_t r = 0; r < m->num_attach_rows; r++) {
        const struct wire_attach_row *row = &m->attach_rows[r];
        int at = find_node(nodes, num_nodes, row->node_worker_id);

        wire_dec_enter(d, "attachments", (long)r);
        if (at < 0)
            return wire_dec_fail(d, "node_worker_id",
                                 "is %u, which owns no member",
                                 row->node_worker_id);
        if (seen[at]++)
            return wire_dec_fail(d, "node_worker_id", "repeats node %u",
                                 row->node_worker_id);
        if (!row->entries)
            return wire_dec_fail(d, "entries", "is NULL");
        for (size_t k = 0; k < m->num_members; k++) {
            wire_dec_enter_inner(d, "entries", (long)k);
            WIRE_TRY(entry_check(d, &row->entries[k]));
        }
    }
    wire_dec_leave(d);
    if (m->num_attach_rows != num_nodes)
        return wire_dec_fail(d, "attachments",
                             "has %zu rows, the members live on %zu nodes",
                             m->num_attach_rows, num_nodes);
    return STRATA_OK;
}

static strata_err attachments_check(struct wire_dec *d,
                                    const struct wire_domain_cmd *m)
{
    uint32_t *nodes;
    size_t num_nodes;
    uint8_t *seen;
    strata_err err;

    if (m->num_attach_rows == 0)
        return STRATA_OK;
    if (m->phase != WIRE_PHASE_PREPARE_EXPORT)
        return wire_dec_fail(d, "attachments", "not allowed in phase %s",
                             wire_phase_name(m->phase));
    if (!m->attach_rows)
        return wire_dec_fail(d, "attachments", "is NULL with %zu rows",
                             m->num_attach_rows);
    if (m->num_attach_rows > WIRE_MAX_ATTACH_ENTRIES / m->num_members)
        return wire_dec_fail(
            d, "attachments", "holds %zu x %zu entries, more than %d",
            m->num_attach_rows, m->num_members, WIRE_MAX_ATTACH_ENTRIES);
    WIRE_TRY(member_nodes(d, m->members, m->num_members, &nodes, &num_nodes));
    seen = base_calloc(num_nodes, 1);
    if (!seen) {
        base_free(nodes);
        return base_fail(STRATA_ENOMEM, "%s: out of memory", d->msg);
    }
    err = attach_rows_check(d, m, nodes, num_nodes, seen);
    base_free(seen);
    base_free(nodes);
    return err;
}

/* ---- Buffers ------------------------------------------------------------ */

static strata_err buffers_check(struct wire_dec *d,
                                const struct wire_domain_cmd *m)
{
    uint64_t total = 0;

    WIRE_TRY(wire_check_array(d, "buffers", m->buffers, m->num_buffers,
                              WIRE_MAX_DOMAIN_BUFFERS));
    for (size_t k = 0; k < m->num_buffers; k++) {
        const struct wire_domain_buffer *v = &m->buffers[k];
        size_t esize = strata_dtype_size((strata_dtype)v->dtype);

        wire_dec_enter(d, "buffers", (long)k);
        WIRE_TRY(wire_check_str(d, "name", v->name, 1, WIRE_NAME_MAX));
        for (size_t l = 0; l < k; l++)
            if (strcmp(m->buffers[l].name, v->name) == 0)
                return wire_dec_fail(d, "name", "repeats \"%s\"", v->name);
        if (!esize)
            return wire_dec_fail(d, "dtype", "has unknown value %u", v->dtype);
        if (v->nbytes == 0 || v->count > v->nbytes / esize ||
            v->count * esize != v->nbytes)
            return wire_dec_fail(d, "nbytes",
                                 "is %llu, count %llu of %zu-byte elements",
                                 (unsigned long long)v->nbytes,
                                 (unsigned long long)v->count, esize);
        if (v->nbytes > m->window_size - total)
            return wire_dec_fail(d, "nbytes",
                                 "overruns the window of %llu bytes",
                                 (unsigned long long)m->window_size);
        total += v->nbytes;
    }
    wire_dec_leave(d);
    return STRATA_OK;
}

/* ---- DOMAIN_CMD --------------------------------------------------------- */

enum {
    CMD_REQUEST_ID = 1,
    CMD_VERSION = 2,
    CMD_PHASE = 3,
    CMD_DOMAIN_ID = 4,
    CMD_GENERATION = 5,
    CMD_WINDOW_SIZE = 6,
    CMD_NAME = 7,
    CMD_PROFILE = 8,
    CMD_MEMBERS = 9,
    CMD_ATTACHMENTS = 10,
    CMD_BUFFERS = 11,
    CMD_DESCRIPTORS = 12,
    CMD_GATHER = 13,
    CMD_EXCHANGE = 14,
};

static const unsigned domain_cmd_nkeys = CMD_EXCHANGE;
static const char *const domain_cmd_names[] = {
    [CMD_REQUEST_ID] = "request_id",
    [CMD_VERSION] = "version",
    [CMD_PHASE] = "phase",
    [CMD_DOMAIN_ID] = "domain_id",
    [CMD_GENERATION] = "generation",
    [CMD_WINDOW_SIZE] = "window_size",
    [CMD_NAME] = "name",
    [CMD_PROFILE] = "profile",
    [CMD_MEMBERS] = "members",
    [CMD_ATTACHMENTS] = "attachments",
    [CMD_BUFFERS] = "buffers",
    [CMD_DESCRIPTORS] = "descriptors",
    [CMD_GATHER] = "gather",
    [CMD_EXCHANGE] = "exchange",
};

static strata_err domain_cmd_check(struct wire_dec *d, const void *vm)
{
    const struct wire_domain_cmd *m = vm;

    if (m->request_id == 0)
        return wire_dec_fail(d, "request_id", "is 0");
    if (m->version != WIRE_DOMAIN_CMD_VERSION)
        return wire_dec_fail(d, "version", "is %u, this build speaks %d",
                             m->version, WIRE_DOMAIN_CMD_VERSION);
    if (m->phase < WIRE_PHASE_PREPARE_EXPORT || m->phase > WIRE_PHASE_ABORT)
        return wire_dec_fail(d, "phase", "has unknown value %u", m->phase);
    if (m->domain_id == 0)
        return wire_dec_fail(d, "domain_id", "is 0");
    if (m->window_size == 0)
        return wire_dec_fail(d, "window_size", "is 0");
    WIRE_TRY(wire_check_str(d, "name", m->name, 1, WIRE_NAME_MAX));
    WIRE_TRY(wire_check_str(d, "profile", m->profile, 1, WIRE_PROFILE_MAX));
    WIRE_TRY(members_check(d, m));
    WIRE_TRY(attachments_check(d, m));
    WIRE_TRY(buffers_check(d, m));
    if (m->gather && m->phase != WIRE_PHASE_PREPARE_EXPORT)
        return wire_dec_fail(d, "gather", "not allowed in phase %s",
                             wire_phase_name(m->phase));
    if (m->exchange && m->phase != WIRE_PHASE_PREPARE_EXPORT)
        return wire_dec_fail(d, "exchange", "not allowed in phase %s",
                             wire_phase_name(m->phase));
    if (!phase_has_descriptors(m->phase)) {
        if (m->num_descriptors)
            return wire_dec_fail(d, "descriptors", "not allowed in phase %s",
                                 wire_phase_name(m->phase));
        return STRATA_OK;
    }
    if (m->num_descriptors != m->num_members)
        return wire_dec_fail(d, "descriptors",
                             "has %zu entries for %zu members",
                             m->num_descriptors, m->num_members);
    return table_check(d, "descriptors", m->descriptors, m->num_descriptors,
                       m->profile, m->window_size);
}

static strata_err members_read(struct wire_dec *d, const struct wire_body *b,
                               struct wire_domain_cmd *m)
{
    const msgpack_object *items;
    const msgpack_object *f;
    struct wire_domain_member *v;
    size_t n;

    WIRE_TRY(wire_get_array(d, WIRE_FIELD(b, CMD_MEMBERS), 1, WIRE_MAX_RANKS,
                            &items, &n));
    v = wire_arena_alloc(d->arena, n * sizeof(*v));
    if (!v)
        return base_fail(STRATA_ENOMEM, "%s: out of memory", d->msg);
    for (size_t k = 0; k < n; k++) {
        wire_dec_enter(d, "members", (long)k);
        WIRE_TRY(wire_get_tuple(d, NULL, &items[k], MEMBER_FIELDS, &f));
        WIRE_TRY(wire_get_u32(d, "node_worker_id", &f[0], 0, INT32_MAX,
                              &v[k].node_worker_id));
        WIRE_TRY(wire_get_u32(d, "local_worker_id", &f[1], 0, INT32_MAX,
                              &v[k].local_worker_id));
        WIRE_TRY(wire_get_u32(d, "global_device_rank", &f[2], 0,
                              WIRE_DEVICE_RANK_MAX, &v[k].global_device_rank));
        WIRE_TRY(wire_get_u32(d, "domain_rank", &f[3], 0, WIRE_MAX_RANKS - 1,
                              &v[k].domain_rank));
    }
    wire_dec_leave(d);
    m->members = v;
    m->num_members = n;
    return STRATA_OK;
}

static strata_err entry_read(struct wire_dec *d, const msgpack_object *o,
                             struct wire_attach_entry *e)
{
    const msgpack_object *f;

    WIRE_TRY(wire_get_tuple(d, NULL, o, ENTRY_FIELDS, &f));
    WIRE_TRY(wire_get_enum(d, "address_space", &f[0], WIRE_SPACE_HOST,
                           WIRE_SPACE_DEVICE, &e->address_space));
    WIRE_TRY(wire_get_enum(d, "role", &f[1], WIRE_ROLE_PROVIDER,
                           WIRE_ROLE_CONSUMER, &e->role));
    WIRE_TRY(wire_get_enum(d, "adapter_kind", &f[2], WIRE_ADAPTER_NONE,
                           WIRE_ADAPTER_MAX, &e->adapter));
    return wire_get_str(d, "adapter_profile", &f[3], 0, WIRE_PROFILE_MAX,
                        &e->adapter_profile);
}

static strata_err row_read(struct wire_dec *d, const msgpack_object *o,
                           size_t num_members, struct wire_attach_row *row)
{
    const msgpack_object *f;
    const msgpack_object *items;
    struct wire_attach_entry *e;
    size_t n;

    WIRE_TRY(wire_get_tuple(d, NULL, o, 2, &f));
    WIRE_TRY(wire_get_u32(d, "node_worker_id", &f[0], 0, INT32_MAX,
                          &row->node_worker_id));
    WIRE_TRY(wire_get_array(d, "entries", &f[1], num_members, num_members,
                            &items, &n));
    e = wire_arena_alloc(d->arena, n * sizeof(*e));
    if (!e)
        return base_fail(STRATA_ENOMEM, "%s: out of memory", d->msg);
    for (size_t k = 0; k < n; k++) {
        wire_dec_enter_inner(d, "entries", (long)k);
        WIRE_TRY(entry_read(d, &items[k], &e[k]));
    }
    row->entries = e;
    return STRATA_OK;
}

static strata_err attachments_read(struct wire_dec *d,
                                   const struct wire_body *b,
                                   struct wire_domain_cmd *m)
{
    const msgpack_object *items;
    struct wire_attach_row *rows;
    size_t n;

    if (!b->val[CMD_ATTACHMENTS])
        return STRATA_OK;
    if (m->phase != WIRE_PHASE_PREPARE_EXPORT)
        return wire_dec_fail(d, "attachments", "not allowed in phase %s",
                             wire_phase_name(m->phase));
    WIRE_TRY(wire_get_array(d, WIRE_FIELD(b, CMD_ATTACHMENTS), 1,
                            WIRE_MAX_ATTACH_ENTRIES / m->num_members, &items,
                            &n));
    rows = wire_arena_alloc(d->arena, n * sizeof(*rows));
    if (!rows)
        return base_fail(STRATA_ENOMEM, "%s: out of memory", d->msg);
    for (size_t r = 0; r < n; r++) {
        wire_dec_enter(d, "attachments", (long)r);
        WIRE_TRY(row_read(d, &items[r], m->num_members, &rows[r]));
    }
    wire_dec_leave(d);
    m->attach_rows = rows;
    m->num_attach_rows = n;
    return STRATA_OK;
}

static strata_err buffers_read(struct wire_dec *d, const struct wire_body *b,
                               struct wire_domain_cmd *m)
{
    const msgpack_object *items;
    const msgpack_object *f;
    struct wire_domain_buffer *v;
    size_t n;

    WIRE_TRY(wire_get_array(d, WIRE_FIELD(b, CMD_BUFFERS), 0,
                            WIRE_MAX_DOMAIN_BUFFERS, &items, &n));
    v = wire_arena_alloc(d->arena, n * sizeof(*v));
    if (!v)
        return base_fail(STRATA_ENOMEM, "%s: out of memory", d->msg);
    for (size_t k = 0; k < n; k++) {
        wire_dec_enter(d, "buffers", (long)k);
        WIRE_TRY(wire_get_tuple(d, NULL, &items[k], BUFFER_FIELDS, &f));
        WIRE_TRY(wire_get_str(d, "name", &f[0], 1, WIRE_NAME_MAX, &v[k].name));
        WIRE_TRY(wire_get_enum(d, "dtype", &f[1], STRATA_U8, STRATA_BOOL,
                               &v[k].dtype));
        WIRE_TRY(wire_get_uint(d, "count", &f[2], 1, UINT64_MAX, &v[k].count));
        WIRE_TRY(
            wire_get_uint(d, "nbytes", &f[3], 1, UINT64_MAX, &v[k].nbytes));
    }
    wire_dec_leave(d);
    m->buffers = n ? v : NULL;
    m->num_buffers = n;
    return STRATA_OK;
}

static strata_err domain_cmd_read(struct wire_dec *d, const struct wire_body *b,
                                  void *vm)
{
    struct wire_domain_cmd *m = vm;

    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, CMD_REQUEST_ID), 1, UINT64_MAX,
                           &m->request_id));
    WIRE_TRY(wire_get_u32(d, WIRE_FIELD(b, CMD_VERSION), 1, UINT32_MAX,
                          &m->version));
    if (m->version != WIRE_DOMAIN_CMD_VERSION)
        return wire_dec_fail(d, "version", "is %u, this build speaks %d",
                             m->version, WIRE_DOMAIN_CMD_VERSION);
    WIRE_TRY(wire_get_enum(d, WIRE_FIELD(b, CMD_PHASE),
                           WIRE_PHASE_PREPARE_EXPORT, WIRE_PHASE_ABORT,
                           &m->phase));
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, CMD_DOMAIN_ID), 1, UINT64_MAX,
                           &m->domain_id));
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, CMD_GENERATION), 0, UINT64_MAX,
                           &m->generation));
    WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, CMD_WINDOW_SIZE), 1, UINT64_MAX,
                           &m->window_size));
    WIRE_TRY(
        wire_get_str(d, WIRE_FIELD(b, CMD_NAME), 1, WIRE_NAME_MAX, &m->name));
    WIRE_TRY(wire_get_str(d, WIRE_FIELD(b, CMD_PROFILE), 1, WIRE_PROFILE_MAX,
                          &m->profile));
    WIRE_TRY(members_read(d, b, m));
    WIRE_TRY(attachments_read(d, b, m));
    WIRE_TRY(buffers_read(d, b, m));
    if (b->val[CMD_GATHER]) {
        uint64_t one;

        if (m->phase != WIRE_PHASE_PREPARE_EXPORT)
            return wire_dec_fail(d, "gather", "not allowed in phase %s",
                                 wire_phase_name(m->phase));
        WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, CMD_GATHER), 1, 1, &one));
        m->gather = true;
    }
    if (b->val[CMD_EXCHANGE]) {
        uint64_t one;

        if (m->phase != WIRE_PHASE_PREPARE_EXPORT)
            return wire_dec_fail(d, "exchange", "not allowed in phase %s",
                                 wire_phase_name(m->phase));
        WIRE_TRY(wire_get_uint(d, WIRE_FIELD(b, CMD_EXCHANGE), 1, 1, &one));
        m->exchange = true;
    }
    if (!phase_has_descriptors(m->phase)) {
        if (b->val[CMD_DESCRIPTORS])
            return wire_dec_fail(d, "descriptors", "not allowed in phase %s",
                                 wire_phase_name(m->phase));
        return STRATA_OK;
    }
    if (!b->val[CMD_DESCRIPTORS])
        return wire_dec_fail(d, "descriptors", "missing in phase %s",
                             wire_phase_name(m->phase));
    return wire_descriptors_read(d, WIRE_FIELD(b, CMD_DESCRIPTORS),
                                 m->num_members, m->num_members,
                                 &m->descriptors, &m->num_descriptors);
}

static void domain_cmd_write_rows(struct wire_pk *p,
                                  const struct wire_domain_cmd *m)
{
    wire_pk_array(p, m->num_attach_rows);
    for (size_t r = 0; r < m->num_attach_rows; r++) {
        const struct wire_attach_row *row = &m->attach_rows[r];

        wire_pk_array(p, 2);
        wire_pk_uint(p, row->node_worker_id);
        wire_pk_array(p, m->num_members);
        for (size_t k = 0; k < m->num_members; k++) {
            const struct wire_attach_entry *e = &row->entries[k];

            wire_pk_array(p, ENTRY_FIELDS);
            wire_pk_uint(p, e->address_space);
            wire_pk_uint(p, e->role);
            wire_pk_uint(p, e->adapter);
            wire_pk_str(p, e->adapter_profile);
        }
    }
}

static void domain_cmd_write(struct wire_pk *p, const struct wire_domain_cmd *m)
{
    bool rows = m->num_attach_rows != 0;
    bool descs = phase_has_descriptors(m->phase);

    wire_pk_map(p, 10 + rows + descs + m->gather + m->exchange);
    wire_pk_key_uint(p, CMD_REQUEST_ID, m->request_id);
    wire_pk_key_uint(p, CMD_VERSION, m->version);
    wire_pk_key_uint(p, CMD_PHASE, m->phase);
    wire_pk_key_uint(p, CMD_DOMAIN_ID, m->domain_id);
    wire_pk_key_uint(p, CMD_GENERATION, m->generation);
    wire_pk_key_uint(p, CMD_WINDOW_SIZE, m->window_size);
    wire_pk_key_str(p, CMD_NAME, m->name);
    wire_pk_key_str(p, CMD_PROFILE, m->profile);
    wire_pk_uint(p, CMD_MEMBERS);
    wire_pk_array(p, m->num_members);
    for (size_t k = 0; k < m->num_members; k++) {
        wire_pk_array(p, MEMBER_FIELDS);
        wire_pk_uint(p, m->members[k].node_worker_id);
        wire_pk_uint(p, m->members[k].local_worker_id);
        wire_pk_uint(p, m->members[k].global_device_rank);
        wire_pk_uint(p, m->members[k].domain_rank);
    }
    if (rows) {
        wire_pk_uint(p, CMD_ATTACHMENTS);
        domain_cmd_write_rows(p, m);
    }
    wire_pk_uint(p, CMD_BUFFERS);
    wire_pk_array(p, m->num_buffers);
    for (size_t k = 0; k < m->num_buffers; k++) {
        wire_pk_array(p, BUFFER_FIELDS);
        wire_pk_str(p, m->buffers[k].name);
        wire_pk_uint(p, m->buffers[k].dtype);
        wire_pk_uint(p, m->buffers[k].count);
        wire_pk_uint(p, m->buffers[k].nbytes);
    }
    if (descs) {
        wire_pk_uint(p, CMD_DESCRIPTORS);
        wire_pk_array(p, m->num_descriptors);
        for (size_t k = 0; k < m->num_descriptors; k++)
            wire_descriptor_pack(p, &m->descriptors[k]);
    }
    if (m->gather)
        wire_pk_key_uint(p, CMD_GATHER, 1);
    if (m->exchange)
        wire_pk_key_uint(p, CMD_EXCHANGE, 1);
}

WIRE_DEFINE_CODEC(domain_cmd, DOMAIN_CMD)
