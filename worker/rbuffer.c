/* Remote buffers: memory that lives on one remote node, so tasks sent
 * there name it without moving bytes, and the copies in and out of any
 * buffer. Requests to a node travel as CONTROL frames through the
 * scheduler's ring (MBX_CTL_NODE_CMD), after the node's earlier work. */
#include "base/alloc.h"
#include "base/err.h"
#include "orch/control.h"
#include "remote.h"

#include <string.h>

static uint64_t next_request = 1;

uint64_t worker_request_ids(uint32_t n)
{
    /* The top bit keeps these apart from the connection's own ids. */
    return (1ull << 63) |
           __atomic_fetch_add(&next_request, n ? n : 1, __ATOMIC_RELAXED);
}

uint64_t worker_request_id(void)
{
    return worker_request_ids(1);
}

strata_err worker_remote_control(strata_worker *w, strata_orch *o, int node,
                                 struct wire_control *c, void *reply,
                                 size_t cap, struct wire_msg *out)
{
    struct remote_node *r = w->nodes[node].remote;
    struct orch_ctl ctl;
    struct orch_ctl *p = &ctl;
    struct wire_buf frame;
    struct wire_msg m;
    strata_err err;

    c->request_id = worker_request_id();
    m.type = WIRE_MSG_CONTROL;
    m.u.control = *c;
    wire_buf_init(&frame);
    err = wire_msg_pack(&m, &frame);
    if (err) {
        wire_buf_fini(&frame);
        return err;
    }
    memset(&ctl, 0, sizeof(ctl));
    ctl.op = MBX_CTL_NODE_CMD;
    ctl.arg[1] = c->request_id;
    ctl.staged = frame.data;
    ctl.staged_len = (uint32_t)frame.len;
    ctl.staged_reply = reply;
    ctl.staged_reply_cap = (uint32_t)cap;
    /* From an orch fn (window copies): after the node tasks before it. */
    ctl.ordered = o != NULL;
    err = orch_control_post(w->sched, o, node, &ctl, NULL);
    if (!err)
        err = orch_control_wait(w->sched, &p, 1);
    wire_buf_fini(&frame);
    if (err)
        return err;
    err = wire_frame_unpack(reply, ctl.staged_reply_len, out);
    if (err)
        return base_fail(err, "node %d (%s): bad reply to %s: %s", node,
                         r->endpoint, wire_ctrl_op_name(c->op),
                         strata_errmsg());
    if (out->type != WIRE_MSG_CONTROL_REPLY ||
        out->u.control_reply.request_id != c->request_id) {
        wire_msg_free(out);
        return base_fail(STRATA_EPROTO,
                         "node %d (%s): a reply to %s that "
                         "does not match it",
                         node, r->endpoint, wire_ctrl_op_name(c->op));
    }
    if (out->u.control_reply.error) {
        err = base_fail(out->u.control_reply.error, "node %d (%s): %s: %s",
                        node, r->endpoint, wire_ctrl_op_name(c->op),
                        out->u.control_reply.message);
        wire_msg_free(out);
    }
    return err;
}

strata_err strata_worker_create_remote_buffer(strata_worker *w, int node_id,
                                              size_t nbytes,
                                              strata_buffer **out)
{
    struct wire_control c = {.op = WIRE_CTRL_BUFFER_CREATE};
    uint8_t reply[4096];
    struct wire_msg m;
    strata_buffer *b;
    strata_err err;

    if (!w || !out)
        return base_fail_null("strata_worker_create_remote_buffer",
                              !w ? "w" : "out");
    err = worker_check_process(w, "strata_worker_create_remote_buffer");
    if (err)
        return err;
    if (nbytes == 0)
        return base_fail(STRATA_EINVAL,
                         "strata_worker_create_remote_buffer: nbytes is 0");
    if (w->level < 4 || node_id < 0 || (size_t)node_id >= w->num_nodes)
        return base_fail(STRATA_EINVAL,
                         "strata_worker_create_remote_buffer: node_id %d: "
                         "the worker has no such node",
                         node_id);
    if (!w->nodes[node_id].remote)
        return base_fail(STRATA_EINVAL,
                         "node %d is forked on this host: it maps host "
                         "buffers (strata_worker_create_buffer) directly",
                         node_id);
    if (w->state != WORKER_READY)
        return base_fail(STRATA_ESTATE,
                         "remote buffers are made after strata_worker_init");
    b = base_calloc(1, sizeof(*b));
    if (!b)
        return base_fail(STRATA_ENOMEM, "out of memory creating a buffer");
    b->size = nbytes;
    b->owner = w;
    b->creator = w->creator;
    b->remote = true;
    b->node = node_id;
    b->id = worker_buffer_next_id();
    c.operands.present =
        WIRE_OPND_BIT(WIRE_OPND_NBYTES) | WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID);
    c.operands.nbytes = nbytes;
    c.operands.buffer_id = b->id;
    err = worker_remote_control(w, NULL, node_id, &c, reply, sizeof(reply), &m);
    if (!err)
        wire_msg_free(&m);
    if (!err)
        err = worker_buffer_track(w, b);
    if (err) {
        base_free(b);
        return err;
    }
    *out = b;
    return STRATA_OK;
}

int strata_buffer_node(const strata_buffer *b)
{
    return b && b->remote ? b->node : -1;
}

/* Pieces that fit one CONTROL and its reply in the staging area. */
#define PIECE_MAX (MBX_STAGING_SIZE - (64u << 10))

strata_err worker_remote_copy(strata_worker *w, strata_orch *o, int node,
                              const struct wire_control *tmpl, void *data,
                              size_t n, bool write)
{
    uint8_t *reply = base_malloc(PIECE_MAX + 4096);
    strata_err err = STRATA_OK;

    if (!reply)
        return base_fail(STRATA_ENOMEM, "out of memory for a copy");
    for (size_t done = 0; !err && done < n;) {
        size_t len = n - done < PIECE_MAX ? n - done : PIECE_MAX;
        struct wire_control c = *tmpl;
        struct wire_msg m;

        c.operands.present |=
            WIRE_OPND_BIT(WIRE_OPND_OFFSET) | WIRE_OPND_BIT(WIRE_OPND_NBYTES);
        c.operands.offset = tmpl->operands.offset + done;
        c.operands.nbytes = len;
        if (write) {
            c.operands.present |= WIRE_OPND_BIT(WIRE_OPND_DATA);
            c.operands.data = (const uint8_t *)data + done;
            c.operands.data_len = len;
        }
        err =
            worker_remote_control(w, o, node, &c, reply, PIECE_MAX + 4096, &m);
        if (err)
            break;
        if (!write) {
            const struct wire_operands *res = &m.u.control_reply.results;

            if (!(res->present & WIRE_OPND_BIT(WIRE_OPND_DATA)) ||
                res->data_len != len)
                err = base_fail(STRATA_EPROTO,
                                "node %d: %s answered %zu bytes, not %zu", node,
                                wire_ctrl_op_name(c.op), res->data_len, len);
            else
                memcpy((uint8_t *)data + done, res->data, len);
        }
        wire_msg_free(&m);
        done += len;
    }
    base_free(reply);
    return err;
}

static strata_err remote_copy(strata_buffer *b, size_t offset, void *data,
                              size_t n, bool write)
{
    struct wire_control c = {.op = write ? WIRE_CTRL_BUFFER_WRITE
                                         : WIRE_CTRL_BUFFER_READ};

    c.operands.present = WIRE_OPND_BIT(WIRE_OPND_BUFFER_ID);
    c.operands.buffer_id = b->id;
    c.operands.offset = offset;
    return worker_remote_copy(b->owner, NULL, b->node, &c, data, n, write);
}

static strata_err copy(strata_buffer *b, size_t offset, void *data, size_t n,
                       bool write)
{
    const char *what = write ? "strata_buffer_write" : "strata_buffer_read";
    strata_worker *w;
    uint32_t pins = 0;

    if (!b || (!data && n > 0))
        return base_fail_null(what, !b ? "b" : write ? "src" : "dst");
    if (offset > b->size || n > b->size - offset)
        return base_fail(STRATA_EINVAL,
                         "%s: offset %zu + n %zu is outside the %zu-byte "
                         "buffer",
                         what, offset, n, b->size);
    if (worker_check_process(b->owner, what))
        return STRATA_ESTATE;
    if (n == 0)
        return STRATA_OK;
    w = b->owner;
    if (w->sched) {
        orch_lock(w->sched);
        pins = b->pins;
        orch_unlock(w->sched);
    }
    if (pins)
        return base_fail(STRATA_ESTATE,
                         "%s: buffer %llu is named by %u unfinished task(s)",
                         what, (unsigned long long)b->id, pins);
    if (b->remote)
        return remote_copy(b, offset, data, n, write);
    if (b->device)
        return worker_device_buffer_copy(b, offset, data, n, write);
    /* Resident, and kept so until the copy is done: another thread's
     * spill must not take the bytes out from under it (a write to pages
     * already spilled would be lost). */
    if (!b->foreign) {
        strata_err err = worker_mem_access_held(&w->mem, b);

        if (err)
            return err;
    }
    if (write)
        memcpy((uint8_t *)b->data + offset, data, n);
    else
        memcpy(data, (const uint8_t *)b->data + offset, n);
    if (!b->foreign)
        worker_mem_let_go(&w->mem, b);
    return STRATA_OK;
}

strata_err strata_buffer_write(strata_buffer *b, size_t offset, const void *src,
                               size_t n)
{
    return copy(b, offset, (void *)(uintptr_t)src, n, true);
}

strata_err strata_buffer_read(strata_buffer *b, size_t offset, void *dst,
                              size_t n)
{
    return copy(b, offset, dst, n, false);
}
