/* A domain's control page: one page of shared memory beside its windows
 * that says whether a member was lost. Every member chip maps it with the
 * windows (chip/control.c) and strata_signal_wait sleeps on its word as
 * well as on the awaited one, so a process that learns of a member's
 * death (the worker that reaps a chip, an L4 that loses a node) wakes the
 * survivors with STRATA_EPEER instead of leaving them waiting forever.
 * It is named like the windows, "/strata-<uid>-<creator>-d<id>-ctl" (and
 * "-<token>" where they carry one), on backends whose windows are host
 * memory (sim; none elsewhere). Whoever makes the windows' names makes
 * and unlinks it: the members create it as they adopt the windows (or a
 * local domain's worker, on the exchange of descriptors, or whoever marks
 * it first) and the worker unlinks it with the windows (a global
 * domain's nodes at ABORT or teardown, its L4 after a node died). A
 * global domain's page has the same name on every node, so a member's
 * node, or the L4 for a whole node, wakes every member on the host. */
#ifndef CHIP_PEER_H
#define CHIP_PEER_H

#include "wire/chip_backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHIP_PEER_WHY_MAX 240

struct chip_domain_ctl {
    /* Futex word: 0 while every member lives, 1 once one was lost (never
     * back). Set after rank and why, with release order. */
    uint32_t broken;
    uint32_t claim; /* the first marker takes it and writes rank and why */
    uint32_t rank;  /* the lost member's domain rank */
    uint32_t reserved;
    char why[CHIP_PEER_WHY_MAX]; /* what happened to it, NUL-terminated */
};

/* The control page's name for the domain of req (its alloc_id, creator
 * and name token) into out. False when the backend does not name host
 * windows (no control page then). */
bool chip_domain_ctl_name(const struct chip_backend_ops *ops,
                          const struct chip_window_req *req, char *out,
                          size_t cap);
/* Maps the control page called name, creating it (zeroed) if create and
 * nobody has yet. STRATA_ENOENT when it does not exist and !create;
 * STRATA_ESYS / STRATA_ENOMEM from the system calls otherwise. */
strata_err chip_domain_ctl_map(const char *name, bool create,
                               struct chip_domain_ctl **out);
/* Makes the control page called name, zeroed, unless it exists already
 * (then one failed system call, nothing changes); maps nothing. A global
 * domain's page is made before any member maps its windows, so that a
 * member never makes one itself (chip/control.c). *made (may be NULL):
 * whether this call made it. STRATA_ESYS / STRATA_ENOMEM from the system
 * calls. */
strata_err chip_domain_ctl_make(const char *name, bool *made);
/* Unmaps a page from chip_domain_ctl_map (NULL: no-op). */
void chip_domain_ctl_unmap(struct chip_domain_ctl *c);
/* Marks the domain broken: the first call records rank and why (later
 * ones keep them), every call wakes every waiter. Any thread, any
 * process that maps the page. */
void chip_domain_ctl_mark(struct chip_domain_ctl *c, uint32_t rank,
                          const char *why);
/* The same for a process that does not map the page (a node for a
 * global domain): opens it by name, marks, unmaps. With create, a page
 * nobody made yet is made, so members that map later find the domain
 * broken: only while the windows' names are sure to be unlinked later.
 * Without create, STRATA_ENOENT when no page of that name exists; errors
 * of chip_domain_ctl_map otherwise. */
strata_err chip_domain_ctl_mark_name(const char *name, bool create,
                                     uint32_t rank, const char *why);

#endif
