/* The window side of a halo rank: packing its rows for its neighbours,
 * the signals that hand them over (forward: chunk by chunk), the waits
 * for theirs, and the boundary rows' grouping by the chunk they need. */
#include "base/alloc.h"
#include "base/clock.h"
#include "base/err.h"
#include "halo_kernel.h"

#include <string.h>

static volatile uint32_t *flag(const struct rank_ctx *c, uint32_t owner,
                               uint32_t sender)
{
    return (volatile uint32_t *)(halo_k_window(c, owner) +
                                 sender * sizeof(uint32_t));
}

static int64_t *stamp(const struct rank_ctx *c, uint32_t owner, uint32_t sender)
{
    return (int64_t *)(halo_k_window(c, owner) +
                       halo_stamp_offset(c->hdr->world)) +
           sender;
}

char *halo_k_window_data(const struct rank_ctx *c, uint32_t r)
{
    if (c->xchg)
        return c->xchg + (size_t)r * c->xchg_stride;
    return halo_k_window(c, r) + c->data_off;
}

void halo_k_ghosts_zero(const struct rank_ctx *c)
{
    /* A window starts zeroed; the exchange buffer holds the last call's. */
    if (c->xchg && c->rp->num_ghosts > 0)
        memset(halo_k_window_data(c, c->rank), 0, c->rp->num_ghosts * c->rb);
}

const struct halo_peer *halo_k_peers(const struct rank_ctx *c, bool send)
{
    return (const struct halo_peer *)(c->plan + (send ? c->rp->send_off
                                                      : c->rp->recv_off));
}

/* Tells peer p (an entry of the send or receive list) that more is
 * there: n more chunks, or 1 in the VJP. */
static void hand_over(struct rank_ctx *c, uint64_t peer, uint32_t n, int64_t t)
{
    /* The stamp is published by the signal's full barrier. */
    __atomic_store_n(stamp(c, (uint32_t)peer, c->rank), t, __ATOMIC_RELAXED);
    strata_signal_add(flag(c, (uint32_t)peer, c->rank), n);
}

void halo_k_signal_all(struct rank_ctx *c, bool send)
{
    const struct halo_peer *p;
    uint64_t n;
    int64_t t = (int64_t)base_now_ns();

    /* Before the plan was opened there is nobody to tell. */
    if (c->signaled || !c->rp || (!c->cc && !c->win))
        return;
    p = halo_k_peers(c, send);
    n = send ? c->rp->num_send : c->rp->num_recv;
    c->signaled = true;
    c->arrived = t;
    /* Every chunk at once in the forward: more than a waiter needs after
     * a failure part way through is harmless, it waits for at least. */
    for (uint64_t i = 0; i < n; i++)
        hand_over(c, p[i].peer,
                  send ? (uint32_t)halo_chunks(p[i].count, c->hdr->chunk_rows)
                       : 1,
                  t);
}

double halo_k_wait_s(const struct rank_ctx *c)
{
    double t = c->hdr->timeout_s;

    /* Over the mpi transport a row from another node comes from the
     * node's exchange, whose own deadline (timeout_s) ends the MPI job
     * and fails the call with STRATA_EPEER. A wait as long as that one
     * would race it (a stopped peer rank then failed the call with this
     * chip's STRATA_ETIMEDOUT or the job's end, by chance): the chip's
     * wait is only a backstop for a node that can no longer end it. */
    if (c->win)
        return t * 2 > t + 30 ? t * 2 : t + 30;
    return t;
}

strata_err halo_k_wait_for(struct rank_ctx *c, uint64_t peer, uint64_t need)
{
    strata_err err = strata_signal_wait(flag(c, c->rank, (uint32_t)peer),
                                        (uint32_t)need, halo_k_wait_s(c));
    int64_t t;

    if (err) {
        base_errmsg_prefix("halo: rank %u waiting for rank %llu", c->rank,
                           (unsigned long long)peer);
        return err;
    }
    t = __atomic_load_n(stamp(c, c->rank, (uint32_t)peer), __ATOMIC_RELAXED);
    if (t > c->arrived)
        c->arrived = t;
    return STRATA_OK;
}

/* The exchange ended when the last ghost arrived (or this rank's own
 * signals went out), which may be well before this rank looked. */
void halo_k_exchange_done(struct rank_ctx *c)
{
    c->stats->wait_end_ns = (int64_t)base_now_ns();
    c->stats->exchange_end_ns = c->arrived;
}

/* Rows [k0, k1) of send entry s into this rank's pack region. */
static void pack_rows(struct rank_ctx *c, const struct halo_peer *s,
                      uint64_t k0, uint64_t k1)
{
    const struct halo_rank_plan *q = halo_k_rank_plan(c, s->peer);
    const int64_t *ids =
        (const int64_t *)(c->plan + q->ghost_off) + s->remote_start;
    char *region = halo_k_window_data(c, c->rank);
    int64_t t0 = (int64_t)base_now_ns();

    for (uint64_t k = k0; k < k1; k++)
        memcpy(region + (s->local_start + k) * c->rb,
               c->in + ((uint64_t)ids[k] - c->rp->owned_begin) * c->rb, c->rb);
    c->stats->pack_ns += (int64_t)base_now_ns() - t0;
    c->stats->sent_rows += k1 - k0;
}

void halo_k_pack(struct rank_ctx *c)
{
    const struct halo_peer *s = halo_k_peers(c, true);

    for (uint64_t i = 0; i < c->rp->num_send; i++)
        pack_rows(c, &s[i], 0, s[i].count);
}

void halo_k_pack_round(struct rank_ctx *c)
{
    const struct halo_peer *s = halo_k_peers(c, true);
    uint64_t cr = c->hdr->chunk_rows;
    uint64_t k0 = c->packed * cr;

    for (uint64_t i = 0; i < c->rp->num_send; i++) {
        if (k0 >= s[i].count)
            continue;
        int64_t t;

        pack_rows(c, &s[i], k0, s[i].count - k0 < cr ? s[i].count : k0 + cr);
        t = (int64_t)base_now_ns();
        /* Never earlier than a peer's stamp already seen (its clock may
         * be another node's). */
        if (t > c->arrived)
            c->arrived = t;
        hand_over(c, s[i].peer, 1, t);
    }
    if (++c->packed >= c->send_rounds)
        c->signaled = true;
}

strata_err halo_k_wait_ghosts(struct rank_ctx *c)
{
    const struct halo_peer *r = halo_k_peers(c, false);
    strata_err err = STRATA_OK;

    for (uint64_t i = 0; i < c->rp->num_recv && !err; i++)
        err = halo_k_wait_for(c, r[i].peer,
                              halo_chunks(r[i].count, c->hdr->chunk_rows));
    return err;
}

void halo_k_pack_rest(struct rank_ctx *c)
{
    while (c->packed < c->send_rounds)
        halo_k_pack_round(c);
}

strata_err halo_k_wait_round(struct rank_ctx *c, uint64_t t)
{
    const struct halo_peer *r = halo_k_peers(c, false);

    for (uint64_t i = 0; i < c->rp->num_recv; i++) {
        strata_err err;

        if (t >= halo_chunks(r[i].count, c->hdr->chunk_rows))
            continue; /* all of it was there for an earlier round */
        err = halo_k_wait_for(c, r[i].peer, t + 1);
        if (err)
            return err;
    }
    return STRATA_OK;
}

void halo_k_point_ghosts(struct rank_ctx *c)
{
    const struct halo_peer *r = halo_k_peers(c, false);
    uint64_t next = c->rows;

    for (uint64_t i = 0; i < c->rp->num_recv; i++)
        for (uint64_t k = 0; k < r[i].count; k++)
            c->ghost_row[r[i].local_start + k] =
                halo_k_window_data(c, (uint32_t)r[i].peer) +
                (r[i].remote_start + k) * c->rb;
    /* The same as segments: a receive's rows are consecutive in its
     * peer's window, so source l of it lies at base + l * rb. */
    c->segs[0] = (struct halo_seg){0, (uintptr_t)c->in};
    c->num_segs = 1;
    for (uint64_t i = 0; i < c->rp->num_recv && c->num_segs; i++) {
        uint64_t first = c->rows + r[i].local_start;
        uintptr_t base =
            (uintptr_t)(halo_k_window_data(c, (uint32_t)r[i].peer) +
                        r[i].remote_start * c->rb) -
            (uintptr_t)(first * c->rb);

        if (r[i].count == 0)
            continue;
        if (first != next)
            c->num_segs = 0; /* not in order: ghost_row serves */
        else if (base != c->segs[c->num_segs - 1].base) {
            if (c->num_segs == HALO_CSR_MAX_SEGS)
                c->num_segs = 0;
            else
                c->segs[c->num_segs++] = (struct halo_seg){first, base};
        }
        next = first + r[i].count;
    }
}

void halo_k_count_rounds(struct rank_ctx *c)
{
    const struct halo_peer *s = halo_k_peers(c, true);
    const struct halo_peer *r = halo_k_peers(c, false);
    uint64_t cr = c->hdr->chunk_rows;

    c->num_rounds = c->send_rounds = 0;
    for (uint64_t i = 0; i < c->rp->num_send; i++)
        if (halo_chunks(s[i].count, cr) > c->send_rounds)
            c->send_rounds = halo_chunks(s[i].count, cr);
    for (uint64_t i = 0; i < c->rp->num_recv; i++)
        if (halo_chunks(r[i].count, cr) > c->num_rounds)
            c->num_rounds = halo_chunks(r[i].count, cr);
}

/* The round of every ghost: the chunk of its owner's block it is in. */
static uint64_t *ghost_rounds(const struct rank_ctx *c)
{
    const struct halo_peer *r = halo_k_peers(c, false);
    uint64_t *gr = base_malloc((c->rp->num_ghosts + 1) * sizeof(uint64_t));

    if (!gr)
        return NULL;
    for (uint64_t i = 0; i < c->rp->num_recv; i++)
        for (uint64_t k = 0; k < r[i].count; k++)
            gr[r[i].local_start + k] = k / c->hdr->chunk_rows;
    return gr;
}

size_t halo_k_order_len(const struct rank_ctx *c)
{
    return c->rows + 1 + c->num_rounds + (c->num_rounds > 1 ? c->rows : 0);
}

void halo_k_round_layout(struct rank_ctx *c)
{
    c->round_end = c->order + c->rows + 1;
    c->round_rows = c->num_rounds > 1 ? c->round_end + c->num_rounds
                                      : c->order + c->num_interior;
}

strata_err halo_k_group_rounds(struct rank_ctx *c)
{
    uint64_t nb = c->rows - c->num_interior;
    const uint64_t *b = c->order + c->num_interior;
    uint64_t *gr, *round;

    halo_k_round_layout(c);
    if (c->num_rounds <= 1) {
        if (c->num_rounds == 1)
            c->round_end[0] = nb;
        return STRATA_OK;
    }
    gr = ghost_rounds(c);
    round = base_malloc((nb + 1) * sizeof(uint64_t));
    if (!gr || !round) {
        base_free(gr);
        base_free(round);
        return base_fail(STRATA_ENOMEM, "halo kernel: rank %u: out of memory",
                         c->rank);
    }
    /* A boundary row's round is the latest chunk among its ghosts. */
    memset(c->round_end, 0, c->num_rounds * sizeof(uint64_t));
    for (uint64_t j = 0; j < nb; j++) {
        uint64_t m = 0;

        for (int64_t k = c->row_ptr[b[j]]; k < c->row_ptr[b[j] + 1]; k++)
            if (c->loc[k] >= c->rows && gr[c->loc[k] - c->rows] > m)
                m = gr[c->loc[k] - c->rows];
        round[j] = m;
        c->round_end[m]++;
    }
    /* Counting sort, stable: round_end holds each round's first slot,
     * then, advanced past its rows, its end. */
    for (uint64_t t = 0, at = 0; t < c->num_rounds; t++) {
        uint64_t n = c->round_end[t];

        c->round_end[t] = at;
        at += n;
    }
    for (uint64_t j = 0; j < nb; j++)
        c->round_rows[c->round_end[round[j]]++] = b[j];
    base_free(gr);
    base_free(round);
    return STRATA_OK;
}
