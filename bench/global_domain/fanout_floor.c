/* The machine's floor under the scaling target (fanout_floor.h). */
#define _GNU_SOURCE
#include "fanout_floor.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "stats.h"

#define LINE 64
#define PAUSES 16
#define PHASES 4
#define MAX_BLOCKS 64

/* One cache line per word: the children's command words, the answer
 * count, and who sleeps. */
struct word {
    uint32_t v;
    uint32_t asleep;
    char pad[LINE - 2 * sizeof(uint32_t)];
};

struct shared {
    struct word answers;
    struct word cmd[FANOUT_FLOOR_MAX];
};

static uint64_t now_ns(void)
{
    return (uint64_t)(bench_now_s() * 1e9);
}

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static void futex_wait(uint32_t *w, uint32_t v)
{
    syscall(SYS_futex, w, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void futex_wake(uint32_t *w)
{
    syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Until *w != old (want_change) or *w >= target: a few pauses, a yield
 * per look for spin_ns, then a futex sleep, as strata's waits do. */
static uint32_t wait_word(struct word *w, uint32_t target, bool want_change,
                          uint64_t spin_ns)
{
    uint64_t until = 0;

    for (unsigned k = 0;; k++) {
        uint32_t v = __atomic_load_n(&w->v, __ATOMIC_ACQUIRE);

        if (want_change ? v != target : v >= target)
            return v;
        if (k < PAUSES) {
            relax();
            continue;
        }
        /* As base_spin_until: a budget of no more than the pauses never
         * yields. */
        if (!until)
            until = spin_ns > PAUSES * 50 ? now_ns() + spin_ns : 1;
        if (now_ns() < until) {
            sched_yield();
            continue;
        }
        __atomic_store_n(&w->asleep, 1, __ATOMIC_SEQ_CST);
        v = __atomic_load_n(&w->v, __ATOMIC_SEQ_CST);
        if (!(want_change ? v != target : v >= target))
            futex_wait(&w->v, v);
        __atomic_store_n(&w->asleep, 0, __ATOMIC_SEQ_CST);
    }
}

static void post(struct word *w, uint32_t add)
{
    __atomic_add_fetch(&w->v, add, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&w->asleep, __ATOMIC_SEQ_CST))
        futex_wake(&w->v);
}

static void child(struct shared *s, int i, uint64_t spin_ns, pid_t parent)
{
    uint32_t seen = 0;

    /* Never outlive the bench, asleep in a futex. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(1);
    for (;;) {
        seen = wait_word(&s->cmd[i], seen, true, spin_ns);
        if (seen == UINT32_MAX)
            _exit(0);
        post(&s->answers, 1);
    }
}

/* One phase: a command to every child, then every answer. */
static void phase(struct shared *s, int n, uint32_t *seq, uint64_t spin_ns)
{
    ++*seq;
    for (int i = 0; i < n; i++)
        post(&s->cmd[i], 1);
    wait_word(&s->answers, *seq * (uint32_t)n, false, spin_ns);
}

double fanout_floor_us(int n, int cycles, uint64_t spin_ns)
{
    struct shared *s;
    pid_t pids[FANOUT_FLOOR_MAX];
    double blocks[MAX_BLOCKS];
    int nb = 0, started = 0;
    uint32_t seq = 0;
    int per = cycles / 8 > 0 ? cycles / 8 : 1;
    pid_t parent = getpid();

    if (n < 1 || n > FANOUT_FLOOR_MAX)
        return -1;
    s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return -1;
    memset(s, 0, sizeof(*s));
    for (; started < n; started++) {
        pids[started] = fork();
        if (pids[started] < 0)
            break;
        if (pids[started] == 0)
            child(s, started, spin_ns, parent);
    }
    if (started == n) {
        for (int c = 0; c < 20; c++) /* warm-up */
            for (int p = 0; p < PHASES; p++)
                phase(s, n, &seq, spin_ns);
        for (int done = 0; done < cycles && nb < MAX_BLOCKS; done += per) {
            uint64_t t0 = now_ns();

            for (int c = 0; c < per; c++)
                for (int p = 0; p < PHASES; p++)
                    phase(s, n, &seq, spin_ns);
            blocks[nb++] = (double)(now_ns() - t0) / 1e3 / per;
        }
    }
    for (int i = 0; i < started; i++) {
        __atomic_store_n(&s->cmd[i].v, UINT32_MAX, __ATOMIC_SEQ_CST);
        futex_wake(&s->cmd[i].v);
    }
    for (int i = 0; i < started; i++)
        while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
            ;
    munmap(s, sizeof(*s));
    return started == n && nb > 0 ? stats_median(blocks, (size_t)nb) : -1;
}
