/*
 * The chaos test's configuration (its environment), its kill plans and
 * its known bugs (see chaos.h).
 */
#include "chaos.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chaos_module.h"
#include "testutil.h"

/* Kill plans skipped because of a known bug, "kind@phase" (phase "*":
 * all): kills that hang or leave things behind. Each names the bug;
 * CHAOS_KNOWN_BUGS=1 plans them anyway. */
static const char *const known_bugs[] = {
    NULL,
};

/* Wrong results of a kill that are known bugs: the error a step returns
 * after a kill of a kind, accepted (reported as KNOWN BUG) unless
 * CHAOS_KNOWN_BUGS=1. */
static const struct known_result {
    enum chaos_kind kind;
    const char *step; /* "init", "run 1", ...; "names": /dev/shm leaked;
                         "processes": processes left */
    strata_err err;
    const char *bug;
} known_results[] = {
    {0, NULL, STRATA_OK, NULL}, /* the end */
};

/* Relative weights of the kinds and phases a plan draws, and the span
 * (ms) its delay is drawn from in each phase: about how long the phase
 * lasts on a 2-core machine. */
static const unsigned kind_weight[CHAOS_KINDS] = {5, 30, 20, 20, 20, 5};
static const unsigned phase_weight[CHAOS_PHASES] = {0, 20, 20, 25, 20, 15, 0};
static const double phase_span_ms[CHAOS_PHASES] = {0, 300, 15, 80, 20, 150, 0};

struct chaos_config chaos_cfg;
unsigned chaos_known_hits;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
    return (double)(splitmix(s) >> 11) / (double)(1ull << 53);
}

static unsigned pick(uint64_t *s, const unsigned *w, size_t n, unsigned mask)
{
    unsigned total = 0, x;

    for (size_t i = 0; i < n; i++)
        total += (mask >> i & 1) ? w[i] : 0;
    if (total == 0)
        return 0;
    x = (unsigned)(splitmix(s) % total);
    for (size_t i = 0; i < n; i++) {
        unsigned wi = (mask >> i & 1) ? w[i] : 0;

        if (x < wi)
            return (unsigned)i;
        x -= wi;
    }
    return 0;
}

static unsigned parse_mask(const char *env, const char *const *names, size_t n,
                           unsigned all)
{
    const char *v = getenv(env);
    unsigned m = 0;

    if (!v || !v[0])
        return all;
    for (size_t i = 0; i < n; i++) {
        const char *p = strstr(v, names[i]);
        size_t len = strlen(names[i]);

        while (p &&
               !((p == v || p[-1] == ',') && (p[len] == ',' || p[len] == '\0')))
            p = strstr(p + 1, names[i]);
        if (p)
            m |= 1u << i;
    }
    return m ? m : all;
}

void chaos_config_read(void)
{
    const char *v;
    double w;

    memset(&chaos_cfg, 0, sizeof(chaos_cfg));
    v = getenv("CHAOS_SEED");
    chaos_cfg.seed = v && v[0] ? strtoull(v, NULL, 0)
                               : (uint64_t)(testutil_now() * 1e6) ^
                                     ((uint64_t)getpid() << 32);
    v = getenv("CHAOS_SECONDS");
    chaos_cfg.seconds = v && v[0] ? atof(v) : 45.0;
    v = getenv("CHAOS_ITERATIONS");
    chaos_cfg.iterations = v && v[0] ? atol(v) : 1000;
    v = getenv("CHAOS_ONLY");
    chaos_cfg.only = v && v[0] ? atol(v) : -1;
    v = getenv("CHAOS_KERNEL_WAIT_S");
    w = v && v[0] ? atof(v) : -1.0;
    chaos_cfg.wait_ms = w < 0 ? CHAOS_WAIT_FOREVER : (uint64_t)(w * 1e3);
    chaos_cfg.kinds = parse_mask("CHAOS_KINDS", chaos_kind_name, CHAOS_KINDS,
                                 (1u << CHAOS_KINDS) - 1);
    chaos_cfg.phases = parse_mask(
        "CHAOS_PHASES", chaos_phase_name, CHAOS_PHASES,
        ((1u << CHAOS_PHASES) - 1) & ~(1u << CHAOS_IDLE) & ~(1u << CHAOS_DONE));
    v = getenv("CHAOS_KNOWN_BUGS");
    chaos_cfg.known_bugs = v && v[0] == '1';
    v = getenv("CHAOS_HANG_S");
    chaos_cfg.hang_s = v && v[0] ? atof(v) : 90.0;
}

static bool known_bug(const struct chaos_plan *p)
{
    char both[48], any[48];

    if (chaos_cfg.known_bugs)
        return false;
    snprintf(both, sizeof(both), "%s@%s", chaos_kind_name[p->kind],
             chaos_phase_name[p->phase]);
    snprintf(any, sizeof(any), "%s@*", chaos_kind_name[p->kind]);
    for (size_t i = 0; known_bugs[i]; i++)
        if (strcmp(known_bugs[i], both) == 0 || strcmp(known_bugs[i], any) == 0)
            return true;
    return false;
}

/* Iteration i's plan: a function of the seed and i only. */
void chaos_plan_for(long i, struct chaos_plan *p)
{
    uint64_t s = chaos_cfg.seed ^ ((uint64_t)i * 0xd1b54a32d192ed03ull);

    for (int tries = 0; tries < 100; tries++) {
        memset(p, 0, sizeof(*p));
        p->kind = (enum chaos_kind)pick(&s, kind_weight, CHAOS_KINDS,
                                        chaos_cfg.kinds);
        p->phase = (enum chaos_phase)pick(&s, phase_weight, CHAOS_PHASES,
                                          chaos_cfg.phases);
        p->side = (int)(splitmix(&s) & 1);
        p->chip = (int)(splitmix(&s) & 1);
        p->delay_s = uniform(&s) * phase_span_ms[p->phase] / 1e3;
        p->kernel_us = (uint64_t)(uniform(&s) * 20000);
        p->sub_us = (uint64_t)(uniform(&s) * 30000);
        p->seed = (uint32_t)splitmix(&s);
        if (!known_bug(p))
            return;
    }
    p->kind = CHAOS_KILL_NONE;
}

void chaos_plan_describe(const struct chaos_plan *p, char *buf, size_t cap)
{
    if (p->kind == CHAOS_KILL_NONE)
        snprintf(buf, cap, "no kill");
    else
        snprintf(buf, cap, "kill %s%s%s in %s +%.1f ms",
                 chaos_kind_name[p->kind],
                 p->kind == CHAOS_KILL_CHIP ? (p->chip ? " 1" : " 0") : "",
                 p->kind == CHAOS_KILL_CHIP || p->kind == CHAOS_KILL_SUB
                     ? (p->side ? " (remote)" : " (forked)")
                     : "",
                 chaos_phase_name[p->phase], p->delay_s * 1e3);
}

/* True (and reported) when e after a kill of kind is a known bug. */
bool chaos_known_result(enum chaos_kind kind, const char *step, int e)
{
    if (chaos_cfg.known_bugs)
        return false;
    for (size_t i = 0; known_results[i].step; i++) {
        const struct known_result *r = &known_results[i];

        if (r->kind == kind && strcmp(r->step, step) == 0 && (int)r->err == e) {
            printf("chaos:     KNOWN BUG (tolerated; CHAOS_KNOWN_BUGS=1 "
                   "fails it): %s: %s: %s\n",
                   step, strata_errname(r->err), r->bug);
            chaos_known_hits++;
            return true;
        }
    }
    return false;
}
