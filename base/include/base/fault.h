/* Fault injection for tests. Compiled in only with STRATA_TESTING; in other
 * builds the points are constant false and the arming calls do nothing. */
#ifndef BASE_FAULT_H
#define BASE_FAULT_H

#include <stdbool.h>

enum base_fault_action {
    BASE_FAULT_FAIL = 0, /* the point reports failure */
    BASE_FAULT_KILL = 1, /* the process SIGKILLs itself at the point */
    BASE_FAULT_STOP = 2, /* the process SIGSTOPs itself: a test resumes it */
    BASE_FAULT_HOLD = 3, /* the thread waits at the point until released,
                            then the point passes */
};

/* The n-th strata allocation from now fails (1 = the next); 0 disarms. */
void base_alloc_fail_after(long n);
/* Injected allocation failures since the last base_alloc_fail_after. */
long base_alloc_failures(void);
/* The nth hit (1-based) of point fails or kills; other hits pass. */
void base_fault_arm(const char *point, long nth, int action);
/* Disarms every point and releases every held thread. */
void base_fault_disarm_all(void);
/* Threads waiting now at a BASE_FAULT_HOLD point named point. */
int base_fault_held(const char *point);
/* Lets every thread held at point go on (its point passes). */
void base_fault_release(const char *point);
/* Called after fork in a child: disarms the allocation countdown so a
 * child does not fail where its parent was meant to. */
void base_fault_after_fork(void);

#ifdef STRATA_TESTING
/* True when point is armed and this is the chosen hit. Also armed from the
 * environment: STRATA_FAULT="point:nth[:kill|:stop]". */
bool base_fault_hit(const char *point);
#define BASE_FAULT(point) base_fault_hit(point)
#else
#define BASE_FAULT(point) false
#endif

#endif
