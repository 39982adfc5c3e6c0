/*
 * Allocation countdown (INTERNAL tests: needs base/fault.h): run a pass of
 * API calls with the n-th allocation failing, for n = 1, 2, ... until a
 * pass completes without an injected failure. Each pass must fail only
 * with STRATA_ENOMEM, only where a failure was injected, and leak nothing.
 */
#ifndef STRATA_IT_COUNTDOWN_H
#define STRATA_IT_COUNTDOWN_H

#include <strata/strata.h>

/* A pass: 0 when every step ran, else the 1-based step that failed with
 * STRATA_ENOMEM (it_countdown_verdict computes this). */
typedef int (*it_countdown_pass)(long n);

/* Drives pass until it runs clean; prints how many passes it took. */
void it_alloc_countdown(it_countdown_pass pass);

/* The verdict of one pass from its steps' results e[0..nsteps) (unrun
 * steps are STRATA_OK); the last step is the teardown, whose ENOMEM still
 * counts as a failed step. Any error but STRATA_ENOMEM fails the test,
 * naming steps[i] and msg. */
int it_countdown_verdict(long n, const strata_err *e, const char *const *steps,
                         int nsteps, const char *msg);

#endif
