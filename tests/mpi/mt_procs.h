/* What an MPI group test looks for outside strata: the processes of an
 * L4's launch (its mpirun, ranks and their chips, whose command lines
 * name the launch's key folder), the ranks by MPI rank, their /dev/shm
 * names and the key folder. */
#ifndef STRATA_MT_PROCS_H
#define STRATA_MT_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define MT_MAX_RANKS 4

/* Processes of l4's launch that still run (zombies not counted). */
size_t mt_launch_procs(pid_t l4);
/* The pids of L4 l4's ranks now, by rank (0: none); how many. */
size_t mt_rank_pids_of(pid_t l4, pid_t pids[MT_MAX_RANKS]);
/* The same for this process's launches. */
size_t mt_rank_pids(pid_t pids[MT_MAX_RANKS]);
/* A strata name in /dev/shm holds "-<pid>-". */
bool mt_shm_of(pid_t pid);
/* A key folder (strata-mpi-<l4>-*) of L4 l4 is in $TMPDIR or /tmp. */
bool mt_key_dir_of(pid_t l4);
/* An Open MPI session folder (strata-ompi-<l4>-*) of L4 l4 is there. */
bool mt_ompi_dir_of(pid_t l4);
/* L4 l4's session folders that an mpirun uses now (an ompi.* inside). */
size_t mt_ompi_dirs_in_use(pid_t l4);
/* The same for this process. */
bool mt_key_dir_left(void);
/* pid exists and is no zombie (an orphan whose mpirun ended first waits
 * for init to reap it, which some containers' init never does). */
bool mt_running(pid_t pid);
/* pid's state letter in /proc/<pid>/stat (R, S, T ...), 0 if none. */
char mt_state(pid_t pid);

/* In a child forked by the test (parent: the test's pid, read before
 * the fork): it is SIGKILLed when the test ends, even by a failed assert
 * that never reaches its kill. */
void mt_die_with_parent(pid_t parent);

/* Forks an L4 that runs child(fd) (dying with the test): child writes '1'
 * on fd once its group is up ('0' if not) and never returns. Returns the
 * L4's pid once it said '1', with its 2 ranks' pids in pids. Asserts. */
pid_t mt_fork_l4(void (*child)(int fd), pid_t pids[MT_MAX_RANKS]);
/* SIGKILLs and reaps L4 l4, then asserts its whole launch is gone within
 * 40 s (the heartbeat bound and mpirun's abort, with room to spare), no
 * /dev/shm name of its 2 ranks (pids) is left, nor its key folder, and
 * its Open MPI session folder goes at the next launch (run here). Rank
 * `stopped` (-1: none), which the test SIGSTOPped, is exempt from the
 * names check: mpirun may SIGKILL it before it runs again, and then
 * nothing can remove its names but this (they are reclaimed here). */
void mt_kill_l4_expect_gone(pid_t l4, const pid_t pids[MT_MAX_RANKS],
                            int stopped);

#endif
