/* bench_tiers: bytes per second of strata_transfer between a ram and an
 * nvme instance (write: ram -> nvme, read: nvme -> ram) against dd moving
 * the same number of bytes in 1 MiB blocks with oflag=direct (write, from
 * /dev/zero) and iflag=direct (read, to /dev/null), in the same directory,
 * alternately, in the same run. The medians of the rounds are compared;
 * the target is strata >= 0.9 x dd both ways. The last stdout line is the
 * JSON summary every bench prints.
 *
 *   bench_tiers [--quick] [--rounds K] [--dir D] [--mib N] [--threads T]
 */
#include "bench_common.h"
#include "dd_ref.h"
#include "machine_load.h"
#include "stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <strata/tier.h>
#include <string.h>
#include <unistd.h>

#define MAX_ROUNDS 15
#define TARGET 0.9

struct opts {
    const char *dir;
    unsigned mib;
    unsigned threads;
    int rounds;
};

static int parse(int argc, char **argv, struct opts *o)
{
    bool quick = false;

    o->dir = NULL;
    o->mib = 1024;
    o->threads = 2;
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
        } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            o->threads = (unsigned)atoi(argv[++i]);
        } else {
            fprintf(stderr,
                    "usage: bench_tiers [--quick] [--rounds K] [--dir D] "
                    "[--mib N] [--threads T]\n");
            return -1;
        }
    }
    if (quick && o->mib == 1024)
        o->mib = 256;
    if (o->rounds <= 0)
        o->rounds = quick ? 3 : 5;
    if (o->rounds > MAX_ROUNDS || o->mib == 0 || o->mib > 65536 ||
        o->threads == 0 || o->threads > 64) {
        fprintf(stderr,
                "bench_tiers: rounds 1..%d, mib 1..65536, threads "
                "1..64\n",
                MAX_ROUNDS);
        return -1;
    }
    return 0;
}

/* One strata transfer, timed; -1 on failure. */
static double timed_transfer(strata_tier_runtime *rt, strata_instance *src,
                             strata_instance *dst)
{
    strata_transfer_handle *t;
    double t0 = bench_now_s(), dt;
    strata_err err = strata_transfer(rt, src, dst, &t);

    if (!err) {
        err = strata_transfer_wait(t, -1);
        strata_transfer_free(t);
    }
    dt = bench_now_s() - t0;
    if (err) {
        fprintf(stderr, "bench_tiers: transfer: %s\n", strata_errmsg());
        return -1;
    }
    return dt;
}

struct samples {
    double w[MAX_ROUNDS], r[MAX_ROUNDS], ddw[MAX_ROUNDS], ddr[MAX_ROUNDS];
};

static int measure(const struct opts *o, const char *dir, struct samples *s)
{
    uint64_t bytes = (uint64_t)o->mib << 20;
    strata_tier_config cfg;
    strata_tier_runtime *rt;
    strata_instance *ram, *nvme, *back;
    char ddfile[640];
    int rc = -1;

    strata_tier_config_init(&cfg);
    cfg.nvme_dir = dir;
    cfg.io_threads = o->threads;
    if (strata_tier_runtime_create(&cfg, &rt) ||
        strata_instance_allocate(rt, "bench", 1, "ram", bytes, &ram) ||
        strata_instance_allocate(rt, "bench", 1, "nvme", bytes, &nvme) ||
        strata_instance_allocate(rt, "bench", 1, "ram", bytes, &back)) {
        fprintf(stderr, "bench_tiers: %s\n", strata_errmsg());
        return -1;
    }
    /* Touch both ram instances now: dd reuses one small buffer, so page
     * faults of fresh memory are not what is compared. */
    memset(strata_instance_data(ram), 0x5a, bytes);
    memset(strata_instance_data(back), 0, bytes);
    snprintf(ddfile, sizeof(ddfile), "%s/dd-reference", dir);
    for (int i = 0; i < o->rounds; i++) {
        s->ddw[i] = dd_ref_write(ddfile, o->mib);
        s->w[i] = timed_transfer(rt, ram, nvme);
        s->ddr[i] = dd_ref_read(ddfile, o->mib);
        s->r[i] = timed_transfer(rt, nvme, back);
        if (s->ddw[i] < 0 || s->ddr[i] < 0 || s->w[i] < 0 || s->r[i] < 0) {
            fprintf(stderr,
                    "bench_tiers: round %d failed (is dd there? "
                    "does %s take O_DIRECT?)\n",
                    i, dir);
            goto out;
        }
        printf("round %d: write strata %.3f s dd %.3f s; read strata %.3f s "
               "dd %.3f s\n",
               i, s->w[i], s->ddw[i], s->r[i], s->ddr[i]);
    }
    rc = memcmp(strata_instance_data(ram), strata_instance_data(back), bytes)
             ? -1
             : 0;
    if (rc)
        fprintf(stderr, "bench_tiers: the bytes read back differ\n");
out:
    unlink(ddfile);
    if (strata_tier_runtime_destroy(rt))
        rc = -1;
    return rc;
}

int main(int argc, char **argv)
{
    struct opts o;
    struct samples s;
    struct machine_load l0, l1;
    char tmpl[600];
    const char *err = NULL;
    double gb, w, r, ddw, ddr, load;
    bool pass;

    if (parse(argc, argv, &o))
        return 2;
    snprintf(tmpl, sizeof(tmpl), "%s/strata-bench-tiers-XXXXXX",
             o.dir ? o.dir : "/var/tmp");
    if (!mkdtemp(tmpl)) {
        perror("bench_tiers: mkdtemp");
        return 1;
    }
    machine_load_sample(&l0);
    if (measure(&o, tmpl, &s))
        err = "a round failed";
    machine_load_sample(&l1);
    rmdir(tmpl);
    load = machine_load_other_pct(&l0, &l1);
    gb = (double)((uint64_t)o.mib << 20) / 1e9;
    w = err ? -1 : gb / stats_median(s.w, (size_t)o.rounds);
    r = err ? -1 : gb / stats_median(s.r, (size_t)o.rounds);
    ddw = err ? -1 : gb / stats_median(s.ddw, (size_t)o.rounds);
    ddr = err ? -1 : gb / stats_median(s.ddr, (size_t)o.rounds);
    pass = !err && w >= TARGET * ddw && r >= TARGET * ddr;
    printf("%u MiB, %d rounds, %u I/O threads, in %s\n", o.mib, o.rounds,
           o.threads, o.dir ? o.dir : "/var/tmp");
    printf("ram -> nvme: strata %.3f GB/s, dd oflag=direct %.3f GB/s "
           "(%.2f x)\n",
           w, ddw, ddw > 0 ? w / ddw : -1);
    printf("nvme -> ram: strata %.3f GB/s, dd iflag=direct %.3f GB/s "
           "(%.2f x)\n",
           r, ddr, ddr > 0 ? r / ddr : -1);
    bench_print_load(load);
    printf("{\"bench\":\"tiers\",\"metric\":\"ram_to_nvme_GBps\","
           "\"unit\":\"GB/s\",");
    bench_json_num("strata", w, true);
    printf("\"reference_name\":\"dd_oflag_direct_GBps\",");
    bench_json_num("reference", ddw, true);
    bench_json_num("ratio", ddw > 0 ? w / ddw : -1, true);
    bench_json_num("target", TARGET, true);
    printf("\"pass\":%s,", pass ? "true" : "false");
    printf("\"target_rule\":\"strata >= 0.9 x dd, both directions, medians\",");
    bench_json_num("nvme_to_ram_GBps", r, true);
    bench_json_num("dd_iflag_direct_GBps", ddr, true);
    bench_json_num("read_ratio", ddr > 0 ? r / ddr : -1, true);
    bench_json_num("mib", o.mib, true);
    bench_json_num("rounds", o.rounds, true);
    bench_json_num("io_threads", o.threads, true);
    bench_json_num("other_cpu_pct", load, false);
    bench_json_end("", err);
    return err ? 1 : 0;
}
