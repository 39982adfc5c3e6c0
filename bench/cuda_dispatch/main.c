/* bench_cuda_dispatch: the per-task cost of a no-op CUDA kernel task on a
 * cuda chip (submit, the chip's launch and blocking event wait, the
 * completion), against a raw cudaLaunchKernel + cudaStreamSynchronize
 * loop in one process, measured in the same run after the worker is gone
 * (the parent must not touch CUDA before it forks its chips). Target:
 * strata <= 1.5 x the reference. Prints a summary and, last, one JSON
 * line. --quick: fewer iterations (ci/gpu-check). Exit 77 without a
 * usable device. */
#include <stdio.h>
#include <stdlib.h>
#include <strata/cuda.h>
#include <strata/strata.h>
#include <string.h>
#include <time.h>

strata_err cuda_dispatch_noop(strata_chip *chip, const strata_args *args);
double cuda_dispatch_reference(int iters, int blocking_sync, char *msg,
                               size_t cap);

#define TARGET_RATIO 1.5

struct job {
    strata_callable k;
    int tasks;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* tasks no-op tasks on chip 0, one after another (each waits for the
 * previous: they share the chip). */
static strata_err submit_all(strata_orch *o, const strata_args *unused,
                             void *user)
{
    const struct job *j = user;
    strata_args *a = NULL;
    strata_err err = strata_args_create(&a);

    (void)unused;
    for (int i = 0; !err && i < j->tasks; i++)
        err = strata_orch_submit_next_level(o, j->k, a, 0);
    strata_args_destroy(a);
    return err;
}

static void skipped(const char *why)
{
    printf("bench_cuda_dispatch: SKIPPED: %s\n", why);
    printf("{\"bench\":\"cuda_dispatch\",\"metric\":\"per_task_us\","
           "\"skipped\":true}\n");
    exit(77);
}

int main(int argc, char **argv)
{
    static const int ids[] = {0};
    const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const int tasks = quick ? 2000 : 20000;
    struct job j = {.tasks = tasks};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    double t0, strata_s, ref_spin, ref_block, ratio;
    char msg[256];
    strata_err err;

    if (strata_register_kernel("cuda_dispatch.noop", cuda_dispatch_noop,
                               &j.k) != STRATA_OK) {
        fprintf(stderr, "register: %s\n", strata_errmsg());
        return 1;
    }
    strata_worker_config_init(&cfg, 3);
    cfg.platform = "cuda";
    cfg.chip_ids = ids;
    cfg.num_chips = 1;
    if (strata_worker_create(&cfg, &w) != STRATA_OK) {
        fprintf(stderr, "create: %s\n", strata_errmsg());
        return 1;
    }
    err = strata_worker_init(w);
    if (err) {
        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        if (strata_worker_destroy(w) != STRATA_OK)
            return 1;
        skipped(msg);
    }
    j.tasks = 200; /* warm-up */
    err = strata_worker_run(w, submit_all, NULL, &j);
    j.tasks = tasks;
    t0 = now_s();
    if (!err)
        err = strata_worker_run(w, submit_all, NULL, &j);
    strata_s = (now_s() - t0) / tasks;
    if (err) {
        fprintf(stderr, "run: %s\n", strata_errmsg());
        return 1;
    }
    if (strata_worker_destroy(w) != STRATA_OK) {
        fprintf(stderr, "destroy: %s\n", strata_errmsg());
        return 1;
    }
    /* The worker and its chips are gone: this process may use CUDA. */
    ref_spin = cuda_dispatch_reference(tasks, 0, msg, sizeof(msg));
    if (ref_spin < 0) {
        fprintf(stderr, "reference: %s\n", msg);
        return 1;
    }
    ref_block = cuda_dispatch_reference(tasks, 1, msg, sizeof(msg));
    ratio = strata_s / ref_spin;
    printf("bench_cuda_dispatch: %d no-op kernel tasks on one cuda chip: "
           "%.2f us/task; raw launch+sync loop %.2f us (spin), %.2f us "
           "(blocking sync); ratio %.2f (target <= %.1f)\n",
           tasks, strata_s * 1e6, ref_spin * 1e6, ref_block * 1e6, ratio,
           TARGET_RATIO);
    printf("{\"bench\":\"cuda_dispatch\",\"metric\":\"per_task_us\","
           "\"unit\":\"us\",\"strata\":%.3f,\"reference_name\":"
           "\"cudaLaunchKernel+cudaStreamSynchronize\",\"reference\":%.3f,"
           "\"reference_blocking_sync\":%.3f,\"ratio\":%.3f,\"target\":%.1f,"
           "\"pass\":%s,\"tasks\":%d,\"quick\":%s}\n",
           strata_s * 1e6, ref_spin * 1e6, ref_block * 1e6, ratio, TARGET_RATIO,
           ratio <= TARGET_RATIO ? "true" : "false", tasks,
           quick ? "true" : "false");
    return 0;
}
