/* This process's pid without a system call per look: cached, and
 * forgotten in the child of every fork() (pthread_atfork), so a forked
 * process sees its own. */
#ifndef BASE_PROC_H
#define BASE_PROC_H

#include <sys/types.h>

pid_t base_pid(void);

#endif
