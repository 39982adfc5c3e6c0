/* A traced L4's side of its remote nodes' timeline traces: TRACE offered
 * in HELLO, the offset between the node's clock and this host's, and the
 * node's records fetched before the GOODBYEs (docs/tracing.md). */
#include "base/clock.h"
#include "base/hostid.h"
#include "base/log.h"
#include "remote.h"
#include "trace/trace.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define FETCH_TIMEOUT_S 10

void remote_trace_hello(struct remote_node *r, struct wire_hello *h)
{
    if (!trace_enabled())
        return;
    h->capabilities |= WIRE_CAP_TRACE;
    r->hello_tx_ns = base_now_ns();
}

/* A node on this host (its boot id and name are ours) shares this
 * CLOCK_MONOTONIC: offset 0, exactly. Elsewhere the NTP estimate: the
 * node's HELLO arrival and reply times against this host's HELLO sending
 * and reply arrival; the node's start-up in between cancels out, the
 * difference of the two ways' delays does not. */
void remote_trace_reply(struct remote_node *r, const struct wire_hello_reply *h)
{
    uint64_t t4 = base_now_ns();
    struct base_host_id me, node;

    if (!(h->capabilities & WIRE_CAP_TRACE) || !h->has_clock || !r->hello_tx_ns)
        return;
    base_host_id(&me);
    memset(&node, 0, sizeof(node));
    snprintf(node.name, sizeof(node.name), "%s", h->node_name);
    snprintf(node.boot, sizeof(node.boot), "%s", h->boot_id ? h->boot_id : "");
    r->clock_same_host = base_host_id_same(&me, &node);
    r->clock_offset = r->clock_same_host
                          ? 0
                          : ((int64_t)(h->hello_rx_ns - r->hello_tx_ns) +
                             (int64_t)(h->time_ns - t4)) /
                                2;
    r->traced = true;
    LOG_INFO("remote %s: clock offset %lld ns (%s; round trip %llu ns)",
             r->endpoint, (long long)r->clock_offset,
             r->clock_same_host ? "same host" : "estimated",
             (unsigned long long)((t4 - r->hello_tx_ns) -
                                  (h->time_ns - h->hello_rx_ns)));
}

void remote_trace_heartbeat(struct remote_node *r,
                            const struct wire_heartbeat *hb)
{
    /* Sent at hb->time_ns by the node's clock, so at most then by ours
     * less the offset: node time - arrival <= offset. */
    int64_t bound = (int64_t)(hb->time_ns - base_now_ns());

    if (r->traced && !r->clock_same_host && bound > r->clock_offset)
        r->clock_offset = bound;
}

static void answered(struct remote_node *r)
{
    struct net *net = r->w->net;

    r->trace_waiting = false;
    pthread_mutex_lock(&net->trace_mu);
    net->trace_waiting--;
    pthread_cond_broadcast(&net->trace_cv);
    pthread_mutex_unlock(&net->trace_mu);
}

bool remote_trace_data(struct remote_node *r, const struct wire_trace *t)
{
    if (!r->trace_waiting || !t->is_data)
        return false;
    trace_remote_add((unsigned)r->index, (int32_t)r->session_pid,
                     (int32_t)t->pid, (int32_t)t->ppid, t->role, t->dropped,
                     t->records, t->num_records, -r->clock_offset);
    if (t->last)
        answered(r);
    return true;
}

void remote_trace_lost(struct remote_node *r)
{
    if (r->trace_waiting)
        answered(r);
}

/* On the loop: a request to every traced node; then the token the
 * fetch counted for this callback goes. */
static void ask_all(evutil_socket_t fd, short what, void *arg)
{
    strata_worker *w = arg;
    struct net *net = w->net;

    (void)fd;
    (void)what;
    for (size_t i = 0; i < w->num_nodes; i++) {
        struct remote_node *r = w->nodes[i].remote;
        struct wire_msg m = {.type = WIRE_MSG_TRACE};
        struct wire_buf b;

        if (!r || !r->traced || r->lost || r->closed || !r->conn)
            continue;
        m.u.trace.request_id = ++r->next_req;
        wire_buf_init(&b);
        if (wire_msg_pack(&m, &b) == STRATA_OK &&
            wire_conn_send(r->conn, b.data, b.len) == STRATA_OK) {
            r->trace_waiting = true;
            pthread_mutex_lock(&net->trace_mu);
            net->trace_waiting++;
            pthread_mutex_unlock(&net->trace_mu);
        } else {
            LOG_WARN("remote %s: no trace: %s", r->endpoint, strata_errmsg());
        }
        wire_buf_fini(&b);
    }
    pthread_mutex_lock(&net->trace_mu);
    net->trace_waiting--;
    pthread_cond_broadcast(&net->trace_cv);
    pthread_mutex_unlock(&net->trace_mu);
}

void remote_trace_fetch(strata_worker *w)
{
    struct net *net = w->net;
    struct timespec until;
    int rc = 0;

    if (!trace_enabled())
        return;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += FETCH_TIMEOUT_S;
    pthread_mutex_lock(&net->trace_mu);
    net->trace_waiting = 1; /* ask_all's own */
    pthread_mutex_unlock(&net->trace_mu);
    if (event_base_once(net->base, -1, EV_TIMEOUT, ask_all, w, NULL) != 0) {
        LOG_WARN("cannot ask the remote nodes for their traces");
        return;
    }
    pthread_mutex_lock(&net->trace_mu);
    while (net->trace_waiting > 0 && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&net->trace_cv, &net->trace_mu, &until);
    if (net->trace_waiting > 0)
        LOG_WARN("%u remote nodes' traces did not come within %d s",
                 net->trace_waiting, FETCH_TIMEOUT_S);
    pthread_mutex_unlock(&net->trace_mu);
}
