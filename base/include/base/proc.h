/* This process's pid without a system call per look: cached, and
 * forgotten in the child of every fork() (pthread_atfork), so a forked
 * process sees its own. */
#ifndef BASE_PROC_H
#define BASE_PROC_H

#include <stdbool.h>
#include <sys/types.h>

pid_t base_pid(void);

/* The start time of process pid (clock ticks after boot, field 22 of
 * /proc/<pid>/stat): with the pid it names one process for good, since a
 * reused pid starts later. Returns false when pid is not a live process
 * (none, or a zombie that can do nothing more). */
bool base_proc_start_time(pid_t pid, unsigned long long *out);

/* True when pid is a zombie: it has ended (and holds nothing but its
 * exit status) but its parent has not reaped it, which an orphan's may
 * never do in a container whose init does not reap. */
bool base_proc_zombie(pid_t pid);

/* True when pid can never act again: no such process (kill(pid, 0) says
 * ESRCH), or a zombie. What may be reclaimed of a process named pid. */
bool base_proc_gone(pid_t pid);

#endif
