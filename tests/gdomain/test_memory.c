/* What a domain handle keeps once it is freed. A handle stays valid until
 * its worker is destroyed (domain.h), so a worker that allocates a domain
 * every step keeps something per step; the transaction's working memory
 * (command buffers, replies, descriptor tables, control frames) must not
 * be part of it. Counted through strata's allocation hooks, which see
 * every heap byte strata itself allocates: after warm-up, 400 cycles of
 * allocate + release of a global domain over two forked nodes, and of a
 * local domain over two chips, each keep under 1 KiB a cycle (about 20
 * KiB and 4 KiB before the working memory was given back). */
#include "gd_kit.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define CYCLES 400
#define KEPT_MAX 1024 /* bytes a freed handle may keep */

/* Live bytes of strata's heap: every block carries its size in front. */
static int64_t live_bytes;

union head {
    size_t size;
    max_align_t align;
};

static void *count_malloc(size_t size, void *ctx)
{
    union head *h = malloc(sizeof(*h) + size);

    (void)ctx;
    if (!h)
        return NULL;
    h->size = size;
    __atomic_add_fetch(&live_bytes, (int64_t)size, __ATOMIC_RELAXED);
    return h + 1;
}

static void count_free(void *p, void *ctx)
{
    union head *h = p ? (union head *)p - 1 : NULL;

    (void)ctx;
    if (!h)
        return;
    __atomic_sub_fetch(&live_bytes, (int64_t)h->size, __ATOMIC_RELAXED);
    free(h);
}

static void *count_realloc(void *p, size_t size, void *ctx)
{
    union head *h = p ? (union head *)p - 1 : NULL;
    size_t old = h ? h->size : 0;

    (void)ctx;
    h = realloc(h, sizeof(*h) + size);
    if (!h)
        return NULL;
    h->size = size;
    __atomic_add_fetch(&live_bytes, (int64_t)size - (int64_t)old,
                       __ATOMIC_RELAXED);
    return h + 1;
}

static int64_t live(void)
{
    return __atomic_load_n(&live_bytes, __ATOMIC_RELAXED);
}

static strata_err global_cycle(strata_orch *o, const strata_args *unused,
                               void *user)
{
    const struct gd_spec *s = user;
    strata_global_domain *g = NULL;
    strata_err err = strata_orch_allocate_global_domain(o, &s->spec, &g);

    (void)unused;
    return err ? err : strata_global_domain_release(g);
}

static void test_memory_freed_global_domain_keeps_little(void **state)
{
    strata_worker *w = NULL;
    struct gd_spec s;
    int64_t before;

    (void)state;
    gd_spec_init(&s, "step", 4096);
    gd_spec_grid(&s, 0, 2, 1);
    gd_spec_buf(&s, "x", STRATA_F32, 64);
    assert_int_equal(gd_l4_start(2, 1, NULL, 0, 0, &w), STRATA_OK);
    for (int i = 0; i < 20; i++)
        assert_int_equal(strata_worker_run(w, global_cycle, NULL, &s),
                         STRATA_OK);
    before = live();
    for (int i = 0; i < CYCLES; i++)
        assert_int_equal(strata_worker_run(w, global_cycle, NULL, &s),
                         STRATA_OK);
    print_message("global: %.0f bytes kept a cycle\n",
                  (double)(live() - before) / CYCLES);
    assert_true(live() - before < (int64_t)CYCLES * KEPT_MAX);
    gd_destroy(w, STRATA_OK);
}

static strata_err local_cycle(strata_orch *o, const strata_args *unused,
                              void *user)
{
    static const int chips[2] = {0, 1};
    strata_domain_spec spec = {.name = "step",
                               .workers = chips,
                               .num_workers = 2,
                               .window_size = 4096};
    strata_domain *d = NULL;
    strata_err err = strata_orch_allocate_domain(o, &spec, &d);

    (void)unused;
    (void)user;
    return err ? err : strata_domain_release(d);
}

static void test_memory_freed_local_domain_keeps_little(void **state)
{
    static const int chips[2] = {0, 1};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    int64_t before;

    (void)state;
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chips;
    cfg.num_chips = 2;
    assert_int_equal(strata_worker_create(&cfg, &w), STRATA_OK);
    assert_int_equal(strata_worker_init(w), STRATA_OK);
    for (int i = 0; i < 20; i++)
        assert_int_equal(strata_worker_run(w, local_cycle, NULL, NULL),
                         STRATA_OK);
    before = live();
    for (int i = 0; i < CYCLES; i++)
        assert_int_equal(strata_worker_run(w, local_cycle, NULL, NULL),
                         STRATA_OK);
    print_message("local: %.0f bytes kept a cycle\n",
                  (double)(live() - before) / CYCLES);
    assert_true(live() - before < (int64_t)CYCLES * KEPT_MAX);
    assert_int_equal(strata_worker_destroy(w), STRATA_OK);
}

int main(void)
{
    const strata_alloc_hooks hooks = {count_malloc, count_realloc, count_free,
                                      NULL};
    const struct CMUnitTest tests[] = {
        gd_test(test_memory_freed_global_domain_keeps_little),
        cmocka_unit_test(test_memory_freed_local_domain_keeps_little),
    };

    /* Before any strata object: every byte strata allocates is seen. */
    if (strata_set_alloc_hooks(&hooks) != STRATA_OK || gd_register() != 0)
        return 1;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
