/*
 * Starting a strata-node from a test (tests/gdomain and tests/remote): a
 * fresh mode-600 secret, the daemon forked with its output in a log file
 * and a chosen environment, its port read from its --port-file when
 * inotify sees the file renamed into place (never after a fixed sleep),
 * and the processes under it found through /proc.
 */
#ifndef STRATA_TESTUTIL_NODE_LAUNCH_H
#define STRATA_TESTUTIL_NODE_LAUNCH_H

#include <stddef.h>
#include <sys/types.h>

/* A fresh secret: devkit_write_secret. */
#include "node_port.h"

struct testutil_node_launch {
    const char *const *argv; /* argv[0] is the executable; NULL-ended */
    const char *dir;         /* the directory the port file appears in */
    const char *port_file;   /* as given with --port-file */
    const char *log;         /* stdout and stderr (created, truncated) */
    const char *log_level;   /* STRATA_LOG for the daemon */
    const char *fault;       /* STRATA_FAULT for the daemon, or NULL */
    double wait_s;           /* how long the port may take */
};

/* Forks and runs the daemon; *pid is its pid once forked (0 if not).
 * Returns its port, or -1 when it could not start, died, or reported no
 * port within wait_s (the reason printed; the caller reaps *pid). */
int testutil_node_launch(const struct testutil_node_launch *l, pid_t *pid);

/* The children of pid (of every thread) appended to out[*n..cap). */
void testutil_children_of(pid_t pid, pid_t *out, size_t *n, size_t cap);

/* Prints a file (a daemon's log) through cmocka's print_error. */
void testutil_print_file(const char *path, const char *title);

#endif
