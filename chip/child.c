/* The child process: start-up handshake, then frames until shutdown. */
#include "base/cpu.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/log.h"
#include "chip/registry.h"
#include "chip_int.h"
#include "trace/trace.h"
#include "watch.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Trace records copy a registry name whole (mbx_trace_ran, the
 * orchestrator's own task records). */
_Static_assert(CHIP_NAME_MAX >= TRACE_NAME_BYTES,
               "a callable's name array holds a trace record's name");

int strata_chip_id(const strata_chip *chip)
{
    return chip ? chip->cfg->id : -1;
}

static void ring_doorbell(int fd)
{
    uint64_t one = 1;

    /* A full counter (EAGAIN) already means "wake up". */
    if (write(fd, &one, sizeof(one)) < 0)
        return;
}

static const char *role(const struct chip_child_cfg *cfg)
{
    return cfg->is_sub ? "sub" : "chip";
}

static bool cfg_is_chip(const strata_chip *chip)
{
    return !chip->cfg->is_sub && chip->cfg->ops;
}

strata_err chip_resolve_args(strata_chip *chip, const struct mbx_frame *f)
{
    strata_err err = wire_args_decode(f->args, f->args_len, &chip->args);

    if (err)
        return err;
    for (uint32_t i = 0; i < chip->args.num_tensors; i++) {
        const struct wire_tensor *t = &chip->args.tensors[i];
        void *base;

        if (t->flags & WIRE_TENSOR_DEVICE)
            err = cfg_is_chip(chip)
                      ? chip_devmem_resolve(chip, t->creator, t->buffer_id,
                                            t->buffer_size, &base)
                      : base_fail(STRATA_EINVAL,
                                  "tensor %u: a device buffer, sent to sub "
                                  "worker %d",
                                  i, chip->cfg->id);
        else
            err = bufmap_get(&chip->map, t->creator, t->buffer_id,
                             t->buffer_size, &base);
        if (err)
            return err;
        chip->args.data[i] = (char *)base + t->offset;
    }
    return STRATA_OK;
}

static strata_err call(strata_chip *chip, const struct chip_callable *c)
{
    const struct chip_child_cfg *cfg = chip->cfg;
    strata_kernel_fn kfn;
    strata_sub_fn sfn;

    if (cfg->is_sub) {
        memcpy(&sfn, &c->fn, sizeof(sfn));
        return sfn(&chip->args);
    }
    memcpy(&kfn, &c->fn, sizeof(kfn));
    if (!cfg->ops->launch)
        return base_fail(STRATA_ENOTSUP, "backend %s cannot launch kernels",
                         cfg->ops->name);
    return cfg->ops->launch(chip->state, chip, kfn, &chip->args);
}

/* call, recorded as a task span with its arguments' bytes. */
static strata_err call_traced(strata_chip *chip, const struct chip_callable *c,
                              struct mbx_frame *f)
{
    uint64_t bytes = 0, t0 = trace_now();
    strata_err err = call(chip, c);

    for (uint32_t i = 0; i < chip->args.num_tensors; i++)
        bytes += chip->args.tensors[i].nbytes;
    mbx_trace_ran(f, t0, bytes, c->name, err);
    if (err && !strata_errmsg()[0])
        strata_errmsg_set("%s", strata_strerror(err));
    return err;
}

static strata_err run_task(strata_chip *chip, struct mbx_frame *f)
{
    const struct chip_child_cfg *cfg = chip->cfg;
    uint32_t want = cfg->is_sub ? STRATA_CALLABLE_SUB : STRATA_CALLABLE_KERNEL;
    const struct chip_callable *c = chip_registry_find(f->digest);
    strata_err err;

    if (!c || c->kind != want) {
        char hex[65];
        strata_callable tmp = {.kind = want};

        memcpy(tmp.digest, f->digest, 32);
        return base_fail(STRATA_ENOENT,
                         "%s %d has no %s with digest %s (register callables "
                         "before strata_worker_init)",
                         role(cfg), cfg->id, chip_callable_kind_name(want),
                         strata_callable_digest_hex(tmp, hex));
    }
    err = chip_resolve_args(chip, f);
    if (err)
        return err;
    if (BASE_FAULT("chip.task"))
        return base_fail(STRATA_EIO, "fault point chip.task");
    base_errmsg_clear();
    if (trace_enabled())
        return call_traced(chip, c, f);
    err = call(chip, c);
    if (err && !strata_errmsg()[0])
        strata_errmsg_set("%s", strata_strerror(err));
    return err;
}

static void serve(strata_chip *chip)
{
    const struct chip_child_cfg *cfg = chip->cfg;
    struct mbx_frame *f;
    strata_err err;
    bool spin = true;

    /* Spin for the next frame only after a task: control frames (domain
     * set-up and release, unmaps) come alone, and a spinning chip only
     * takes the CPU from the process that has work. */
    while ((f = mbx_child_wait_spin(cfg->mbx, spin)) != NULL) {
        spin = f->kind == MBX_TASK;
        if (f->kind == MBX_TASK)
            err = run_task(chip, f);
        else if (f->kind == MBX_CONTROL && !mbx_frame_take(f))
            err = STRATA_OK; /* withdrawn by the worker: nothing to do */
        else if (f->kind == MBX_CONTROL)
            err = chip_run_control(chip, f);
        else
            err = base_fail(STRATA_EPROTO, "unknown frame kind %u", f->kind);
        f->result = (int32_t)err;
        if (err)
            snprintf(f->msg, sizeof(f->msg), "%s", strata_errmsg());
        /* Kernels print from this process; keep their lines in order with
         * the parent's. Cheap when nothing is buffered. */
        fflush(stdout);
        if (mbx_child_complete(cfg->mbx, cfg->shared))
            ring_doorbell(cfg->doorbell_fd);
    }
}

static strata_err start(strata_chip *chip)
{
    const struct chip_child_cfg *cfg = chip->cfg;

    if (BASE_FAULT("chip.init"))
        return base_fail(STRATA_EIO, "fault point chip.init");
    if (cfg->is_sub)
        return STRATA_OK;
    if (!cfg->ops->init)
        return STRATA_OK;
    return cfg->ops->init(chip, &chip->state);
}

_Noreturn void chip_child_main(const struct chip_child_cfg *cfg)
{
    static strata_chip chip;
    strata_err err;

    /* Die with the worker, and never outlive it if it already died. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != cfg->parent)
        _exit(70);
    setpgid(0, 0);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_IGN); /* the worker decides; Ctrl-C goes to it */
    base_fault_after_fork();
    base_log_set_role("%s[%d]", role(cfg), cfg->id);
    trace_proc_open("%s %d", role(cfg), cfg->id);
    chip.cfg = cfg;
    if (!cfg->is_sub && base_cpu_pin(cfg->index, cfg->count) >= 0)
        LOG_DEBUG("pinned (STRATA_PIN)");
    if (!cfg->is_sub)
        chip_signal_bind(&cfg->shared->signal_parked, cfg->va_base,
                         chip_va_local_size(cfg->va_size));
    bufmap_init(&chip.map);
    bufmap_init(&chip.devs);
    err = start(&chip);
    mbx_child_init_done(cfg->mbx, err, err ? strata_errmsg() : "");
    ring_doorbell(cfg->doorbell_fd);
    if (err) {
        LOG_DEBUG("init failed: %s", strata_errmsg());
        _exit(71);
    }
    LOG_DEBUG("ready");
    serve(&chip);
    chip_watch_remove_all();
    if (!cfg->is_sub && chip.state)
        chip_devmem_fini(&chip);
    if (!cfg->is_sub && cfg->ops->fini)
        cfg->ops->fini(&chip, chip.state);
    bufmap_fini(&chip.map);
    fflush(NULL);
    _exit(0);
}
