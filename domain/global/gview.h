/* The node-side view of a global domain, shared by gnode.c and
 * gnode_lazy.c. */
#ifndef DOMAIN_GVIEW_H
#define DOMAIN_GVIEW_H

#include "domain/global.h"
#include "wire/chip_backend.h"
#include "wire/msg.h"

#include <stdbool.h>
#include <stdint.h>
#include <strata/domain.h>

enum view_state {
    VIEW_PREPARED = 1,
    VIEW_IMPORTED,
    VIEW_COMMITTED,
    VIEW_GONE /* aborted; kept until the chips pass its withdrawn ADOPTs */
};

struct strata_global_view {
    uint64_t domain_id;
    /* The cluster id of COMM_INIT when it was prepared: its names are
     * made and dropped after this one, whatever a later COMM_INIT says. */
    uint64_t cluster_id;
    uint64_t generation;
    uint64_t identity; /* digest of name, size, members, buffers */
    uint64_t charged;  /* its bytes in gdomain_state.window_bytes */
    char name[STRATA_DOMAIN_NAME_MAX];
    uint32_t n; /* ranks in the domain */
    size_t window_size;
    size_t mapping_size;
    uint32_t nlocal; /* members on this node */
    int *chips;      /* local chip ids, with ... */
    uint32_t *ranks; /* ... their domain ranks */
    int *eps;
    uint64_t *device_ctx;
    uint64_t *local_base;
    size_t num_buffers;
    strata_comm_buffer_info *buffers;
    char (*names)[STRATA_DOMAIN_NAME_MAX];
    struct wire_attach_entry *attach;        /* this node's row, or NULL */
    char (*handles)[CHIP_WINDOW_HANDLE_MAX]; /* local members' names */
    int state;
    struct orch_ctl *ctls;
    struct orch_ctl **ptrs;
    /* Members map lazily (gnode_lazy.c): */
    bool lazy;
    bool adopts_posted;
    bool mapped;    /* every member ran its ADOPT: lookups need not wait */
    bool watched;   /* members' deaths mark the control page (IMPORT on) */
    bool made_page; /* this node made the control page (gwin_make) */
    int jslot;      /* its record in the node's journal (gjournal.c); -1 */
    uint64_t va_start, va_len;   /* the node's range piece (0: none) */
    struct orch_ctl *adopt_ctls; /* apart from ctls, which RELEASE uses */
    /* Lookups holding v: from strata_orch_get_global_domain until the
     * fence of the run that looked (atomic; ABORT keeps a held view as
     * VIEW_GONE). */
    uint32_t users;
    struct strata_global_view *next;
};

/* What the backend is told about rank r of global domain domain_id's
 * window: a name every node of the cluster, and its L4, compute alike
 * (the L4's pid and token in cluster_id). */
static inline struct chip_window_req gwin_req(uint64_t cluster_id,
                                              uint64_t domain_id, uint32_t r,
                                              uint32_t n, size_t window_size)
{
    return (struct chip_window_req){
        .alloc_id = GLOBAL_ALLOC_TAG | domain_id,
        .rank = r,
        .rank_count = n,
        .window_size = window_size,
        .creator_pid = (int32_t)(cluster_id >> 32),
        .name_token = (uint32_t)cluster_id,
    };
}

/* Drops every rank's name of that domain and its control page's
 * (ENOENT: never made). */
void gwin_unlink_all(const struct chip_backend_ops *ops, uint64_t cluster_id,
                     uint64_t domain_id, uint32_t n, size_t window_size);
/* Registers the control page (chip/peer.h) of that domain, named like
 * its windows, to be marked when endpoint ep of s dies, naming rank and
 * the domain (orch_mark_on_death, keyed GLOBAL_ALLOC_TAG | domain_id): a
 * node for each of its members. A page no longer there is not made
 * again (the domain is going): whoever registers forgets
 * (orch_mark_forget) before the names go. STRATA_OK without a
 * host-window backend. */
strata_err gwin_watch(struct orch_sched *s, const struct chip_backend_ops *ops,
                      uint64_t cluster_id, uint64_t domain_id, uint32_t n,
                      const char *name, int ep, uint32_t rank);
/* Makes that domain's control page unless it exists: the L4 before
 * PREPARE_EXPORT, a node at IMPORT (for a host the L4 is not on), always
 * before a member maps, since members never make it (chip/control.c).
 * *made: whether this call made it. STRATA_OK without a host-window
 * backend. */
strata_err gwin_make(const struct chip_backend_ops *ops, uint64_t cluster_id,
                     uint64_t domain_id, uint32_t n, bool *made);

/* gjournal.c: the node's record of the lazy views whose names its
 * members may make, in /dev/shm beside its other names, so that whoever
 * reaps a node killed outright removes them (worker_reclaim_names). Under
 * gv_mu; a failure is logged (the names then stay, as before). */
void gjournal_add(strata_worker *w, struct strata_global_view *v);
void gjournal_remove(strata_worker *w, struct strata_global_view *v);
/* At teardown, once every view is gone: the journal itself goes. */
void gjournal_close(strata_worker *w);

/* gnode_lazy.c. Under gv_mu unless said. */
/* Makes v lazy when it can be (v->lazy says). */
void gnode_lazy_begin(strata_worker *w, struct strata_global_view *v);
/* PREPARE_EXPORT: names the members' windows into handles. */
strata_err gnode_lazy_prepare(strata_worker *w, struct strata_global_view *v,
                              char (*handles)[CHIP_WINDOW_HANDLE_MAX]);
/* IMPORT: checks the table, posts the quiet ADOPTs. */
strata_err gnode_lazy_import(strata_worker *w, struct strata_global_view *v,
                             const struct wire_domain_cmd *c);
/* Waits for the members' ADOPTs of a committed view; without gv_mu, v
 * held by users. */
strata_err gnode_lazy_mapped(strata_worker *w, struct strata_global_view *v);
/* ABORT (v unlinked; kept while a withdrawn ADOPT is still in a ring). */
strata_err gnode_lazy_abort(strata_worker *w, struct strata_global_view *v);
/* Whether a member may have created a window of v. */
bool gnode_lazy_touched(const struct strata_global_view *v);
/* Drops every rank's name of v. */
void gnode_lazy_unlink(const strata_worker *w,
                       const struct strata_global_view *v);

#endif
