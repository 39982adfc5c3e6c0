/* A strata-node daemon a benchmark starts for its remote nodes: on
 * 127.0.0.1 port 0, with a fresh mode-600 pre-shared key (or --insecure),
 * the port read from its --port-file (inotify for the rename, a pidfd for
 * its death, under a deadline), stopped with SIGTERM and reaped. */
#ifndef BENCH_DAEMON_H
#define BENCH_DAEMON_H

#include <stdbool.h>
#include <sys/types.h>

struct bench_daemon {
    char dir[64]; /* mkdtemp; "" once removed */
    char secret[96];
    char port_file[96];
    pid_t pid; /* 0 when not running */
    int pidfd; /* -1 when none */
    char endpoint[32];
};

struct bench_daemon_opts {
    const char *name;     /* the bench, for messages and the temp dir */
    const char *node_bin; /* the strata-node executable */
    const char *module;   /* --module LIB.so, or NULL */
    bool insecure;        /* --insecure instead of a key */
};

/* 0, or -1 with the reason on stderr (the daemon is stopped then). */
int bench_daemon_start(struct bench_daemon *d,
                       const struct bench_daemon_opts *o);
/* Removes the key and port files (both sides have read them); idempotent. */
void bench_daemon_forget_files(struct bench_daemon *d);
/* Idempotent; 0 when it exited with status 0 (or was not running). */
int bench_daemon_stop(struct bench_daemon *d);

#endif
