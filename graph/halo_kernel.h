/* The halo kernels' shared state and helpers: private to graph/
 * (halo_exec_kernel.c runs a rank, halo_exec_cache.c keeps index arrays
 * between calls, halo_exec_stream.c streams large paged ranks). */
#ifndef GRAPH_HALO_KERNEL_H
#define GRAPH_HALO_KERNEL_H

#include "halo_exec_int.h"
#include "rowsum.h"

#include <stdbool.h>
#include <stdint.h>

/* Everything a rank's kernel works from. */
struct rank_ctx {
    const char *plan;
    const struct halo_plan_hdr *hdr;
    const struct halo_rank_plan *rp;
    const strata_comm_context *cc;
    struct halo_stats *stats;
    const struct halo_edge_entry *edge;
    uint32_t rank;
    strata_dtype dtype;
    size_t features;
    size_t rb; /* bytes per row */
    size_t data_off;
    /* Local handles: rank r's exchange region at xchg + r * xchg_stride
     * (else NULL: in its window, at data_off). */
    char *xchg;
    size_t xchg_stride;
    /* The mpi transport: every rank's window (flags, stamps, data) at
     * win + r * win_stride in the node's mailbox, and cc NULL (else
     * NULL: the domain's windows, cc->window_base). */
    char *win;
    size_t win_stride;
    uint64_t rows; /* owned */
    const char *in;
    char *out;
    const int64_t *row_ptr; /* rebased, rows + 1 */
    const int64_t *cols;    /* global ids */
    int64_t *paged_rows;    /* owned copies when paged */
    int64_t *paged_cols;
    uint64_t *loc; /* per entry: owned row, or rows + ghost index */
    /* Interior rows, then boundary rows descending (the VJP's order, the
     * same whatever the chunks); then in the same allocation (of
     * halo_k_order_len entries, halo_k_round_layout) round_end and, with
     * several rounds, round_rows. */
    uint64_t *order;
    uint64_t num_interior;
    bool cached; /* paged rows, loc and order belong to a cache entry */
    /* Forward hand-off in chunks (hdr->chunk_rows rows of each block):
     * round t of a receiver needs chunk t of every peer that has one; the
     * boundary rows of round t, round_rows[round_end[t - 1] ..
     * round_end[t]) (from 0 for t = 0), read nothing of a later chunk. */
    uint64_t num_rounds;  /* receive: most chunks of any peer's block */
    uint64_t send_rounds; /* send: most chunks of any block sent */
    uint64_t packed;      /* send rounds packed and signalled */
    uint64_t *round_end;
    uint64_t *round_rows;
    const char **ghost_row; /* forward: ghost g in its owner's window */
    /* Forward: where source l lies, own rows then each peer's ghosts (a
     * peer's ghosts are one block of its window); 0 segments when they
     * need more than HALO_CSR_MAX_SEGS (ghost_row serves then). */
    struct halo_seg segs[HALO_CSR_MAX_SEGS];
    size_t num_segs;
    bool signaled;
    int64_t arrived; /* latest signal time of the peers waited for */
};

/* Rank r's window: the domain's, or its part of the mpi mailbox. */
static inline char *halo_k_window(const struct rank_ctx *c, uint32_t r)
{
    return c->win ? c->win + (size_t)r * c->win_stride
                  : (char *)c->cc->window_base[r];
}

/* The mpi transport's kernel arguments (halo_exec_mpi.c): tensor nt is
 * the node's mailbox, scalar 3 its window stride; sets c->win. */
strata_err halo_mpi_kernel_windows(const strata_args *args, size_t nt,
                                   struct rank_ctx *c);

/* Source rows handed to halo_rowsum at a time. */
#define HALO_K_SRC_BATCH 64

/* halo_exec_kernel.c: a rank's rows */
/* The row of source l (an index of c->loc): owned, or a ghost in its
 * owner's window. */
static inline const void *halo_k_source(const struct rank_ctx *c, uint64_t l)
{
    return l < c->rows ? c->in + l * c->rb : c->ghost_row[l - c->rows];
}
/* Rank r's part of the plan. */
static inline const struct halo_rank_plan *
halo_k_rank_plan(const struct rank_ctx *c, uint64_t r)
{
    return halo_plan_rank(c->plan, r);
}

/* row *= w, over one row. */
static inline void halo_k_row_scale(const struct rank_ctx *c, void *row,
                                    double w)
{
    if (c->dtype == STRATA_F32)
        for (size_t f = 0; f < c->features; f++)
            ((float *)row)[f] *= (float)w;
    else
        for (size_t f = 0; f < c->features; f++)
            ((double *)row)[f] *= w;
}
/* Row i of the output from its entries [lo, hi): global ids cols[k],
 * local indices loc[k] (owned row, or rows + ghost index). */
void halo_k_forward_row(const struct rank_ctx *c, uint64_t i,
                        const int64_t *cols, const uint64_t *loc, int64_t lo,
                        int64_t hi);
/* Adds row i's cotangent into its sources among entries [lo, hi): the
 * ghost ones (into this rank's window) with ghosts set, else the owned
 * ones (into out). */
void halo_k_vjp_row(const struct rank_ctx *c, uint64_t i, const int64_t *cols,
                    const uint64_t *loc, int64_t lo, int64_t hi, bool ghosts);
/* The ghost index of source id (STRATA_EINVAL when it is no ghost). */
strata_err halo_k_ghost_index(const struct rank_ctx *c, int64_t id,
                              uint64_t *out);
/* Adds what peer s holds for this rank's rows (its ghost cotangents). */
void halo_k_vjp_receive(const struct rank_ctx *c, const struct halo_peer *s);

/* halo_exec_xfer.c: a rank's side of the windows. */
const struct halo_peer *halo_k_peers(const struct rank_ctx *c, bool send);
/* VJP: zeroes this rank's ghost cotangent slots before they accumulate. */
void halo_k_ghosts_zero(const struct rank_ctx *c);
/* The data region of rank r: its exchange region, or its window's. */
char *halo_k_window_data(const struct rank_ctx *c, uint32_t r);
/* Tells every peer that waits on this rank that all its data is there
 * (forward: every chunk; VJP: its ghost cotangents). Also used on
 * failure, so peers finish instead of waiting out their timeout (the run
 * fails with this rank's error anyway). */
void halo_k_signal_all(struct rank_ctx *c, bool send);
/* How long one wait for a peer may take: timeout_s, or over the mpi
 * transport longer (the exchange's deadline decides there). */
double halo_k_wait_s(const struct rank_ctx *c);
/* Waits until peer handed over at least need (chunks, or 1 in the VJP). */
strata_err halo_k_wait_for(struct rank_ctx *c, uint64_t peer, uint64_t need);
void halo_k_exchange_done(struct rank_ctx *c);
/* Packs every block, signalling nothing. */
void halo_k_pack(struct rank_ctx *c);
/* Packs chunk c->packed of every block that has one and signals each. */
void halo_k_pack_round(struct rank_ctx *c);
/* Packs every chunk not packed yet, signalling each. */
void halo_k_pack_rest(struct rank_ctx *c);
/* Waits for every chunk of every peer. */
strata_err halo_k_wait_ghosts(struct rank_ctx *c);
/* Waits for chunk t of every peer whose block has one. */
strata_err halo_k_wait_round(struct rank_ctx *c, uint64_t t);
void halo_k_point_ghosts(struct rank_ctx *c);
/* Sets num_rounds and send_rounds from the plan. */
void halo_k_count_rounds(struct rank_ctx *c);
/* Entries of c->order's allocation; where round_end and round_rows lie
 * in it (num_interior set); the boundary rows by round into them. */
size_t halo_k_order_len(const struct rank_ctx *c);
void halo_k_round_layout(struct rank_ctx *c);
strata_err halo_k_group_rounds(struct rank_ctx *c);

/* halo_exec_cache.c: index arrays of the plans a chip ran lately. */
/* Opens the rank's paged store, failing (as "the store changed") unless
 * its files are the ones the plan was made from. */
strata_err halo_k_open_store(const struct rank_ctx *c, strata_gfg **out);
/* Fills c from the cache (c->cached); false when its plan is not there. */
bool halo_k_cache_take(struct rank_ctx *c);
/* At the end of a call: keeps c's index arrays when ok and they fit,
 * else frees them unless a cache entry still holds them. */
void halo_k_cache_release(struct rank_ctx *c, bool ok);
/* What keeping c's index arrays takes: the one measure the cache and the
 * choice to stream (halo_k_streams) both use. */
size_t halo_k_index_bytes(const struct rank_ctx *c);

/* halo_exec_stream.c: the forward and VJP of a paged rank too large for
 * the cache, streamed through a page of rows. */
bool halo_k_streams(const struct rank_ctx *c);
strata_err halo_k_forward_stream(struct rank_ctx *c);
strata_err halo_k_vjp_stream(struct rank_ctx *c);

#endif
