/* Callables of the handler fuzz targets (fuzz_module.c), registered in
 * the fuzzer process before any worker forks, so the chips the session
 * starts have them too:
 *   orch fuzz.noop    does nothing.
 *   orch fuzz.fail    fails with STRATA_EINVAL.
 *   orch fuzz.touch   reads every tensor here (in the session process),
 *                     then passes them all to kernel fuzz.touch on chip
 *                     scalar 0 (chip 0 without scalars), scalar 1 times
 *                     (1 without; at most 4).
 *   orch fuzz.late    sleeps scalar 0 ms (at most 100; 50 without), then
 *                     writes every tensor that is not STRATA_IN here: a
 *                     run past its TASK's deadline that still uses its
 *                     buffers.
 *   kernel fuzz.touch reads every tensor and writes a pattern into every
 *                     tensor that is not STRATA_IN.
 * Every access stays inside the tensor's nbytes: a fault in one of them is
 * a buffer the node unmapped or sized wrongly, not a bug of this file. */
#ifndef FUZZ_MODULE_H
#define FUZZ_MODULE_H

#include <strata/strata.h>

#define FUZZ_O_NOOP "fuzz.noop"
#define FUZZ_O_FAIL "fuzz.fail"
#define FUZZ_O_TOUCH "fuzz.touch"
#define FUZZ_O_LATE "fuzz.late"
#define FUZZ_K_TOUCH "fuzz.touch"

struct fuzz_callables {
    strata_callable noop, fail, touch, late;
};

/* Registers the callables (main thread, before any worker starts); 0 or
 * -1 with the reason on stderr. */
int fuzz_module_register(struct fuzz_callables *out);

#endif
