/* A strata-node daemon for bench_global_domain's remote nodes: started on
 * 127.0.0.1 port 0 with a fresh mode-600 pre-shared key, the port read
 * from its --port-file (inotify for the rename, a pidfd for its death,
 * under a deadline), stopped with SIGTERM and reaped. */
#ifndef BENCH_GD_DAEMON_H
#define BENCH_GD_DAEMON_H

#include <sys/types.h>

struct bench_daemon {
    char dir[64]; /* mkdtemp; "" once removed */
    char secret[96];
    char port_file[96];
    pid_t pid; /* 0 when not running */
    int pidfd; /* -1 when none */
    char endpoint[32];
};

/* 0, or -1 with the reason on stderr (the daemon is stopped then). */
int bench_daemon_start(struct bench_daemon *d, const char *node_bin);
/* Idempotent; 0 when it exited with status 0 (or was not running). */
int bench_daemon_stop(struct bench_daemon *d);

#endif
