/* Device buffers (strata/device.h): a strata_buffer whose bytes live in
 * one chip's device memory. The worker keeps only the handle; the chip
 * allocates, frees and copies on control frames (chip/devmem.c), posted
 * through the scheduler so each runs after the chip's earlier work. */
#include "base/alloc.h"
#include "base/err.h"
#include "base/log.h"
#include "orch/control.h"
#include "worker_int.h"

#include <stdio.h>
#include <strata/device.h>
#include <string.h>

/* Posts one control frame to chip index ep (with args a, or none) and
 * waits for it. */
static strata_err post_wait(struct orch_sched *s, strata_orch *o, int ep,
                            struct orch_ctl *c, const strata_args *a)
{
    struct orch_ctl *cp = c;
    strata_err err = orch_control_post(s, o, ep, c, a);

    return err ? err : orch_control_wait(s, &cp, 1);
}

strata_err strata_worker_create_device_buffer(strata_worker *w, int chip_id,
                                              size_t nbytes,
                                              strata_buffer **out)
{
    struct orch_ctl c;
    strata_buffer *b;
    strata_err err;
    int ep;

    if (!w || !out)
        return base_fail_null("strata_worker_create_device_buffer",
                              !w ? "w" : "out");
    err = worker_check_process(w, "strata_worker_create_device_buffer");
    if (err)
        return err;
    if (nbytes == 0)
        return base_fail(STRATA_EINVAL,
                         "strata_worker_create_device_buffer: nbytes is 0");
    if (w->level != 3)
        return base_fail(STRATA_EINVAL,
                         "strata_worker_create_device_buffer: a level-%d "
                         "worker has no chips of its own (device buffers "
                         "live on chips of a level-3 worker)",
                         w->level);
    if (w->state != WORKER_READY || !w->sched)
        return base_fail(STRATA_ESTATE,
                         "strata_worker_create_device_buffer: call "
                         "strata_worker_init first");
    ep = orch_chip_index(w->sched, chip_id);
    if (ep < 0)
        return base_fail(STRATA_EINVAL,
                         "strata_worker_create_device_buffer: no chip %d",
                         chip_id);
    err = orch_chip_check(w->sched, ep);
    if (err)
        return err;
    b = base_calloc(1, sizeof(*b));
    if (!b)
        return base_fail(STRATA_ENOMEM, "out of memory creating a buffer");
    b->size = nbytes;
    b->owner = w;
    b->creator = w->creator;
    b->id = worker_buffer_next_id();
    b->device = true;
    b->chip = chip_id;
    snprintf(b->name, sizeof(b->name), "device-%d-b%llu", chip_id,
             (unsigned long long)b->id);
    memset(&c, 0, sizeof(c));
    c.op = MBX_CTL_DEV_ALLOC;
    c.arg[0] = b->id;
    c.arg[1] = (uint64_t)b->creator;
    c.arg[2] = nbytes;
    err = post_wait(w->sched, NULL, ep, &c, NULL);
    if (err) {
        base_errmsg_prefix("chip %d: device buffer of %zu bytes", chip_id,
                           nbytes);
        base_free(b);
        return err;
    }
    err = worker_buffer_track(w, b);
    if (err) {
        worker_device_buffer_free(b);
        base_free(b);
        return err;
    }
    *out = b;
    return STRATA_OK;
}

int strata_buffer_chip(const strata_buffer *b)
{
    return b && b->device ? b->chip : -1;
}

void worker_device_buffer_free(strata_buffer *b)
{
    strata_worker *w = b->owner;
    struct orch_ctl c;
    int ep = orch_chip_index(w->sched, b->chip);
    strata_err err;

    /* A dead chip's memory went with its process. */
    if (ep < 0 || orch_chip_check(w->sched, ep) != STRATA_OK)
        return;
    memset(&c, 0, sizeof(c));
    c.op = MBX_CTL_DEV_FREE;
    c.arg[0] = b->id;
    c.arg[1] = (uint64_t)b->creator;
    err = post_wait(w->sched, NULL, ep, &c, NULL);
    if (err)
        LOG_WARN("device buffer %llu of chip %d not freed: %s",
                 (unsigned long long)b->id, b->chip, strata_errmsg());
}

strata_err worker_device_buffer_copy(strata_buffer *b, size_t offset,
                                     void *data, size_t n, bool write)
{
    strata_worker *w = b->owner;
    int ep = orch_chip_index(w->sched, b->chip);
    strata_err err = STRATA_OK;

    for (size_t done = 0; !err && done < n;) {
        size_t piece =
            n - done < MBX_STAGING_SIZE ? n - done : MBX_STAGING_SIZE;
        struct orch_ctl c;

        memset(&c, 0, sizeof(c));
        c.op = write ? MBX_CTL_DEV_WRITE : MBX_CTL_DEV_READ;
        c.ordered = true;
        c.arg[0] = b->id;
        c.arg[1] = (uint64_t)b->creator;
        c.arg[2] = offset + done;
        c.arg[3] = piece;
        if (write) {
            c.staged = (const uint8_t *)data + done;
            c.staged_len = (uint32_t)piece;
        } else {
            c.staged_reply = (uint8_t *)data + done;
            c.staged_reply_cap = (uint32_t)piece;
        }
        err = post_wait(w->sched, NULL, ep, &c, NULL);
        if (!err && !write && c.staged_reply_len != piece)
            err =
                base_fail(STRATA_EPROTO,
                          "device buffer %llu: %u bytes came back, not %zu",
                          (unsigned long long)b->id, c.staged_reply_len, piece);
        done += piece;
    }
    return err;
}

/* ------------------------------------------------------------------ */
/* Copies inside an orch fn                                            */
/* ------------------------------------------------------------------ */

/* One DEV_COPY frame on chip index ep: src's bytes into dst's, ordered by
 * their tags. Not waited for. */
static strata_err post_copy(struct orch_sched *s, strata_orch *o, int ep,
                            struct orch_ctl *c, strata_buffer *dst,
                            size_t dst_offset, strata_buffer *src,
                            size_t src_offset, size_t n)
{
    strata_args *a;
    strata_err err = strata_args_create(&a);

    if (err)
        return err;
    err = strata_args_add_tensor(a, dst, dst_offset, STRATA_U8, 1, &n,
                                 STRATA_OUT);
    if (!err)
        err = strata_args_add_tensor(a, src, src_offset, STRATA_U8, 1, &n,
                                     STRATA_IN);
    if (err) {
        base_errmsg_prefix("strata_orch_buffer_copy");
        strata_args_destroy(a);
        return STRATA_EINVAL;
    }
    memset(c, 0, sizeof(*c));
    c->op = MBX_CTL_DEV_COPY;
    c->ordered = true;
    c->arg[0] = n;
    err = orch_control_post(s, o, ep, c, a);
    strata_args_destroy(a);
    return err;
}

static strata_err check_copy(strata_worker *w, const strata_buffer *dst,
                             size_t dst_offset, const strata_buffer *src,
                             size_t src_offset, size_t n)
{
    const strata_buffer *both[2] = {dst, src};
    const size_t offs[2] = {dst_offset, src_offset};

    for (int i = 0; i < 2; i++) {
        const char *which = i ? "src" : "dst";
        const strata_buffer *b = both[i];

        if (b->owner != w)
            return base_fail(STRATA_EINVAL,
                             "strata_orch_buffer_copy: %s belongs to another "
                             "worker",
                             which);
        if (b->remote)
            return base_fail(STRATA_EINVAL,
                             "strata_orch_buffer_copy: %s is a remote "
                             "buffer (use strata_buffer_write/_read)",
                             which);
        if (offs[i] > b->size || n > b->size - offs[i])
            return base_fail(STRATA_EINVAL,
                             "strata_orch_buffer_copy: %s bytes [%zu, +%zu) "
                             "are outside its %zu-byte buffer",
                             which, offs[i], n, b->size);
    }
    if (!dst->device && !src->device)
        return base_fail(STRATA_EINVAL,
                         "strata_orch_buffer_copy: dst and src are both host "
                         "buffers (copy them with memcpy)");
    if (dst == src && dst_offset < src_offset + n &&
        src_offset < dst_offset + n)
        return base_fail(STRATA_EINVAL,
                         "strata_orch_buffer_copy: bytes [%zu, +%zu) and "
                         "[%zu, +%zu) of one buffer overlap",
                         dst_offset, n, src_offset, n);
    return STRATA_OK;
}

strata_err strata_orch_buffer_copy(strata_orch *o, strata_buffer *dst,
                                   size_t dst_offset, const strata_buffer *src,
                                   size_t src_offset, size_t nbytes)
{
    /* The source is only read; argument lists take it as writable. */
    strata_buffer *s_buf = (strata_buffer *)(uintptr_t)src;
    struct orch_ctl c[2];
    struct orch_ctl *cp[2] = {&c[0], &c[1]};
    strata_buffer *tmp = NULL;
    struct orch_sched *s;
    strata_worker *w;
    strata_err err;
    int ep_dst, ep_src;

    err = orch_usable(o, "strata_orch_buffer_copy");
    if (err)
        return err;
    if (!dst || !src)
        return base_fail_null("strata_orch_buffer_copy", !dst ? "dst" : "src");
    w = strata_orch_worker(o);
    s = orch_sched_of(o);
    err = check_copy(w, dst, dst_offset, src, src_offset, nbytes);
    if (err || nbytes == 0)
        return err;
    ep_dst = dst->device ? orch_chip_index(s, dst->chip) : -1;
    ep_src = src->device ? orch_chip_index(s, src->chip) : -1;
    if (ep_dst < 0 || ep_src < 0 || ep_dst == ep_src) {
        /* One chip does it all. */
        err = post_copy(s, o, ep_dst >= 0 ? ep_dst : ep_src, &c[0], dst,
                        dst_offset, s_buf, src_offset, nbytes);
        return err ? err : orch_control_wait(s, cp, 1);
    }
    /* Across chips: out through a host buffer, whose tags order the two
     * halves. */
    err = strata_worker_create_buffer(w, nbytes, &tmp);
    if (err)
        return err;
    err = post_copy(s, o, ep_src, &c[0], tmp, 0, s_buf, src_offset, nbytes);
    if (!err) {
        err = post_copy(s, o, ep_dst, &c[1], dst, dst_offset, tmp, 0, nbytes);
        if (err) {
            /* The first half still runs; its own error yields to this. */
            char msg[STRATA_ERRMSG_MAX];

            snprintf(msg, sizeof(msg), "%s", strata_errmsg());
            if (orch_control_wait(s, cp, 1) != STRATA_OK)
                LOG_DEBUG("copy out of chip %d: %s", src->chip,
                          strata_errmsg());
            base_fail(err, "%s", msg);
        } else {
            err = orch_control_wait(s, cp, 2);
        }
    }
    if (strata_buffer_release(tmp) != STRATA_OK)
        LOG_WARN("a staging buffer stays until the worker goes: %s",
                 strata_errmsg());
    return err;
}
