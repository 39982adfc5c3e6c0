/* A strata-node daemon that an example starts for itself on 127.0.0.1
 * (port 0, a fresh pre-shared key in a private temporary directory) and
 * stops on every path, and the L4 over a forked node and that one. Shared
 * by the examples that use a remote node. */
#ifndef EXAMPLE_NODE_H
#define EXAMPLE_NODE_H

#include <stddef.h>
#include <sys/types.h>

#include <strata/strata.h>

struct example_node {
    char dir[64]; /* mkdtemp; "" once removed */
    char secret[96];
    char port_file[96];
    pid_t pid; /* 0 when not running */
    int pidfd; /* -1 when none */
    int port;
    char endpoint[32]; /* "127.0.0.1:<port>" once started */
};

/* Starts node_bin with module, waits (inotify + pidfd, never a fixed sleep)
 * until it reports its port, under start_deadline_s. Messages are prefixed
 * with name. 0 on success; on failure d is left for example_node_stop. */
int example_node_start(struct example_node *d, const char *name,
                       const char *node_bin, const char *module,
                       int start_deadline_s);
/* SIGTERM, then reap (SIGKILL after 10 s); removes the files. 0 when the
 * daemon stopped cleanly. Idempotent. */
int example_node_stop(struct example_node *d, const char *name);
/* Removes the secret, the port file and the directory (idempotent): once
 * both sides have read the key it need not stay on disk. */
void example_node_forget_files(struct example_node *d, const char *name);
/* The L4 the mixed examples use: node 0 a forked L3, node 1 the daemon's
 * L3, both with chips[0..nchips). The daemon's files are removed once both
 * sides have read the key. 0 on success; on failure the reason is printed
 * (prefixed with name) and *out, when set, is the worker to destroy. */
int example_l4_build(struct example_node *d, const char *name, const int *chips,
                     size_t nchips, strata_worker **out);
/* getenv(var) when set and not empty, else fallback. */
const char *example_env_or(const char *var, const char *fallback);

#endif
