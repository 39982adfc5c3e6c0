/* HELLO: the first message of a session sizes its L3 worker, which
 * starts on a pool thread while the loop goes on answering heartbeats;
 * HELLO_REPLY goes out once it is up. */
#include "session_int.h"

#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/fault.h"
#include "base/hostid.h"
#include "base/log.h"
#include "domain/global.h"
#include "session_trace.h"
#include "worker_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static strata_err start_worker(const struct wire_hello *h, strata_worker **w)
{
    strata_worker_config cfg;
    int *ids = base_calloc(h->num_chips ? h->num_chips : 1, sizeof(int));
    strata_err err;

    if (!ids)
        return base_fail(STRATA_ENOMEM, "out of memory");
    for (size_t i = 0; i < h->num_chips; i++)
        ids[i] = (int)h->chip_ids[i];
    strata_worker_config_init(&cfg, 3);
    cfg.platform = h->platform;
    cfg.comm_profile = h->comm_profile;
    cfg.chip_ids = ids;
    cfg.num_chips = h->num_chips;
    cfg.num_sub_workers = h->num_sub_workers;
    /* The tree's remaining start-up budget, not a fresh one. */
    if (h->startup_budget_ms)
        cfg.startup_timeout_s = (double)h->startup_budget_ms / 1e3;
    err = strata_worker_create(&cfg, w);
    base_free(ids);
    if (!err) {
        err = strata_worker_init(*w);
        if (err) {
            char msg[STRATA_ERRMSG_MAX];

            snprintf(msg, sizeof(msg), "%s", strata_errmsg());
            if (strata_worker_destroy(*w) != STRATA_OK)
                LOG_WARN("destroy after a failed init: %s", strata_errmsg());
            *w = NULL;
            err = base_fail(err, "%s", msg);
        }
    }
    return err;
}

static void start_job_fn(struct spool_job *job)
{
    struct sstart *st = (struct sstart *)job;

    st->err = start_worker(&st->m.u.hello, &st->w);
    if (!st->err)
        gnode_set_window_cap(st->w, st->s->lim.max_window_bytes);
    if (st->err)
        snprintf(st->msg, sizeof(st->msg), "%s", strata_errmsg());
    /* The loop may have ended: finish() then takes st->w. */
    event_active(st->s->started, 0, 0);
}

static void send_hello_reply(struct session *s, const struct wire_hello *h,
                             uint16_t version, strata_err err, const char *msg)
{
    struct wire_msg m = {.type = WIRE_MSG_HELLO_REPLY};
    struct wire_hello_reply *r = &m.u.hello_reply;
    struct base_host_id id;
    char host[WIRE_NAME_MAX + 1];

    /* Which host this is (boot id and name), as global domains judge it. */
    base_host_id(&id);
    snprintf(host, sizeof(host), "%s", id.name[0] ? id.name : "strata-node");
    r->boot_id = id.boot;
    r->version = err ? 0 : version;
    s->proto = r->version;
    r->error = err;
    r->message = err ? msg : "";
    r->capabilities =
        err ? 0
            : h->capabilities &
                  (WIRE_CAP_DATA_CHUNKS | WIRE_CAP_REMOTE_BUFFERS |
                   WIRE_CAP_GLOBAL_DOMAINS | WIRE_CAP_DEADLINES |
                   WIRE_CAP_STARTUP_HEARTBEATS | WIRE_CAP_ORDERED_DOMAIN_CMDS |
                   (s->traced ? WIRE_CAP_TRACE : 0));
    /* As a node from before the queue of domain commands (tests). */
    if (BASE_FAULT("session.unordered"))
        r->capabilities &= ~WIRE_CAP_ORDERED_DOMAIN_CMDS;
    r->has_clock = !err && s->traced;
    r->hello_rx_ns = r->has_clock ? s->hello_ns : 0;
    r->time_ns = r->has_clock ? base_now_ns() : 0;
    r->node_name = host;
    r->pid = (uint32_t)getpid();
    session_send_msg(s, &m);
    if (err) {
        LOG_WARN("refused HELLO: %s", msg);
        wire_conn_close(s->conn, (uint32_t)err, "HELLO refused");
    }
}

/* The start job is done (loop thread). */
void session_on_started(evutil_socket_t fd, short what, void *arg)
{
    struct session *s = arg;
    struct sstart *st = s->start;
    const struct wire_hello *h = &st->m.u.hello;

    (void)fd;
    (void)what;
    s->start = NULL;
    s->w = st->w;
    send_hello_reply(s, h, st->version, st->err, st->msg);
    if (!st->err) {
        s->state = S_READY;
        s->peer_pid = h->pid;
        LOG_INFO("session for %s (pid %u): %zu chips, %u sub workers",
                 h->node_name, h->pid, h->num_chips, h->num_sub_workers);
    }
    wire_msg_free(&st->m);
    base_free(st);
}

/* Counts want processes in the daemon's total (worker_proc_cap), or
 * STRATA_EBUSY naming the limit when they would pass it. */
static strata_err reserve_procs(const struct worker_proc_cap *c, uint32_t want)
{
    uint64_t total = 0;

    if (!c || !c->slots || c->slot >= c->num_slots)
        return STRATA_OK;
    /* Store, then sum (both sequentially consistent): of two sessions
     * racing, each sees the other's store or the other sees its own. */
    __atomic_store_n(&c->slots[c->slot], want, __ATOMIC_SEQ_CST);
    for (uint32_t i = 0; i < c->num_slots; i++)
        total += __atomic_load_n(&c->slots[i], __ATOMIC_SEQ_CST);
    if (total <= c->max_total)
        return STRATA_OK;
    __atomic_store_n(&c->slots[c->slot], 0, __ATOMIC_SEQ_CST);
    return base_fail(STRATA_EBUSY,
                     "HELLO asks for %u chips and sub workers: this node "
                     "already runs %llu of the %u processes it allows for "
                     "all its sessions together (strata-node "
                     "--max-procs-total); try again later",
                     want, (unsigned long long)(total - want), c->max_total);
}

/* Takes m's memory. */
void session_on_hello(struct session *s, struct wire_msg *m)
{
    const struct wire_hello *h = &m->u.hello;
    struct sstart *st;
    uint16_t version = 0;
    strata_err err;

    s->hello_ns = base_now_ns();
    err = wire_proto_choose(WIRE_PROTO_MIN, WIRE_PROTO_MAX, h->proto_min,
                            h->proto_max, &version);
    if (!err && h->num_chips + h->num_sub_workers > s->lim.max_procs)
        err = base_fail(STRATA_EINVAL,
                        "HELLO asks for %zu chips and %u sub workers: this "
                        "node allows %u processes per session "
                        "(strata-node --max-procs)",
                        h->num_chips, h->num_sub_workers, s->lim.max_procs);
    if (!err)
        err = reserve_procs(s->lim.procs,
                            (uint32_t)h->num_chips + h->num_sub_workers);
    st = err ? NULL : base_calloc(1, sizeof(*st));
    if (!err && !st)
        err = base_fail(STRATA_ENOMEM, "out of memory");
    if (err || !st) {
        send_hello_reply(s, h, 0, err, strata_errmsg());
        wire_msg_free(m);
        return;
    }
    st->job.fn = start_job_fn;
    st->s = s;
    st->m = *m;
    st->version = version;
    s->start = st;
    s->state = S_STARTING;
    s->startup_heartbeats = h->capabilities & WIRE_CAP_STARTUP_HEARTBEATS;
    s->traced = session_trace_start(h->capabilities); /* before the forks */
    /* Not counted in work: session_abandon_work must not reach the worker while
     * the job is making it. */
    if (spool_submit(&s->pool, &st->job) != STRATA_OK) {
        s->start = NULL;
        send_hello_reply(s, h, 0, STRATA_ESYS, strata_errmsg());
        wire_msg_free(&st->m);
        base_free(st);
    }
}
