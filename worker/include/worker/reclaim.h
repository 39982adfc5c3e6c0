/* Removing the /dev/shm names of processes that died without doing it
 * themselves: a session killed under strata-node, a node, chip or sub
 * worker killed under its parent; and the folders a killed L4's MPI
 * launches left in /tmp. */
#ifndef WORKER_RECLAIM_H
#define WORKER_RECLAIM_H

#include <stddef.h>
#include <sys/types.h>

/* Unlinks every strata name in /dev/shm that one of pids[0..n) created:
 * buffers and domain windows, strata-<uid>-<pid>-..., and the windows of
 * the global domains a dead node's journal lists (gjournal_reclaim in
 * domain/global.h: those carry their L4's pid). The pids must be dead and
 * reaped, so that none can be some new process's. Returns how many names were
 * removed (a journal's domains count one each). Any thread. */
size_t worker_reclaim_names(const pid_t *pids, size_t n);

/* Removes every strata-ompi-<pid>-* folder (Open MPI's session folder of
 * an MPI group launch, worker/mpitmp.c) and strata-mpi-<pid>-* folder (a
 * launch's key folder) of a dead <pid> of this user in dir (NULL:
 * $TMPDIR, else /tmp), or with dir "/dev/shm" every
 * strata-<uid>-<pid>-ompi-* folder (its segment folder): what a killed L4
 * left. Every launch does this before it makes its own. */
void worker_mpi_reclaim_stale_dirs(const char *dir);

#endif
