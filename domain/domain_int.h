/* Local communication domains: private state. */
#ifndef DOMAIN_INT_H
#define DOMAIN_INT_H

#include "orch/control.h"
#include "wire/chip_backend.h"

#include <strata/domain.h>

struct strata_domain {
    char name[STRATA_DOMAIN_NAME_MAX];
    uint64_t alloc_id;
    int creator; /* the worker's pid, in segment names */
    uint32_t n;  /* members */
    size_t window_size;
    size_t mapping_size;
    int *chips; /* chip ids in rank order */
    int *eps;   /* scheduler endpoint of each rank */
    uint64_t *device_ctx;
    uint64_t *local_base;
    size_t num_buffers;
    strata_comm_buffer_info *buffers;
    char (*buffer_names)[STRATA_DOMAIN_NAME_MAX];
    struct orch_sched *sched;
    strata_run *run;
    uint64_t run_id;       /* the run may be gone when a late frame fails */
    struct orch_ctl *ctls; /* one per member, reused by every phase */
    struct orch_ctl **ctl_ptrs;
    /* Lifetime, under the scheduler lock (flags read atomically). */
    bool allocated;
    bool released;
    bool freed;
    uint32_t release_pending;
    /* Windows the worker made (adopt.c): their piece of the reserved
     * range, and ADOPT frames not yet done. */
    bool adopted;
    struct orch_ctl *adopt_ctls; /* ADOPT frames may outlive the run */
    uint64_t va_start, va_len;
    uint32_t adopt_pending;
    uint32_t adopt_posted; /* ADOPT frames posted: ranks 0..adopt_posted */
    uint32_t adopt_ran;    /* ADOPTs members ran (and created segments in) */
    uint32_t name_token;   /* in the segments' names */
    /* The control page (lost.c), mapped here from before the names go
     * until the domain is freed; under the scheduler lock once live. */
    struct chip_domain_ctl *ctl;
    struct strata_domain *next_live;
    /* Freed, its working memory not yet given back (domain.c). */
    struct strata_domain *shrink_next;
    bool on_shrink;
};

/* validate.c: the whole spec, before any side effect. */
strata_err domain_validate(struct orch_sched *s, strata_run *run,
                           const strata_domain_spec *spec);
/* True when a live (unreleased) domain of run is called name. */
bool domain_name_live(strata_run *run, const char *name);
void domain_live_add(struct strata_domain *d);
void domain_live_remove(struct strata_domain *d);
/* Calls fn(d, arg) for every live domain of the process (under the
 * registry's lock: fn must not add or remove). */
void domain_live_each(void (*fn)(struct strata_domain *d, void *arg),
                      void *arg);
/* adopt.c: builds d without a round trip when the backend makes windows
 * in the worker and the reserved range has room; *used says whether it
 * did (else nothing happened and the exchange of descriptors follows). */
strata_err domain_adopt_build(struct strata_domain *d, bool *used);
/* Under the scheduler lock: withdraws member r's ADOPT if the chip has not
 * begun it (it never maps the windows then, and needs no RELEASE). */
bool domain_adopt_withdraw_locked(struct strata_domain *d, uint32_t r);
/* lost.c: maps d's control page here (creating it if no member has),
 * unless it is mapped or the backend makes none. */
strata_err domain_ctl_keep(struct strata_domain *d);
/* Unmaps it (none: no-op). */
void domain_ctl_drop(struct strata_domain *d);
/* Drops its name (ENOENT: never made, or gone). */
void domain_ctl_unlink(const struct strata_domain *d);
/* Once d is live: its members' deaths, past and future, mark its control
 * page. */
strata_err domain_watch_deaths(struct strata_domain *d);
/* domain.c, under the scheduler lock: RELEASE to members 0..n-1 as work
 * of run (NULL: of none), except to members whose ADOPT is withdrawn in
 * time; the domain is freed (and a worker-made window's addresses given
 * back) once all are done, at once when no member had mapped. */
void domain_release_locked(struct strata_domain *d, strata_run *run,
                           uint32_t n);

#endif
