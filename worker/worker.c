/* strata_worker_*: configuration, runs, accessors, destroy. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "base/proc.h"
#include "chip/chip.h"
#include "remote.h"
#include "sim/sim.h"
#include "trace/trace.h"
#include "worker_int.h"

#include <stdlib.h>

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Chips plus sub workers of one node. */
#define WORKER_CHILDREN_MAX 4096

void strata_worker_config_init(strata_worker_config *cfg, int level)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof(*cfg));
    cfg->level = level;
    cfg->platform = "sim";
    cfg->comm_profile = "sim";
    cfg->startup_timeout_s = 120.0;
}

/* The built-in backends; plug-ins register themselves when loaded. */
static strata_err register_builtin_backends(void)
{
    return chip_backend_register(&sim_backend_ops);
}

static strata_err check_config(const strata_worker_config *cfg)
{
    if (cfg->level < 3 || cfg->level > STRATA_MAX_LEVEL)
        return base_fail(STRATA_EINVAL,
                         "worker level %d: a worker is level 3 (a node) to "
                         "%d",
                         cfg->level, STRATA_MAX_LEVEL);
    if (cfg->level > 3 && cfg->num_chips > 0)
        return base_fail(STRATA_EINVAL,
                         "num_chips is %zu: a level-%d worker drives nodes, "
                         "not chips: add level-%d workers with "
                         "strata_worker_add_worker",
                         cfg->num_chips, cfg->level, cfg->level - 1);
    if (cfg->num_chips > 0 && !cfg->chip_ids)
        return base_fail(STRATA_EINVAL, "num_chips is %zu but chip_ids is NULL",
                         cfg->num_chips);
    /* Each alone first: their sum could wrap. */
    if (cfg->num_chips > WORKER_CHILDREN_MAX ||
        cfg->num_sub_workers > WORKER_CHILDREN_MAX ||
        cfg->num_chips + cfg->num_sub_workers > WORKER_CHILDREN_MAX)
        return base_fail(STRATA_EINVAL,
                         "num_chips (%zu) + num_sub_workers (%zu): more than "
                         "%d children",
                         cfg->num_chips, cfg->num_sub_workers,
                         WORKER_CHILDREN_MAX);
    for (size_t i = 0; i < cfg->num_chips; i++) {
        if (cfg->chip_ids[i] < 0)
            return base_fail(STRATA_EINVAL, "chip_ids[%zu] is negative (%d)", i,
                             cfg->chip_ids[i]);
        for (size_t j = 0; j < i; j++)
            if (cfg->chip_ids[j] == cfg->chip_ids[i])
                return base_fail(STRATA_EINVAL,
                                 "chip id %d appears twice in chip_ids",
                                 cfg->chip_ids[i]);
    }
    /* NaN fails the comparison too. */
    if (!(cfg->startup_timeout_s > 0 && cfg->startup_timeout_s <= 1e7))
        return base_fail(STRATA_EINVAL,
                         "startup_timeout_s is %g: it must be > 0 and at "
                         "most 1e7 s",
                         cfg->startup_timeout_s);
    if (cfg->device_ordinals) {
        if (!cfg->platform || strcmp(cfg->platform, "cuda") != 0)
            return base_fail(STRATA_EINVAL,
                             "device_ordinals is set, but platform is '%s': "
                             "device ordinals are for platform \"cuda\"",
                             cfg->platform ? cfg->platform : "sim");
        for (size_t i = 0; i < cfg->num_chips; i++)
            if (cfg->device_ordinals[i] < 0)
                return base_fail(STRATA_EINVAL,
                                 "device_ordinals[%zu] is %d for chip %d: a "
                                 "device ordinal is >= 0",
                                 i, cfg->device_ordinals[i], cfg->chip_ids[i]);
    }
    if (cfg->comm_profile && strcmp(cfg->comm_profile, "cuda-fabric") == 0)
        return base_fail(STRATA_ENOTSUP,
                         "comm_profile 'cuda-fabric' is not supported: "
                         "fabric handles (multi-node NVLink) are not built; "
                         "use \"cuda-ipc\" for the chips of one host");
    if (cfg->comm_profile && strcmp(cfg->comm_profile, "cuda-ipc") == 0 &&
        (!cfg->platform || strcmp(cfg->platform, "cuda") != 0))
        return base_fail(STRATA_EINVAL,
                         "comm_profile 'cuda-ipc' needs platform \"cuda\" "
                         "(the platform is '%s')",
                         cfg->platform ? cfg->platform : "sim");
    if (cfg->comm_profile && strcmp(cfg->comm_profile, "sim") != 0 &&
        strcmp(cfg->comm_profile, "cuda-ipc") != 0)
        return base_fail(STRATA_EINVAL,
                         "comm_profile '%s' is not supported (use \"sim\", "
                         "or \"cuda-ipc\" on platform \"cuda\")",
                         cfg->comm_profile);
    return worker_mem_check(cfg);
}

/* The trace file: the config's, else STRATA_TRACE's; 0, or -1 when out of
 * memory. */
static int trace_path_set(strata_worker *w, const strata_worker_config *cfg)
{
    const char *path = cfg->trace_path;

    if (!path || !*path)
        path = getenv("STRATA_TRACE");
    if (!path || !*path)
        return 0;
    w->trace_path = base_strdup(path);
    return w->trace_path ? 0 : -1;
}

/* A top-level worker with a trace file starts the tree's trace session
 * before it forks anything; its children record into it. */
static strata_err trace_begin(strata_worker *w)
{
    char role[32];
    strata_err err;

    if (!w->trace_path)
        return STRATA_OK;
    snprintf(role, sizeof(role), "L%d", w->level);
    err = trace_session_start(w->trace_path, role);
    if (err)
        return err;
    w->traced = true;
    return STRATA_OK;
}

/* After the tree is gone: the merge into the trace file. A failure to
 * write it is logged; the worker's teardown stands. */
static void trace_end(strata_worker *w)
{
    if (!w->traced)
        return;
    w->traced = false;
    if (trace_session_finish() != STRATA_OK)
        LOG_WARN("trace file %s: %s", w->trace_path, strata_errmsg());
}

strata_err strata_worker_create(const strata_worker_config *cfg,
                                strata_worker **out)
{
    const char *platform;
    strata_worker *w;
    strata_err err;

    if (!cfg || !out)
        return base_fail_null("strata_worker_create", !cfg ? "cfg" : "out");
    err = check_config(cfg);
    if (err)
        return err;
    err = register_builtin_backends();
    if (err)
        return err;
    platform = cfg->platform ? cfg->platform : "sim";
    if (!chip_backend_find(platform))
        return base_fail(STRATA_EINVAL, "platform '%s' has no backend",
                         platform);
    base_alloc_lock_hooks();
    w = base_calloc(1, sizeof(*w));
    if (!w)
        return base_fail(STRATA_ENOMEM, "out of memory creating a worker");
    w->chip_ids = base_calloc(cfg->num_chips ? cfg->num_chips : 1, sizeof(int));
    if (!w->chip_ids) {
        base_free(w);
        return base_fail(STRATA_ENOMEM, "out of memory creating a worker");
    }
    if (worker_mem_init(&w->mem, cfg)) {
        base_free(w->chip_ids);
        base_free(w);
        return base_fail(STRATA_ENOMEM, "out of memory creating a worker");
    }
    if (cfg->num_chips)
        memcpy(w->chip_ids, cfg->chip_ids, cfg->num_chips * sizeof(int));
    if (cfg->device_ordinals && cfg->num_chips) {
        w->device_ordinals = base_calloc(cfg->num_chips, sizeof(int));
        if (!w->device_ordinals) {
            base_free(w->chip_ids);
            base_free(w);
            return base_fail(STRATA_ENOMEM, "out of memory creating a worker");
        }
        memcpy(w->device_ordinals, cfg->device_ordinals,
               cfg->num_chips * sizeof(int));
    }
    if (trace_path_set(w, cfg)) {
        base_free(w->chip_ids);
        base_free(w->device_ordinals);
        worker_mem_fini(&w->mem);
        base_free(w);
        return base_fail(STRATA_ENOMEM, "out of memory creating a worker");
    }
    w->level = cfg->level;
    /* This process is the tree's root above the nodes: say so in its log
     * lines (a forked node names itself in node.c). */
    if (w->level > 3)
        base_log_set_role("l%d", w->level);
    snprintf(w->platform, sizeof(w->platform), "%s", platform);
    snprintf(w->comm_profile, sizeof(w->comm_profile), "%s",
             cfg->comm_profile ? cfg->comm_profile : "sim");
    w->num_chips = cfg->num_chips;
    w->num_subs = cfg->num_sub_workers;
    w->startup_timeout_s = cfg->startup_timeout_s;
    w->creator = getpid();
    w->ops = chip_backend_find(platform);
    w->doorbell_fd = -1;
    pthread_mutex_init(&w->buf_mu, NULL);
    gdomain_state_init(&w->gd);
    *out = w;
    return STRATA_OK;
}

strata_err strata_worker_init(strata_worker *w)
{
    strata_err err;

    if (!w)
        return base_fail_null("strata_worker_init", "w");
    if (worker_check_process(w, "strata_worker_init"))
        return STRATA_ESTATE;
    if (w->state != WORKER_CREATED)
        return base_fail(STRATA_ESTATE, "worker is already initialized");
    if (w->owned)
        return base_fail(STRATA_ESTATE,
                         "worker belongs to a parent, which starts it");
    err = trace_begin(w);
    if (err)
        return err;
    err = worker_spawn(w, base_deadline_after(w->startup_timeout_s));
    if (err)
        trace_end(w);
    return err;
}

strata_err strata_worker_add_worker(strata_worker *parent, strata_worker *child,
                                    int *worker_id_out)
{
    struct worker_node *slot = NULL;
    strata_err err;

    if (!parent || !child || !worker_id_out)
        return base_fail_null("strata_worker_add_worker",
                              !parent  ? "parent"
                              : !child ? "child"
                                       : "worker_id_out");
    if (parent == child)
        return base_fail(STRATA_EINVAL,
                         "strata_worker_add_worker: a worker cannot be its "
                         "own child (level %d)",
                         parent->level);
    if (parent->level < 4 || child->level != parent->level - 1)
        return base_fail(STRATA_EINVAL,
                         "a level-%d worker cannot take a level-%d child "
                         "(children are one level down, parents level 4+)",
                         parent->level, child->level);
    if (parent->state != WORKER_CREATED || child->state != WORKER_CREATED)
        return base_fail(STRATA_ESTATE,
                         "add children before strata_worker_init, to "
                         "un-started workers");
    if (child->owned)
        return base_fail(STRATA_ESTATE, "worker already has a parent");
    err = worker_node_slot(parent, &slot);
    if (err || !slot)
        return err ? err : STRATA_ENOMEM;
    slot->local = child;
    child->owned = true;
    *worker_id_out = (int)parent->num_nodes - 1;
    return STRATA_OK;
}

strata_err worker_node_slot(strata_worker *w, struct worker_node **slot_out)
{
    if (w->num_nodes == w->cap_nodes) {
        size_t cap = w->cap_nodes ? 2 * w->cap_nodes : 4;
        void *p = base_realloc(w->nodes, cap * sizeof(*w->nodes));

        if (!p)
            return base_fail(STRATA_ENOMEM, "out of memory adding a node");
        w->nodes = p;
        w->cap_nodes = cap;
    }
    *slot_out = &w->nodes[w->num_nodes++];
    memset(*slot_out, 0, sizeof(**slot_out));
    return STRATA_OK;
}

strata_err worker_check_process(const strata_worker *w, const char *fn)
{
    /* Once per run: no system call (base_pid). */
    if (w->creator != base_pid())
        return base_fail(STRATA_ESTATE,
                         "%s: the worker belongs to process %d; a process "
                         "forked from it has only a copy, which it cannot "
                         "use or destroy",
                         fn, (int)w->creator);
    return STRATA_OK;
}

static strata_err check_ready(const strata_worker *w, bool have_fn,
                              const char *fn_name)
{
    strata_err err;

    if (!w || !have_fn)
        return base_fail_null(fn_name, !w ? "w" : "fn");
    err = worker_check_process(w, fn_name);
    if (err)
        return err;
    if (w->state != WORKER_READY)
        return base_fail(STRATA_ESTATE, "worker is not initialized (call "
                                        "strata_worker_init)");
    if (__atomic_load_n(&w->poisoned, __ATOMIC_ACQUIRE))
        return base_fail(STRATA_ESTATE,
                         "worker is poisoned: a global domain's ABORT "
                         "failed; destroy it");
    return STRATA_OK;
}

strata_err strata_worker_submit(strata_worker *w, strata_orch_fn fn,
                                const strata_args *args, void *user,
                                strata_run **out)
{
    strata_err err;

    /* NULLs first, then state (errors.md). */
    if (w && fn && !out)
        return base_fail_null("strata_worker_submit", "out");
    err = check_ready(w, fn != NULL, "strata_worker_submit");
    if (err)
        return err;
    return orch_run_start(w->sched, fn, args, user, out);
}

strata_err strata_worker_run(strata_worker *w, strata_orch_fn fn,
                             const strata_args *args, void *user)
{
    strata_err err = check_ready(w, fn != NULL, "strata_worker_run");
    strata_run *run;

    if (err)
        return err;
    err = strata_worker_submit(w, fn, args, user, &run);

    if (err)
        return err;
    err = strata_run_wait(run, -1);
    strata_run_free(run);
    return err;
}

void worker_free(strata_worker *w)
{
    mpigroup_free_all(w);
    for (size_t i = 0; i < w->num_nodes; i++) {
        if (w->nodes[i].local)
            worker_free(w->nodes[i].local);
        remote_node_free(w->nodes[i].remote);
    }
    base_free(w->nodes);
    gnode_free_all(w);
    gdomain_free_all(w);
    worker_buffers_free_all(w);
    if (w->va_base)
        munmap(w->va_base, w->va_size);
    pthread_mutex_destroy(&w->gd.gv_mu);
    pthread_mutex_destroy(&w->buf_mu);
    worker_mem_fini(&w->mem);
    base_free(w->chip_ids);
    base_free(w->device_ordinals);
    base_free(w->trace_path);
    base_free(w);
}

strata_err strata_worker_destroy(strata_worker *w)
{
    if (!w)
        return STRATA_OK;
    if (w->owned && w->creator == getpid())
        return base_fail(STRATA_ESTATE,
                         "worker belongs to a parent: destroy the parent");
    if (worker_check_process(w, "strata_worker_destroy"))
        return STRATA_ESTATE;
    if (w->sched && orch_in_fn_of(w->sched))
        return base_fail(STRATA_ESTATE,
                         "strata_worker_destroy from inside one of the "
                         "worker's own orch fns: it would wait for that run "
                         "forever");
    if (w->sched) {
        orch_drain(w->sched);
        orch_sched_stop(w->sched);
    }
    remote_stop(w);
    worker_teardown_children(w);
    orch_sched_destroy(w->sched);
    trace_end(w);
    worker_free(w);
    return STRATA_OK;
}

size_t strata_worker_num_chips(const strata_worker *w)
{
    return w ? w->num_chips : 0;
}

size_t strata_worker_num_sub_workers(const strata_worker *w)
{
    return w ? w->num_subs : 0;
}

int strata_worker_chip_pid(const strata_worker *w, int chip_id)
{
    if (!w || !w->eps || w->level != 3)
        return -1;
    for (size_t i = 0; i < w->num_chips; i++)
        if (w->eps[i].id == chip_id)
            return (int)w->eps[i].pid;
    return -1;
}

int strata_worker_sub_pid(const strata_worker *w, size_t index)
{
    if (!w || !w->eps || index >= w->num_subs)
        return -1;
    return (int)w->eps[worker_num_directed(w) + index].pid;
}

size_t strata_worker_num_nodes(const strata_worker *w)
{
    return w ? w->num_nodes : 0;
}

int strata_worker_node_pid(const strata_worker *w, int node_id)
{
    if (!w || !w->eps || w->level < 4 || node_id < 0 ||
        (size_t)node_id >= w->num_nodes)
        return -1;
    if (w->nodes && w->nodes[node_id].remote)
        return (int)w->nodes[node_id].remote->session_pid;
    return (int)w->eps[node_id].pid;
}
