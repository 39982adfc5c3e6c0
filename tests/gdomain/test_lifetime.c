/*
 * Lifetime of global domains: release inside the run (freed at its
 * fence), no release (freed at the fence too), retain_after_run (a later
 * run reads what an earlier one wrote; freed only after its release, or
 * at worker destroy), release between runs, release twice; and the
 * bounded control-plane copies into and out of windows (forked members;
 * STRATA_ENOTSUP for remote ones), with every range error.
 *
 * "Freed" is checked from outside as well as through the API: no window
 * of the domain is mapped by any process below the test.
 */
#define _GNU_SOURCE
#include "gd_kit.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define COUNT 256
#define WINDOW 8192

static struct gd_daemon daemon_;

static int setup(void **state)
{
    if (gd_setup(state) != 0)
        return -1;
    return gd_daemon_start(&daemon_, NULL, NULL);
}

static int teardown(void **state)
{
    (void)state;
    return gd_daemon_stop(&daemon_);
}

static void spec_4(struct gd_spec *s, const char *name, bool retain)
{
    gd_spec_init(s, name, WINDOW);
    gd_spec_grid(s, 0, 2, 2);
    gd_spec_buf(s, "vec", STRATA_U32, COUNT);
    gd_spec_buf(s, "flag", STRATA_U32, 1);
    s->spec.retain_after_run = retain;
}

/* A domain released in a run must be freed when that run returns ("freed
 * at the next fence"), also when it was retained past an earlier run. */
static void assert_freed_at_fence(const strata_global_domain *g,
                                  const char *what)
{
    if (!strata_global_domain_freed(g))
        fail_msg("%s: not freed when the run that released it returned "
                 "(released %d, %zu window mappings left)",
                 what, strata_global_domain_released(g),
                 gd_window_maps_below());
}

/* ---- release inside the run ------------------------------------------ */

struct rel {
    struct gd_spec s;
    strata_global_domain *g;
    bool release;
    bool released_after, freed_after; /* right after release in the fn */
    size_t maps_after;
    strata_err second, null_release;
};

static strata_err rel_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct rel *r = user;

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &r->s.spec, &r->g));
    gd_try(strata_orch_scope_begin(o));
    gd_try(
        gd_submit_fill(o, &r->s, strata_global_domain_id(r->g), 0, COUNT, 1));
    gd_try(strata_orch_scope_end(o));
    if (r->release) {
        gd_try(strata_global_domain_release(r->g));
        r->second = strata_global_domain_release(r->g);
        r->null_release = strata_global_domain_release(NULL);
    }
    r->released_after = strata_global_domain_released(r->g);
    r->freed_after = strata_global_domain_freed(r->g);
    /* Released is a flag: the windows live until the fence. */
    r->maps_after = gd_domain_maps_below(strata_global_domain_id(r->g));
    return STRATA_OK;
}

static void release_case(bool release)
{
    testutil_snapshot before;
    static struct rel r;
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&r, 0, sizeof(r));
    spec_4(&r.s, "rel", false);
    r.release = release;
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    gd_ok(strata_worker_run(w, rel_orch, NULL, &r));
    assert_int_equal(r.released_after, release);
    assert_false(r.freed_after);
    assert_int_equal(r.maps_after, 16);
    if (release) {
        assert_int_equal(r.second, STRATA_OK);
        assert_int_equal(r.null_release, STRATA_OK);
    }
    assert_true(strata_global_domain_released(r.g));
    assert_true(strata_global_domain_freed(r.g));
    assert_int_equal(gd_window_maps_below(), 0);
    /* Releasing a freed domain is still a no-op. */
    gd_ok(strata_global_domain_release(r.g));
    assert_true(strata_global_domain_freed(r.g));
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

static void test_gd_lifetime_release_in_run_freed_at_fence(void **state)
{
    (void)state;
    release_case(true);
}

static void test_gd_lifetime_no_release_freed_at_fence(void **state)
{
    (void)state;
    release_case(false);
}

/* ---- retain_after_run ------------------------------------------------- */

struct ret {
    struct gd_spec s;
    strata_global_domain *g;
    strata_buffer *own, *peer, *sum;
    uint64_t id;
    bool release_in_first, release_in_read;
    size_t maps_in_read;
};

/* Run 1: each member computes its slice into its own window. */
static strata_err ret_compute(strata_orch *o, const strata_args *args,
                              void *user)
{
    struct ret *r = user;

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &r->s.spec, &r->g));
    r->id = strata_global_domain_id(r->g);
    gd_try(gd_submit_fill(o, &r->s, r->id, 0, COUNT, 77));
    if (r->release_in_first)
        gd_try(strata_global_domain_release(r->g));
    return STRATA_OK;
}

/* A run that fails on the nodes (chip 9 is nobody's member). */
static strata_err ret_fail(strata_orch *o, const strata_args *args, void *user)
{
    struct ret *r = user;
    uint64_t sc[6] = {r->id, 0, COUNT, 1, 1, 9};

    (void)args;
    return gd_node_task(o, 0, gd_o_fill, NULL, 0, 0, STRATA_IN, sc, 6);
}

/* A later run: every member reads its own window and rank 0's (through
 * the peer mapping), then (optionally) releases. */
static strata_err ret_read(strata_orch *o, const strata_args *args, void *user)
{
    struct ret *r = user;

    (void)args;
    r->maps_in_read = gd_domain_maps_below(r->id);
    gd_try(gd_submit_read(o, &r->s, r->id, GD_OWN, 0, COUNT * 4, r->own));
    gd_try(gd_submit_read(o, &r->s, r->id, 0, 0, COUNT * 4, r->peer));
    if (r->release_in_read)
        gd_try(strata_global_domain_release(r->g));
    return STRATA_OK;
}

static void check_read(const struct ret *r)
{
    const uint32_t *own = strata_buffer_data(r->own);
    const uint32_t *peer = strata_buffer_data(r->peer);
    size_t n = r->s.spec.num_members;

    for (size_t rank = 0; rank < n; rank++) {
        size_t k = gd_slot_of(&r->s, rank);

        for (uint32_t i = 0; i < COUNT; i++) {
            if (own[k * COUNT + i] != gd_value(77, (uint32_t)rank, i))
                fail_msg("rank %zu own[%u] = %u, want %u", rank, i,
                         own[k * COUNT + i], gd_value(77, (uint32_t)rank, i));
            if (peer[k * COUNT + i] != gd_value(77, 0, i))
                fail_msg("rank %zu read rank 0 [%u] = %u, want %u", rank, i,
                         peer[k * COUNT + i], gd_value(77, 0, i));
        }
    }
}

static void ret_buffers(strata_worker *w, struct ret *r)
{
    size_t n = r->s.spec.num_members;

    gd_ok(strata_worker_create_buffer(w, n * COUNT * 4, &r->own));
    gd_ok(strata_worker_create_buffer(w, n * COUNT * 4, &r->peer));
}

/* Retained across a run that failed and into a third that reads it. */
static void retain_case(size_t nremote)
{
    testutil_snapshot before;
    static struct ret r;
    const struct gd_daemon *ds[1] = {&daemon_};
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&r, 0, sizeof(r));
    spec_4(&r.s, "kept", true);
    gd_ok(gd_l4_start(2 - nremote, 2, ds, nremote, 2, &w));
    ret_buffers(w, &r);
    gd_ok(strata_worker_run(w, ret_compute, NULL, &r));
    assert_false(strata_global_domain_released(r.g));
    assert_false(strata_global_domain_freed(r.g));
    assert_int_equal(gd_domain_maps_below(r.id), 16);
    gd_expect(STRATA_ETASK, strata_worker_run(w, ret_fail, NULL, &r));
    assert_false(strata_global_domain_freed(r.g));
    r.release_in_read = false;
    gd_ok(strata_worker_run(w, ret_read, NULL, &r));
    assert_int_equal(r.maps_in_read, 16);
    check_read(&r);
    assert_false(strata_global_domain_freed(r.g));
    memset(strata_buffer_data(r.own), 0, 4 * COUNT * 4);
    r.release_in_read = true;
    gd_ok(strata_worker_run(w, ret_read, NULL, &r));
    check_read(&r);
    /* Released in the run: freed at its fence. */
    assert_true(strata_global_domain_released(r.g));
    assert_freed_at_fence(r.g, "retained, released in a later run");
    assert_int_equal(gd_window_maps_below(), 0);
    gd_destroy(w, STRATA_OK);
    assert_true(gd_daemon_idle(&daemon_, 10.0));
    testutil_assert_clean_within(&before, 5.0);
}

static void test_gd_lifetime_retain_later_run_reads_ok(void **state)
{
    (void)state;
    retain_case(0);
}

static void test_gd_lifetime_retain_remote_later_run_reads_ok(void **state)
{
    (void)state;
    retain_case(1);
}

static strata_err empty_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)o;
    (void)args;
    (void)user;
    return STRATA_OK;
}

static bool is_freed(void *arg)
{
    return strata_global_domain_freed(arg);
}

/* Released between runs (no run active): freed without another run. */
static void test_gd_lifetime_retain_release_between_runs_freed(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct ret r;
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&r, 0, sizeof(r));
    spec_4(&r.s, "kept", true);
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    ret_buffers(w, &r);
    gd_ok(strata_worker_run(w, ret_compute, NULL, &r));
    assert_false(strata_global_domain_freed(r.g));
    gd_ok(strata_global_domain_release(r.g));
    gd_ok(strata_global_domain_release(r.g));
    assert_true(strata_global_domain_released(r.g));
    if (!testutil_wait_until(is_freed, r.g, 5.0)) {
        /* Without this run the queued release would never go out, and
         * the teardown's destroy would wait for it forever. */
        strata_err kick = strata_worker_run(w, empty_orch, NULL, NULL);

        fail_msg("released between runs: not freed within 5 s (%zu window "
                 "mappings left); an empty run then returned %s and freed "
                 "it: %s",
                 gd_window_maps_below(), strata_errname(kick),
                 testutil_wait_until(is_freed, r.g, 5.0) ? "yes" : "no");
    }
    assert_int_equal(gd_window_maps_below(), 0);
    /* The nodes no longer know it; the worker goes on. */
    gd_expect(STRATA_ETASK, strata_worker_run(w, ret_read, NULL, &r));
    gd_assert_contains(strata_errmsg(), "no committed global domain");
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

/* Retained, then a member node dies between runs: releasing it is still
 * OK (the dead node has nothing to undo), and says nothing of a failure
 * in strata_errmsg (an outside user read the node's loss there). */
static void test_gd_lifetime_retain_node_killed_release_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct ret r;
    strata_worker *w = NULL;
    pid_t node;

    testutil_snapshot_take(&before);
    memset(&r, 0, sizeof(r));
    spec_4(&r.s, "kept", true);
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    ret_buffers(w, &r);
    gd_ok(strata_worker_run(w, ret_compute, NULL, &r));
    node = strata_worker_node_pid(w, 1);
    assert_true(node > 0);
    assert_int_equal(kill(node, SIGKILL), 0);
    /* The loss is seen (a run fails on it) before the release. */
    gd_expect(STRATA_EPEER, strata_worker_run(w, ret_read, NULL, &r));
    gd_ok(strata_global_domain_release(r.g));
    assert_string_equal(strata_errmsg(), "");
    assert_true(testutil_wait_until(is_freed, r.g, 10.0));
    gd_destroy(w, STRATA_EPEER);
    testutil_assert_clean_within(&before, 5.0);
}

/* Retained but released in its own run: freed at that run's fence. */
static void test_gd_lifetime_retain_released_same_run_freed(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct ret r;
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&r, 0, sizeof(r));
    spec_4(&r.s, "kept", true);
    r.release_in_first = true;
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    ret_buffers(w, &r);
    gd_ok(strata_worker_run(w, ret_compute, NULL, &r));
    assert_true(strata_global_domain_freed(r.g));
    assert_int_equal(gd_window_maps_below(), 0);
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

/* Never released: the worker's destroy takes it down with nothing left. */
static void test_gd_lifetime_retain_never_released_destroy_clean(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct ret r;
    const struct gd_daemon *ds[1] = {&daemon_};
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&r, 0, sizeof(r));
    spec_4(&r.s, "kept", true);
    gd_ok(gd_l4_start(1, 2, ds, 1, 2, &w));
    ret_buffers(w, &r);
    gd_ok(strata_worker_run(w, ret_compute, NULL, &r));
    assert_int_equal(gd_domain_maps_below(r.id), 16);
    gd_destroy(w, STRATA_OK);
    assert_true(gd_daemon_idle(&daemon_, 10.0));
    assert_int_equal(gd_window_maps_below(), 0);
    testutil_assert_clean_within(&before, 5.0);
}

/* ---- copies ----------------------------------------------------------------
 */

#define BIG_WINDOW ((size_t)2 << 20)

struct cp {
    struct gd_spec s;
    strata_global_domain *g;
    uint64_t id;
    strata_buffer *own;
    uint32_t pattern[COUNT], back[COUNT], kernel_back[COUNT];
    uint32_t remote_back[COUNT];
    bool remote_big_ok;
    uint32_t at_end[2];
    strata_err errs[16];
    strata_err remote_to, remote_from, after_release;
    strata_err whole_ok, whole_last_ok, l4_lookup;
    char zero_msg[STRATA_ERRMSG_MAX], l4_lookup_msg[STRATA_ERRMSG_MAX];
};

static strata_err cp_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct cp *c = user;
    static uint8_t big[(1u << 20) + 4];
    uint32_t word = 0xabcdef01u;
    strata_global_domain *g;
    int k = 0;

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &c->s.spec, &c->g));
    g = c->g;
    c->id = strata_global_domain_id(g);
    for (uint32_t i = 0; i < COUNT; i++)
        c->pattern[i] = 0x5a000000u + i;
    /* Into rank 1's "vec" (a forked member), then back. */
    gd_try(strata_orch_copy_to_global_domain(o, g, 1, "vec", 0, c->pattern,
                                             sizeof(c->pattern)));
    gd_try(strata_orch_copy_from_global_domain(o, g, 1, "vec", 0, c->back,
                                               sizeof(c->back)));
    /* Kernels see what was copied in: every member reads its own. */
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_read(o, &c->s, c->id, GD_OWN, 0, COUNT * 4, c->own));
    gd_try(strata_orch_scope_end(o));
    /* And copies see what kernels wrote: rank 0 fills, then read back. */
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_fill(o, &c->s, c->id, 0, COUNT, 9));
    gd_try(strata_orch_scope_end(o));
    gd_try(strata_orch_copy_from_global_domain(o, g, 0, NULL, 0, c->kernel_back,
                                               sizeof(c->kernel_back)));
    /* The whole mapping (NULL buffer) up to window_size, 1 MiB at most. */
    c->whole_ok = strata_orch_copy_to_global_domain(
        o, g, 0, NULL, BIG_WINDOW - (1u << 20), big, 1u << 20);
    c->whole_last_ok = strata_orch_copy_from_global_domain(o, g, 1, "flag", 0,
                                                           &c->at_end[0], 4);
    /* Range errors: each EINVAL. */
    c->errs[k++] = strata_orch_copy_to_global_domain(o, g, 1, "vec", 4,
                                                     c->pattern, COUNT * 4);
    c->errs[k++] = strata_orch_copy_to_global_domain(o, g, 1, "vec",
                                                     COUNT * 4 + 1, &word, 0);
    c->errs[k++] =
        strata_orch_copy_to_global_domain(o, g, 1, "vec", 0, &word, 0);
    snprintf(c->zero_msg, sizeof(c->zero_msg), "%s", strata_errmsg());
    {
        /* Views live on the nodes: the L4 is told so. */
        strata_global_view *v = NULL;

        c->l4_lookup = strata_orch_get_global_domain(o, c->id, &v);
        snprintf(c->l4_lookup_msg, sizeof(c->l4_lookup_msg), "%s",
                 strata_errmsg());
    }
    c->errs[k++] =
        strata_orch_copy_from_global_domain(o, g, 1, "flag", 1, &word, 4);
    c->errs[k++] =
        strata_orch_copy_from_global_domain(o, g, 0, "nope", 0, &word, 4);
    c->errs[k++] =
        strata_orch_copy_to_global_domain(o, g, 4, "vec", 0, &word, 4);
    c->errs[k++] =
        strata_orch_copy_to_global_domain(o, g, 0, "vec", 0, NULL, 4);
    c->errs[k++] = strata_orch_copy_to_global_domain(o, g, 0, NULL,
                                                     BIG_WINDOW - 2, &word, 4);
    c->errs[k++] = strata_orch_copy_from_global_domain(o, g, 0, NULL, 0, big,
                                                       (1u << 20) + 4);
    c->errs[k++] =
        strata_orch_copy_to_global_domain(o, g, 0, NULL, SIZE_MAX, &word, 4);
    c->errs[k++] = strata_orch_copy_to_global_domain(o, g, 0, "vec",
                                                     SIZE_MAX - 2, &word, 4);
    c->errs[k++] =
        strata_orch_copy_from_global_domain(NULL, g, 0, "vec", 0, &word, 4);
    c->errs[k++] =
        strata_orch_copy_from_global_domain(o, NULL, 0, "vec", 0, &word, 4);
    /* Ranks 2 and 3 are on the remote node: the bytes travel as CONTROL
     * frames; 1 MiB takes two pieces. */
    c->remote_to = strata_orch_copy_to_global_domain(o, g, 2, "vec", 0,
                                                     c->pattern, COUNT * 4);
    c->remote_from = strata_orch_copy_from_global_domain(
        o, g, 2, "vec", 0, c->remote_back, COUNT * 4);
    {
        static uint8_t again[1u << 20];

        for (size_t i = 0; i < sizeof(again); i++)
            big[i] = (uint8_t)(i * 7 + 3);
        gd_try(strata_orch_copy_to_global_domain(
            o, g, 3, NULL, BIG_WINDOW - (1u << 20), big, 1u << 20));
        gd_try(strata_orch_copy_from_global_domain(
            o, g, 3, NULL, BIG_WINDOW - (1u << 20), again, 1u << 20));
        c->remote_big_ok = memcmp(again, big, sizeof(again)) == 0;
    }
    c->errs[k++] = strata_orch_copy_to_global_domain(o, g, 3, "vec", 4,
                                                     c->pattern, COUNT * 4);
    gd_try(strata_global_domain_release(g));
    c->after_release =
        strata_orch_copy_from_global_domain(o, g, 0, "vec", 0, &word, 4);
    return STRATA_OK;
}

static void test_gd_lifetime_copies_ranges_checked(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct cp c;
    const struct gd_daemon *ds[1] = {&daemon_};
    strata_worker *w = NULL;
    const uint32_t *own;

    testutil_snapshot_take(&before);
    memset(&c, 0, sizeof(c));
    gd_spec_init(&c.s, "copies", BIG_WINDOW);
    gd_spec_grid(&c.s, 0, 2, 2);
    gd_spec_buf(&c.s, "vec", STRATA_U32, COUNT);
    gd_spec_buf(&c.s, "flag", STRATA_U32, 1);
    gd_ok(gd_l4_start(1, 2, ds, 1, 2, &w));
    gd_ok(strata_worker_create_buffer(w, 4 * COUNT * 4, &c.own));
    gd_ok(strata_worker_run(w, cp_orch, NULL, &c));
    assert_memory_equal(c.back, c.pattern, sizeof(c.pattern));
    own = strata_buffer_data(c.own);
    assert_memory_equal(own + COUNT, c.pattern, sizeof(c.pattern));
    for (uint32_t i = 0; i < COUNT; i++) {
        assert_int_equal(own[i], 0); /* rank 0 was never written */
        assert_int_equal(c.kernel_back[i], gd_value(9, 0, i));
    }
    assert_int_equal(c.whole_ok, STRATA_OK);
    assert_int_equal(c.whole_last_ok, STRATA_OK);
    for (int i = 0; i < 14; i++)
        if (c.errs[i] != STRATA_EINVAL)
            fail_msg("range case %d: %s, want STRATA_EINVAL", i,
                     strata_errname(c.errs[i]));
    gd_assert_contains(c.zero_msg, "a copy of 0 bytes");
    assert_int_equal(c.l4_lookup, STRATA_EINVAL);
    gd_assert_contains(c.l4_lookup_msg, "level-3 worker's orch fn");
    assert_int_equal(c.remote_to, STRATA_OK);
    assert_int_equal(c.remote_from, STRATA_OK);
    assert_memory_equal(c.remote_back, c.pattern, sizeof(c.pattern));
    assert_true(c.remote_big_ok);
    assert_int_equal(c.after_release, STRATA_ESTATE);
    assert_true(strata_global_domain_freed(c.g));
    assert_int_equal(gd_window_maps_below(), 0);
    gd_destroy(w, STRATA_OK);
    assert_true(gd_daemon_idle(&daemon_, 10.0));
    testutil_assert_clean_within(&before, 5.0);
}

/* Copies into a retained domain in a later run reach its kernels. */
struct cpr {
    struct gd_spec s;
    strata_global_domain *g;
    strata_buffer *own;
    uint32_t v[COUNT];
};

static strata_err cpr_alloc(strata_orch *o, const strata_args *args, void *user)
{
    struct cpr *c = user;

    (void)args;
    return strata_orch_allocate_global_domain(o, &c->s.spec, &c->g);
}

static strata_err cpr_use(strata_orch *o, const strata_args *args, void *user)
{
    struct cpr *c = user;

    (void)args;
    for (uint32_t r = 0; r < 4; r++) {
        for (uint32_t i = 0; i < COUNT; i++)
            c->v[i] = r * 100000u + i;
        gd_try(strata_orch_copy_to_global_domain(o, c->g, r, "vec", 0, c->v,
                                                 sizeof(c->v)));
    }
    gd_try(gd_submit_read(o, &c->s, strata_global_domain_id(c->g), GD_OWN, 0,
                          COUNT * 4, c->own));
    return strata_global_domain_release(c->g);
}

static void test_gd_lifetime_copy_into_retained_later_run_ok(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct cpr c;
    strata_worker *w = NULL;
    const uint32_t *own;

    testutil_snapshot_take(&before);
    memset(&c, 0, sizeof(c));
    spec_4(&c.s, "kept", true);
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    gd_ok(strata_worker_create_buffer(w, 4 * COUNT * 4, &c.own));
    gd_ok(strata_worker_run(w, cpr_alloc, NULL, &c));
    gd_ok(strata_worker_run(w, cpr_use, NULL, &c));
    own = strata_buffer_data(c.own);
    for (uint32_t r = 0; r < 4; r++)
        for (uint32_t i = 0; i < COUNT; i++)
            assert_int_equal(own[r * COUNT + i], r * 100000u + i);
    assert_freed_at_fence(c.g, "retained, released in a later run");
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

/* ---- the L4 killed with a domain alive ---------------------------------- */

/* In a forked child: an L4 of 2 forked nodes x 1 chip with a retained
 * domain whose members wrote their windows (so the names exist), then
 * {this pid, node 0, node 1} to the parent, then wait to be killed. */
static strata_err doomed_orch(strata_orch *o, const strata_args *args,
                              void *user)
{
    struct gd_spec *s = user;
    strata_global_domain *g = NULL;

    (void)args;
    gd_try(strata_orch_allocate_global_domain(o, &s->spec, &g));
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_fill(o, s, strata_global_domain_id(g), 0, COUNT, 3));
    return strata_orch_scope_end(o);
}

/* Node 0's chip sleeps a minute: a task the L4 never sees end. */
static strata_err busy_orch(strata_orch *o, const strata_args *args, void *user)
{
    const uint64_t sc[3] = {60000, 1, 0};

    (void)args;
    (void)user;
    return gd_node_task(o, 0, gd_o_sleep, NULL, 0, 0, STRATA_IN, sc, 3);
}

/* Whether pid sleeps in nanosleep (gd.k.sleep), from /proc/pid/syscall. */
static bool sleeping(void *arg)
{
    char path[64];
    long nr = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/syscall", (int)*(pid_t *)arg);
    f = fopen(path, "re");
    if (!f)
        return false;
    if (fscanf(f, "%ld", &nr) != 1)
        nr = -1;
    fclose(f);
    return nr == SYS_clock_nanosleep || nr == SYS_nanosleep;
}

/* arg NULL: every node idle when the L4 dies; else node 0 busy (its chip
 * asleep in the task before the pids are reported). */
static int doomed_l4(void *arg, int wfd)
{
    static struct gd_spec s;
    strata_worker *w = NULL;
    strata_run *busy = NULL;
    int pids[3] = {-1, -1, -1};

    gd_spec_init(&s, "doomed", WINDOW);
    gd_spec_grid(&s, 0, 2, 1);
    s.spec.retain_after_run = true;
    if (gd_l4_start(2, 1, NULL, 0, 0, &w) == STRATA_OK &&
        strata_worker_run(w, doomed_orch, NULL, &s) == STRATA_OK &&
        (!arg ||
         strata_worker_submit(w, busy_orch, NULL, NULL, &busy) == STRATA_OK)) {
        pid_t chip = -1;

        pids[0] = (int)getpid();
        pids[1] = (int)strata_worker_node_pid(w, 0);
        pids[2] = (int)strata_worker_node_pid(w, 1);
        if (arg && (gd_descendants(pids[1], &chip, 1) != 1 ||
                    !testutil_wait_until(sleeping, &chip, 30.0)))
            pids[0] = -1;
    }
    if (!testutil_write_full(wfd, pids, sizeof(pids)))
        return 2;
    for (;;)
        pause();
}

/* Kills the doomed L4 (busy: with node 0 in a task); its nodes must be
 * gone within within_s, and its domain's names with them. */
static void kill_doomed(bool busy, double within_s)
{
    testutil_snapshot before;
    int pids[3] = {-1, -1, -1};
    int rfd = -1, st = 0;
    testutil_pids t = {.n = 0}; /* nodes and chips, reaped here */
    pid_t child, l4;
    double t0, took;
    bool got;

    testutil_snapshot_take(&before);
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    child = testutil_spawn(doomed_l4, busy ? &busy : NULL, &rfd);
    assert_true(child > 0);
    got = testutil_read_full(rfd, pids, sizeof(pids), 60.0);
    close(rfd);
    l4 = (pid_t)pids[0];
    if (!got || l4 != child || pids[1] <= 0 || pids[2] <= 0) {
        kill(child, SIGKILL);
        testutil_wait_child(child, 10.0, &st);
        fail_msg("the doomed L4 did not start (%d %d %d)", pids[0], pids[1],
                 pids[2]);
    }
    /* The members made the names (two windows and the domain's control
     * page): there is something to leave behind. */
    assert_int_equal(gd_shm_windows(&l4, 1), 3);
    for (int i = 1; i < 3; i++) {
        t.pid[t.n++] = pids[i];
        t.n += gd_descendants(pids[i], t.pid + t.n, 6);
    }
    assert_int_equal(kill(child, SIGKILL), 0);
    t0 = testutil_now();
    assert_true(testutil_wait_child(child, 10.0, &st));
    if (!testutil_wait_until(testutil_pids_gone, &t, within_s))
        fail_msg("the nodes of the killed L4 or their chips still run %.0f "
                 "s later",
                 within_s);
    took = testutil_now() - t0;
    print_message("%zu nodes and chips gone %.3f s after the kill\n", t.n,
                  took);
    /* The busy node ran out its grace: it did not die of the signal. */
    if (busy && took < 9.0)
        fail_msg("the busy node ended %.3f s after the kill, before its "
                 "10 s grace",
                 took);
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
    if (gd_shm_windows(&l4, 1) != 0)
        fail_msg("%zu window names of the killed L4 left in /dev/shm",
                 gd_shm_windows(&l4, 1));
    testutil_assert_clean(&before);
}

/* A kill -9 of the L4 while a used domain lives: its forked nodes end in
 * order (their parent-death signal), and the last thing they do is drop
 * the domain's names, so /dev/shm keeps none of them. */
static void test_gd_lifetime_l4_killed_names_dropped(void **state)
{
    (void)state;
    kill_doomed(false, 5.0);
}

/* The same with node 0 in a task that would run a minute: node 1 ends at
 * once and drops every rank's name; node 0 (and its chip) end once the
 * orphan's grace (10 s) is over, not a minute later. */
static void test_gd_lifetime_l4_killed_busy_node_ends(void **state)
{
    (void)state;
    kill_doomed(true, 20.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        gd_test(test_gd_lifetime_release_in_run_freed_at_fence),
        gd_test(test_gd_lifetime_no_release_freed_at_fence),
        gd_test(test_gd_lifetime_retain_later_run_reads_ok),
        gd_test(test_gd_lifetime_retain_remote_later_run_reads_ok),
        gd_test(test_gd_lifetime_retain_release_between_runs_freed),
        gd_test(test_gd_lifetime_retain_node_killed_release_ok),
        gd_test(test_gd_lifetime_retain_released_same_run_freed),
        gd_test(test_gd_lifetime_retain_never_released_destroy_clean),
        gd_test(test_gd_lifetime_copies_ranges_checked),
        gd_test(test_gd_lifetime_copy_into_retained_later_run_ok),
        gd_test(test_gd_lifetime_l4_killed_names_dropped),
        gd_test(test_gd_lifetime_l4_killed_busy_node_ends),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
