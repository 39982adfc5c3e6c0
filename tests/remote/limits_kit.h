/*
 * For the tests of strata-node's limits: a daemon started with options of
 * the test's choosing (remote_kit starts it with its defaults only), its
 * log read back, and a /dev/shm count by creator pid.
 */
#ifndef STRATA_LIMITS_KIT_H
#define STRATA_LIMITS_KIT_H

#include "remote_kit.h"

/* rk_node_start with extra arguments (NULL-ended, at most 16) after the
 * usual ones; the log at STRATA_LOG=info. Stop it with rk_node_stop. 0 or
 * -1 with the reason printed. */
int lk_node_start(struct rk_node *n, enum rk_auth auth,
                  const char *const *extra);

/* Lines of n's log that contain needle; the first of them printed when
 * show is true. */
size_t lk_log_count(const struct rk_node *n, const char *needle, bool show);

/* /dev/shm entries strata-<uid>-<pid>-... now. */
size_t lk_shm_of(pid_t pid);

#endif
