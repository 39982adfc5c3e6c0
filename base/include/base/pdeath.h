/* The parent-death signal of a forked child (chip, sub worker, node),
 * made to mean what it says. Linux sends it when the *thread* that forked
 * the child ends, so a worker initialized in a thread that then returns
 * would lose every child while its process lives on. The child gets
 * SIGTERM instead of SIGKILL and this handler decides:
 * - a SIGTERM after the parent set the child's shutdown word (the
 *   teardown's escalation), or from anyone but the parent: the default,
 *   the child ends at once;
 * - a parent-death signal while the parent process lives (a thread of it
 *   ended; the child has been handed to another of its threads):
 *   ignored, once 50 ms showed that the parent is not dying (a dying
 *   parent hands its children from thread to thread as they end);
 * - the parent process is gone: orphaned() when given (it must be
 *   async-signal-safe), else the default. */
#ifndef BASE_PDEATH_H
#define BASE_PDEATH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Arms it in this (just forked) process: parent is the forking process,
 * shutdown the child's sticky shutdown word. SIGTERM is unblocked (a mask
 * inherited from a parent that takes its signals through a signalfd
 * would keep the child alive forever). Then checks that parent is still
 * the parent; false (the caller exits) when it already died. */
bool base_pdeath_arm(pid_t parent, const uint32_t *shutdown,
                     void (*orphaned)(void));

#endif
