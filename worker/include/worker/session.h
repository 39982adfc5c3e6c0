/* A strata-node session: one authenticated parent connection served by one
 * forked process that hosts an L3 worker. */
#ifndef WORKER_SESSION_H
#define WORKER_SESSION_H

#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>
#include <strata/strata.h>

/* The daemon's count of processes across its sessions (strata-node
 * --max-procs-total): one word per session slot, in memory the daemon
 * shares with every session. A session's HELLO stores its chips and sub
 * workers in its slot, then sums the slots: past max_total it clears its
 * slot and is refused (two HELLOs racing at the cap may both be: never
 * more than the cap). The daemon clears a slot when it reaps its
 * session. */
struct worker_proc_cap {
    uint32_t *slots; /* num_slots words, shared */
    uint32_t num_slots;
    uint32_t slot; /* this session's */
    uint32_t max_total;
};

/* What one session may hold at once (strata-node's --max-* options; the
 * defaults are in docs/deployment.md). A request past a cap is refused
 * with an error naming it; the session goes on. */
struct worker_session_limits {
    uint32_t max_tasks;        /* tasks received and not yet completed */
    uint32_t max_threads;      /* jobs (tasks, commands) running at once;
                                  the pool has max_threads + 2 threads */
    uint64_t max_buffer_bytes; /* shadow buffers, all together */
    uint64_t max_window_bytes; /* global domains' windows made here */
    uint32_t max_procs;        /* chips + sub workers HELLO may ask for */
    size_t reply_high_water;   /* bytes queued for the peer before the
                                  session stops reading it */
    const struct worker_proc_cap *procs; /* daemon-wide; NULL: none */
};

void worker_session_limits_default(struct worker_session_limits *l);

/* Serves the accepted socket fd of an authenticated parent until it says
 * GOODBYE or fails; returns the process exit status. ssl: the connection's
 * TLS, its handshake done by strata-node before the fork; NULL =
 * plaintext (loopback only). fd and ssl belong to the session from the
 * call on. lim NULL = the defaults. */
int worker_session_main(int fd, SSL *ssl, const char *peer,
                        const struct worker_session_limits *lim);

/* What the GOODBYE says when SIGTERM ends the session (default:
 * "strata-node is shutting down"): strata-rank's sessions end on
 * mpirun's SIGTERM, when the MPI job ends. Call before
 * worker_session_main. */
void worker_session_set_term_reason(const char *msg);

/* When the session ends without an orderly GOODBYE (its parent lost,
 * SIGTERM), unlink this process's names in /dev/shm before anything else
 * (mappings stay; the teardown's own unlinks find them gone): a process
 * that nobody reclaims after it dies (strata-rank, which mpirun SIGKILLs
 * a second after its SIGTERM) then leaves none even if it is killed
 * while its chips wind down. Call before worker_session_main. */
void worker_session_set_reclaim_early(void);

/* Ends this process's session from any thread, as SIGTERM does, but as
 * a failure: its GOODBYE carries STRATA_EPEER and the message, and
 * worker_session_main returns status (> 0). Only the first call counts.
 * For a failure the process cannot recover from, that its parent should
 * hear the cause of (strata-rank: a collective past its deadline). */
void worker_session_fail(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
