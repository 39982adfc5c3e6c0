/* Open MPI groups of an L4 (private to worker/): the spec copied at add
 * (mpigroup.c), the launch of mpirun with its one-time key and listener and
 * its end (mpilaunch.c), and the dial-back of the ranks (mpiaccept.c).
 * Every rank is a remote_node whose connection is accepted rather than
 * dialed; after the handshake remote.c serves it like any remote node. */
#ifndef WORKER_MPIGROUP_H
#define WORKER_MPIGROUP_H

#include "mpiident.h"
#include "remote.h"

#include <limits.h>
#include <sys/types.h>

struct mpi_pending; /* a connection that has not said who it is yet */

struct mpi_group {
    strata_worker *w;
    size_t first; /* node ids first .. first + n - 1, rank order */
    size_t n;
    /* the spec, copied */
    char *mpirun_path;
    char **mpirun_args;
    size_t num_mpirun_args;
    char *hostfile;
    char *hosts; /* "h1:slots,h2:slots" for --host, or NULL */
    char *rank_program;
    char **modules;
    size_t num_modules;
    char *callback_host;
    int callback_port;
    char *key_dir;
    /* the launch (the connection thread's once the loop runs) */
    char dir_path[PATH_MAX - 16]; /* mode 700, holds the key; "" when gone */
    char key_path[PATH_MAX];
    /* Open MPI's session folder (orte_tmpdir_base), this launch's own;
     * "" when gone or the user's own is set (mpitmp.c) */
    char ompi_dir[PATH_MAX - 16];
    /* Open MPI's shared-memory segments (btl vader, osc sm): a folder of
     * this launch in /dev/shm, so that a killed mpirun's go with it; ""
     * when gone, or the user set both folders (mpitmp.c) */
    char shm_dir[64];
    char dial[300]; /* host:port the ranks dial */
    SSL_CTX *ctx;
    int lfd;
    struct event_base *base;
    struct event *listen_ev;
    struct event *exit_ev;
    struct event *deadline_ev;
    struct mpi_pending *pending;
    size_t joined;
    pid_t mpirun; /* 0: not started */
    int pidfd;
    bool reaped;
    int status; /* mpirun's wait status, once reaped */
    uint64_t deadline;
    char refused[200]; /* why the last stranger was refused, or "" */
    /* ranks on this host, by rank: pid as joined, 0 when elsewhere or not
     * joined; what names their processes (the key folder's path) */
    pid_t *local_pids;
    /* their start times as joined (base_proc_start_time), 0 if unread:
     * the pid and this name one process even once it is exiting */
    unsigned long long *local_starts;
    char tag[PATH_MAX - 16];
};

static inline struct remote_node *mpigroup_node(struct mpi_group *g,
                                                size_t rank)
{
    return g->w->nodes[g->first + rank].remote;
}

/* mpihalo.c: tells the halo mpi transport (graph) how to ask which MPI
 * rank a node is; idempotent. */
void mpihalo_install(void);

/* mpitmp.c: Open MPI's session and segment folders for a launch. sweep:
 * removes the session, segment and key folders a killed L4 left (every
 * launch, first, whatever its hosts); make:
 * creates them (not those the user chose in OMPI_MCA_* variables); env:
 * this process's environment with them added, for mpirun (NULL: out of
 * memory; free with mpitmp_env_free, which is told the count of entries
 * env added, *added); remove: the folders and all in them. */
void mpitmp_sweep(const struct mpi_group *g);
strata_err mpitmp_make(struct mpi_group *g);
char **mpitmp_env(const struct mpi_group *g, size_t *added);
void mpitmp_env_free(char **env, size_t added);
void mpitmp_remove(struct mpi_group *g);

/* mpilaunch.c */
strata_err mpilaunch_start(struct mpi_group *g, struct event_base *base,
                           uint64_t deadline);
void mpilaunch_stop(struct mpi_group *g);
/* Removes the key file and its folder (idempotent). */
void mpilaunch_forget_key(struct mpi_group *g);
/* Reaps mpirun if it has exited; true when it has. */
bool mpilaunch_reap(struct mpi_group *g);

/* mpiaccept.c: the events of a started group on base. */
strata_err mpiaccept_watch(struct mpi_group *g);
/* After mpirun started: its exit loses every rank still up. */
strata_err mpiaccept_watch_exit(struct mpi_group *g);
/* Frees the events and the connections still being checked. */
void mpiaccept_unwatch(struct mpi_group *g);
/* Stops taking connections (all ranks are in, or the group is ending). */
void mpiaccept_close_listener(struct mpi_group *g);

#endif
