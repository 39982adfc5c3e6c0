/*
 * Every public function of strata.h, domain.h and graph.h at its edges:
 * NULL, NaN, zero, huge and out-of-range arguments, as docs/errors.md
 * promises. One table, one row per call: the call as written, the context
 * it needs, the code it must return and a word its message must hold (for
 * STRATA_EINVAL: the argument it names; "x is NULL" for a NULL x).
 * Functions with no error to return (accessors, destroy/free of NULL) must
 * return their neutral value (0, NULL, -1, false) without crashing: their
 * rows wrap the call in neutral().
 *
 * Rows that need no live worker run in a forked child each, so a crash or
 * a hang is reported as such (and the table goes on); rows that need a
 * worker, an orch fn or an L4 run in this process, inside one run each.
 *
 * A row with a "pending" file names a fix that belongs to that file's
 * owner: its result is printed, and it fails the test only with
 * STRATA_EDGES_STRICT=1 (set it once the fix is in, then drop the mark).
 */
#include "it_kernels.h"

#include <strata/cuda.h>

#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Where a row runs. */
enum ctx {
    N, /* anywhere: in a forked child of its own */
    W, /* with the live L3 worker (E.w), in this process */
    O, /* inside an orch fn of E.w */
    G, /* inside an orch fn of the L4 (E.l4) */
};

/* What the objects the rows name are. */
struct env {
    strata_worker *w;         /* L3: chips 0 and 1, one sub, initialized */
    strata_worker *fresh;     /* L3, created, never initialized */
    strata_worker *fresh4;    /* L4, created, never initialized */
    strata_worker *l4;        /* L4 with one forked L3 node of chips 0 and 1 */
    strata_buffer *b;         /* 4096 bytes of w */
    strata_buffer *b2;        /* 4096 bytes of w */
    strata_buffer *lb;        /* 4096 bytes of l4 */
    strata_args *a;           /* one u32 tensor over b[0, 16) */
    strata_run *run;          /* a finished run of w */
    strata_orch *o;           /* the orch fn's, in O and G rows */
    strata_domain *d;         /* chips 0 and 1, window 4096, buffer "buf" */
    strata_global_domain *g;  /* node 0's chips 0 and 1, window 4096 */
    strata_halo *h;           /* the ring below on chips 0 and 1 */
    strata_halo_map *m;       /* rank 0 of 2 of the ring */
    strata_gfg *gfg;          /* the ring, as a store */
    char dir[64];             /* a temporary directory */
    char gfg_path[96];        /* dir/ring.gfg */
    strata_callable k, s, oc; /* kernel, sub and orch registered here */
    strata_csr_view csr;      /* a ring of 4 */
    strata_domain_spec dspec;
    strata_global_domain_spec gspec;
    strata_halo_spec hspec;
    strata_worker_config cfg;
    strata_remote_spec rspec;
    strata_mpi_group_spec mspec;
    strata_chip_domain_ctx dctx;
    strata_halo_rank_trace trace;
    strata_callable c;
    uint32_t word;
    uint32_t u32;
    uint64_t u64, u64b;
    int id;
    size_t count;
    const int64_t *ids;
    int64_t rows[8];
    char hex[65];
    char bytes[64];
    void *p;
};

static struct env E;
static const int ids2[] = {0, 1};
static const int ids_dup[] = {1, 1};
static const int ids_neg[] = {-1};
static const int64_t ring_ptr[] = {0, 1, 2, 3, 4};
static const int64_t ring_col[] = {3, 0, 1, 2};
static const int64_t bad_ptr[] = {1, 1, 2, 3, 4};
static const int64_t bad_col[] = {3, 0, 9, 2};
static const strata_global_member members2[] = {{0, 0}, {0, 1}};
static const strata_global_member member_bad_node[] = {{9, 0}};
static const strata_comm_buffer_spec buf_spec[] = {{"buf", STRATA_U32, 16, 64}};
static const strata_comm_buffer_spec buf_mismatch[] = {
    {"buf", STRATA_U32, 16, 65}};
static const size_t shape1[] = {16};
static const size_t shape_huge[] = {SIZE_MAX / 2};
static const size_t shape5[] = {1, 1, 1, 1, 1, 1};
static const size_t shape_1025[] = {1025};
static const int ids3[] = {0, 1, 2};
static const strata_comm_buffer_spec buf_noname[] = {{NULL, STRATA_U32, 1, 4}};
static const strata_comm_buffer_spec buf_nodtype[] = {
    {"buf", (strata_dtype)0, 1, 4}};
static const strata_comm_buffer_spec buf_empty[] = {{"buf", STRATA_U32, 0, 0}};
static const strata_comm_buffer_spec buf_twice[] = {{"buf", STRATA_U32, 1, 4},
                                                    {"buf", STRATA_U32, 1, 4}};
static const strata_comm_buffer_spec buf_count_huge[] = {
    {"buf", STRATA_U64, SIZE_MAX / 4, 0}};
static const strata_comm_buffer_spec buf_too_big[] = {
    {"buf", STRATA_U8, 4097, 4097}};
static const char long_name[] =
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";

static strata_err nop_kernel(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    (void)a;
    return STRATA_OK;
}

static strata_err nop_sub(const strata_args *a)
{
    (void)a;
    return STRATA_OK;
}

static strata_err nop_orch(strata_orch *o, const strata_args *a, void *u)
{
    (void)o;
    (void)a;
    (void)u;
    return STRATA_OK;
}

static void nop_edge(int64_t dst, int64_t src, strata_dtype dtype,
                     size_t features, const void *in_row, void *acc_row)
{
    (void)dst;
    (void)src;
    (void)dtype;
    (void)features;
    (void)in_row;
    (void)acc_row;
}

/* A row of a function with nothing to return: STRATA_OK when the call
 * gave its neutral value. */
#define NOT_NEUTRAL ((strata_err)1000)
static strata_err neutral(bool ok)
{
    return ok ? STRATA_OK : NOT_NEUTRAL;
}

/* Helpers for rows that need more than one call. */
static strata_err spec_with(size_t window, size_t nbuf,
                            const strata_comm_buffer_spec *bufs,
                            const int *workers, size_t n, strata_domain **out)
{
    strata_domain_spec s = {"edge", workers, n, window, bufs, nbuf};

    return strata_orch_allocate_domain(E.o, &s, out);
}

static strata_err domain_tib(void)
{
    strata_domain *d = NULL;

    return spec_with((size_t)1 << 40, 0, NULL, ids2, 2, &d);
}

static strata_err scopes_17(void)
{
    strata_err err = STRATA_OK;
    int opened = 0;

    while (opened < 16 && strata_orch_scope_begin(E.o) == STRATA_OK)
        opened++;
    if (opened == 16)
        err = strata_orch_scope_begin(E.o);
    else
        strata_errmsg_set("only %d scopes opened", opened);
    while (opened-- > 0)
        if (strata_orch_scope_end(E.o) != STRATA_OK)
            break;
    return err;
}

static strata_err cfg_with(int level, double timeout, size_t subs,
                           const int *chips, size_t nchips,
                           const char *platform, const char *profile)
{
    strata_worker_config c;
    strata_worker *w = NULL;
    strata_err err;

    strata_worker_config_init(&c, level);
    c.startup_timeout_s = timeout;
    c.num_sub_workers = subs;
    c.chip_ids = chips;
    c.num_chips = nchips;
    if (platform)
        c.platform = platform;
    if (profile)
        c.comm_profile = profile;
    err = strata_worker_create(&c, &w);
    if (err == STRATA_OK) {
        err = strata_worker_destroy(w);
        strata_errmsg_set("worker created (destroy: %s)", strata_errname(err));
        err = STRATA_OK;
    }
    return err;
}

static strata_err remote_with(const char *endpoint, size_t nchips,
                              const int *chips, strata_worker *parent)
{
    strata_remote_spec r = {.endpoint = endpoint,
                            .insecure = true,
                            .chip_ids = chips,
                            .num_chips = nchips};

    return strata_worker_add_remote_worker(parent, &r, &E.id);
}

static strata_err mpi_with(size_t ranks, size_t n, size_t nchips,
                           const int *chips, strata_worker *parent)
{
    strata_mpi_group_spec m = {
        .ranks = ranks, .chip_ids = chips, .num_chips = nchips};
    int ids[2];

    return strata_worker_add_mpirun_worker_group(parent, &m, ids, n);
}

static strata_err halo_with(size_t features, strata_dtype dtype, int reducer,
                            int schedule, double timeout)
{
    strata_halo_spec s;
    strata_halo *h = NULL;
    strata_err err;

    strata_halo_spec_init(&s);
    s.csr = &E.csr;
    s.chips = ids2;
    s.num_chips = 2;
    s.features = features;
    s.dtype = dtype;
    s.reducer = (strata_halo_reducer)reducer;
    s.schedule = (strata_halo_schedule)schedule;
    s.timeout_s = timeout;
    err = strata_halo_create(E.w, &s, &h);
    if (err == STRATA_OK) {
        err = strata_halo_destroy(h);
        strata_errmsg_set("halo created (destroy: %s)", strata_errname(err));
        err = STRATA_OK;
    }
    return err;
}

static strata_err gdomain_with(size_t window, const strata_global_member *m,
                               size_t n)
{
    strata_global_domain_spec s = {
        .name = "gedge", .members = m, .num_members = n, .window_size = window};
    strata_global_domain *g = NULL;

    return strata_orch_allocate_global_domain(E.o, &s, &g);
}

static strata_err csr_derive(const int64_t *ptr, const int64_t *col,
                             uint64_t rows, uint64_t ents, uint32_t world,
                             uint32_t rank, const strata_id_list *req)
{
    strata_csr_view v = {rows, ents, ptr, col};
    strata_halo_map *m = NULL;
    strata_err err = strata_halo_map_derive(&v, world, rank, req, &m);

    strata_halo_map_destroy(m);
    return err;
}

static strata_err save_with(const char *name, const strata_csr_view *v,
                            strata_dtype dtype)
{
    char path[160];

    snprintf(path, sizeof(path), "%s/%s", E.dir, name);
    return strata_gfg_save(path, v, dtype);
}

static strata_err register_long(int which)
{
    char name[200];

    memset(name, 'x', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    switch (which) {
    case 0:
        return strata_register_kernel(name, nop_kernel, &E.c);
    case 1:
        return strata_callable_by_name(STRATA_CALLABLE_KERNEL, name, &E.c);
    default:
        return strata_halo_register_edge(name, nop_edge, NULL);
    }
}

static strata_err errmsg_set_null(void)
{
    const char *volatile fmt = NULL;

    strata_errmsg_set("before");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#pragma GCC diagnostic ignored "-Wformat-security"
    strata_errmsg_set(fmt);
#pragma GCC diagnostic pop
    return neutral(strata_errmsg()[0] == '\0');
}

static strata_err group_with(const strata_args *const *a, const int *ids,
                             size_t n)
{
    return strata_orch_submit_next_level_group(E.o, E.k, a, ids, n);
}

static strata_err wrong_kind(strata_callable c)
{
    c.kind = 77;
    return strata_orch_submit_next_level(E.o, c, E.a, 0);
}

static strata_err wait_flag_orch(strata_orch *o, const strata_args *a, void *u)
{
    (void)a;
    (void)u;
    return it_submit_wait_flag(o, 0, E.b2, E.b);
}

/* strata_run_wait(run, NAN) on a run that is still going: it must answer
 * at once (a NaN deadline once meant "for ever"). */
static strata_err wait_nan_unfinished(void)
{
    uint32_t one = 1;
    strata_run *run = NULL;
    char msg[STRATA_ERRMSG_MAX];
    strata_err err, end;
    double t0;

    it_try(strata_buffer_write(E.b2, 0, &(uint32_t){0}, sizeof(uint32_t)));
    it_try(strata_worker_submit(E.w, wait_flag_orch, NULL, NULL, &run));
    t0 = testutil_now();
    err = strata_run_wait(run, NAN);
    snprintf(msg, sizeof(msg), "%s", strata_errmsg());
    if (testutil_now() - t0 > 2.0) {
        strata_errmsg_set("strata_run_wait(run, NAN) waited %.1f s",
                          testutil_now() - t0);
        err = NOT_NEUTRAL;
    }
    memcpy(strata_buffer_data(E.b2), &one, sizeof(one));
    end = strata_run_wait(run, 30);
    strata_run_free(run);
    if (end)
        return end;
    if (err != NOT_NEUTRAL)
        strata_errmsg_set("%s", msg); /* the NaN wait's, not the last's */
    return err;
}

#define AS(T, v) ((T)(v))

/* A domain spec of one named buffer list, or a name of its own. */
static strata_err domain_with(const char *name, size_t nbuf,
                              const strata_comm_buffer_spec *bufs)
{
    strata_domain_spec s = {name, ids2, 2, 4096, bufs, nbuf};
    strata_domain *d = NULL;

    return strata_orch_allocate_domain(E.o, &s, &d);
}

/* A halo spec that is the ring's on chips 0 and 1, but for one field. */
enum halo_field {
    H_AS_IS,
    H_NO_CSR,
    H_BOTH,
    H_CHIPS_NULL,
    H_CHIPS_HUGE,
    H_CHIP_99,
    H_EDGE_NULL,
    H_EDGE_UNKNOWN,
    H_GFG_EMPTY,
    H_TIMEOUT_NEG,
    H_CHIPS_AND_MEMBERS
};

static strata_err halo_field(strata_worker *w, enum halo_field f)
{
    static const int chip99[] = {99};
    strata_halo_spec s;
    strata_halo *h = NULL;
    strata_err err;

    strata_halo_spec_init(&s);
    s.csr = &E.csr;
    s.chips = ids2;
    s.num_chips = 2;
    switch (f) {
    case H_AS_IS:
        break;
    case H_NO_CSR:
        s.csr = NULL;
        break;
    case H_BOTH:
        s.gfg_path = E.gfg_path;
        break;
    case H_CHIPS_NULL:
        s.chips = NULL;
        break;
    case H_CHIPS_HUGE:
        s.num_chips = UINT32_MAX / 2;
        break;
    case H_CHIP_99:
        s.chips = chip99;
        s.num_chips = 1;
        break;
    case H_EDGE_NULL:
        s.reducer = STRATA_HALO_EDGE;
        break;
    case H_EDGE_UNKNOWN:
        s.reducer = STRATA_HALO_EDGE;
        s.edge_kernel = "edge.unknown";
        break;
    case H_GFG_EMPTY:
        s.csr = NULL;
        s.gfg_path = "";
        break;
    case H_TIMEOUT_NEG:
        s.timeout_s = -INFINITY; /* <= 0: the default, 60 s */
        break;
    case H_CHIPS_AND_MEMBERS:
        s.members = members2;
        s.num_members = 2;
        break;
    }
    err = strata_halo_create(w, &s, &h);
    if (err == STRATA_OK) {
        err = strata_halo_destroy(h);
        strata_errmsg_set("halo created (destroy: %s)", strata_errname(err));
        err = STRATA_OK;
    }
    return err;
}

static strata_err group_kind(int kind)
{
    strata_callable c = E.k;

    c.kind = (uint32_t)kind;
    return strata_orch_submit_next_level_group(
        E.o, c, AS(const strata_args *const *, &E.a), ids2, 1);
}

static strata_err sub_kind(int kind)
{
    strata_callable c = E.s;

    c.kind = (uint32_t)kind;
    return strata_orch_submit_sub(E.o, c, E.a);
}

/* A callable of a digest no process registered. */
static strata_callable unknown_callable(void)
{
    strata_callable c = E.k;

    memset(c.digest, 0xa5, sizeof(c.digest));
    return c;
}

static void *edge_malloc(size_t size, void *ctx)
{
    (void)ctx;
    return malloc(size);
}

/* malloc_fn alone: realloc_fn and free_fn missing. */
static strata_err alloc_hooks_partial(void)
{
    strata_alloc_hooks h = {.malloc_fn = edge_malloc};

    return strata_set_alloc_hooks(&h);
}

/* The table: ctx, code, message word, pending file, call. (Not in it:
 * strata_module_init, which a module defines and the library only
 * declares.) */
#define EDGE_ROWS(X)                                                           \
    /* errors */                                                               \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strcmp(strata_strerror(AS(strata_err, 999)), "unknown error") == \
              0))                                                              \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_strerror(AS(strata_err, -1)) != NULL))                    \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_errname(AS(strata_err, 999)) != NULL))                    \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_errmsg() != NULL))              \
    X(N, STRATA_OK, NULL, NULL, errmsg_set_null())                             \
    /* allocation hooks */                                                     \
    X(N, STRATA_EINVAL, "malloc_fn", NULL,                                     \
      strata_set_alloc_hooks(&(strata_alloc_hooks){0}))                        \
    X(N, STRATA_EINVAL, "realloc_fn", NULL, alloc_hooks_partial())             \
    X(N, STRATA_ESTATE, NULL, NULL, strata_set_alloc_hooks(NULL))              \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_errname(AS(strata_err, -1)) != NULL))                     \
    /* dtypes */                                                               \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_dtype_size(AS(strata_dtype, 0)) == 0))                    \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_dtype_size(AS(strata_dtype, 99)) == 0))                   \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_dtype_size(AS(strata_dtype, -1)) == 0))                   \
    /* registry */                                                             \
    X(N, STRATA_EINVAL, "name is NULL", NULL,                                  \
      strata_register_kernel(NULL, nop_kernel, &E.c))                          \
    X(N, STRATA_EINVAL, "fn is NULL", NULL,                                    \
      strata_register_kernel("edge.k", NULL, &E.c))                            \
    X(N, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_register_kernel("edge.k", nop_kernel, NULL))                      \
    X(N, STRATA_EINVAL, "name", NULL,                                          \
      strata_register_kernel("", nop_kernel, &E.c))                            \
    X(N, STRATA_EINVAL, "name", NULL, register_long(0))                        \
    X(N, STRATA_EINVAL, "name is NULL", NULL,                                  \
      strata_register_orch(NULL, nop_orch, &E.c))                              \
    X(N, STRATA_EINVAL, "fn is NULL", NULL,                                    \
      strata_register_orch("edge.o", NULL, &E.c))                              \
    X(N, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_register_orch("edge.o", nop_orch, NULL))                          \
    X(N, STRATA_EINVAL, "name is NULL", NULL,                                  \
      strata_register_sub(NULL, nop_sub, &E.c))                                \
    X(N, STRATA_EINVAL, "fn is NULL", NULL,                                    \
      strata_register_sub("edge.s", NULL, &E.c))                               \
    X(N, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_register_sub("edge.s", nop_sub, NULL))                            \
    X(N, STRATA_EINVAL, "kind", NULL,                                          \
      strata_callable_by_name(AS(strata_callable_kind, 0), "x", &E.c))         \
    X(N, STRATA_EINVAL, "kind", NULL,                                          \
      strata_callable_by_name(AS(strata_callable_kind, 99), "x", &E.c))        \
    X(N, STRATA_EINVAL, "name is NULL", NULL,                                  \
      strata_callable_by_name(STRATA_CALLABLE_KERNEL, NULL, &E.c))             \
    X(N, STRATA_EINVAL, "name", NULL,                                          \
      strata_callable_by_name(STRATA_CALLABLE_KERNEL, "", &E.c))               \
    X(N, STRATA_EINVAL, "name", NULL, register_long(1))                        \
    X(N, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_callable_by_name(STRATA_CALLABLE_KERNEL, "x", NULL))              \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_callable_name((strata_callable){0}) == NULL))             \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_callable_digest_hex(E.k, NULL) == NULL))                  \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strcmp(strata_callable_digest_hex((strata_callable){0}, E.hex),  \
                     "000000000000000000000000000000000000000000000000000000"  \
                     "0000000000") == 0))                                      \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_callable_name(unknown_callable()) == NULL))               \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_callable_digest_hex(unknown_callable(), NULL) == NULL))   \
    /* modules (strata_module_init is the module's, not the library's) */      \
    X(N, STRATA_EINVAL, "shared_object_path is NULL", NULL,                    \
      strata_load_module(NULL))                                                \
    X(N, STRATA_EINVAL, "shared_object_path", NULL, strata_load_module(""))    \
    X(N, STRATA_EIO, "/nonexistent/edge.so", NULL,                             \
      strata_load_module("/nonexistent/edge.so"))                              \
    X(N, STRATA_EIO, "ring.gfg", NULL, strata_load_module(E.gfg_path))         \
    /* worker configuration */                                                 \
    X(N, STRATA_OK, NULL, NULL, (strata_worker_config_init(NULL, 3), 0))       \
    X(N, STRATA_EINVAL, "cfg is NULL", NULL, strata_worker_create(NULL, &E.w)) \
    X(N, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_worker_create(&E.cfg, NULL))                                      \
    X(N, STRATA_EINVAL, "level", NULL,                                         \
      cfg_with(99, 10, 0, NULL, 0, NULL, NULL))                                \
    X(N, STRATA_EINVAL, "level", NULL,                                         \
      cfg_with(2, 10, 0, NULL, 0, NULL, NULL))                                 \
    X(N, STRATA_EINVAL, "level 9", NULL,                                       \
      cfg_with(STRATA_MAX_LEVEL + 1, 10, 0, NULL, 0, NULL, NULL))              \
    X(N, STRATA_OK, NULL, NULL,                                                \
      cfg_with(STRATA_MAX_LEVEL, 10, 0, NULL, 0, NULL, NULL))                  \
    X(N, STRATA_EINVAL, "level", NULL,                                         \
      cfg_with(INT_MIN, 10, 0, NULL, 0, NULL, NULL))                           \
    X(N, STRATA_EINVAL, "startup_timeout_s", NULL,                             \
      cfg_with(3, NAN, 0, NULL, 0, NULL, NULL))                                \
    X(N, STRATA_EINVAL, "startup_timeout_s", NULL,                             \
      cfg_with(3, 0, 0, NULL, 0, NULL, NULL))                                  \
    X(N, STRATA_EINVAL, "startup_timeout_s", NULL,                             \
      cfg_with(3, -1, 0, NULL, 0, NULL, NULL))                                 \
    X(N, STRATA_EINVAL, "startup_timeout_s", NULL,                             \
      cfg_with(3, INFINITY, 0, NULL, 0, NULL, NULL))                           \
    X(N, STRATA_EINVAL, "num_sub_workers", NULL,                               \
      cfg_with(3, 10, SIZE_MAX, NULL, 0, NULL, NULL))                          \
    X(N, STRATA_EINVAL, "num_chips", NULL,                                     \
      cfg_with(3, 10, 1, ids2, SIZE_MAX, NULL, NULL))                          \
    X(N, STRATA_EINVAL, "chip_ids is NULL", NULL,                              \
      cfg_with(3, 10, 0, NULL, 2, NULL, NULL))                                 \
    X(N, STRATA_EINVAL, "chip id 1", NULL,                                     \
      cfg_with(3, 10, 0, ids_dup, 2, NULL, NULL))                              \
    X(N, STRATA_EINVAL, "chip_ids[0]", NULL,                                   \
      cfg_with(3, 10, 0, ids_neg, 1, NULL, NULL))                              \
    X(N, STRATA_EINVAL, "platform", NULL,                                      \
      cfg_with(3, 10, 0, NULL, 0, "edge", NULL))                               \
    X(N, STRATA_EINVAL, "comm_profile", NULL,                                  \
      cfg_with(3, 10, 0, NULL, 0, NULL, "edge"))                               \
    X(N, STRATA_EINVAL, "num_chips", NULL,                                     \
      cfg_with(4, 10, 0, ids2, 2, NULL, NULL))                                 \
    /* worker life */                                                          \
    X(N, STRATA_EINVAL, "w is NULL", NULL, strata_worker_init(NULL))           \
    X(W, STRATA_ESTATE, "already", NULL, strata_worker_init(E.w))              \
    X(N, STRATA_EINVAL, "w is NULL", NULL,                                     \
      strata_worker_run(NULL, nop_orch, NULL, NULL))                           \
    X(W, STRATA_EINVAL, "fn is NULL", NULL,                                    \
      strata_worker_run(E.w, NULL, NULL, NULL))                                \
    X(W, STRATA_ESTATE, "not initialized", NULL,                               \
      strata_worker_run(E.fresh, nop_orch, NULL, NULL))                        \
    X(N, STRATA_EINVAL, "w is NULL", NULL,                                     \
      strata_worker_submit(NULL, nop_orch, NULL, NULL, &E.run))                \
    X(W, STRATA_EINVAL, "fn is NULL", NULL,                                    \
      strata_worker_submit(E.w, NULL, NULL, NULL, &E.run))                     \
    X(W, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_worker_submit(E.w, nop_orch, NULL, NULL, NULL))                   \
    X(W, STRATA_ESTATE, "not initialized", NULL,                               \
      strata_worker_submit(E.fresh, nop_orch, NULL, NULL,                      \
                           AS(strata_run **, &E.p)))                           \
    X(W, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_worker_submit(E.fresh, nop_orch, NULL, NULL, NULL))               \
    X(N, STRATA_EINVAL, "run is NULL", NULL, strata_run_wait(NULL, 1))         \
    X(W, STRATA_EINVAL, "timeout_s", NULL, strata_run_wait(E.run, NAN))        \
    X(W, STRATA_EINVAL, "timeout_s", NULL, wait_nan_unfinished())              \
    X(W, STRATA_OK, NULL, NULL, strata_run_wait(E.run, -INFINITY))             \
    X(W, STRATA_OK, NULL, NULL, strata_run_wait(E.run, INFINITY))              \
    X(W, STRATA_OK, NULL, NULL, strata_run_wait(E.run, 0))                     \
    X(W, STRATA_OK, NULL, NULL, strata_run_wait(E.run, -1))                    \
    X(N, STRATA_OK, NULL, NULL, (strata_run_free(NULL), 0))                    \
    X(N, STRATA_OK, NULL, NULL, strata_worker_destroy(NULL))                   \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_worker_num_chips(NULL) == 0))   \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_worker_num_sub_workers(NULL) == 0))                       \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_worker_num_nodes(NULL) == 0))   \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_worker_chip_pid(NULL, 0) == -1))                          \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_worker_chip_pid(E.w, 99) == -1))                          \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_worker_chip_pid(E.w, INT_MIN) == -1))                     \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_worker_sub_pid(NULL, 0) == -1)) \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_worker_sub_pid(E.w, SIZE_MAX) == -1))                     \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_worker_node_pid(NULL, 0) == -1))                          \
    X(W, STRATA_OK, NULL, NULL, neutral(strata_worker_node_pid(E.w, 0) == -1)) \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_worker_node_pid(E.l4, INT_MAX) == -1))                    \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_worker_node_pid(E.l4, -1) == -1))                         \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_worker_node_pid(E.l4, INT_MIN) == -1))                    \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_worker_chip_pid(E.fresh, 0) == -1))                       \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_worker_sub_pid(E.fresh, 0) == -1))                        \
    X(W, STRATA_OK, NULL, NULL, neutral(strata_worker_num_nodes(E.w) == 0))    \
    /* buffers */                                                              \
    X(N, STRATA_EINVAL, "w is NULL", NULL,                                     \
      strata_worker_create_buffer(NULL, 64, AS(strata_buffer **, &E.p)))       \
    X(W, STRATA_EINVAL, "nbytes", NULL,                                        \
      strata_worker_create_buffer(E.w, 0, AS(strata_buffer **, &E.p)))         \
    X(W, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_worker_create_buffer(E.w, 64, NULL))                              \
    X(W, STRATA_ENOMEM, "/dev/shm", NULL,                                      \
      strata_worker_create_buffer(E.w, SIZE_MAX, AS(strata_buffer **, &E.p)))  \
    X(W, STRATA_ENOMEM, "/dev/shm", NULL,                                      \
      strata_worker_create_buffer(E.w, (size_t)1 << 50,                        \
                                  AS(strata_buffer **, &E.p)))                 \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_buffer_data(NULL) == NULL))     \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_buffer_size(NULL) == 0))        \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_buffer_node(NULL) == -1))       \
    X(N, STRATA_OK, NULL, NULL, strata_buffer_release(NULL))                   \
    X(N, STRATA_EINVAL, "b is NULL", NULL,                                     \
      strata_buffer_write(NULL, 0, E.bytes, 1))                                \
    X(W, STRATA_EINVAL, "src is NULL", NULL,                                   \
      strata_buffer_write(E.b, 0, NULL, 1))                                    \
    X(W, STRATA_EINVAL, "offset", NULL,                                        \
      strata_buffer_write(E.b, 4096, E.bytes, 1))                              \
    X(W, STRATA_EINVAL, "offset", NULL,                                        \
      strata_buffer_write(E.b, SIZE_MAX, E.bytes, 2))                          \
    X(W, STRATA_EINVAL, "offset", NULL,                                        \
      strata_buffer_write(E.b, 1, E.bytes, SIZE_MAX))                          \
    X(W, STRATA_OK, NULL, NULL, strata_buffer_write(E.b, 4096, E.bytes, 0))    \
    X(W, STRATA_OK, NULL, NULL, strata_buffer_write(E.b, 0, NULL, 0))          \
    X(W, STRATA_EINVAL, "offset", NULL,                                        \
      strata_buffer_write(E.b, 4097, E.bytes, 0))                              \
    X(N, STRATA_EINVAL, "b is NULL", NULL,                                     \
      strata_buffer_read(NULL, 0, E.bytes, 1))                                 \
    X(W, STRATA_EINVAL, "dst is NULL", NULL,                                   \
      strata_buffer_read(E.b, 0, NULL, 1))                                     \
    X(W, STRATA_EINVAL, "offset", NULL,                                        \
      strata_buffer_read(E.b, 4095, E.bytes, 2))                               \
    X(W, STRATA_EINVAL, "offset", NULL,                                        \
      strata_buffer_read(E.b, SIZE_MAX, E.bytes, 2))                           \
    X(W, STRATA_OK, NULL, NULL, strata_buffer_read(E.b, 4096, NULL, 0))        \
    X(W, STRATA_EINVAL, "offset", NULL,                                        \
      strata_buffer_read(E.b, 0, E.bytes, SIZE_MAX))                           \
    /* tree building and remote nodes */                                       \
    X(N, STRATA_EINVAL, "parent is NULL", NULL,                                \
      strata_worker_add_worker(NULL, E.fresh, &E.id))                          \
    X(W, STRATA_EINVAL, "child is NULL", NULL,                                 \
      strata_worker_add_worker(E.fresh4, NULL, &E.id))                         \
    X(W, STRATA_EINVAL, "worker_id_out is NULL", NULL,                         \
      strata_worker_add_worker(E.fresh, E.fresh, NULL))                        \
    X(W, STRATA_EINVAL, "level", NULL,                                         \
      strata_worker_add_worker(E.fresh, E.fresh, &E.id))                       \
    X(N, STRATA_EINVAL, "parent is NULL", NULL,                                \
      strata_worker_add_remote_worker(NULL, &E.rspec, &E.id))                  \
    X(W, STRATA_EINVAL, "spec is NULL", NULL,                                  \
      strata_worker_add_remote_worker(E.fresh4, NULL, &E.id))                  \
    X(W, STRATA_EINVAL, "worker_id_out is NULL", NULL,                         \
      strata_worker_add_remote_worker(E.fresh4, &E.rspec, NULL))               \
    X(W, STRATA_EINVAL, "endpoint", NULL,                                      \
      remote_with(NULL, 1, ids2, E.fresh4))                                    \
    X(W, STRATA_EINVAL, "port", NULL,                                          \
      remote_with("127.0.0.1:0", 1, ids2, E.fresh4))                           \
    X(W, STRATA_EINVAL, "port", NULL,                                          \
      remote_with("127.0.0.1:70000", 1, ids2, E.fresh4))                       \
    X(W, STRATA_EINVAL, "chip_ids is NULL", NULL,                              \
      remote_with("127.0.0.1:7070", 2, NULL, E.fresh4))                        \
    X(W, STRATA_EINVAL, "num_chips", NULL,                                     \
      remote_with("127.0.0.1:7070", SIZE_MAX, ids2, E.fresh4))                 \
    X(W, STRATA_EINVAL, "level", NULL,                                         \
      remote_with("127.0.0.1:7070", 1, ids2, E.fresh))                         \
    X(W, STRATA_EINVAL, "endpoint", NULL, remote_with("", 1, ids2, E.fresh4))  \
    X(W, STRATA_EINVAL, "port", NULL,                                          \
      remote_with("127.0.0.1", 1, ids2, E.fresh4))                             \
    X(W, STRATA_EINVAL, "loopback", NULL,                                      \
      remote_with("192.0.2.1:7070", 1, ids2, E.fresh4))                        \
    X(W, STRATA_EINVAL, "chip_ids[0]", NULL,                                   \
      remote_with("127.0.0.1:7070", 1, ids_neg, E.fresh4))                     \
    X(W, STRATA_ESTATE, "before init", NULL,                                   \
      remote_with("127.0.0.1:7070", 1, ids2, E.l4))                            \
    X(N, STRATA_EINVAL, "parent is NULL", NULL,                                \
      strata_worker_add_mpirun_worker_group(NULL, &E.mspec, &E.id, 1))         \
    X(W, STRATA_EINVAL, "spec is NULL", NULL,                                  \
      strata_worker_add_mpirun_worker_group(E.fresh4, NULL, &E.id, 1))         \
    X(W, STRATA_EINVAL, "ids_out is NULL", NULL,                               \
      strata_worker_add_mpirun_worker_group(E.fresh4, &E.mspec, NULL, 1))      \
    X(W, STRATA_EINVAL, "ranks is 0", NULL, mpi_with(0, 2, 1, ids2, E.fresh4)) \
    X(W, STRATA_EINVAL, "ranks", NULL,                                         \
      mpi_with(SIZE_MAX, SIZE_MAX, 1, ids2, E.fresh4))                         \
    X(W, STRATA_EINVAL, "ids_out holds 1", NULL,                               \
      mpi_with(2, 1, 1, ids2, E.fresh4))                                       \
    X(W, STRATA_EINVAL, "chip_ids is NULL", NULL,                              \
      mpi_with(1, 2, 2, NULL, E.fresh4))                                       \
    X(W, STRATA_EINVAL, "num_chips", NULL,                                     \
      mpi_with(1, 2, SIZE_MAX, ids2, E.fresh4))                                \
    X(W, STRATA_EINVAL, "level", NULL, mpi_with(1, 2, 1, ids2, E.fresh))       \
    X(W, STRATA_EINVAL, "ids_out holds 0", NULL,                               \
      mpi_with(1, 0, 1, ids2, E.fresh4))                                       \
    X(N, STRATA_EINVAL, "w is NULL", NULL,                                     \
      strata_worker_create_remote_buffer(NULL, 0, 64,                          \
                                         AS(strata_buffer **, &E.p)))          \
    X(W, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_worker_create_remote_buffer(E.l4, 0, 64, NULL))                   \
    X(W, STRATA_EINVAL, "nbytes", NULL,                                        \
      strata_worker_create_remote_buffer(E.l4, 0, 0,                           \
                                         AS(strata_buffer **, &E.p)))          \
    X(W, STRATA_EINVAL, "node", NULL,                                          \
      strata_worker_create_remote_buffer(E.l4, -1, 64,                         \
                                         AS(strata_buffer **, &E.p)))          \
    X(W, STRATA_EINVAL, "node", NULL,                                          \
      strata_worker_create_remote_buffer(E.l4, INT_MAX, 64,                    \
                                         AS(strata_buffer **, &E.p)))          \
    X(W, STRATA_EINVAL, "no such node", NULL,                                  \
      strata_worker_create_remote_buffer(E.w, 0, 64,                           \
                                         AS(strata_buffer **, &E.p)))          \
    X(W, STRATA_EINVAL, "forked", NULL,                                        \
      strata_worker_create_remote_buffer(E.l4, 0, 64,                          \
                                         AS(strata_buffer **, &E.p)))          \
    /* argument lists */                                                       \
    X(N, STRATA_EINVAL, "out is NULL", NULL, strata_args_create(NULL))         \
    X(N, STRATA_OK, NULL, NULL, (strata_args_destroy(NULL), 0))                \
    X(N, STRATA_OK, NULL, NULL, (strata_args_clear(NULL), 0))                  \
    X(N, STRATA_EINVAL, "a is NULL", NULL,                                     \
      strata_args_add_tensor(NULL, E.b, 0, STRATA_U32, 1, shape1, STRATA_IN))  \
    X(N, STRATA_EINVAL, "buf is NULL", NULL,                                   \
      strata_args_add_tensor(E.a, NULL, 0, STRATA_U32, 1, shape1, STRATA_IN))  \
    X(W, STRATA_EINVAL, "dtype", NULL,                                         \
      strata_args_add_tensor(E.a, E.b, 0, AS(strata_dtype, 0), 1, shape1,      \
                             STRATA_IN))                                       \
    X(W, STRATA_EINVAL, "dtype", NULL,                                         \
      strata_args_add_tensor(E.a, E.b, 0, AS(strata_dtype, 99), 1, shape1,     \
                             STRATA_IN))                                       \
    X(W, STRATA_EINVAL, "ndims", NULL,                                         \
      strata_args_add_tensor(E.a, E.b, 0, STRATA_U32, 0, shape1, STRATA_IN))   \
    X(W, STRATA_EINVAL, "ndims", NULL,                                         \
      strata_args_add_tensor(E.a, E.b, 0, STRATA_U32, 6, shape5, STRATA_IN))   \
    X(W, STRATA_EINVAL, "ndims", NULL,                                         \
      strata_args_add_tensor(E.a, E.b, 0, STRATA_U32, SIZE_MAX, shape5,        \
                             STRATA_IN))                                       \
    X(W, STRATA_EINVAL, "shape is NULL", NULL,                                 \
      strata_args_add_tensor(E.a, E.b, 0, STRATA_U32, 1, NULL, STRATA_IN))     \
    X(W, STRATA_EINVAL, "tag", NULL,                                           \
      strata_args_add_tensor(E.a, E.b, 0, STRATA_U32, 1, shape1,               \
                             AS(strata_tag, 0)))                               \
    X(W, STRATA_EINVAL, "tag", NULL,                                           \
      strata_args_add_tensor(E.a, E.b, 0, STRATA_U32, 1, shape1,               \
                             AS(strata_tag, 99)))                              \
    X(W, STRATA_EINVAL, "outside", NULL,                                       \
      strata_args_add_tensor(E.a, E.b, 4096, STRATA_U32, 1, shape1,            \
                             STRATA_IN))                                       \
    X(W, STRATA_EINVAL, "outside", NULL,                                       \
      strata_args_add_tensor(E.a, E.b, SIZE_MAX, STRATA_U32, 1, shape1,        \
                             STRATA_IN))                                       \
    X(W, STRATA_EINVAL, "shape", NULL,                                         \
      strata_args_add_tensor(E.a, E.b, 0, STRATA_U64, 1, shape_huge,           \
                             STRATA_IN))                                       \
    X(W, STRATA_EINVAL, "outside", NULL,                                       \
      strata_args_add_tensor(E.a, E.b, 0, STRATA_U32, 1, shape_1025,           \
                             STRATA_IN))                                       \
    X(W, STRATA_EINVAL, "outside", NULL,                                       \
      strata_args_add_tensor(E.a, E.b, 4094, STRATA_U32, 1, shape1,            \
                             STRATA_IN))                                       \
    X(N, STRATA_EINVAL, "a is NULL", NULL, strata_args_add_scalar(NULL, 1))    \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_args_num_tensors(NULL) == 0))   \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_data(NULL, 0) == NULL))                       \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_data(E.a, SIZE_MAX) == NULL))                 \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_nbytes(NULL, 0) == 0))                        \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_nbytes(E.a, 1) == 0))                         \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_dtype(NULL, 0) == 0))                         \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_dtype(E.a, 9) == 0))                          \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_ndims(NULL, 0) == 0))                         \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_dim(NULL, 0, 0) == 0))                        \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_dim(E.a, 0, 5) == 0))                         \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_dim(E.a, 0, SIZE_MAX) == 0))                  \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_args_tensor_tag(NULL, 0) == 0)) \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_buffer(NULL, 0) == NULL))                     \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_buffer(E.a, 3) == NULL))                      \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_offset(NULL, 0) == 0))                        \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_args_num_scalars(NULL) == 0))   \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_args_scalar(NULL, 0) == 0))     \
    X(W, STRATA_OK, NULL, NULL, neutral(strata_args_scalar(E.a, 0) == 0))      \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_scalar(E.a, SIZE_MAX) == 0))                         \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_ndims(E.a, 9) == 0))                          \
    X(W, STRATA_OK, NULL, NULL, neutral(strata_args_tensor_tag(E.a, 9) == 0))  \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_offset(E.a, SIZE_MAX) == 0))                  \
    X(W, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_args_tensor_nbytes(E.a, SIZE_MAX) == 0))                  \
    /* orchestrator */                                                         \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_orch_submit_next_level(NULL, E.k, E.a, 0))                        \
    X(O, STRATA_EINVAL, "chip -1", NULL,                                       \
      strata_orch_submit_next_level(E.o, E.k, E.a, -1))                        \
    X(O, STRATA_EINVAL, "chip 2147483647", NULL,                               \
      strata_orch_submit_next_level(E.o, E.k, E.a, INT_MAX))                   \
    X(O, STRATA_EINVAL, "kind 77", NULL, wrong_kind(E.k))                      \
    X(O, STRATA_EINVAL, "kind 0", NULL, group_kind(0))                         \
    X(O, STRATA_EINVAL, "kind 4294967295", NULL, group_kind(-1))               \
    X(O, STRATA_EINVAL, "kind 77", NULL, sub_kind(77))                         \
    X(O, STRATA_EINVAL, "not registered", NULL,                                \
      strata_orch_submit_next_level(E.o, unknown_callable(), E.a, 0))          \
    X(O, STRATA_EINVAL, "both", NULL,                                          \
      group_with((const strata_args *const[2]){E.a, E.a}, ids_dup, 2))         \
    X(O, STRATA_EINVAL, "-1", NULL,                                            \
      group_with(AS(const strata_args *const *, &E.a), ids_neg, 1))            \
    X(O, STRATA_EINVAL, "n 3", NULL,                                           \
      group_with((const strata_args *const[3]){E.a, E.a, E.a}, ids3, 3))       \
    X(O, STRATA_EINVAL, "kernel", NULL,                                        \
      strata_orch_submit_next_level(E.o, E.s, E.a, 0))                         \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_orch_submit_next_level_group(NULL, E.k, NULL, ids2, 2))           \
    X(O, STRATA_EINVAL, "a is NULL", NULL, group_with(NULL, ids2, 2))          \
    X(O, STRATA_EINVAL, "worker_ids is NULL", NULL,                            \
      group_with(AS(const strata_args *const *, &E.a), NULL, 1))               \
    X(O, STRATA_EINVAL, "n is 0", NULL,                                        \
      group_with(AS(const strata_args *const *, &E.a), ids2, 0))               \
    X(O, STRATA_EINVAL, "n", NULL,                                             \
      group_with(AS(const strata_args *const *, &E.a), ids2, SIZE_MAX))        \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_orch_submit_sub(NULL, E.s, E.a))                                  \
    X(O, STRATA_EINVAL, "sub", NULL, strata_orch_submit_sub(E.o, E.k, E.a))    \
    X(N, STRATA_EINVAL, "orch is NULL", NULL, strata_orch_scope_begin(NULL))   \
    X(N, STRATA_EINVAL, "orch is NULL", NULL, strata_orch_scope_end(NULL))     \
    X(O, STRATA_ESTATE, "scope", NULL, strata_orch_scope_end(E.o))             \
    X(O, STRATA_ESTATE, "16", NULL, scopes_17())                               \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_orch_set_deadline(NULL, 1))                                       \
    X(O, STRATA_EINVAL, "deadline", NULL, strata_orch_set_deadline(E.o, NAN))  \
    X(O, STRATA_EINVAL, "deadline", NULL, strata_orch_set_deadline(E.o, -1))   \
    X(O, STRATA_EINVAL, "deadline", NULL,                                      \
      strata_orch_set_deadline(E.o, INFINITY))                                 \
    X(O, STRATA_EINVAL, "deadline", NULL, strata_orch_set_deadline(E.o, 1e8))  \
    X(O, STRATA_EINVAL, "deadline", NULL,                                      \
      strata_orch_set_deadline(E.o, -INFINITY))                                \
    X(O, STRATA_OK, NULL, NULL, strata_orch_set_deadline(E.o, 0))              \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_orch_worker(NULL) == NULL))     \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_chip_id(NULL) == -1))           \
    /* strata/cuda.h: no chip, or not a CUDA one */                            \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_chip_cuda_stream(NULL) == NULL))                          \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_chip_cuda_device(NULL) == -1))  \
    /* local domains */                                                        \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_orch_allocate_domain(NULL, &E.dspec, &E.d))                       \
    X(O, STRATA_EINVAL, "spec is NULL", NULL,                                  \
      strata_orch_allocate_domain(E.o, NULL, &E.d))                            \
    X(O, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_orch_allocate_domain(E.o, &E.dspec, NULL))                        \
    X(O, STRATA_EINVAL, "window_size", NULL,                                   \
      spec_with(0, 0, NULL, ids2, 2, AS(strata_domain **, &E.p)))              \
    X(O, STRATA_EINVAL, "workers", NULL,                                       \
      spec_with(4096, 0, NULL, NULL, 2, AS(strata_domain **, &E.p)))           \
    X(O, STRATA_EINVAL, "no workers", NULL,                                    \
      spec_with(4096, 0, NULL, ids2, 0, AS(strata_domain **, &E.p)))           \
    X(O, STRATA_EINVAL, "num_workers", NULL,                                   \
      spec_with(4096, 0, NULL, ids2, SIZE_MAX, AS(strata_domain **, &E.p)))    \
    X(O, STRATA_EINVAL, "chip 1", NULL,                                        \
      spec_with(4096, 0, NULL, ids_dup, 2, AS(strata_domain **, &E.p)))        \
    X(O, STRATA_EINVAL, "buffers", NULL,                                       \
      spec_with(4096, 1, NULL, ids2, 2, AS(strata_domain **, &E.p)))           \
    X(O, STRATA_EINVAL, "nbytes", NULL,                                        \
      spec_with(4096, 1, buf_mismatch, ids2, 2, AS(strata_domain **, &E.p)))   \
    X(O, STRATA_EINVAL, "window_size", NULL,                                   \
      spec_with(SIZE_MAX, 0, NULL, ids2, 2, AS(strata_domain **, &E.p)))       \
    X(O, STRATA_ENOMEM, "/dev/shm", NULL, domain_tib())                        \
    X(O, STRATA_EINVAL, "name", NULL, domain_with(NULL, 0, NULL))              \
    X(O, STRATA_EINVAL, "name", NULL, domain_with("", 0, NULL))                \
    X(O, STRATA_EINVAL, "name", NULL, domain_with(long_name, 0, NULL))         \
    X(O, STRATA_EINVAL, "already", NULL, domain_with("edges", 0, NULL))        \
    X(O, STRATA_EINVAL, "num_buffers", NULL,                                   \
      domain_with("edge", SIZE_MAX, buf_spec))                                 \
    X(O, STRATA_EINVAL, "buffers[0]", NULL,                                    \
      domain_with("edge", 1, buf_noname))                                      \
    X(O, STRATA_EINVAL, "dtype", NULL, domain_with("edge", 1, buf_nodtype))    \
    X(O, STRATA_EINVAL, "empty", NULL, domain_with("edge", 1, buf_empty))      \
    X(O, STRATA_EINVAL, "twice", NULL, domain_with("edge", 2, buf_twice))      \
    X(O, STRATA_EINVAL, "count", NULL, domain_with("edge", 1, buf_count_huge)) \
    X(O, STRATA_EINVAL, "window_size", NULL,                                   \
      domain_with("edge", 1, buf_too_big))                                     \
    X(N, STRATA_EINVAL, "d is NULL", NULL,                                     \
      strata_domain_context(NULL, 0, &E.dctx))                                 \
    X(O, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_domain_context(E.d, 0, NULL))                                     \
    X(O, STRATA_ENOENT, "chip 99", NULL,                                       \
      strata_domain_context(E.d, 99, &E.dctx))                                 \
    X(O, STRATA_ENOENT, "chip -1", NULL,                                       \
      strata_domain_context(E.d, -1, &E.dctx))                                 \
    X(N, STRATA_OK, NULL, NULL, strata_domain_release(NULL))                   \
    X(N, STRATA_OK, NULL, NULL, neutral(!strata_domain_released(NULL)))        \
    X(N, STRATA_OK, NULL, NULL, neutral(!strata_domain_freed(NULL)))           \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_orch_copy_to(NULL, E.d, 0, "buf", 0, E.b, 0, 4))                  \
    X(O, STRATA_EINVAL, "d is NULL", NULL,                                     \
      strata_orch_copy_to(E.o, NULL, 0, "buf", 0, E.b, 0, 4))                  \
    X(O, STRATA_EINVAL, "buffer is NULL", NULL,                                \
      strata_orch_copy_to(E.o, E.d, 0, NULL, 0, E.b, 0, 4))                    \
    X(O, STRATA_EINVAL, "src is NULL", NULL,                                   \
      strata_orch_copy_to(E.o, E.d, 0, "buf", 0, NULL, 0, 4))                  \
    X(O, STRATA_EINVAL, "nope", NULL,                                          \
      strata_orch_copy_to(E.o, E.d, 0, "nope", 0, E.b, 0, 4))                  \
    X(O, STRATA_EINVAL, "outside", NULL,                                       \
      strata_orch_copy_to(E.o, E.d, 0, "buf", SIZE_MAX, E.b, 0, 4))            \
    X(O, STRATA_EINVAL, "outside", NULL,                                       \
      strata_orch_copy_to(E.o, E.d, 0, "buf", 0, E.b, SIZE_MAX, 4))            \
    X(O, STRATA_EINVAL, "outside", NULL,                                       \
      strata_orch_copy_to(E.o, E.d, 0, "buf", 0, E.b, 0, SIZE_MAX))            \
    X(O, STRATA_ENOENT, "chip 99", NULL,                                       \
      strata_orch_copy_to(E.o, E.d, 99, "buf", 0, E.b, 0, 4))                  \
    X(O, STRATA_EINVAL, "nbytes is 0", NULL,                                   \
      strata_orch_copy_to(E.o, E.d, 0, "buf", 0, E.b, 0, 0))                   \
    X(O, STRATA_EINVAL, "another worker", NULL,                                \
      strata_orch_copy_to(E.o, E.d, 0, "buf", 0, E.lb, 0, 4))                  \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_orch_copy_from(NULL, E.d, 0, "buf", 0, E.b, 0, 4))                \
    X(O, STRATA_EINVAL, "d is NULL", NULL,                                     \
      strata_orch_copy_from(E.o, NULL, 0, "buf", 0, E.b, 0, 4))                \
    X(O, STRATA_EINVAL, "dst is NULL", NULL,                                   \
      strata_orch_copy_from(E.o, E.d, 0, "buf", 0, NULL, 0, 4))                \
    X(O, STRATA_EINVAL, "outside", NULL,                                       \
      strata_orch_copy_from(E.o, E.d, 0, "buf", 60, E.b, 0, 8))                \
    X(O, STRATA_EINVAL, "buffer is NULL", NULL,                                \
      strata_orch_copy_from(E.o, E.d, 0, NULL, 0, E.b, 0, 4))                  \
    X(O, STRATA_EINVAL, "nope", NULL,                                          \
      strata_orch_copy_from(E.o, E.d, 0, "nope", 0, E.b, 0, 4))                \
    X(O, STRATA_ENOENT, "chip 99", NULL,                                       \
      strata_orch_copy_from(E.o, E.d, 99, "buf", 0, E.b, 0, 4))                \
    X(O, STRATA_EINVAL, "outside", NULL,                                       \
      strata_orch_copy_from(E.o, E.d, 0, "buf", 0, E.b, SIZE_MAX, 4))          \
    X(O, STRATA_EINVAL, "outside", NULL,                                       \
      strata_orch_copy_from(E.o, E.d, 0, "buf", 0, E.b, 4094, 4))              \
    /* global domains */                                                       \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_orch_allocate_global_domain(NULL, &E.gspec, &E.g))                \
    X(G, STRATA_EINVAL, "spec is NULL", NULL,                                  \
      strata_orch_allocate_global_domain(E.o, NULL, &E.g))                     \
    X(G, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_orch_allocate_global_domain(E.o, &E.gspec, NULL))                 \
    X(G, STRATA_EINVAL, "members", NULL, gdomain_with(4096, NULL, 2))          \
    X(G, STRATA_EINVAL, "no members", NULL, gdomain_with(4096, members2, 0))   \
    X(G, STRATA_EINVAL, "window_size", NULL, gdomain_with(0, members2, 2))     \
    X(G, STRATA_EINVAL, "node 9", NULL,                                        \
      gdomain_with(4096, member_bad_node, 1))                                  \
    X(G, STRATA_ENOMEM, "/dev/shm", NULL,                                      \
      gdomain_with((size_t)1 << 40, members2, 2))                              \
    X(O, STRATA_EINVAL, "level", NULL, gdomain_with(4096, members2, 2))        \
    X(N, STRATA_OK, NULL, NULL, strata_global_domain_release(NULL))            \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_global_domain_id(NULL) == 0))   \
    X(N, STRATA_OK, NULL, NULL, neutral(!strata_global_domain_released(NULL))) \
    X(N, STRATA_OK, NULL, NULL, neutral(!strata_global_domain_freed(NULL)))    \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_orch_copy_to_global_domain(NULL, E.g, 0, NULL, 0, E.bytes, 4))    \
    X(G, STRATA_EINVAL, "g is NULL", NULL,                                     \
      strata_orch_copy_to_global_domain(E.o, NULL, 0, NULL, 0, E.bytes, 4))    \
    X(G, STRATA_EINVAL, "src is NULL", NULL,                                   \
      strata_orch_copy_to_global_domain(E.o, E.g, 0, NULL, 0, NULL, 4))        \
    X(G, STRATA_EINVAL, "rank", NULL,                                          \
      strata_orch_copy_to_global_domain(E.o, E.g, 2, NULL, 0, E.bytes, 4))     \
    X(G, STRATA_EINVAL, "outside", NULL,                                       \
      strata_orch_copy_to_global_domain(E.o, E.g, 0, NULL, SIZE_MAX, E.bytes,  \
                                        4))                                    \
    X(G, STRATA_EINVAL, "1 MiB", NULL,                                         \
      strata_orch_copy_to_global_domain(E.o, E.g, 0, NULL, 0, E.bytes,         \
                                        SIZE_MAX))                             \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_orch_copy_from_global_domain(NULL, E.g, 0, NULL, 0, E.bytes, 4))  \
    X(G, STRATA_EINVAL, "g is NULL", NULL,                                     \
      strata_orch_copy_from_global_domain(E.o, NULL, 0, NULL, 0, E.bytes, 4))  \
    X(G, STRATA_EINVAL, "dst is NULL", NULL,                                   \
      strata_orch_copy_from_global_domain(E.o, E.g, 0, NULL, 0, NULL, 4))      \
    X(G, STRATA_EINVAL, "rank", NULL,                                          \
      strata_orch_copy_from_global_domain(E.o, E.g, UINT32_MAX, NULL, 0,       \
                                          E.bytes, 4))                         \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_orch_get_global_domain(NULL, 1, AS(strata_global_view **, &E.p))) \
    X(O, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_orch_get_global_domain(E.o, 1, NULL))                             \
    X(O, STRATA_ENOENT, "domain", NULL,                                        \
      strata_orch_get_global_domain(E.o, UINT64_MAX,                           \
                                    AS(strata_global_view **, &E.p)))          \
    X(G, STRATA_EINVAL, "level", NULL,                                         \
      strata_orch_get_global_domain(E.o, 1, AS(strata_global_view **, &E.p)))  \
    X(N, STRATA_EINVAL, "v is NULL", NULL,                                     \
      strata_global_view_context(NULL, 0, &E.dctx))                            \
    /* kernel side and signals */                                              \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_chip_comm_context(NULL, 0) == NULL))                      \
    X(N, STRATA_OK, NULL, NULL, (strata_signal_add(NULL, 1), 0))               \
    X(N, STRATA_EINVAL, "word is NULL", NULL, strata_signal_wait(NULL, 1, 0))  \
    X(N, STRATA_EINVAL, "timeout_s", NULL,                                     \
      strata_signal_wait(&E.word, 1, NAN))                                     \
    X(N, STRATA_ETIMEDOUT, NULL, NULL, strata_signal_wait(&E.word, 1, 0))      \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_chip_comm_context(NULL, UINT64_MAX) == NULL))             \
    X(N, STRATA_OK, NULL, NULL, strata_signal_wait(&E.word, 0, -1))            \
    X(N, STRATA_ETIMEDOUT, NULL, NULL, strata_signal_wait(&E.word, 1, 1e-300)) \
    X(N, STRATA_ETIMEDOUT, NULL, NULL,                                         \
      strata_signal_wait(&E.word, UINT32_MAX, 1e-3))                           \
    /* partition */                                                            \
    X(N, STRATA_EINVAL, "world", NULL,                                         \
      strata_owned_range(10, 0, 0, &E.u64, &E.u64b))                           \
    X(N, STRATA_EINVAL, "rank", NULL,                                          \
      strata_owned_range(10, 2, 2, &E.u64, &E.u64b))                           \
    X(N, STRATA_EINVAL, "begin_out is NULL", NULL,                             \
      strata_owned_range(10, 2, 0, NULL, &E.u64b))                             \
    X(N, STRATA_EINVAL, "end_out is NULL", NULL,                               \
      strata_owned_range(10, 2, 0, &E.u64, NULL))                              \
    X(N, STRATA_OK, NULL, NULL,                                                \
      strata_owned_range(UINT64_MAX, UINT32_MAX, UINT32_MAX - 1, &E.u64,       \
                         &E.u64b))                                             \
    X(N, STRATA_EINVAL, "entity", NULL,                                        \
      strata_destination_owner(10, 10, 2, &E.u32))                             \
    X(N, STRATA_EINVAL, "world", NULL,                                         \
      strata_destination_owner(0, 10, 0, &E.u32))                              \
    X(N, STRATA_EINVAL, "rank_out is NULL", NULL,                              \
      strata_destination_owner(0, 10, 2, NULL))                                \
    X(N, STRATA_OK, NULL, NULL, strata_owned_range(0, 1, 0, &E.u64, &E.u64b))  \
    X(N, STRATA_OK, NULL, NULL,                                                \
      strata_destination_owner(UINT64_MAX - 1, UINT64_MAX, UINT32_MAX,         \
                               &E.u32))                                        \
    /* halo maps */                                                            \
    X(N, STRATA_EINVAL, "csr is NULL", NULL,                                   \
      strata_halo_map_derive(NULL, 2, 0, NULL, &E.m))                          \
    X(N, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_halo_map_derive(&E.csr, 2, 0, NULL, NULL))                        \
    X(N, STRATA_EINVAL, "world", NULL,                                         \
      csr_derive(ring_ptr, ring_col, 4, 4, 0, 0, NULL))                        \
    X(N, STRATA_EINVAL, "rank", NULL,                                          \
      csr_derive(ring_ptr, ring_col, 4, 4, 2, 5, NULL))                        \
    X(N, STRATA_EINVAL, "row_ptr is NULL", NULL,                               \
      csr_derive(NULL, ring_col, 4, 4, 2, 0, NULL))                            \
    X(N, STRATA_EINVAL, "col_idx is NULL", NULL,                               \
      csr_derive(ring_ptr, NULL, 4, 4, 2, 0, NULL))                            \
    X(N, STRATA_EINVAL, "row_ptr[0]", NULL,                                    \
      csr_derive(bad_ptr, ring_col, 4, 4, 2, 0, NULL))                         \
    X(N, STRATA_EINVAL, "num_entities", NULL,                                  \
      csr_derive(ring_ptr, ring_col, 4, 5, 2, 0, NULL))                        \
    X(N, STRATA_EINVAL, "column", NULL,                                        \
      csr_derive(ring_ptr, bad_col, 4, 4, 2, 0, NULL))                         \
    X(N, STRATA_EINVAL, "num_rows", NULL,                                      \
      csr_derive(ring_ptr, ring_col, UINT64_MAX, UINT64_MAX, 2, 0, NULL))      \
    X(N, STRATA_EINVAL, "ids", NULL,                                           \
      csr_derive(ring_ptr, ring_col, 4, 4, 2, 0,                               \
                 (strata_id_list[2]){{NULL, 0}, {NULL, 3}}))                   \
    X(N, STRATA_EINVAL, "csr is NULL", NULL,                                   \
      strata_halo_maps_collective(NULL, 2, &E.m))                              \
    X(N, STRATA_EINVAL, "maps_out is NULL", NULL,                              \
      strata_halo_maps_collective(&E.csr, 2, NULL))                            \
    X(N, STRATA_EINVAL, "world", NULL,                                         \
      strata_halo_maps_collective(&E.csr, 0, &E.m))                            \
    X(N, STRATA_OK, NULL, NULL, (strata_halo_map_destroy(NULL), 0))            \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_halo_map_rank(NULL) == 0))      \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_halo_map_world(NULL) == 0))     \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_halo_map_owned_begin(NULL) == 0))                         \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_halo_map_owned_end(NULL) == 0)) \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_halo_map_num_ghosts(NULL) == 0))                          \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_halo_map_ghost_ids(NULL) == NULL))                        \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_halo_map_num_receive_peers(NULL) == 0))                   \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_halo_map_num_send_peers(NULL) == 0))                      \
    X(N, STRATA_EINVAL, "m is NULL", NULL,                                     \
      strata_halo_map_receive_from(NULL, 0, &E.u32, &E.ids, &E.count))         \
    X(N, STRATA_EINVAL, "i", NULL,                                             \
      strata_halo_map_receive_from(E.m, SIZE_MAX, &E.u32, &E.ids, &E.count))   \
    X(N, STRATA_EINVAL, "peer_out is NULL", NULL,                              \
      strata_halo_map_receive_from(E.m, 0, NULL, &E.ids, &E.count))            \
    X(N, STRATA_EINVAL, "ids_out is NULL", NULL,                               \
      strata_halo_map_receive_from(E.m, 0, &E.u32, NULL, &E.count))            \
    X(N, STRATA_EINVAL, "count_out is NULL", NULL,                             \
      strata_halo_map_receive_from(E.m, 0, &E.u32, &E.ids, NULL))              \
    X(N, STRATA_EINVAL, "m is NULL", NULL,                                     \
      strata_halo_map_send_to(NULL, 0, &E.u32, &E.ids, &E.count))              \
    X(N, STRATA_EINVAL, "i", NULL,                                             \
      strata_halo_map_send_to(E.m, 99, &E.u32, &E.ids, &E.count))              \
    X(N, STRATA_EINVAL, "peer_out is NULL", NULL,                              \
      strata_halo_map_send_to(E.m, 0, NULL, &E.ids, &E.count))                 \
    X(N, STRATA_EINVAL, "ids_out is NULL", NULL,                               \
      strata_halo_map_send_to(E.m, 0, &E.u32, NULL, &E.count))                 \
    X(N, STRATA_EINVAL, "count_out is NULL", NULL,                             \
      strata_halo_map_send_to(E.m, 0, &E.u32, &E.ids, NULL))                   \
    X(N, STRATA_EINVAL, "i", NULL,                                             \
      strata_halo_map_receive_from(E.m, 99, &E.u32, &E.ids, &E.count))         \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_halo_map_bytes_for(NULL, 4, 4) == 0))                     \
    X(N, STRATA_OK, NULL, NULL,                                                \
      neutral(strata_halo_map_bytes_for(E.m, SIZE_MAX, 2) == SIZE_MAX))        \
    /* the .gfg store */                                                       \
    X(N, STRATA_EINVAL, "path is NULL", NULL,                                  \
      strata_gfg_save(NULL, &E.csr, STRATA_I32))                               \
    X(N, STRATA_EINVAL, "path", NULL, strata_gfg_save("", &E.csr, STRATA_I32)) \
    X(N, STRATA_EINVAL, "csr is NULL", NULL,                                   \
      save_with("edge_null.gfg", NULL, STRATA_I32))                            \
    X(N, STRATA_EINVAL, "index_dtype", NULL,                                   \
      save_with("edge_f32.gfg", &E.csr, STRATA_F32))                           \
    X(N, STRATA_EINVAL, "index_dtype", NULL,                                   \
      save_with("edge_99.gfg", &E.csr, AS(strata_dtype, 99)))                  \
    X(N, STRATA_EEXIST, "exists", NULL,                                        \
      save_with("ring.gfg", &E.csr, STRATA_I32))                               \
    X(N, STRATA_ENOENT, "edge_missing", NULL,                                  \
      save_with("edge_missing/x.gfg", &E.csr, STRATA_I32))                     \
    X(N, STRATA_EINVAL, "path is NULL", NULL,                                  \
      strata_gfg_open(NULL, AS(strata_gfg **, &E.p)))                          \
    X(N, STRATA_EINVAL, "path", NULL,                                          \
      strata_gfg_open("", AS(strata_gfg **, &E.p)))                            \
    X(N, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_gfg_open(E.gfg_path, NULL))                                       \
    X(N, STRATA_ENOENT, "/nonexistent", NULL,                                  \
      strata_gfg_open("/nonexistent/edge.gfg", AS(strata_gfg **, &E.p)))       \
    X(N, STRATA_ENOENT, "manifest", NULL,                                      \
      strata_gfg_open(E.dir, AS(strata_gfg **, &E.p)))                         \
    X(N, STRATA_ENOENT, "/dev/null", NULL,                                     \
      strata_gfg_open("/dev/null", AS(strata_gfg **, &E.p)))                   \
    X(N, STRATA_OK, NULL, NULL, (strata_gfg_close(NULL), 0))                   \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_gfg_num_rows(NULL) == 0))       \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_gfg_num_entities(NULL) == 0))   \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_gfg_num_edges(NULL) == 0))      \
    X(N, STRATA_OK, NULL, NULL, neutral(strata_gfg_index_dtype(NULL) == 0))    \
    X(N, STRATA_EINVAL, "g is NULL", NULL,                                     \
      strata_gfg_row_edges(NULL, 0, 1, &E.u64))                                \
    X(N, STRATA_EINVAL, "count_out is NULL", NULL,                             \
      strata_gfg_row_edges(E.gfg, 0, 1, NULL))                                 \
    X(N, STRATA_EINVAL, "begin", NULL,                                         \
      strata_gfg_row_edges(E.gfg, 2, 1, &E.u64))                               \
    X(N, STRATA_EINVAL, "end", NULL,                                           \
      strata_gfg_row_edges(E.gfg, 0, UINT64_MAX, &E.u64))                      \
    X(N, STRATA_OK, NULL, NULL, strata_gfg_row_edges(E.gfg, 4, 4, &E.u64))     \
    X(N, STRATA_EINVAL, "g is NULL", NULL,                                     \
      strata_gfg_read_rows(NULL, 0, 1, E.rows, E.rows, 8))                     \
    X(N, STRATA_EINVAL, "row_ptr_out is NULL", NULL,                           \
      strata_gfg_read_rows(E.gfg, 0, 1, NULL, E.rows, 8))                      \
    X(N, STRATA_EINVAL, "col_out is NULL", NULL,                               \
      strata_gfg_read_rows(E.gfg, 0, 1, E.rows, NULL, 8))                      \
    X(N, STRATA_EINVAL, "col_capacity", NULL,                                  \
      strata_gfg_read_rows(E.gfg, 0, 4, E.rows, E.rows, 1))                    \
    X(N, STRATA_EINVAL, "end", NULL,                                           \
      strata_gfg_read_rows(E.gfg, 0, 5, E.rows, E.rows, 8))                    \
    X(N, STRATA_EINVAL, "begin", NULL,                                         \
      strata_gfg_read_rows(E.gfg, UINT64_MAX, 0, E.rows, E.rows, 8))           \
    X(N, STRATA_OK, NULL, NULL,                                                \
      strata_gfg_read_rows(E.gfg, 4, 4, E.rows, E.rows, 0))                    \
    X(N, STRATA_EINVAL, "world", NULL,                                         \
      strata_halo_map_derive_gfg(E.gfg, 0, 0, NULL, &E.m))                     \
    X(N, STRATA_EINVAL, "g is NULL", NULL,                                     \
      strata_halo_map_derive_gfg(NULL, 2, 0, NULL, &E.m))                      \
    X(N, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_halo_map_derive_gfg(E.gfg, 2, 0, NULL, NULL))                     \
    X(N, STRATA_EINVAL, "rank", NULL,                                          \
      strata_halo_map_derive_gfg(E.gfg, 2, 2, NULL, &E.m))                     \
    X(N, STRATA_EINVAL, "gfg_path is NULL", NULL,                              \
      strata_halo_map_derive_paged(NULL, 2, 0, NULL, &E.m))                    \
    X(N, STRATA_EINVAL, "world", NULL,                                         \
      strata_halo_map_derive_paged(E.gfg_path, 0, 0, NULL, &E.m))              \
    X(N, STRATA_EINVAL, "rank", NULL,                                          \
      strata_halo_map_derive_paged(E.gfg_path, 2, 2, NULL, &E.m))              \
    X(N, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_halo_map_derive_paged(E.gfg_path, 2, 0, NULL, NULL))              \
    X(N, STRATA_EINVAL, "gfg_path", NULL,                                      \
      strata_halo_map_derive_paged("", 2, 0, NULL, &E.m))                      \
    X(N, STRATA_ENOENT, "/nonexistent", NULL,                                  \
      strata_halo_map_derive_paged("/nonexistent/edge.gfg", 2, 0, NULL, &E.m)) \
    /* halo execution */                                                       \
    X(N, STRATA_EINVAL, "name is NULL", NULL,                                  \
      strata_halo_register_edge(NULL, nop_edge, NULL))                         \
    X(N, STRATA_EINVAL, "name", NULL,                                          \
      strata_halo_register_edge("", nop_edge, NULL))                           \
    X(N, STRATA_EINVAL, "name", NULL, register_long(2))                        \
    X(N, STRATA_EINVAL, "forward is NULL", NULL,                               \
      strata_halo_register_edge("edge.e", NULL, NULL))                         \
    X(N, STRATA_OK, NULL, NULL, (strata_halo_spec_init(NULL), 0))              \
    X(N, STRATA_EINVAL, "w is NULL", NULL,                                     \
      strata_halo_create(NULL, &E.hspec, &E.h))                                \
    X(W, STRATA_EINVAL, "spec is NULL", NULL,                                  \
      strata_halo_create(E.w, NULL, &E.h))                                     \
    X(W, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_halo_create(E.w, &E.hspec, NULL))                                 \
    X(W, STRATA_EINVAL, "features", NULL, halo_with(0, STRATA_F32, 1, 0, 0))   \
    X(W, STRATA_EINVAL, "features", NULL,                                      \
      halo_with(SIZE_MAX, STRATA_F32, 1, 0, 0))                                \
    X(W, STRATA_EINVAL, "dtype", NULL, halo_with(1, STRATA_I32, 1, 0, 0))      \
    X(W, STRATA_EINVAL, "reducer", NULL, halo_with(1, STRATA_F32, 99, 0, 0))   \
    X(W, STRATA_EINVAL, "schedule", NULL, halo_with(1, STRATA_F32, 1, 99, 0))  \
    X(W, STRATA_EINVAL, "timeout_s", NULL,                                     \
      halo_with(1, STRATA_F32, 1, 0, NAN))                                     \
    X(W, STRATA_EINVAL, "csr and gfg_path", NULL, halo_field(E.w, H_NO_CSR))   \
    X(W, STRATA_EINVAL, "csr and gfg_path", NULL, halo_field(E.w, H_BOTH))     \
    X(W, STRATA_EINVAL, "gfg_path", NULL, halo_field(E.w, H_GFG_EMPTY))        \
    X(W, STRATA_EINVAL, "chips", NULL, halo_field(E.w, H_CHIPS_NULL))          \
    X(W, STRATA_EINVAL, "num_chips", NULL, halo_field(E.w, H_CHIPS_HUGE))      \
    /* A chip the worker lacks is found at the first call (graph.h); more      \
     * chips than it has at create (E.fresh has none). */                      \
    X(W, STRATA_OK, NULL, NULL, halo_field(E.w, H_CHIP_99))                    \
    X(W, STRATA_EINVAL, "edge kernel", NULL, halo_field(E.w, H_EDGE_NULL))     \
    X(W, STRATA_EINVAL, "edge.unknown", NULL, halo_field(E.w, H_EDGE_UNKNOWN)) \
    X(W, STRATA_EINVAL, "chips and members", NULL,                             \
      halo_field(E.w, H_CHIPS_AND_MEMBERS))                                    \
    X(W, STRATA_OK, NULL, NULL, halo_field(E.w, H_TIMEOUT_NEG))                \
    X(W, STRATA_EINVAL, "num_chips", NULL, halo_field(E.fresh, H_AS_IS))       \
    X(N, STRATA_OK, NULL, NULL, strata_halo_destroy(NULL))                     \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_halo_forward(NULL, E.h, E.b, E.b2))                               \
    X(O, STRATA_EINVAL, "h is NULL", NULL,                                     \
      strata_halo_forward(E.o, NULL, E.b, E.b2))                               \
    X(O, STRATA_EINVAL, "x is NULL", NULL,                                     \
      strata_halo_forward(E.o, E.h, NULL, E.b2))                               \
    X(O, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_halo_forward(E.o, E.h, E.b, NULL))                                \
    X(O, STRATA_EINVAL, "x == out", NULL,                                      \
      strata_halo_forward(E.o, E.h, E.b, E.b))                                 \
    X(N, STRATA_EINVAL, "orch is NULL", NULL,                                  \
      strata_halo_vjp(NULL, E.h, E.b, E.b2))                                   \
    X(O, STRATA_EINVAL, "grad_out is NULL", NULL,                              \
      strata_halo_vjp(E.o, E.h, NULL, E.b2))                                   \
    X(O, STRATA_EINVAL, "grad_x is NULL", NULL,                                \
      strata_halo_vjp(E.o, E.h, E.b, NULL))                                    \
    X(N, STRATA_EINVAL, "h is NULL", NULL,                                     \
      strata_halo_last_trace(NULL, 0, &E.trace))                               \
    X(N, STRATA_EINVAL, "out is NULL", NULL,                                   \
      strata_halo_last_trace(E.h, 0, NULL))                                    \
    X(N, STRATA_EINVAL, "rank", NULL,                                          \
      strata_halo_last_trace(E.h, 2, &E.trace))                                \
    X(N, STRATA_EINVAL, "rank", NULL,                                          \
      strata_halo_last_trace(E.h, UINT32_MAX, &E.trace))

struct row {
    enum ctx ctx;
    strata_err want;
    const char *msg; /* the message holds it; NULL: not checked */
    /* The file whose owner fixes it ("!file": the row may crash, so in
     * this process it runs only in strict mode); NULL: none. */
    const char *pending;
    const char *call;
};

static const struct row rows[] = {
#define X(ctx, want, msg, pending, call) {ctx, want, msg, pending, #call},
    EDGE_ROWS(X)
#undef X
};
#define NUM_ROWS (sizeof(rows) / sizeof(rows[0]))

static strata_err run_row(size_t i)
{
    size_t k = 0;

#define X(ctx, want, msg, pending, call)                                       \
    if (k++ == i)                                                              \
        return (strata_err)(call);
    EDGE_ROWS(X)
#undef X
    return NOT_NEUTRAL;
}

/* What a row did. */
struct outcome {
    bool ran;
    int signal; /* killed by it (a crash) */
    bool hung;
    strata_err got;
    char msg[STRATA_ERRMSG_MAX];
};

static struct outcome results[NUM_ROWS];

static void record(size_t i, strata_err got)
{
    results[i].ran = true;
    results[i].got = got;
    snprintf(results[i].msg, sizeof(results[i].msg), "%s", strata_errmsg());
}

#define ROW_TIMEOUT_MS 20000

/* Runs row i in a child of its own: a crash or a hang is the child's. */
static void run_forked(size_t i)
{
    struct outcome *r = &results[i];
    int fds[2], status = 0;
    struct pollfd pfd;
    pid_t pid;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE};
        struct outcome mine = {.ran = true};

        /* CMocka's handlers would carry on with the test in the child. */
        for (size_t s = 0; s < sizeof(sigs) / sizeof(sigs[0]); s++)
            signal(sigs[s], SIG_DFL);
        close(fds[0]);
        mine.got = run_row(i);
        snprintf(mine.msg, sizeof(mine.msg), "%s", strata_errmsg());
        if (write(fds[1], &mine, sizeof(mine)) != (ssize_t)sizeof(mine))
            _exit(2);
        _exit(0);
    }
    close(fds[1]);
    pfd = (struct pollfd){.fd = fds[0], .events = POLLIN};
    if (poll(&pfd, 1, ROW_TIMEOUT_MS) == 0) {
        r->hung = true;
        kill(pid, SIGKILL);
    } else if (read(fds[0], r, sizeof(*r)) != (ssize_t)sizeof(*r)) {
        r->ran = false;
    }
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status) && !r->hung)
        r->signal = WTERMSIG(status);
}

static bool strict(void)
{
    return getenv("STRATA_EDGES_STRICT") != NULL;
}

static void run_ctx(enum ctx ctx)
{
    bool trace = getenv("STRATA_EDGES_TRACE") != NULL;

    for (size_t i = 0; i < NUM_ROWS; i++) {
        /* In this process a crash would end the table: a pending row
         * that may crash ("!file") runs here only once its fix is in
         * (strict). */
        if (rows[i].ctx != ctx ||
            (rows[i].pending && rows[i].pending[0] == '!' && !strict()))
            continue;
        if (trace)
            fprintf(stderr, "row %zu: %s\n", i, rows[i].call);
        record(i, run_row(i));
    }
}

static strata_err orch_rows(strata_orch *o, const strata_args *a, void *user)
{
    enum ctx ctx = *(const enum ctx *)user;
    strata_err err;

    (void)a;
    E.o = o;
    if (ctx == O) {
        strata_domain_spec s = {"edges", ids2, 2, 4096, buf_spec, 1};

        err = strata_orch_allocate_domain(o, &s, &E.d);
    } else {
        strata_global_domain_spec s = {.name = "gedges",
                                       .members = members2,
                                       .num_members = 2,
                                       .window_size = 4096};

        err = strata_orch_allocate_global_domain(o, &s, &E.g);
    }
    if (err)
        return err;
    run_ctx(ctx);
    if (ctx == G)
        return strata_global_domain_release(E.g);
    return strata_domain_release(E.d);
}

/* Fails the test for every row that did not do what its line says. */
static void check_rows(void)
{
    size_t failed = 0, pending = 0;

    for (size_t i = 0; i < NUM_ROWS; i++) {
        const struct row *row = &rows[i];
        const struct outcome *r = &results[i];
        char why[STRATA_ERRMSG_MAX + 128] = "";

        if (r->hung)
            snprintf(why, sizeof(why), "hung (killed after %d ms)",
                     ROW_TIMEOUT_MS);
        else if (r->signal)
            snprintf(why, sizeof(why), "crashed: %s", strsignal(r->signal));
        else if (!r->ran)
            snprintf(why, sizeof(why), "not run: it may crash this process");
        else if (r->got == NOT_NEUTRAL)
            snprintf(why, sizeof(why), "not the neutral value");
        else if (r->got != row->want)
            snprintf(why, sizeof(why), "got %s (%s), want %s",
                     strata_errname(r->got), r->msg, strata_errname(row->want));
        else if (row->msg && !strstr(r->msg, row->msg))
            snprintf(why, sizeof(why), "message '%s' does not name '%s'",
                     r->msg, row->msg);
        if (!why[0]) {
            if (row->pending)
                print_message("now passes, drop its pending mark (%s): %s\n",
                              row->pending, row->call);
            continue;
        }
        if (row->pending && !strict()) {
            pending++;
            print_message("PENDING (%s): %s: %s\n", row->pending, row->call,
                          why);
            continue;
        }
        failed++;
        print_error("FAILED: %s: %s\n", row->call, why);
    }
    print_message("%zu rows, %zu failed, %zu pending\n", NUM_ROWS, failed,
                  pending);
    assert_int_equal(failed, 0);
}

static strata_err make_env(void)
{
    strata_worker_config cfg;
    strata_worker *node = NULL;
    strata_err err;
    int id;

    E.csr = (strata_csr_view){4, 4, ring_ptr, ring_col};
    snprintf(E.dir, sizeof(E.dir), "/tmp/strata-edges-XXXXXX");
    if (!mkdtemp(E.dir))
        return STRATA_ESYS;
    snprintf(E.gfg_path, sizeof(E.gfg_path), "%s/ring.gfg", E.dir);
    it_try(strata_gfg_save(E.gfg_path, &E.csr, STRATA_I32));
    it_try(strata_gfg_open(E.gfg_path, &E.gfg));
    it_try(strata_halo_map_derive(&E.csr, 2, 0, NULL, &E.m));
    it_try(it_worker_start(ids2, 2, 1, &E.w));
    strata_worker_config_init(&cfg, 3);
    it_try(it_worker_create(&cfg, &E.fresh));
    it_try(strata_worker_create_buffer(E.w, 4096, &E.b));
    it_try(strata_worker_create_buffer(E.w, 4096, &E.b2));
    it_try(it_args1(E.b, 0, 16, STRATA_IN, &E.a));
    it_try(strata_worker_submit(E.w, nop_orch, NULL, NULL, &E.run));
    it_try(strata_run_wait(E.run, 30));
    strata_halo_spec_init(&E.hspec);
    E.hspec.csr = &E.csr;
    E.hspec.chips = ids2;
    E.hspec.num_chips = 2;
    it_try(strata_halo_create(E.w, &E.hspec, &E.h));
    strata_worker_config_init(&E.cfg, 3);
    E.rspec = (strata_remote_spec){.endpoint = "127.0.0.1:7070",
                                   .insecure = true,
                                   .chip_ids = ids2,
                                   .num_chips = 1};
    E.dspec = (strata_domain_spec){"edge", ids2, 2, 4096, buf_spec, 1};
    E.gspec = (strata_global_domain_spec){.name = "gedge",
                                          .members = members2,
                                          .num_members = 2,
                                          .window_size = 4096};
    strata_worker_config_init(&cfg, 4);
    cfg.startup_timeout_s = 30;
    it_try(it_worker_create(&cfg, &E.fresh4));
    it_try(it_worker_create(&cfg, &E.l4));
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids2;
    cfg.num_chips = 2;
    it_try(strata_worker_create(&cfg, &node));
    err = strata_worker_add_worker(E.l4, node, &id);
    if (err) {
        strata_err d = strata_worker_destroy(node);

        return d ? d : err;
    }
    it_try(strata_worker_init(E.l4));
    return strata_worker_create_buffer(E.l4, 4096, &E.lb);
}

static void free_env(void)
{
    char cmd[128];

    strata_args_destroy(E.a);
    strata_run_free(E.run);
    if (E.h)
        it_ok(strata_halo_destroy(E.h));
    if (E.l4)
        it_ok(it_worker_destroy(E.l4));
    if (E.fresh)
        it_ok(it_worker_destroy(E.fresh));
    if (E.fresh4)
        it_ok(it_worker_destroy(E.fresh4));
    if (E.w)
        it_ok(it_worker_destroy(E.w));
    strata_halo_map_destroy(E.m);
    strata_gfg_close(E.gfg);
    if (E.dir[0]) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", E.dir);
        assert_int_equal(system(cmd), 0);
    }
    memset(&E, 0, sizeof(E));
}

static void test_api_edges_every_public_function_refuses_bad_input(void **st)
{
    testutil_snapshot before;
    enum ctx ctx;

    (void)st;
    testutil_snapshot_take(&before);
    it_ok(strata_register_kernel("edges.nop", nop_kernel, &E.k));
    it_ok(strata_register_sub("edges.nop", nop_sub, &E.s));
    if (make_env() != STRATA_OK) {
        char msg[STRATA_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        free_env();
        fail_msg("setting up: %s", msg);
    }
    for (size_t i = 0; i < NUM_ROWS; i++)
        if (rows[i].ctx == N)
            run_forked(i);
    run_ctx(W);
    ctx = O;
    it_ok(strata_worker_run(E.w, orch_rows, NULL, &ctx));
    ctx = G;
    it_ok(strata_worker_run(E.l4, orch_rows, NULL, &ctx));
    free_env();
    check_rows();
    testutil_assert_clean(&before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(
            test_api_edges_every_public_function_refuses_bad_input,
            it_teardown),
    };
    return cmocka_run_group_tests(tests, it_setup_kernels, NULL);
}
