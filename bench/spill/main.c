/* bench_spill: a worker with a ram budget of one buffer and LRU eviction
 * spills buffer A (N MiB, filled) when buffer B of the same size is
 * created, and restores A when the host touches it again after B is
 * released. Each round times the spill (strata_worker_create_buffer of B:
 * A's bytes to a file in the directory, then B's pages reserved) and the
 * restore (strata_buffer_data of A: its pages reserved again, its bytes
 * read back, the file removed), and, alternating with them, dd writing N
 * MiB with oflag=direct into a new file and reading them with iflag=direct
 * in the same directory. The medians of spill + restore and of the dd pair are
 * compared (target: strata >= 0.9 x dd); A's bytes are checked after the
 * last round. The last stdout line is the JSON summary every bench
 * prints.
 *
 *   bench_spill [--quick] [--rounds K] [--dir D] [--mib N]
 */
#include "bench_common.h"
#include "dd_ref.h"
#include "machine_load.h"
#include "stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <strata/strata.h>
#include <strata/tier.h>
#include <string.h>
#include <unistd.h>

#define MAX_ROUNDS 15
#define TARGET 0.9

struct opts {
    const char *dir;
    unsigned mib;
    int rounds;
};

static int parse(int argc, char **argv, struct opts *o)
{
    bool quick = false;

    o->dir = NULL;
    o->mib = 1024;
    o->rounds = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            o->rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
            o->dir = argv[++i];
        } else if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc) {
            o->mib = (unsigned)atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_spill [--quick] [--rounds K] "
                            "[--dir D] [--mib N]\n");
            return -1;
        }
    }
    if (quick && o->mib == 1024)
        o->mib = 256;
    if (o->rounds <= 0)
        o->rounds = quick ? 3 : 5;
    if (o->rounds > MAX_ROUNDS || o->mib == 0 || o->mib > 65536) {
        fprintf(stderr, "bench_spill: rounds 1..%d, mib 1..65536\n",
                MAX_ROUNDS);
        return -1;
    }
    return 0;
}

struct samples {
    double spill[MAX_ROUNDS], restore[MAX_ROUNDS], pair[MAX_ROUNDS];
    double ddw[MAX_ROUNDS], ddr[MAX_ROUNDS], ddpair[MAX_ROUNDS];
    uint64_t spills, restores;
};

static int fail(const char *what)
{
    fprintf(stderr, "bench_spill: %s: %s\n", what, strata_errmsg());
    return -1;
}

/* One round of strata: spill A (creating B), release B, restore A. */
static int strata_round(strata_worker *w, strata_buffer *a, size_t bytes,
                        double *spill_s, double *restore_s)
{
    strata_buffer *b;
    double t0 = bench_now_s();

    if (strata_worker_create_buffer(w, bytes, &b))
        return fail("create B (spilling A)");
    *spill_s = bench_now_s() - t0;
    if (strata_buffer_release(b))
        return fail("release B");
    t0 = bench_now_s();
    if (!strata_buffer_data(a))
        return fail("restore A");
    *restore_s = bench_now_s() - t0;
    return 0;
}

static bool check(strata_buffer *a, size_t bytes)
{
    const unsigned char *p = strata_buffer_data(a);

    for (size_t i = 0; p && i < bytes; i++)
        if (p[i] != (unsigned char)(i * 7 + 1))
            return false;
    return p != NULL;
}

static int measure(const struct opts *o, const char *dir, struct samples *s)
{
    size_t bytes = (size_t)o->mib << 20;
    char budget[64], ddfile[640];
    strata_worker_config cfg;
    strata_tier_report r;
    strata_worker *w;
    strata_buffer *a;
    unsigned char *p;
    int rc = -1;

    snprintf(budget, sizeof(budget), "ram=%u MiB", o->mib);
    strata_worker_config_init(&cfg, 3);
    cfg.budgets = budget;
    cfg.spill_dir = dir;
    cfg.eviction = STRATA_EVICT_LRU;
    if (strata_worker_create(&cfg, &w))
        return fail("worker create");
    if (strata_worker_create_buffer(w, bytes, &a)) {
        fail("create A");
        goto out;
    }
    p = strata_buffer_data(a);
    for (size_t i = 0; i < bytes; i++)
        p[i] = (unsigned char)(i * 7 + 1);
    snprintf(ddfile, sizeof(ddfile), "%s/dd-reference", dir);
    for (int i = 0; i < o->rounds; i++) {
        /* A new file each round, as every spill writes one; its removal
         * is not timed (a restore's removal of the spill file is). */
        unlink(ddfile);
        s->ddw[i] = dd_ref_write(ddfile, o->mib);
        if (strata_round(w, a, bytes, &s->spill[i], &s->restore[i]))
            goto out;
        s->ddr[i] = dd_ref_read(ddfile, o->mib);
        if (s->ddw[i] < 0 || s->ddr[i] < 0) {
            fprintf(stderr,
                    "bench_spill: round %d: dd failed (is it there? "
                    "does %s take O_DIRECT?)\n",
                    i, dir);
            goto out;
        }
        s->pair[i] = s->spill[i] + s->restore[i];
        s->ddpair[i] = s->ddw[i] + s->ddr[i];
        printf("round %d: spill %.3f s restore %.3f s; dd write %.3f s "
               "read %.3f s\n",
               i, s->spill[i], s->restore[i], s->ddw[i], s->ddr[i]);
    }
    if (!check(a, bytes)) {
        fprintf(stderr, "bench_spill: A's bytes differ after the rounds\n");
        goto out;
    }
    if (strata_worker_memory_report(w, &r) == STRATA_OK) {
        s->spills = r.spills;
        s->restores = r.restores;
    }
    rc = 0;
out:
    unlink(ddfile);
    if (strata_worker_destroy(w))
        rc = -1;
    return rc;
}

int main(int argc, char **argv)
{
    struct opts o;
    struct samples s = {0};
    struct machine_load l0, l1;
    char tmpl[600];
    const char *err = NULL;
    double gb, pair, ddpair, load;
    bool pass;

    if (parse(argc, argv, &o))
        return 2;
    snprintf(tmpl, sizeof(tmpl), "%s/strata-bench-spill-XXXXXX",
             o.dir ? o.dir : "/var/tmp");
    if (!mkdtemp(tmpl)) {
        perror("bench_spill: mkdtemp");
        return 1;
    }
    machine_load_sample(&l0);
    if (measure(&o, tmpl, &s))
        err = "a round failed";
    machine_load_sample(&l1);
    rmdir(tmpl);
    load = machine_load_other_pct(&l0, &l1);
    gb = (double)((uint64_t)o.mib << 20) / 1e9;
    /* Both sides move the bytes twice (out and back): GB/s of the pair. */
    pair = err ? -1 : 2 * gb / stats_median(s.pair, (size_t)o.rounds);
    ddpair = err ? -1 : 2 * gb / stats_median(s.ddpair, (size_t)o.rounds);
    pass = !err && pair >= TARGET * ddpair;
    printf("%u MiB, %d rounds, in %s\n", o.mib, o.rounds,
           o.dir ? o.dir : "/var/tmp");
    if (!err)
        printf("spill %.3f s + restore %.3f s (medians): %.3f GB/s; dd "
               "oflag=direct + iflag=direct %.3f s + %.3f s: %.3f GB/s "
               "(%.2f x)\n",
               stats_median(s.spill, (size_t)o.rounds),
               stats_median(s.restore, (size_t)o.rounds), pair,
               stats_median(s.ddw, (size_t)o.rounds),
               stats_median(s.ddr, (size_t)o.rounds), ddpair,
               ddpair > 0 ? pair / ddpair : -1);
    bench_print_load(load);
    printf("{\"bench\":\"spill\",\"metric\":\"spill_restore_GBps\","
           "\"unit\":\"GB/s\",");
    bench_json_num("strata", pair, true);
    printf("\"reference_name\":\"dd_direct_write_read_GBps\",");
    bench_json_num("reference", ddpair, true);
    bench_json_num("ratio", ddpair > 0 ? pair / ddpair : -1, true);
    bench_json_num("target", TARGET, true);
    printf("\"pass\":%s,", pass ? "true" : "false");
    printf("\"target_rule\":\"spill+restore >= 0.9 x dd write+read, "
           "medians\",");
    bench_json_num("spill_s",
                   err ? -1 : stats_median(s.spill, (size_t)o.rounds), true);
    bench_json_num("restore_s",
                   err ? -1 : stats_median(s.restore, (size_t)o.rounds), true);
    bench_json_num("dd_write_s",
                   err ? -1 : stats_median(s.ddw, (size_t)o.rounds), true);
    bench_json_num("dd_read_s",
                   err ? -1 : stats_median(s.ddr, (size_t)o.rounds), true);
    bench_json_num("spills", (double)s.spills, true);
    bench_json_num("restores", (double)s.restores, true);
    bench_json_num("mib", o.mib, true);
    bench_json_num("rounds", o.rounds, true);
    bench_json_num("other_cpu_pct", load, false);
    bench_json_end("", err);
    return err ? 1 : 0;
}
