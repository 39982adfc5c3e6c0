/*
 * Two-process ping-pong over a shared page. The parent writes round number
 * i into `ping`; the child, seeing it, writes i into `pong`; the parent,
 * seeing that, starts round i + 1. In futex mode each side sleeps in
 * FUTEX_WAIT until the other's FUTEX_WAKE, which is what a runtime pays when
 * it parks instead of spinning. The futex calls are not FUTEX_PRIVATE: the
 * page is shared between two address spaces.
 */
#include "pingpong.h"
#include "bench_common.h"

#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

#define WARMUP_ROUNDS 1000u

/* The two words live on separate cache lines so each side's store does not
 * invalidate the line the other is polling. */
struct page {
    _Alignas(64) uint32_t ping;
    _Alignas(64) uint32_t pong;
};

static void futex_wait(uint32_t *word, uint32_t seen)
{
    /* EAGAIN (the word already changed) and EINTR both mean: look again. */
    syscall(SYS_futex, word, FUTEX_WAIT, seen, NULL, NULL, 0);
}

static void futex_wake(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Waits until *word == want. */
static void await(uint32_t *word, uint32_t want, enum pingpong_mode mode)
{
    uint32_t seen;

    while ((seen = __atomic_load_n(word, __ATOMIC_ACQUIRE)) != want) {
        if (mode == PINGPONG_FUTEX)
            futex_wait(word, seen);
        else
            cpu_relax();
    }
}

static void post(uint32_t *word, uint32_t value, enum pingpong_mode mode)
{
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
    if (mode == PINGPONG_FUTEX)
        futex_wake(word);
}

static void child_loop(struct page *p, uint32_t rounds, enum pingpong_mode mode,
                       pid_t parent)
{
    /* Die with the parent instead of waiting for it forever. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    for (uint32_t i = 1; i <= rounds; i++) {
        await(&p->ping, i, mode);
        post(&p->pong, i, mode);
    }
    _exit(0);
}

/* The parent's side: rounds 1..WARMUP_ROUNDS untimed, then `blocks` timed
 * blocks of `iters` rounds each. */
static void parent_loop(struct page *p, size_t iters, size_t blocks,
                        enum pingpong_mode mode, double *block_us)
{
    uint32_t i = 1;

    for (; i <= WARMUP_ROUNDS; i++) {
        post(&p->ping, i, mode);
        await(&p->pong, i, mode);
    }
    for (size_t b = 0; b < blocks; b++) {
        double t0 = bench_now_us();
        for (size_t r = 0; r < iters; r++, i++) {
            post(&p->ping, i, mode);
            await(&p->pong, i, mode);
        }
        block_us[b] = (bench_now_us() - t0) / (double)iters;
    }
}

int pingpong_measure(enum pingpong_mode mode, size_t iters, size_t blocks,
                     double *rtt_us_out)
{
    size_t rounds = WARMUP_ROUNDS + iters * blocks;
    double *block_us;
    struct page *p;
    int status, rc = -1;
    pid_t parent = getpid(), child;

    if (iters == 0 || blocks == 0 || rounds > UINT32_MAX)
        return -1;
    block_us = calloc(blocks, sizeof(*block_us));
    p = mmap(NULL, sizeof(*p), PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (block_us == NULL || p == MAP_FAILED) {
        fprintf(stderr, "pingpong: out of memory\n");
        goto out;
    }
    fflush(NULL); /* the child must not flush the parent's buffered output */
    child = fork();
    if (child < 0) {
        fprintf(stderr, "pingpong: fork: %s\n", strerror(errno));
        goto out;
    }
    if (child == 0)
        child_loop(p, (uint32_t)rounds, mode, parent);

    parent_loop(p, iters, blocks, mode, block_us);
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "pingpong: partner process failed\n");
        goto out;
    }
    *rtt_us_out = stats_median(block_us, blocks);
    rc = 0;
out:
    if (p != MAP_FAILED && p != NULL)
        munmap(p, sizeof(*p));
    free(block_us);
    return rc;
}
