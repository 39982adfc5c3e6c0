/*
 * Domain spec validation: every bad spec is STRATA_EINVAL with a message,
 * leaves *out alone and allocates nothing (no window segment in /dev/shm,
 * no window mapped in any chip), and the worker goes on working: a good
 * domain allocated right after in the same run carries an allreduce.
 */
#define _GNU_SOURCE
#include "dom_kit.h"

#include <stdlib.h>
#include <string.h>

#define NAME_63                                                                \
    "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk"
#define NAME_64 NAME_63 "l"

#define MAX_CASES 40

/* Results gathered inside the orch fn, checked by the test thread. */
struct vcase {
    const char *what;
    strata_err want, got;
    bool out_untouched;
    bool has_msg;
    char msg[STRATA_ERRMSG_MAX];
};

struct vstate {
    struct it_fx *f;
    size_t n;
    struct vcase c[MAX_CASES];
    size_t shm_after, maps_after; /* after every bad spec */
    strata_domain *good;
};

static void record(struct vstate *v, const char *what, strata_err want,
                   strata_err got, strata_domain *const *out)
{
    struct vcase *c = &v->c[v->n++];
    c->what = what;
    c->want = want;
    c->got = got;
    c->out_untouched = *out == (strata_domain *)(uintptr_t)0x5a5a;
    snprintf(c->msg, sizeof(c->msg), "%s", strata_errmsg());
    c->has_msg = c->msg[0] != '\0';
}

/* Allocates s and records the result (want EINVAL unless told). */
static void try_spec(strata_orch *o, struct vstate *v, const char *what,
                     const strata_domain_spec *s)
{
    strata_domain *d = (strata_domain *)(uintptr_t)0x5a5a;
    strata_err e = strata_orch_allocate_domain(o, s, &d);
    record(v, what, STRATA_EINVAL, e, &d);
}

static const int ids3[3] = {0, 1, 2};

/* A good spec: chips {0,1,2}, 4 KiB windows, "vec" u32[256] and
 * "flag" u32[1]. */
static void good_spec(struct dom_spec *s, const char *name)
{
    dom_spec_init(s, name, ids3, 3, 4096);
    dom_spec_buf(s, "vec", STRATA_U32, 256);
    dom_spec_buf(s, "flag", STRATA_U32, 1);
}

static strata_err bad_specs_orch(strata_orch *o, const strata_args *args,
                                 void *user)
{
    (void)args;
    struct vstate *v = user;
    struct dom_spec s;
    strata_domain *d = (strata_domain *)(uintptr_t)0x5a5a;

    /* NULL arguments. */
    good_spec(&s, "v");
    record(v, "NULL spec", STRATA_EINVAL,
           strata_orch_allocate_domain(o, NULL, &d), &d);
    {
        strata_err e = strata_orch_allocate_domain(o, &s.spec, NULL);
        record(v, "NULL out", STRATA_EINVAL, e, &d);
    }
    record(v, "NULL orch", STRATA_EINVAL,
           strata_orch_allocate_domain(NULL, &s.spec, &d), &d);

    /* Names. */
    good_spec(&s, NULL);
    try_spec(o, v, "NULL name", &s.spec);
    good_spec(&s, "");
    try_spec(o, v, "empty name", &s.spec);
    good_spec(&s, NAME_64);
    try_spec(o, v, "64-byte name", &s.spec);

    /* Workers. */
    good_spec(&s, "v");
    s.spec.num_workers = 0;
    try_spec(o, v, "no workers (num_workers 0)", &s.spec);
    good_spec(&s, "v");
    s.spec.workers = NULL;
    try_spec(o, v, "no workers (workers NULL)", &s.spec);
    good_spec(&s, "v");
    s.workers[2] = 0;
    try_spec(o, v, "duplicate worker {0,1,0}", &s.spec);
    good_spec(&s, "v");
    s.workers[1] = 7;
    try_spec(o, v, "chip 7 not in the worker", &s.spec);
    good_spec(&s, "v");
    s.workers[0] = -1;
    try_spec(o, v, "chip -1", &s.spec);

    /* Buffers. */
    good_spec(&s, "v");
    s.bufs[1].name = "";
    try_spec(o, v, "empty buffer name", &s.spec);
    good_spec(&s, "v");
    s.bufs[1].name = NULL;
    try_spec(o, v, "NULL buffer name", &s.spec);
    good_spec(&s, "v");
    s.bufs[1].name = NAME_64;
    try_spec(o, v, "64-byte buffer name", &s.spec);
    good_spec(&s, "v");
    s.bufs[1].name = "vec";
    try_spec(o, v, "duplicate buffer names", &s.spec);
    good_spec(&s, "v");
    s.bufs[0].nbytes += 1;
    try_spec(o, v, "count * size < nbytes", &s.spec);
    good_spec(&s, "v");
    s.bufs[0].nbytes -= 4;
    try_spec(o, v, "count * size > nbytes", &s.spec);
    good_spec(&s, "v");
    s.bufs[0].dtype = (strata_dtype)0;
    try_spec(o, v, "dtype 0", &s.spec);
    good_spec(&s, "v");
    s.bufs[0].dtype = (strata_dtype)99;
    try_spec(o, v, "dtype 99", &s.spec);
    good_spec(&s, "v");
    s.bufs[0].dtype = STRATA_U16;
    s.bufs[0].count = SIZE_MAX / 2 + 1; /* count * 2 wraps to 0 */
    s.bufs[0].nbytes = 0;
    try_spec(o, v, "count * size overflows", &s.spec);
    good_spec(&s, "v");
    s.spec.window_size = 256 * 4 + 4 - 1;
    try_spec(o, v, "sum(nbytes) = window_size + 1", &s.spec);
    good_spec(&s, "v");
    s.bufs[0].dtype = STRATA_U8;
    s.bufs[0].count = s.bufs[0].nbytes = SIZE_MAX / 2 + 1;
    s.bufs[1].dtype = STRATA_U8;
    s.bufs[1].count = s.bufs[1].nbytes = SIZE_MAX / 2 + 1;
    try_spec(o, v, "sum(nbytes) overflows", &s.spec);
    good_spec(&s, "v");
    s.spec.buffers = NULL;
    try_spec(o, v, "num_buffers 2, buffers NULL", &s.spec);
    good_spec(&s, "v");
    s.spec.window_size = 0;
    s.spec.num_buffers = 0;
    try_spec(o, v, "window_size 0", &s.spec);
    good_spec(&s, "v");
    s.spec.window_size = SIZE_MAX; /* rounds up past the address space */
    s.spec.num_buffers = 0;
    try_spec(o, v, "window_size SIZE_MAX", &s.spec);
    good_spec(&s, "v");
    s.spec.window_size = (1ull << 46) / 3 + 1; /* 3 windows over 64 TiB */
    s.spec.num_buffers = 0;
    try_spec(o, v, "3 windows over 64 TiB", &s.spec);

    /* Nothing of the above may have allocated a window anywhere. */
    v->shm_after = dom_shm_windows();
    v->maps_after = dom_chip_window_maps(v->f->w, it_ids4, 4);

    /* The worker still works: a good domain, then a live duplicate. */
    good_spec(&s, "live");
    it_try(strata_orch_allocate_domain(o, &s.spec, &v->good));
    try_spec(o, v, "name of a live domain", &s.spec);
    /* Boundaries that are fine: exact fit, no buffers, 63-byte names. */
    {
        strata_domain *d2 = NULL;
        good_spec(&s, "exact");
        s.spec.window_size = 256 * 4 + 4;
        it_try(strata_orch_allocate_domain(o, &s.spec, &d2));
        it_try(strata_domain_release(d2));
        dom_spec_init(&s, NAME_63, ids3, 1, 1);
        it_try(strata_orch_allocate_domain(o, &s.spec, &d2));
        it_try(strata_domain_release(d2));
        good_spec(&s, "bufname");
        s.bufs[1].name = NAME_63;
        it_try(strata_orch_allocate_domain(o, &s.spec, &d2));
        it_try(strata_domain_release(d2));
    }
    return dom_submit_allreduce(o, v->good, ids3, 3, 0, 256, 1024, 5,
                                v->f->b[0]);
}

static void
test_domain_validate_bad_specs_einval_nothing_allocated(void **state)
{
    (void)state;
    struct it_fx f;
    struct vstate *v = calloc(1, sizeof(*v));
    assert_non_null(v);
    it_fx_start(&f, 1024);
    v->f = &f;
    it_ok(strata_worker_run(f.w, bad_specs_orch, NULL, v));
    size_t bad = 0;
    for (size_t i = 0; i < v->n; i++) {
        struct vcase *c = &v->c[i];
        bool ok = c->got == c->want && c->out_untouched && c->has_msg;
        print_message("%-32s -> %-13s %s\n", c->what, strata_errname(c->got),
                      c->msg);
        if (!ok) {
            print_error("case '%s': got %s (want %s), out %s, message '%s'\n",
                        c->what, strata_errname(c->got),
                        strata_errname(c->want),
                        c->out_untouched ? "untouched" : "WRITTEN", c->msg);
            bad++;
        }
    }
    assert_int_equal(v->n, 27);
    assert_int_equal(bad, 0);
    assert_int_equal(v->shm_after, 0);
    assert_int_equal(v->maps_after, 0);
    assert_int_equal(dom_check_allreduce(f.b[0], 3, 256, 5), 0);
    assert_true(strata_domain_freed(v->good));
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    free(v);
    it_fx_end(&f);
}

/* ---- name reuse */

struct reuse {
    struct it_fx *f;
    strata_domain *first, *second, *third;
    strata_err dup, after_release;
};

static strata_err reuse_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)args;
    struct reuse *r = user;
    struct dom_spec s;
    strata_domain *d = NULL;

    good_spec(&s, "same");
    it_try(strata_orch_allocate_domain(o, &s.spec, &r->first));
    /* Used before it is released: the task keeps its windows alive. */
    it_try(dom_submit_allreduce(o, r->first, ids3, 3, 0, 256, 1024, 1,
                                r->f->b[0]));
    r->dup = strata_orch_allocate_domain(o, &s.spec, &d);
    it_try(strata_domain_release(r->first));
    r->after_release = strata_orch_allocate_domain(o, &s.spec, &r->second);
    it_try(r->after_release);
    return dom_submit_allreduce(o, r->second, ids3, 3, 0, 256, 1024, 2,
                                r->f->b[1]);
}

static strata_err reuse_next_run_orch(strata_orch *o, const strata_args *args,
                                      void *user)
{
    (void)args;
    struct reuse *r = user;
    struct dom_spec s;

    /* r->second was never released: the last fence swept it. */
    good_spec(&s, "same");
    it_try(strata_orch_allocate_domain(o, &s.spec, &r->third));
    return dom_submit_allreduce(o, r->third, ids3, 3, 0, 256, 1024, 3,
                                r->f->b[2]);
}

static void test_domain_validate_name_reuse_after_release_ok(void **state)
{
    (void)state;
    struct it_fx f;
    struct reuse r = {.f = &f};
    it_fx_start(&f, 1024);
    it_ok(strata_worker_run(f.w, reuse_orch, NULL, &r));
    it_expect(STRATA_EINVAL, r.dup);
    it_ok(r.after_release);
    assert_true(r.first != r.second);
    assert_int_equal(dom_check_allreduce(f.b[0], 3, 256, 1), 0);
    assert_int_equal(dom_check_allreduce(f.b[1], 3, 256, 2), 0);
    assert_true(strata_domain_freed(r.first));
    assert_true(strata_domain_freed(r.second));
    it_ok(strata_worker_run(f.w, reuse_next_run_orch, NULL, &r));
    assert_int_equal(dom_check_allreduce(f.b[2], 3, 256, 3), 0);
    assert_true(strata_domain_freed(r.third));
    assert_int_equal(dom_chip_window_maps(f.w, it_ids4, 4), 0);
    it_fx_end(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(
            test_domain_validate_bad_specs_einval_nothing_allocated,
            it_teardown),
        cmocka_unit_test_teardown(
            test_domain_validate_name_reuse_after_release_ok, it_teardown),
    };
    return cmocka_run_group_tests(tests, dom_setup, NULL);
}
