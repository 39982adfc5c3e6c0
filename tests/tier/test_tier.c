/* Tiered memory: names and aliases, IEC sizes, budgets, instances and
 * latest(), transfers (preconditions, ordering, failures, close waits for
 * readers), the memory report. Real files in a temporary directory; the
 * I/O pool's threads are real (label tsan). */
#include "base/fault.h"
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <strata/tier.h>
#include <cmocka.h>

#include "tier_test.h"

#define MiB (1024u * 1024u)

struct fixture {
    char dir[64];
    testutil_snapshot before;
    strata_tier_runtime *rt;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    strata_tier_config cfg;

    if (!f)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/strata-tier-test-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    testutil_snapshot_take(&f->before);
    strata_tier_config_init(&cfg);
    cfg.nvme_dir = f->dir;
    if (strata_tier_runtime_create(&cfg, &f->rt) != STRATA_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    base_fault_disarm_all();
    assert_int_equal(strata_tier_runtime_destroy(f->rt), STRATA_OK);
    /* Every nvme file is gone with the runtime. */
    assert_int_equal(count_files(f->dir), 0);
    rmdir(f->dir);
    testutil_assert_clean(&f->before);
    free(f);
    return 0;
}

static strata_instance *alloc_ok(strata_tier_runtime *rt, const char *name,
                                 uint64_t version, const char *tier,
                                 uint64_t cap)
{
    strata_instance *inst = NULL;
    strata_err err =
        strata_instance_allocate(rt, name, version, tier, cap, &inst);

    if (err)
        fprintf(stderr, "allocate %s v%llu on %s: %s\n", name,
                (unsigned long long)version, tier, strata_errmsg());
    assert_int_equal(err, STRATA_OK);
    return inst;
}

static void fill(strata_instance *inst, uint64_t cap, unsigned seed)
{
    unsigned char *buf = malloc(cap);

    assert_non_null(buf);
    for (uint64_t i = 0; i < cap; i++)
        buf[i] = (unsigned char)((i * 131 + seed * 7 + (i >> 12)) & 0xff);
    assert_int_equal(strata_instance_write(inst, 0, buf, cap), STRATA_OK);
    free(buf);
}

static void expect(strata_instance *inst, uint64_t cap, unsigned seed)
{
    unsigned char *buf = malloc(cap);

    assert_non_null(buf);
    assert_int_equal(strata_instance_read(inst, 0, buf, cap), STRATA_OK);
    for (uint64_t i = 0; i < cap; i++) {
        unsigned char want =
            (unsigned char)((i * 131 + seed * 7 + (i >> 12)) & 0xff);

        if (buf[i] != want)
            fail_msg("byte %llu is %u, want %u (seed %u)",
                     (unsigned long long)i, buf[i], want, seed);
    }
    free(buf);
}

static void move(strata_tier_runtime *rt, strata_instance *src,
                 strata_instance *dst)
{
    strata_transfer_handle *t = NULL;

    assert_int_equal(strata_transfer(rt, src, dst, &t), STRATA_OK);
    assert_int_equal(strata_transfer_wait(t, -1), STRATA_OK);
    assert_true(strata_transfer_ready(t));
    strata_transfer_free(t);
}

/* ---------------------------------------------------------------- */

static void test_tier_names_and_aliases_resolve(void **state)
{
    static const struct {
        const char *name;
        strata_tier tier;
    } ok[] = {
        {"device", STRATA_TIER_DEVICE},
        {"hbm", STRATA_TIER_DEVICE},
        {"host-pinned", STRATA_TIER_HOST_PINNED},
        {"pinned_ram", STRATA_TIER_HOST_PINNED},
        {"ram", STRATA_TIER_RAM},
        {"host", STRATA_TIER_RAM},
        {"nvme", STRATA_TIER_NVME},
        {"ssd", STRATA_TIER_NVME},
    };
    strata_tier t;

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        assert_int_equal(strata_tier_parse(ok[i].name, &t), STRATA_OK);
        assert_int_equal(t, ok[i].tier);
    }
    assert_string_equal(strata_tier_name(STRATA_TIER_HOST_PINNED),
                        "host-pinned");
    assert_null(strata_tier_name((strata_tier)7));
    for (const char *const *n =
             (const char *const[]){"register", "shared", "remote", NULL};
         *n; n++) {
        assert_int_equal(strata_tier_parse(*n, &t), STRATA_EINVAL);
        assert_msg_has("known but not allocatable");
    }
    assert_int_equal(strata_tier_parse("HBM", &t), STRATA_EINVAL);
    assert_msg_has("unknown tier");
}

static void test_tier_iec_table_parses_or_refuses(void **state)
{
    static const struct {
        const char *text;
        uint64_t bytes;
        const char *why; /* NULL: accepted */
    } rows[] = {
        {"0", 0, NULL},
        {"16", 16, NULL},
        {"16B", 16, NULL},
        {"1 KiB", 1024, NULL},
        {"  2MiB  ", 2u * 1024 * 1024, NULL},
        {"3\tGiB", UINT64_C(3) << 30, NULL},
        {"1TiB", UINT64_C(1) << 40, NULL},
        {"16777215 TiB", UINT64_C(16777215) << 40, NULL},
        {"18446744073709551615", UINT64_MAX, NULL},
        {"18446744073709551616", 0, "past 2^64"},
        {"16777216 TiB", 0, "past 2^64"},
        {"-1", 0, "negative"},
        {" -5 GiB", 0, "negative"},
        {"+5", 0, "sign"},
        {"1.5GiB", 0, "fraction"},
        {"1e9", 0, "fraction or exponent"},
        {".5", 0, "fraction"},
        {"true", 0, "boolean"},
        {"False", 0, "boolean"},
        {"1GB", 0, "SI units are refused"},
        {"1 kB", 0, "SI units are refused"},
        {"2 MB", 0, "SI units are refused"},
        {"1 TB", 0, "SI units are refused"},
        {"4G", 0, "SI units are refused"},
        {"1 gib", 0, "unknown unit"},
        {"1 KiB 2", 0, "text after the unit"},
        {"", 0, "empty"},
        {"   ", 0, "empty"},
        {"GiB", 0, "does not start with a decimal integer"},
    };
    uint64_t v;

    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        v = 12345;
        strata_err err = strata_parse_bytes(rows[i].text, &v);

        if (!rows[i].why) {
            if (err)
                fail_msg("'%s' refused: %s", rows[i].text, strata_errmsg());
            assert_true(v == rows[i].bytes);
        } else {
            if (err != STRATA_EINVAL)
                fail_msg("'%s' accepted as %llu", rows[i].text,
                         (unsigned long long)v);
            assert_true(v == 12345); /* not written */
            assert_msg_has(rows[i].why);
        }
    }
    assert_int_equal(strata_parse_bytes(NULL, &v), STRATA_EINVAL);
    assert_msg_has("text is NULL");
}

static void test_tier_budget_edges_equal_allowed_one_more_refused(void **state)
{
    struct fixture *f = *state;
    strata_instance *a, *b, *c = NULL;
    strata_tier_report r;

    assert_int_equal(strata_tier_set_budget(f->rt, "host", "16 B"), STRATA_OK);
    a = alloc_ok(f->rt, "x", 1, "ram", 8);
    b = alloc_ok(f->rt, "x", 2, "ram", 8); /* live == budget: allowed */
    assert_int_equal(strata_instance_allocate(f->rt, "x", 3, "ram", 1, &c),
                     STRATA_EBUDGET);
    assert_null(c);
    assert_msg_has("tier 'ram'");
    assert_msg_has("budget of 16 bytes");
    assert_msg_has("16 bytes live");
    /* The failure left no trace. */
    assert_int_equal(strata_tier_report_get(f->rt, &r), STRATA_OK);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].live, 16);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].peak, 16);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].instances, 2);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].budget, 16);
    assert_int_equal(strata_tier_latest(f->rt, "x", NULL, &c), STRATA_OK);
    assert_ptr_equal(c, b);
    /* Other tiers have their own budgets. */
    assert_int_equal(strata_tier_set_budget(f->rt, "ssd", "8"), STRATA_OK);
    c = alloc_ok(f->rt, "x", 3, "nvme", 8);
    assert_int_equal(strata_instance_allocate(f->rt, "y", 1, "nvme", 1, &c),
                     STRATA_EBUDGET);
    assert_msg_has("tier 'nvme'");
    assert_int_equal(count_files(f->dir), 1);
    /* Closing makes room; the peak stays. */
    assert_int_equal(strata_instance_close(a), STRATA_OK);
    c = alloc_ok(f->rt, "x", 4, "ram", 8);
    assert_int_equal(strata_tier_report_get(f->rt, &r), STRATA_OK);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].live, 16);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].peak, 16);
    /* A budget below live is allowed; then nothing fits. NULL lifts it. */
    assert_int_equal(strata_tier_set_budget(f->rt, "ram", "4"), STRATA_OK);
    assert_int_equal(strata_instance_allocate(f->rt, "z", 1, "ram", 1, &c),
                     STRATA_EBUDGET);
    assert_int_equal(strata_tier_set_budget(f->rt, "ram", NULL), STRATA_OK);
    c = alloc_ok(f->rt, "z", 1, "ram", 1 * MiB);
    assert_int_equal(strata_tier_report_get(f->rt, &r), STRATA_OK);
    assert_true(r.tiers[STRATA_TIER_RAM].budget == UINT64_MAX);
    /* Bad budgets. */
    assert_int_equal(strata_tier_set_budget(f->rt, "ram", "1GB"),
                     STRATA_EINVAL);
    assert_int_equal(strata_tier_set_budget(f->rt, "register", "1"),
                     STRATA_EINVAL);
}

static void test_tier_config_budgets_string(void **state)
{
    strata_tier_config cfg;
    strata_tier_runtime *rt = NULL;
    strata_tier_report r;
    static const char *const bad[] = {
        "ram",           "ram=",     "ram=1GB",       "ram=-1",      "disk=1",
        "ram=1,,nvme=2", "ram=true", "ram=16,ram=32", "host=1,ram=2"};

    (void)state;
    strata_tier_config_init(&cfg);
    cfg.budgets = " ram = 1 KiB , ssd=2MiB, hbm=0,";
    assert_int_equal(strata_tier_runtime_create(&cfg, &rt), STRATA_OK);
    assert_int_equal(strata_tier_report_get(rt, &r), STRATA_OK);
    assert_int_equal(r.tiers[STRATA_TIER_RAM].budget, 1024);
    assert_int_equal(r.tiers[STRATA_TIER_NVME].budget, 2 * MiB);
    assert_int_equal(r.tiers[STRATA_TIER_DEVICE].budget, 0);
    assert_true(r.tiers[STRATA_TIER_HOST_PINNED].budget == UINT64_MAX);
    assert_int_equal(strata_tier_runtime_destroy(rt), STRATA_OK);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rt = NULL;
        cfg.budgets = bad[i];
        if (strata_tier_runtime_create(&cfg, &rt) != STRATA_EINVAL)
            fail_msg("budgets '%s' accepted", bad[i]);
        assert_null(rt);
    }
    cfg.budgets = NULL;
    cfg.io_threads = 65;
    assert_int_equal(strata_tier_runtime_create(&cfg, &rt), STRATA_EINVAL);
    cfg.io_threads = 0;
    cfg.nvme_dir = "/nonexistent/strata";
    assert_int_equal(strata_tier_runtime_create(&cfg, &rt), STRATA_EINVAL);
    assert_msg_has("nvme_dir");
    /* Writable to access(), but no file can be made there. */
    cfg.nvme_dir = "/proc";
    assert_int_equal(strata_tier_runtime_create(&cfg, &rt), STRATA_EINVAL);
    assert_msg_has("nvme_dir '/proc' takes no files");
    assert_null(rt);
}

static void test_tier_device_and_pinned_need_cuda(void **state)
{
    struct fixture *f = *state;
    strata_tier_config cfg;
    strata_tier_runtime *rt;
    strata_instance *i = NULL;
    static const char *const tiers[][2] = {{"device", "device"},
                                           {"hbm", "device"},
                                           {"host-pinned", "host-pinned"},
                                           {"pinned_ram", "host-pinned"}};

    for (size_t k = 0; k < 4; k++) {
        assert_int_equal(
            strata_instance_allocate(f->rt, "x", 1, tiers[k][0], 8, &i),
            STRATA_ENOTSUP);
        assert_msg_has(tiers[k][1]);
        assert_msg_has("CUDA backend");
    }
    assert_int_equal(strata_instance_allocate(f->rt, "x", 1, "register", 8, &i),
                     STRATA_EINVAL);
    assert_msg_has("not allocatable");
    /* nvme needs a directory. */
    strata_tier_config_init(&cfg);
    assert_int_equal(strata_tier_runtime_create(&cfg, &rt), STRATA_OK);
    assert_int_equal(strata_instance_allocate(rt, "x", 1, "nvme", 8, &i),
                     STRATA_ENOTSUP);
    assert_msg_has("nvme_dir");
    assert_null(i);
    assert_int_equal(strata_tier_runtime_destroy(rt), STRATA_OK);
}

static void test_tier_latest_picks_highest_live_version(void **state)
{
    struct fixture *f = *state;
    strata_instance *r1, *r3, *n3, *n2, *got = NULL;

    r1 = alloc_ok(f->rt, "w", 1, "ram", 16);
    r3 = alloc_ok(f->rt, "w", 3, "ram", 16);
    n2 = alloc_ok(f->rt, "w", 2, "nvme", 16);
    assert_int_equal(strata_tier_latest(f->rt, "w", NULL, &got), STRATA_OK);
    assert_ptr_equal(got, r3);
    assert_int_equal(strata_tier_latest(f->rt, "w", "ssd", &got), STRATA_OK);
    assert_ptr_equal(got, n2);
    /* An equal version on another tier: the later allocated. */
    n3 = alloc_ok(f->rt, "w", 3, "nvme", 16);
    assert_int_equal(strata_tier_latest(f->rt, "w", NULL, &got), STRATA_OK);
    assert_ptr_equal(got, n3);
    assert_int_equal(strata_instance_close(r3), STRATA_OK);
    assert_int_equal(strata_tier_latest(f->rt, "w", "ram", &got), STRATA_OK);
    assert_ptr_equal(got, r1);
    assert_int_equal(strata_instance_close(r1), STRATA_OK);
    got = NULL;
    assert_int_equal(strata_tier_latest(f->rt, "w", "ram", &got),
                     STRATA_ENOENT);
    assert_null(got);
    assert_int_equal(strata_tier_latest(f->rt, "nothing", NULL, &got),
                     STRATA_ENOENT);
    assert_int_equal(strata_tier_latest(f->rt, "w", "remote", &got),
                     STRATA_EINVAL);
    assert_string_equal(strata_instance_name(n3), "w");
    assert_int_equal(strata_instance_version(n3), 3);
    assert_int_equal(strata_instance_tier(n3), STRATA_TIER_NVME);
    assert_int_equal(strata_instance_capacity(n3), 16);
    assert_true(strata_instance_closed(r1));
    assert_int_equal(strata_instance_close(r1), STRATA_ESTATE);
}

static void test_tier_preconditions_in_order(void **state)
{
    struct fixture *f = *state;
    strata_instance *a = alloc_ok(f->rt, "p", 1, "ram", 8);
    strata_instance *closed = alloc_ok(f->rt, "q", 2, "ram", 4);
    strata_instance *other = alloc_ok(f->rt, "q", 2, "nvme", 4);
    strata_instance *v2 = alloc_ok(f->rt, "p", 2, "nvme", 16);
    strata_instance *big = alloc_ok(f->rt, "p", 1, "nvme", 16);
    strata_transfer_handle *t = NULL;

    assert_int_equal(strata_instance_close(closed), STRATA_OK);
    /* closed beats distinct, name, version and capacity */
    assert_int_equal(strata_transfer(f->rt, closed, closed, &t), STRATA_ESTATE);
    assert_msg_has("source 'q' v2 is closed");
    assert_int_equal(strata_transfer(f->rt, a, closed, &t), STRATA_ESTATE);
    assert_msg_has("destination 'q' v2 is closed");
    /* distinct beats name/version and capacity (none differ here) */
    assert_int_equal(strata_transfer(f->rt, a, a, &t), STRATA_EINVAL);
    assert_msg_has("same instance");
    /* name beats capacity: 'q' v2 of 4 bytes vs 'p' v1 of 8 */
    assert_int_equal(strata_transfer(f->rt, a, other, &t), STRATA_EINVAL);
    assert_msg_has("name and version must match");
    /* version beats capacity: p v1 (8) vs p v2 (16) */
    assert_int_equal(strata_transfer(f->rt, a, v2, &t), STRATA_EINVAL);
    assert_msg_has("name and version must match");
    /* capacity last */
    assert_int_equal(strata_transfer(f->rt, a, big, &t), STRATA_EINVAL);
    assert_msg_has("capacity 8 differs from destination capacity 16");
    assert_null(t);
    /* NULLs first of all */
    assert_int_equal(strata_transfer(f->rt, NULL, a, &t), STRATA_EINVAL);
    assert_msg_has("src is NULL");
    assert_int_equal(strata_transfer(f->rt, a, big, NULL), STRATA_EINVAL);
    assert_msg_has("out is NULL");
}

static void test_tier_round_trip_ram_nvme_ram(void **state)
{
    struct fixture *f = *state;
    const uint64_t cap = 3 * MiB + 123; /* partial last chunk and block */
    strata_instance *hot = alloc_ok(f->rt, "state", 7, "ram", cap);
    strata_instance *cold = alloc_ok(f->rt, "state", 7, "nvme", cap);
    strata_instance *back, *cold2;
    strata_tier_report r;
    char json[1024];
    size_t len = 0;

    fill(hot, cap, 1);
    move(f->rt, hot, cold);
    assert_int_equal(strata_instance_close(hot), STRATA_OK);
    expect(cold, cap, 1); /* the file, read directly */
    cold2 = alloc_ok(f->rt, "state", 7, "nvme", cap);
    move(f->rt, cold, cold2); /* nvme -> nvme through staging */
    back = alloc_ok(f->rt, "state", 7, "ram", cap);
    move(f->rt, cold2, back);
    expect(back, cap, 1);
    assert_int_equal(strata_tier_report_get(f->rt, &r), STRATA_OK);
    assert_true(r.moved[STRATA_TIER_RAM][STRATA_TIER_NVME] == cap);
    assert_true(r.moved[STRATA_TIER_NVME][STRATA_TIER_NVME] == cap);
    assert_true(r.moved[STRATA_TIER_NVME][STRATA_TIER_RAM] == cap);
    assert_int_equal(r.transfers_done, 3);
    assert_true(r.tiers[STRATA_TIER_RAM].peak == cap);
    assert_true(r.tiers[STRATA_TIER_NVME].live == 2 * cap);
    assert_int_equal(strata_tier_report_json(&r, NULL, 0, &len), STRATA_OK);
    assert_true(len > 100 && len < sizeof(json));
    assert_int_equal(strata_tier_report_json(&r, json, len, &len),
                     STRATA_ENOMEM);
    assert_int_equal(strata_tier_report_json(&r, json, sizeof(json), &len),
                     STRATA_OK);
    assert_int_equal(strlen(json), len);
    assert_non_null(strstr(json, "\"schema\":\"strata.tier-report.v1\""));
    assert_non_null(strstr(json, "\"device\":{\"live\":0,\"peak\":0,"
                                 "\"budget\":null,\"instances\":0}"));
    assert_non_null(strstr(json, "\"ram->nvme\":3145851"));
    assert_non_null(strstr(json, "\"bytes_moved\":9437553"));
}

/* Transfers issued back to back, no wait between them, on one value:
 *   Tw G->H, Tc H->C (a slow writer of C: nvme write, then read),
 *   T1 A->B, T2 B->C (reads what T1 wrote: RAW; waits for Tc: WAW),
 *   T3 D->B (must wait for T2 to have read B: WAR; and T1: WAW),
 *   T4 B->E (reads what T3 wrote: RAW).
 * C must hold A's bytes and E and B D's. With one I/O thread the queue
 * order is strict: without the WAR edge T3 runs while T2 still waits for
 * Tc, and C gets D's bytes; without RAW T2 reads B before T1 wrote it. */
static void ordered_round(strata_tier_runtime *rt, unsigned round, uint64_t cap)
{
    strata_instance *a = alloc_ok(rt, "o", round, "ram", cap);
    strata_instance *b = alloc_ok(rt, "o", round, "nvme", cap);
    strata_instance *c = alloc_ok(rt, "o", round, "ram", cap);
    strata_instance *d = alloc_ok(rt, "o", round, "ram", cap);
    strata_instance *e = alloc_ok(rt, "o", round, "ram", cap);
    strata_instance *g = alloc_ok(rt, "o", round, "ram", cap);
    strata_instance *h = alloc_ok(rt, "o", round, "nvme", cap);
    strata_transfer_handle *t[6];

    fill(a, cap, 10 + round);
    fill(d, cap, 20 + round);
    fill(g, cap, 50 + round);
    assert_int_equal(strata_transfer(rt, g, h, &t[0]), STRATA_OK);
    assert_int_equal(strata_transfer(rt, h, c, &t[1]), STRATA_OK);
    assert_int_equal(strata_transfer(rt, a, b, &t[2]), STRATA_OK);
    assert_int_equal(strata_transfer(rt, b, c, &t[3]), STRATA_OK);
    assert_int_equal(strata_transfer(rt, d, b, &t[4]), STRATA_OK);
    assert_int_equal(strata_transfer(rt, b, e, &t[5]), STRATA_OK);
    for (int k = 5; k >= 0; k--) {
        assert_int_equal(strata_transfer_wait(t[k], 60), STRATA_OK);
        strata_transfer_free(t[k]);
    }
    expect(c, cap, 10 + round);
    expect(e, cap, 20 + round);
    expect(b, cap, 20 + round);
    /* A host write waits for the readers of its instance. */
    assert_int_equal(strata_transfer(rt, b, c, &t[0]), STRATA_OK);
    fill(b, cap, 30 + round);
    assert_int_equal(strata_transfer_wait(t[0], 60), STRATA_OK);
    strata_transfer_free(t[0]);
    expect(c, cap, 20 + round);
    for (strata_instance *const *i =
             (strata_instance *const[]){a, b, c, d, e, g, h, NULL};
         *i; i++)
        assert_int_equal(strata_instance_close(*i), STRATA_OK);
}

static void test_tier_concurrent_transfers_ordered(void **state)
{
    struct fixture *f = *state;
    strata_tier_config cfg;

    strata_tier_config_init(&cfg);
    cfg.nvme_dir = f->dir;
    for (unsigned threads = 1; threads <= 3; threads += 2) {
        strata_tier_runtime *rt;

        cfg.io_threads = threads;
        assert_int_equal(strata_tier_runtime_create(&cfg, &rt), STRATA_OK);
        for (unsigned round = 0; round < 2; round++)
            ordered_round(rt, round, 4 * MiB + 512);
        assert_int_equal(strata_tier_runtime_destroy(rt), STRATA_OK);
    }
    /* And on the fixture's runtime (2 threads). */
    ordered_round(f->rt, 9, 2 * MiB);
}

static void test_tier_failed_write_reported_at_wait(void **state)
{
    struct fixture *f = *state;
    const uint64_t cap = 4 * MiB;
    strata_instance *a = alloc_ok(f->rt, "f", 1, "ram", cap);
    strata_instance *b = alloc_ok(f->rt, "f", 1, "nvme", cap);
    strata_instance *c = alloc_ok(f->rt, "f", 1, "ram", cap);
    strata_transfer_handle *t1, *t2;
    strata_tier_report r;
    struct stat st;
    char path[512], byte;

    fill(a, cap, 5);
    /* The second chunk's pwrite fails as a full disk would. */
    base_fault_arm("tier.pwrite", 2, BASE_FAULT_FAIL);
    assert_int_equal(strata_transfer(f->rt, a, b, &t1), STRATA_OK);
    assert_int_equal(strata_transfer(f->rt, b, c, &t2), STRATA_OK);
    assert_int_equal(strata_transfer_wait(t1, -1), STRATA_EIO);
    assert_msg_has("No space left on device");
    assert_msg_has("'f' v1 ram->nvme");
    assert_true(strata_transfer_ready(t1));
    /* The same result on every wait. */
    assert_int_equal(strata_transfer_wait(t1, 0), STRATA_EIO);
    /* Its reader fails too: its source holds no valid bytes. */
    assert_int_equal(strata_transfer_wait(t2, -1), STRATA_EIO);
    assert_msg_has("earlier transfer into its source failed");
    strata_transfer_free(t1);
    strata_transfer_free(t2);
    assert_int_equal(strata_instance_read(b, 0, &byte, 1), STRATA_EIO);
    assert_msg_has("holds no valid data");
    /* The file's blocks went back to the file system. */
    assert_int_equal(count_files(f->dir), 1);
    {
        DIR *d = opendir(f->dir);
        struct dirent *e;

        assert_non_null(d);
        while ((e = readdir(d)))
            if (e->d_name[0] != '.')
                snprintf(path, sizeof(path), "%s/%s", f->dir, e->d_name);
        closedir(d);
    }
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_blocks, 0);
    assert_int_equal(strata_tier_report_get(f->rt, &r), STRATA_OK);
    assert_int_equal(r.transfers_failed, 2);
    assert_int_equal(r.transfers_done, 0);
    assert_int_equal(r.moved[STRATA_TIER_RAM][STRATA_TIER_NVME], 0);
    /* A good transfer makes b valid again; closing releases it. */
    move(f->rt, a, b);
    expect(b, cap, 5);
    assert_int_equal(strata_instance_close(b), STRATA_OK);
    assert_int_equal(strata_tier_report_get(f->rt, &r), STRATA_OK);
    assert_true(r.tiers[STRATA_TIER_NVME].live == 0);
    assert_int_equal(count_files(f->dir), 0);
}

static void test_tier_failed_read_reported_at_wait(void **state)
{
    struct fixture *f = *state;
    strata_instance *a = alloc_ok(f->rt, "g", 1, "nvme", 2 * MiB);
    strata_instance *b = alloc_ok(f->rt, "g", 1, "ram", 2 * MiB);
    strata_transfer_handle *t;

    base_fault_arm("tier.pread", 1, BASE_FAULT_FAIL);
    assert_int_equal(strata_transfer(f->rt, a, b, &t), STRATA_OK);
    assert_int_equal(strata_transfer_wait(t, -1), STRATA_EIO);
    assert_msg_has("read of chunk");
    assert_msg_has("Input/output error");
    strata_transfer_free(t);
}

static void test_tier_open_fault_leaves_no_trace(void **state)
{
    struct fixture *f = *state;
    strata_instance *i = NULL;
    strata_tier_report r;

    base_fault_arm("tier.open", 1, BASE_FAULT_FAIL);
    assert_int_equal(strata_instance_allocate(f->rt, "h", 1, "nvme", 64, &i),
                     STRATA_ESYS);
    assert_null(i);
    base_fault_arm("tier.alloc", 1, BASE_FAULT_FAIL);
    assert_int_equal(strata_instance_allocate(f->rt, "h", 1, "ram", 64, &i),
                     STRATA_ENOMEM);
    assert_int_equal(strata_tier_report_get(f->rt, &r), STRATA_OK);
    for (int k = 0; k < STRATA_TIER_COUNT; k++) {
        assert_int_equal(r.tiers[k].live, 0);
        assert_int_equal(r.tiers[k].peak, 0);
        assert_int_equal(r.tiers[k].instances, 0);
    }
    assert_int_equal(strata_tier_latest(f->rt, "h", NULL, &i), STRATA_ENOENT);
    assert_int_equal(count_files(f->dir), 0);
}

/* Closing a source returns only once its readers are done: the transfer
 * is finished and the bytes it copied are the source's. */
static void test_tier_close_waits_for_readers(void **state)
{
    struct fixture *f = *state;
    const uint64_t cap = 48 * MiB;

    for (unsigned round = 0; round < 3; round++) {
        strata_instance *a = alloc_ok(f->rt, "c", round, "ram", cap);
        strata_instance *b = alloc_ok(f->rt, "c", round, "nvme", cap);
        strata_instance *c = alloc_ok(f->rt, "c", round, "ram", cap);
        strata_transfer_handle *t1, *t2;

        fill(a, cap, 40 + round);
        assert_int_equal(strata_transfer(f->rt, a, b, &t1), STRATA_OK);
        assert_int_equal(strata_transfer(f->rt, b, c, &t2), STRATA_OK);
        assert_int_equal(strata_instance_close(a), STRATA_OK);
        assert_true(strata_transfer_ready(t1));
        assert_int_equal(strata_transfer_wait(t1, 0), STRATA_OK);
        /* b is read by t2: closing it waits for t2 as well. */
        assert_int_equal(strata_instance_close(b), STRATA_OK);
        assert_true(strata_transfer_ready(t2));
        assert_int_equal(strata_transfer_wait(t2, 0), STRATA_OK);
        expect(c, cap, 40 + round);
        strata_transfer_free(t1);
        strata_transfer_free(t2);
        assert_int_equal(strata_instance_close(c), STRATA_OK);
    }
}

static void test_tier_handle_outlives_runtime(void **state)
{
    strata_tier_config cfg;
    strata_tier_runtime *rt;
    strata_instance *a, *b;
    strata_transfer_handle *t;

    (void)state;
    strata_tier_config_init(&cfg);
    cfg.io_threads = 1;
    assert_int_equal(strata_tier_runtime_create(&cfg, &rt), STRATA_OK);
    a = alloc_ok(rt, "k", 1, "ram", 5 * MiB);
    b = alloc_ok(rt, "k", 1, "ram", 5 * MiB);
    assert_int_equal(strata_transfer(rt, a, b, &t), STRATA_OK);
    /* Destroy waits for the transfer; the handle keeps its result. */
    assert_int_equal(strata_tier_runtime_destroy(rt), STRATA_OK);
    assert_true(strata_transfer_ready(t));
    assert_int_equal(strata_transfer_wait(t, 0), STRATA_OK);
    strata_transfer_free(t);
}

struct forked {
    strata_tier_runtime *rt;
    strata_instance *ram, *nvme;
    strata_transfer_handle *t;
};

/* In a forked child: every call on the parent's runtime is refused
 * (STRATA_ESTATE, saying so) and touches nothing. Returns the number of
 * calls that were not. */
static int use_parents_runtime(void *arg)
{
    struct forked *k = arg;
    strata_transfer_handle *t = NULL;
    strata_instance *inst = NULL;
    strata_tier_report r;
    char byte = 1;
    strata_err e[10];
    int bad = 0;

    e[0] = strata_transfer(k->rt, k->ram, k->nvme, &t);
    e[1] = strata_transfer_wait(k->t, -1);
    e[2] = strata_instance_write(k->ram, 0, &byte, 1);
    e[3] = strata_instance_read(k->nvme, 0, &byte, 1);
    e[4] = strata_instance_allocate(k->rt, "c", 1, "ram", 64, &inst);
    e[5] = strata_tier_set_budget(k->rt, "ram", "1MiB");
    e[6] = strata_tier_latest(k->rt, "k", "nvme", &inst);
    e[7] = strata_tier_report_get(k->rt, &r);
    e[8] = strata_instance_close(k->nvme);
    e[9] = strata_tier_runtime_destroy(k->rt);
    for (int i = 0; i < 10; i++)
        bad += e[i] != STRATA_ESTATE;
    bad += strstr(strata_errmsg(), "forked from it") == NULL;
    bad += strata_instance_data(k->ram) != NULL;
    strata_transfer_free(k->t); /* the parent's: left alone */
    return bad;
}

/* A forked child cannot use or destroy its parent's runtime: nothing
 * hangs on the I/O threads that did not follow the fork, and the
 * parent's nvme file and instances are still its own afterwards. */
static void test_tier_forked_child_refused(void **state)
{
    struct fixture *f = *state;
    struct forked k = {.rt = f->rt};
    int status;

    k.ram = alloc_ok(f->rt, "k", 1, "ram", MiB);
    k.nvme = alloc_ok(f->rt, "k", 1, "nvme", MiB);
    fill(k.ram, MiB, 3);
    assert_int_equal(strata_transfer(f->rt, k.ram, k.nvme, &k.t), STRATA_OK);
    assert_int_equal(strata_transfer_wait(k.t, -1), STRATA_OK);
    status = testutil_run_in_child(use_parents_runtime, &k);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(count_files(f->dir), 1);
    expect(k.nvme, MiB, 3);
    strata_transfer_free(k.t);
    assert_int_equal(strata_instance_close(k.ram), STRATA_OK);
    assert_int_equal(strata_instance_close(k.nvme), STRATA_OK);
}

static void test_tier_arguments_refused_by_name(void **state)
{
    struct fixture *f = *state;
    strata_instance *i = NULL;
    char longname[300];
    uint64_t v;

    assert_int_equal(strata_tier_runtime_create(NULL, NULL), STRATA_EINVAL);
    assert_msg_has("strata_tier_runtime_create: cfg is NULL");
    assert_int_equal(strata_instance_allocate(NULL, "x", 1, "ram", 1, &i),
                     STRATA_EINVAL);
    assert_msg_has("rt is NULL");
    assert_int_equal(strata_instance_allocate(f->rt, NULL, 1, "ram", 1, &i),
                     STRATA_EINVAL);
    assert_msg_has("name is NULL");
    assert_int_equal(strata_instance_allocate(f->rt, "x", 1, NULL, 1, &i),
                     STRATA_EINVAL);
    assert_msg_has("tier is NULL");
    assert_int_equal(strata_instance_allocate(f->rt, "x", 1, "ram", 1, NULL),
                     STRATA_EINVAL);
    assert_int_equal(strata_instance_allocate(f->rt, "", 1, "ram", 1, &i),
                     STRATA_EINVAL);
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(strata_instance_allocate(f->rt, longname, 1, "ram", 1, &i),
                     STRATA_EINVAL);
    assert_int_equal(strata_instance_allocate(f->rt, "x", 1, "ram", 0, &i),
                     STRATA_EINVAL);
    assert_msg_has("capacity 0");
    assert_int_equal(
        strata_instance_allocate(f->rt, "x", 1, "ram", UINT64_MAX, &i),
        STRATA_EINVAL);
    assert_null(i);
    assert_int_equal(strata_transfer_wait(NULL, 0), STRATA_EINVAL);
    assert_int_equal(strata_parse_bytes("1", NULL), STRATA_EINVAL);
    assert_int_equal(strata_tier_set_budget(NULL, "ram", "1"), STRATA_EINVAL);
    assert_int_equal(strata_tier_report_get(f->rt, NULL), STRATA_EINVAL);
    assert_int_equal(strata_instance_close(NULL), STRATA_OK);
    assert_int_equal(strata_tier_runtime_destroy(NULL), STRATA_OK);
    strata_transfer_free(NULL);
    assert_false(strata_transfer_ready(NULL));
    assert_null(strata_instance_name(NULL));
    assert_int_equal(strata_instance_tier(NULL), -1);
    assert_null(strata_instance_data(NULL));
    i = alloc_ok(f->rt, "x", 1, "ram", 16);
    assert_int_equal(strata_instance_write(i, 8, "123456789", 9),
                     STRATA_EINVAL);
    assert_msg_has("outside the 16-byte instance");
    assert_int_equal(strata_instance_read(i, 0, NULL, 1), STRATA_EINVAL);
    {
        strata_transfer_handle *t;
        strata_instance *j = alloc_ok(f->rt, "x", 1, "ram", 16);

        assert_int_equal(strata_transfer(f->rt, i, j, &t), STRATA_OK);
        assert_int_equal(strata_transfer_wait(t, NAN), STRATA_EINVAL);
        assert_msg_has("NaN");
        assert_int_equal(strata_transfer_wait(t, 30), STRATA_OK);
        strata_transfer_free(t);
    }
    (void)v;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tier_names_and_aliases_resolve),
        cmocka_unit_test(test_tier_iec_table_parses_or_refuses),
        cmocka_unit_test_setup_teardown(
            test_tier_budget_edges_equal_allowed_one_more_refused, setup,
            teardown),
        cmocka_unit_test(test_tier_config_budgets_string),
        cmocka_unit_test_setup_teardown(test_tier_device_and_pinned_need_cuda,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_tier_latest_picks_highest_live_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tier_preconditions_in_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tier_round_trip_ram_nvme_ram,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_tier_concurrent_transfers_ordered,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_tier_failed_write_reported_at_wait,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_tier_failed_read_reported_at_wait,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_tier_open_fault_leaves_no_trace,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_tier_close_waits_for_readers,
                                        setup, teardown),
        cmocka_unit_test(test_tier_handle_outlives_runtime),
        cmocka_unit_test_setup_teardown(test_tier_forked_child_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tier_arguments_refused_by_name,
                                        setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
