/* tiers_round_trip: eight bytes from RAM to an NVMe instance and back, under
 * budgets of 16 bytes of RAM and 8 of NVMe (the reference system's
 * HierarchyRuntime example, in C). */
#include <stdio.h>
#include <stdlib.h>
#include <strata/tier.h>
#include <string.h>
#include <unistd.h>

static int check(strata_err err, const char *what)
{
    if (err == STRATA_OK)
        return 0;
    fprintf(stderr, "tiers_round_trip: FAILED at %s: %s (%s)\n", what,
            strata_errname(err), strata_errmsg());
    return 1;
}

/* Waits for a transfer and frees its handle. */
static strata_err finish(strata_transfer_handle *t)
{
    strata_err err = strata_transfer_wait(t, -1);

    strata_transfer_free(t);
    return err;
}

static int round_trip(strata_tier_runtime *rt)
{
    strata_instance *hot, *cold, *back;
    strata_transfer_handle *t;
    char out[9] = "";
    char report[1024];
    strata_tier_report r;
    size_t len;

    if (check(strata_instance_allocate(rt, "state", 7, "ram", 8, &hot),
              "allocate ram") ||
        check(strata_instance_write(hot, 0, "tiga1234", 8), "write") ||
        check(strata_instance_allocate(rt, "state", 7, "nvme", 8, &cold),
              "allocate nvme") ||
        check(strata_transfer(rt, hot, cold, &t), "transfer to nvme") ||
        check(finish(t), "wait to nvme") ||
        check(strata_instance_close(hot), "close ram") ||
        check(strata_instance_allocate(rt, "state", 7, "ram", 8, &back),
              "allocate ram again") ||
        check(strata_transfer(rt, cold, back, &t), "transfer to ram") ||
        check(finish(t), "wait to ram") ||
        check(strata_instance_read(back, 0, out, 8), "read"))
        return 1;
    if (strcmp(out, "tiga1234") != 0) {
        fprintf(stderr, "tiers_round_trip: FAILED: read back '%s'\n", out);
        return 1;
    }
    if (check(strata_tier_report_get(rt, &r), "report") ||
        check(strata_tier_report_json(&r, report, sizeof(report), &len),
              "report json"))
        return 1;
    printf("%s\n", report);
    printf("tiers_round_trip: OK (read back '%s' after ram -> nvme -> ram)\n",
           out);
    return 0;
}

int main(void)
{
    char dir[] = "/tmp/strata-tiers-example-XXXXXX";
    strata_tier_config cfg;
    strata_tier_runtime *rt;
    int rc;

    if (!mkdtemp(dir)) {
        perror("tiers_round_trip: FAILED: mkdtemp");
        return 1;
    }
    strata_tier_config_init(&cfg);
    cfg.nvme_dir = dir;
    cfg.budgets = "ram=16, nvme=8";
    if (check(strata_tier_runtime_create(&cfg, &rt), "create")) {
        rmdir(dir);
        return 1;
    }
    rc = round_trip(rt);
    /* The runtime owns the instances: destroy closes them and removes
     * their files. */
    if (check(strata_tier_runtime_destroy(rt), "destroy"))
        rc = 1;
    if (rmdir(dir) != 0) {
        perror("tiers_round_trip: FAILED: rmdir (a file left behind?)");
        rc = 1;
    }
    return rc;
}
