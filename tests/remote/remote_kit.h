/*
 * Helpers shared by the remote tests: a real strata-node daemon on
 * 127.0.0.1 port 0 (fresh secret in a mkdtemp directory, the port read
 * from its --port-file when inotify says the file appeared, never after a
 * fixed sleep), a cluster CA with node and client certificates made with
 * the openssl CLI, and L4 workers with forked and remote L3 nodes.
 *
 * The daemon is a child of the test process: start it in a group setup (or
 * a test) before testutil_snapshot_take and stop it after the leak check,
 * or stop it before the check. Its sessions are its children, not ours.
 */
#ifndef STRATA_REMOTE_KIT_H
#define STRATA_REMOTE_KIT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <setjmp.h>

#include <cmocka.h>

#include <stdbool.h>
#include <sys/types.h>

#include "it_common.h"
#include "remote_module.h"
#include "testutil.h"

/* Deadline for anything that should take well under a second. */
#define RK_WAIT_S 10.0
#define RK_PATH_MAX 192
#define RK_DIR_MAX 64 /* mkdtemp directories under /tmp */

/* Node orch callables (remote_module.h), looked up by name. */
extern strata_callable rk_o_add, rk_o_span, rk_o_noop;

/* Registers the module's callables in this process (forked L3 nodes need
 * them) and looks up rk_o_*. 0 or -1. Group setups call it first. */
int rk_register(void);

enum rk_auth {
    RK_PSK = 0,  /* --secret-file, a fresh random secret */
    RK_CERT,     /* --cert/--key/--ca from struct rk_certs */
    RK_INSECURE, /* --insecure (loopback) */
};

/* A cluster CA signing a node and a client certificate, and a rogue CA
 * signing a client certificate of its own (EC P-256, made by rk_certs_make
 * with the openssl CLI in a mkdtemp directory). */
struct rk_certs {
    char dir[RK_DIR_MAX];
    char ca[RK_PATH_MAX];
    char node_cert[RK_PATH_MAX], node_key[RK_PATH_MAX];
    char client_cert[RK_PATH_MAX], client_key[RK_PATH_MAX];
    char rogue_ca[RK_PATH_MAX];
    char rogue_cert[RK_PATH_MAX], rogue_key[RK_PATH_MAX];
};

/* 0, or -1 with the reason printed. */
int rk_certs_make(struct rk_certs *c);
void rk_certs_remove(struct rk_certs *c);

struct rk_node {
    pid_t pid; /* 0 once stopped */
    int port;
    enum rk_auth auth;
    const struct rk_certs *certs; /* RK_CERT */
    char dir[RK_DIR_MAX];         /* mkdtemp, removed by rk_node_stop */
    char secret[RK_PATH_MAX];     /* dir/secret (RK_PSK) */
    char log[RK_PATH_MAX];        /* dir/node.log: stderr, STRATA_LOG=info */
    char endpoint[64];            /* "127.0.0.1:<port>" */
    bool term_sent;               /* rk_node_term was called */
    bool exited;                  /* reaped by rk_node_alive */
    int status;                   /* its waitpid status, once exited */
};

/* Starts strata-node --listen 127.0.0.1:0 --module <the test module>
 * with auth (certs for RK_CERT) and waits (event-driven, RK_WAIT_S at
 * most) for its port file. 0, or -1 with the reason and its log printed. */
int rk_node_start(struct rk_node *n, enum rk_auth auth,
                  const struct rk_certs *certs);
/* The same with STRATA_FAULT=fault in the daemon's environment (its
 * sessions and their chips inherit it); NULL = none. */
int rk_node_start_fault(struct rk_node *n, enum rk_auth auth,
                        const struct rk_certs *certs, const char *fault);
/* SIGTERM, waits for it (SIGKILL after RK_WAIT_S), removes its directory.
 * 0 when it was alive and exited with status 0; -1 otherwise (log
 * printed). Idempotent. */
int rk_node_stop(struct rk_node *n);
/* Sends the daemon SIGTERM without waiting: a clean exit (status 0) is then
 * expected, and rk_node_stop only reaps it. */
void rk_node_term(struct rk_node *n);
/* True while the daemon runs (reaps it; an unexpected end prints its log). */
bool rk_node_alive(struct rk_node *n);
/* Its session processes now (children of every daemon thread). */
size_t rk_node_sessions(const struct rk_node *n, pid_t *out, size_t cap);
/* Waits until it has exactly want sessions. */
bool rk_node_wait_sessions(const struct rk_node *n, size_t want,
                           double timeout_s);
/* True once its log holds needle (polls up to timeout_s). */
bool rk_node_log_has(const struct rk_node *n, const char *needle,
                     double timeout_s);
void rk_node_print_log(const struct rk_node *n);
/* Lines of its log that hold needle, now. */
size_t rk_node_log_count(const struct rk_node *n, const char *needle);

/* Writes 32 random bytes, hex encoded, to a new file of mode 0600. */
int rk_write_secret(const char *path);

/* A spec for node n with chips 0..nchips-1, authenticated as n expects
 * (PSK: n's secret; RK_CERT: the good client certificate). */
void rk_spec(strata_remote_spec *s, const struct rk_node *n, size_t nchips);

/* An un-started L4 with `forked` forked L3 nodes (chips 0 and 1; node ids
 * 0..forked-1) and then one remote node per spec (ids forked..). */
strata_err rk_l4_create(size_t forked, const strata_remote_spec *remotes,
                        size_t nremote, strata_worker **out);
/* rk_l4_create + strata_worker_init; on failure the worker is destroyed
 * and strata_errmsg still holds the init's message. */
strata_err rk_l4_start(size_t forked, const strata_remote_spec *remotes,
                       size_t nremote, strata_worker **out);
/* Destroys w; fails the test unless STRATA_OK (or ok_too). */
void rk_destroy(strata_worker *w, strata_err ok_too);

/* One run of rt.add on every node in nodes[0..nn): node k adds words
 * [k*per, (k+1)*per) of x and y into z; x[i] = seed + i, y[i] = 3i + 1.
 * Checks z; a wrong word is STRATA_EIO with the index in strata_errmsg. */
strata_err rk_add_run(strata_worker *w, const int *nodes, size_t nn, size_t per,
                      uint32_t seed);

/* A fresh L4 with one remote node (2 chips) to n, one checked rt.add run,
 * destroy: the daemon still serves good clients. Fails the test if not. */
void rk_assert_serves(const struct rk_node *n);

/* Runs only the tests whose names match $RT_FILTER (cmocka's filter), when
 * set. Call at the top of main. */
void rk_filter_from_env(void);

/* After a test on a shared daemon: it is alive, its sessions have ended
 * (the parents said goodbye), and nothing of the test's leaked. */
void rk_assert_idle(struct rk_node *n, const testutil_snapshot *before);

/* An orch fn (user = struct rk_block) that runs rt.span for ms on chip 0
 * of node, creating the marker file named by the bytes of path first: a
 * task that is known to be running once the file exists. */
struct rk_block {
    strata_buffer *span, *path;
    int node;
    uint64_t ms;
};
strata_err rk_block_orch(strata_orch *o, const strata_args *args, void *user);
/* Submits n rt.span tasks of ms each to node, at once: task i fills
 * spans[i] (a buffer of n struct rt_span) on chip i % 2. */
strata_err rk_submit_spans(strata_orch *o, strata_buffer *spans, size_t n,
                           uint64_t ms, int node);
/* True when the file arg (a path) exists; for testutil_wait_until. */
bool rk_file_exists(void *arg);
/* Fails the current test unless hay contains needle. */
void rk_assert_contains(const char *hay, const char *needle);

#endif /* STRATA_REMOTE_KIT_H */
