/* Starting a strata-node on loopback, the pieces the tests (tests/util)
 * and the benchmarks (bench/common) share: a fresh pre-shared key, and
 * the port the daemon reports through its --port-file. Never installed. */
#ifndef STRATA_DEVKIT_NODE_PORT_H
#define STRATA_DEVKIT_NODE_PORT_H

#include <sys/types.h>

/* 64 random hex digits into a new mode-600 file (O_EXCL). 0 or -1. */
int devkit_write_secret(const char *path);

/* The port pid (a child of the caller, not reaped here) writes to
 * port_file, which it renames into place. ino is an inotify descriptor
 * watching the file's directory for IN_MOVED_TO: the rename wakes the
 * wait, and so does pid's death (through a pidfd; without one, it is
 * noticed within 100 ms). Never a fixed sleep. The port, or -1 when pid
 * ended first or wait_s passed. */
int devkit_wait_port(const char *port_file, int ino, pid_t pid, double wait_s);

#endif
