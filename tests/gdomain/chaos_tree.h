/*
 * The process tree of the chaos test (test_chaos.c), read from /proc, and
 * what a run may leave behind.
 *
 *   test process (L4, a child subreaper)
 *   ├── forked L3 node ── chip 0, chip 1, sub 0   (children in fork order)
 *   └── strata-node daemon
 *       └── session (the remote L3 node) ── chip 0, chip 1, sub 0
 *
 * A worker forks its chips first, then its subs, all from one thread, so
 * a node's children list them in that order. Nothing here calls strata:
 * the killer thread uses it while the main thread is inside the library.
 */
#ifndef STRATA_CHAOS_TREE_H
#define STRATA_CHAOS_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define CHAOS_MAX_PIDS 256
#define CHAOS_MAX_NAMES 128
#define CHAOS_NAME_MAX 260

/* The children of pid (every thread's), in order; returns how many. */
size_t chaos_children(pid_t pid, pid_t *out, size_t cap);
/* True when pid is alive or a zombie and was made by fork() (it signals
 * SIGCHLD when it ends): a chip or a sub. Not so a sanitizer's tracer:
 * at exit() LeakSanitizer clones one (CLONE_VM, no exit signal) that
 * ptrace-stops the process, and the process spins until the tracer says
 * it is done; killed, it never says so (a hang). */
bool chaos_forked(pid_t pid);
/* Every process below root, breadth first; returns how many. */
size_t chaos_descendants(pid_t root, pid_t *out, size_t cap);

/* A set of pids seen in the tree during an iteration. */
struct chaos_pids {
    pid_t pid[CHAOS_MAX_PIDS];
    size_t n;
};
void chaos_pids_add(struct chaos_pids *s, pid_t pid);
bool chaos_pids_has(const struct chaos_pids *s, pid_t pid);

/* Names in /dev/shm that contain "strata". */
struct chaos_names {
    char name[CHAOS_MAX_NAMES][CHAOS_NAME_MAX];
    size_t n;
};
void chaos_shm_list(struct chaos_names *out);
/* Entries of now not in before whose creator pid (strata-<uid>-<pid>-...)
 * is in seen, appended to msg; returns how many. */
size_t chaos_shm_new(const struct chaos_names *before,
                     const struct chaos_names *now,
                     const struct chaos_pids *seen, char *msg, size_t cap);
/* Unlinks those same entries (what a run leaked, so that the next
 * iterations start clean); returns how many. */
size_t chaos_shm_remove_new(const struct chaos_names *before,
                            const struct chaos_pids *seen);
/* The paths of list that still exist, appended to msg; returns how
 * many. */
size_t chaos_paths_left(const struct chaos_names *list, char *msg, size_t cap);

/* One line per process below root: pid, parent, state, command (for a
 * hang report), on stderr. */
void chaos_print_tree(pid_t root);
/* Every thread's stack of each process below root and of root itself,
 * from gdb (10 s a process at most), on stderr: what a hang waits on. A
 * line saying so, and nothing else, when gdb is not installed. */
void chaos_print_stacks(pid_t root);

#endif /* STRATA_CHAOS_TREE_H */
