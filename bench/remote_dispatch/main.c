/*
 * bench_remote_dispatch: what a task on a remote L3 node costs.
 *
 * 1. Floor: a raw TCP ping-pong on 127.0.0.1 between two processes (a
 *    forked echo server; 64-byte messages, TCP_NODELAY, blocking reads).
 *    No runtime can hand a remote process work and hear back faster than
 *    that on the same machine.
 * 2. Round trip: an L4 worker with one remote node, a strata-node started
 *    by the bench on 127.0.0.1 port 0 with a fresh pre-shared key (TLS
 *    1.3), loading noop_module.so. Many runs of an orch fn that submits
 *    one no-op orch task to the node are timed; the median over blocks of
 *    the mean run time is the remote round trip as a caller sees it
 *    (submit, TASK over TLS, the session's L3 run, COMPLETION, the fence).
 *    The same against an --insecure daemon separates TLS from the rest.
 *    Both are measured in rounds (3, or 5 with the full run), each with a
 *    fresh echo pair and then a fresh daemon and L4: on a small VM the two
 *    processes' placement on CPUs decides much of a connection's latency,
 *    for the floor and for strata alike. Each side reports the median over
 *    rounds, and the ratio is the median of the per-round ratios.
 * 3. Throughput: runs of k = 1, 8, 64 independent no-op tasks to the node
 *    (k tasks in flight; the client ring holds 8 frames per node, so with
 *    64 the rest queue in the scheduler): tasks per second.
 *
 * --busy N runs everything with N busy processes beside it (forked
 * first, spinning until the bench ends): the same ratio, measured under
 * load, with its own target and metric name.
 *
 * Targets (issue 18): the TLS round trip <= 1.5 x the TCP ping-pong of
 * the same run idle, <= 2 x with one busy process.
 *
 * The last stdout line is one JSON object (see bench/CMakeLists.txt).
 * Usage: bench_remote_dispatch [--quick] [--busy N]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <strata/strata.h>

#include "bench_common.h"
#include "bench_daemon.h"
#include "stats.h"

#ifndef BENCH_NODE_PATH
#define BENCH_NODE_PATH "strata-node"
#endif
#ifndef BENCH_MODULE_PATH
#define BENCH_MODULE_PATH "libbench_remote_noop.so"
#endif

#define NAME "bench_remote_dispatch"
#define TARGET_IDLE 1.5 /* remote round trip <= 1.5x the raw TCP one */
#define TARGET_BUSY 2.0 /* ... and <= 2x beside busy processes */
#define MAX_BUSY 64
#define MSG_BYTES 64
#define MAX_BLOCKS 15
#define MAX_ROUNDS 5
#define NUM_K 3

static const size_t ks[NUM_K] = {1, 8, 64};

struct options {
    bool quick;
    int busy; /* busy processes beside the bench */
    size_t tcp_iters, rtt_runs, blocks, tput_tasks, rounds;
    double block_us; /* about how long one timed block of runs lasts */
};

struct results {
    double tcp_rtt_us;               /* median over rounds */
    double tls_rtt_us, plain_rtt_us; /* one task per run; TLS: median */
    double ratio;                    /* median of the per-round ratios */
    double tcp_round[MAX_ROUNDS], tls_round[MAX_ROUNDS];
    double tput[NUM_K];   /* tasks per second */
    double run_us[NUM_K]; /* one run of k tasks */
};

/* ---- load -----------------------------------------------------------------
 */

/* n spinning children, forked before this process has threads; they die
 * with it (PR_SET_PDEATHSIG), so every exit path ends them. */
static int busy_start(int n)
{
    pid_t parent = getpid();

    for (int i = 0; i < n; i++) {
        pid_t pid = fork();

        if (pid < 0)
            return -1;
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(0);
            for (;;)
                __asm__ volatile("" ::: "memory");
        }
    }
    return 0;
}

/* ---- 1. raw TCP ping-pong -------------------------------------------- */

static bool full_io(int fd, void *buf, size_t n, bool wr)
{
    size_t done = 0;

    while (done < n) {
        ssize_t r = wr ? write(fd, (char *)buf + done, n - done)
                       : read(fd, (char *)buf + done, n - done);

        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return false;
        }
        done += (size_t)r;
    }
    return true;
}

static int tcp_pingpong(const struct options *opt, double *rtt_us)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    char msg[MSG_BYTES];
    double blocks[MAX_BLOCKS];
    int one = 1, lfd, fd = -1, status;
    pid_t pid;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(lfd, 1) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &len) != 0) {
        perror(NAME ": tcp listener");
        return -1;
    }
    fflush(NULL);
    pid = fork();
    if (pid == 0) { /* the echo server */
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (c < 0)
            _exit(1);
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        while (full_io(c, msg, sizeof(msg), false) &&
               full_io(c, msg, sizeof(msg), true))
            ;
        _exit(0);
    }
    close(lfd);
    if (pid < 0)
        return -1;
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        perror(NAME ": tcp connect");
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    memset(msg, 'p', sizeof(msg));
    for (size_t i = 0; i < 1000; i++) /* warm-up */
        if (!full_io(fd, msg, sizeof(msg), true) ||
            !full_io(fd, msg, sizeof(msg), false))
            goto broken;
    for (size_t b = 0; b < opt->blocks; b++) {
        double t0 = bench_now_us();

        for (size_t i = 0; i < opt->tcp_iters; i++)
            if (!full_io(fd, msg, sizeof(msg), true) ||
                !full_io(fd, msg, sizeof(msg), false))
                goto broken;
        blocks[b] = (bench_now_us() - t0) / (double)opt->tcp_iters;
    }
    close(fd);
    waitpid(pid, &status, 0);
    *rtt_us = stats_median(blocks, opt->blocks);
    return 0;
broken:
    fprintf(stderr, NAME ": the TCP echo broke\n");
    close(fd);
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* ---- 2 and 3. remote tasks ---------------------------------------------- */

struct dispatch {
    strata_callable noop;
    strata_args *empty;
    size_t k;
};

static strata_err dispatch_orch(strata_orch *o, const strata_args *unused,
                                void *user)
{
    const struct dispatch *d = user;
    strata_err err = STRATA_OK;

    (void)unused;
    for (size_t i = 0; i < d->k && err == STRATA_OK; i++)
        err = strata_orch_submit_next_level(o, d->noop, d->empty, 0);
    return err;
}

static void report(const char *what, strata_err err)
{
    fprintf(stderr, NAME ": %s: %s (%s): %s\n", what, strata_errname(err),
            strata_strerror(err), strata_errmsg());
}

static strata_err start_l4(const struct bench_daemon *d, bool insecure,
                           strata_worker **out)
{
    static const int chip_ids[1] = {0};
    strata_worker_config c4;
    strata_remote_spec spec;
    strata_worker *w = NULL;
    strata_err err;
    int id;

    strata_worker_config_init(&c4, 4);
    err = strata_worker_create(&c4, &w);
    if (err)
        return err;
    memset(&spec, 0, sizeof(spec));
    spec.endpoint = d->endpoint;
    spec.secret_file = insecure ? NULL : d->secret;
    spec.insecure = insecure;
    spec.chip_ids = chip_ids;
    spec.num_chips = 1;
    err = strata_worker_add_remote_worker(w, &spec, &id);
    if (!err)
        err = strata_worker_init(w);
    if (err) {
        char msg[STRATA_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        if (strata_worker_destroy(w) != STRATA_OK)
            report("destroy", STRATA_EPEER);
        strata_errmsg_set("%s", msg);
        return err;
    }
    *out = w;
    return STRATA_OK;
}

/* Median over blocks of the mean time of one run with d->k tasks. Each
 * block has at most max_runs runs and lasts about block_us (estimated from
 * the warm-up), so a slow path cannot make the bench run for minutes. */
static strata_err time_runs(strata_worker *w, struct dispatch *d,
                            size_t max_runs, size_t blocks, double block_us,
                            double *run_us)
{
    double b[MAX_BLOCKS], t0, est;
    size_t runs;
    strata_err err;

    t0 = bench_now_us();
    for (size_t i = 0; i < 10; i++) { /* warm-up */
        err = strata_worker_run(w, dispatch_orch, NULL, d);
        if (err)
            return err;
    }
    est = (bench_now_us() - t0) / 10;
    runs = (size_t)(block_us / (est > 1 ? est : 1));
    runs = runs > max_runs ? max_runs : runs < 5 ? 5 : runs;
    for (size_t k = 0; k < blocks; k++) {
        t0 = bench_now_us();
        for (size_t i = 0; i < runs; i++) {
            err = strata_worker_run(w, dispatch_orch, NULL, d);
            if (err)
                return err;
        }
        b[k] = (bench_now_us() - t0) / (double)runs;
    }
    *run_us = stats_median(b, blocks);
    return STRATA_OK;
}

/* One connection: its one-task round trip into *rtt_us, and the
 * throughput into res when tput. */
static int bench_remote(const struct options *opt, bool insecure, bool tput,
                        struct dispatch *d, double *rtt_us, struct results *res)
{
    const char *bin = getenv("STRATA_NODE");
    struct bench_daemon_opts o = {.name = NAME,
                                  .node_bin = bin ? bin : BENCH_NODE_PATH,
                                  .module = BENCH_MODULE_PATH,
                                  .insecure = insecure};
    struct bench_daemon dm;
    strata_worker *w = NULL;
    strata_err err;
    int rc = 1;

    if (bench_daemon_start(&dm, &o) != 0)
        return 1;
    err = start_l4(&dm, insecure, &w);
    bench_daemon_forget_files(&dm); /* both sides have read the key */
    if (err) {
        report("start the L4 worker", err);
        goto out;
    }
    d->k = 1;
    err = time_runs(w, d, opt->rtt_runs, opt->blocks, opt->block_us, rtt_us);
    for (size_t i = 0; tput && !err && i < NUM_K; i++) {
        d->k = ks[i];
        err = time_runs(w, d, opt->tput_tasks / ks[i] + 1, opt->blocks,
                        opt->block_us, &res->run_us[i]);
        res->tput[i] = (double)ks[i] / res->run_us[i] * 1e6;
    }
    if (err)
        report("remote runs", err);
    else
        rc = 0;
out:
    if (w) {
        err = strata_worker_destroy(w);
        if (err) {
            report("destroy", err);
            rc = 1;
        }
    }
    bench_daemon_stop(&dm);
    return rc;
}

/* ---- output ------------------------------------------------------------- */

static double target_ratio(const struct options *opt)
{
    return opt->busy > 0 ? TARGET_BUSY : TARGET_IDLE;
}

static void print_summary(const struct options *opt, const struct results *r)
{
    printf(NAME " (%s, %d busy processes beside it)\n",
           opt->quick ? "quick" : "full", opt->busy);
    printf("machine floor, two processes, 127.0.0.1:\n");
    printf("  raw TCP ping-pong round trip (%d B)   %8.2f us  (median of %zu "
           "rounds)\n",
           MSG_BYTES, r->tcp_rtt_us, opt->rounds);
    printf("remote L3 node (strata-node on 127.0.0.1), one no-op orch task "
           "per run:\n");
    printf("  TLS 1.3 PSK                         %8.2f us  (%.2fx the TCP "
           "round trip; target <= %.1fx)\n",
           r->tls_rtt_us, r->ratio, target_ratio(opt));
    printf("  rounds (TCP / TLS, us):");
    for (size_t i = 0; i < opt->rounds; i++)
        printf("  %.0f/%.0f", r->tcp_round[i], r->tls_round[i]);
    printf("\n");
    printf("  --insecure (no TLS)                 %8.2f us  (%.2fx)\n",
           r->plain_rtt_us, r->plain_rtt_us / r->tcp_rtt_us);
    printf("throughput, k no-op tasks in flight to one node (TLS; the ring "
           "holds 8, more queue):\n");
    printf("  %5s  %12s  %12s  %10s\n", "k", "run (us)", "per task (us)",
           "tasks/s");
    for (size_t i = 0; i < NUM_K; i++)
        printf("  %5zu  %12.1f  %12.2f  %10.0f\n", ks[i], r->run_us[i],
               r->run_us[i] / (double)ks[i], r->tput[i]);
}

static void print_json(const struct options *opt, const struct results *r,
                       const char *error)
{
    double ratio = r->ratio, target = target_ratio(opt);

    printf("{\"bench\":\"remote_dispatch\",\"metric\":\"remote_rtt_us%s\","
           "\"unit\":\"us\",\"strata\":%.3f,\"reference_name\":"
           "\"tcp_pingpong_rtt_us\",\"reference\":%.3f,\"ratio\":%.4f,"
           "\"target\":%.3f,\"target_ratio\":%.1f,\"pass\":%s,"
           "\"busy\":%d,",
           opt->busy > 0 ? "_busy" : "", r->tls_rtt_us, r->tcp_rtt_us, ratio,
           target * r->tcp_rtt_us, target,
           error == NULL && ratio > 0 && ratio <= target ? "true" : "false",
           opt->busy);
    printf("\"insecure_rtt_us\":%.3f,\"tasks_per_s\":{\"1\":%.0f,\"8\":%.0f,"
           "\"64\":%.0f},\"run_us\":{\"1\":%.2f,\"8\":%.2f,\"64\":%.2f},",
           r->plain_rtt_us, r->tput[0], r->tput[1], r->tput[2], r->run_us[0],
           r->run_us[1], r->run_us[2]);
    printf("\"rounds\":[");
    for (size_t i = 0; i < opt->rounds; i++)
        printf("%s{\"tcp_us\":%.3f,\"tls_us\":%.3f}", i ? "," : "",
               r->tcp_round[i], r->tls_round[i]);
    printf("],\"message_bytes\":%d,\"quick\":%s", MSG_BYTES,
           opt->quick ? "true" : "false");
    if (error)
        printf(",\"error\":\"%s\"", error);
    printf("}\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    struct options opt = {0};
    struct results res = {0};
    struct dispatch d = {0};
    strata_err err;

    for (int i = 1; i < argc; i++) {
        char *end = NULL;

        if (strcmp(argv[i], "--quick") == 0) {
            opt.quick = true;
        } else if (strcmp(argv[i], "--busy") == 0 && i + 1 < argc &&
                   (opt.busy = (int)strtol(argv[i + 1], &end, 10),
                    *end == '\0') &&
                   opt.busy >= 0 && opt.busy <= MAX_BUSY) {
            i++;
        } else {
            fprintf(stderr, "usage: " NAME " [--quick] [--busy N (0..%d)]\n",
                    MAX_BUSY);
            return 2;
        }
    }
    if (busy_start(opt.busy) != 0) {
        print_json(&opt, &res, "cannot fork the busy processes");
        return 1;
    }
    opt.tcp_iters = opt.quick ? 2000 : 10000;
    opt.rtt_runs = opt.quick ? 300 : 2000;
    opt.blocks = opt.quick ? 3 : 7;
    opt.tput_tasks = opt.quick ? 1024 : 8192;
    opt.block_us = opt.quick ? 100e3 : 400e3;
    opt.rounds = opt.quick ? 3 : MAX_ROUNDS;
    signal(SIGPIPE, SIG_IGN);
    err = strata_callable_by_name(STRATA_CALLABLE_ORCH, "bench.remote_noop",
                                  &d.noop);
    if (!err)
        err = strata_args_create(&d.empty);
    if (err) {
        report("setup", err);
        print_json(&opt, &res, "setup failed");
        return 1;
    }
    /* Each round: the floor (forked while this process has no threads:
     * a destroyed worker leaves none), then a fresh connection. */
    for (size_t i = 0; i < opt.rounds; i++) {
        bool last = i + 1 == opt.rounds;

        if (tcp_pingpong(&opt, &res.tcp_round[i]) != 0) {
            strata_args_destroy(d.empty);
            print_json(&opt, &res, "tcp ping-pong failed");
            return 1;
        }
        if (bench_remote(&opt, false, last, &d, &res.tls_round[i], &res) != 0) {
            strata_args_destroy(d.empty);
            print_json(&opt, &res, "remote measurement failed");
            return 1;
        }
    }
    if (bench_remote(&opt, true, false, &d, &res.plain_rtt_us, &res) != 0) {
        strata_args_destroy(d.empty);
        print_json(&opt, &res, "remote measurement failed");
        return 1;
    }
    strata_args_destroy(d.empty);
    {
        double ratios[MAX_ROUNDS], tcp[MAX_ROUNDS], tls[MAX_ROUNDS];

        for (size_t i = 0; i < opt.rounds; i++) {
            ratios[i] = res.tls_round[i] / res.tcp_round[i];
            tcp[i] = res.tcp_round[i];
            tls[i] = res.tls_round[i];
        }
        res.ratio = stats_median(ratios, opt.rounds);
        res.tcp_rtt_us = stats_median(tcp, opt.rounds);
        res.tls_rtt_us = stats_median(tls, opt.rounds);
    }
    print_summary(&opt, &res);
    print_json(&opt, &res, NULL);
    return 0;
}
