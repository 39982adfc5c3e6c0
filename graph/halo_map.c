/* Halo maps: which ghosts a rank receives from whom and which owned values
 * it sends to whom, derived from the rank's owned CSR rows. */
#include "base/alloc.h"
#include "base/err.h"
#include "graph_int.h"

#include <stdlib.h>
#include <string.h>

/* One receive_from or send_to entry: ids[offset, offset + count). */
struct halo_peer {
    uint32_t peer;
    size_t offset;
    size_t count;
};

struct strata_halo_map {
    uint32_t world;
    uint32_t rank;
    uint64_t owned_begin;
    uint64_t owned_end;
    int64_t *ghosts; /* sorted, unique, none owned */
    size_t num_ghosts;
    struct halo_peer *recv; /* ascending peer; slices of ghosts */
    size_t num_recv;
    int64_t *send_ids;      /* per send entry, sorted and unique */
    struct halo_peer *send; /* ascending peer; slices of send_ids */
    size_t num_send;
};

strata_err graph_csr_check(const strata_csr_view *csr, const char *who)
{
    const int64_t *rp = csr->row_ptr;
    uint64_t entries;

    if (csr->num_rows >= (uint64_t)INT64_MAX ||
        csr->num_entities > (uint64_t)INT64_MAX)
        return base_fail(STRATA_EINVAL,
                         "%s: num_rows %llu or num_entities "
                         "%llu does not fit int64",
                         who, (unsigned long long)csr->num_rows,
                         (unsigned long long)csr->num_entities);
    if (!rp)
        return base_fail(STRATA_EINVAL, "%s: row_ptr is NULL", who);
    if (rp[0] != 0)
        return base_fail(STRATA_EINVAL,
                         "%s: CSR endpoints wrong: row_ptr[0] is %lld, not 0",
                         who, (long long)rp[0]);
    for (uint64_t i = 0; i < csr->num_rows; i++)
        if (rp[i + 1] < rp[i])
            return base_fail(STRATA_EINVAL,
                             "%s: row_ptr not monotonic: row_ptr[%llu] = "
                             "%lld < row_ptr[%llu] = %lld",
                             who, (unsigned long long)(i + 1),
                             (long long)rp[i + 1], (unsigned long long)i,
                             (long long)rp[i]);
    entries = (uint64_t)rp[csr->num_rows];
    if (entries > 0 && !csr->col_idx)
        return base_fail(
            STRATA_EINVAL, "%s: col_idx is NULL but row_ptr[%llu] is %llu", who,
            (unsigned long long)csr->num_rows, (unsigned long long)entries);
    for (uint64_t e = 0; e < entries; e++) {
        int64_t c = csr->col_idx[e];

        if (c < 0 || (uint64_t)c >= csr->num_entities)
            return base_fail(STRATA_EINVAL,
                             "%s: column out of range: col_idx[%llu] = %lld "
                             "is not in [0, %llu)",
                             who, (unsigned long long)e, (long long)c,
                             (unsigned long long)csr->num_entities);
    }
    return STRATA_OK;
}

/* Groups the ghosts by owner; owners grow with ids, so one pass does. */
static strata_err build_recv(strata_halo_map *m, uint64_t n)
{
    uint32_t owner;
    strata_err err;

    if (m->num_ghosts == 0)
        return STRATA_OK;
    /* Each entry holds at least one ghost. */
    m->recv = base_calloc(m->num_ghosts < m->world ? m->num_ghosts : m->world,
                          sizeof(*m->recv));
    if (!m->recv)
        return base_fail(STRATA_ENOMEM, "halo map: no memory for %u peers",
                         m->world);
    for (size_t i = 0; i < m->num_ghosts; i++) {
        err = strata_destination_owner((uint64_t)m->ghosts[i], n, m->world,
                                       &owner);
        if (err != STRATA_OK)
            return err;
        if (m->num_recv == 0 || m->recv[m->num_recv - 1].peer != owner) {
            m->recv[m->num_recv].peer = owner;
            m->recv[m->num_recv].offset = i;
            m->num_recv++;
        }
        m->recv[m->num_recv - 1].count++;
    }
    return STRATA_OK;
}

/* Checks every request names an id this rank owns; returns the total. */
static strata_err check_requests(const strata_halo_map *m,
                                 const strata_id_list *req, size_t *total_out)
{
    size_t total = 0;

    for (uint32_t p = 0; p < m->world; p++) {
        if (req[p].count > 0 && !req[p].ids)
            return base_fail(STRATA_EINVAL,
                             "halo map: peer_requests[%u] has %zu ids but a "
                             "NULL array",
                             p, req[p].count);
        if (p == m->rank && req[p].count > 0)
            return base_fail(STRATA_EINVAL,
                             "halo map: rank %u requests %zu ids from itself "
                             "(peer_requests[%u] must be empty)",
                             p, req[p].count, p);
        for (size_t i = 0; i < req[p].count; i++) {
            int64_t id = req[p].ids[i];

            if (id < 0 || (uint64_t)id < m->owned_begin ||
                (uint64_t)id >= m->owned_end)
                return base_fail(STRATA_EINVAL,
                                 "halo map: peer %u requests id %lld, which "
                                 "rank %u does not own (it owns [%llu, %llu))",
                                 p, (long long)id, m->rank,
                                 (unsigned long long)m->owned_begin,
                                 (unsigned long long)m->owned_end);
        }
        total += req[p].count;
    }
    *total_out = total;
    return STRATA_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a;
    int64_t y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static strata_err build_send(strata_halo_map *m, const strata_id_list *req)
{
    size_t total = 0;
    size_t used = 0;
    strata_err err = check_requests(m, req, &total);

    if (err != STRATA_OK || total == 0)
        return err;
    m->send_ids = base_malloc(total * sizeof(*m->send_ids));
    m->send = base_calloc(m->world, sizeof(*m->send));
    if (!m->send_ids || !m->send)
        return base_fail(STRATA_ENOMEM,
                         "halo map: no memory for %zu requested ids", total);
    for (uint32_t p = 0; p < m->world; p++) {
        int64_t *ids = m->send_ids + used;
        size_t k = 0;

        if (req[p].count == 0)
            continue;
        memcpy(ids, req[p].ids, req[p].count * sizeof(*ids));
        qsort(ids, req[p].count, sizeof(*ids), cmp_i64);
        for (size_t i = 0; i < req[p].count; i++)
            if (k == 0 || ids[k - 1] != ids[i])
                ids[k++] = ids[i];
        m->send[m->num_send].peer = p;
        m->send[m->num_send].offset = used;
        m->send[m->num_send].count = k;
        m->num_send++;
        used += k;
    }
    return STRATA_OK;
}

strata_err graph_halo_map_build(uint64_t n, uint32_t world, uint32_t rank,
                                struct graph_ghosts *g,
                                const strata_id_list *peer_requests,
                                strata_halo_map **out)
{
    strata_halo_map *m = base_calloc(1, sizeof(*m));
    strata_err err;

    if (!m) {
        graph_ghosts_fini(g);
        return base_fail(STRATA_ENOMEM, "halo map: no memory");
    }
    m->world = world;
    m->rank = rank;
    m->owned_begin = g->begin;
    m->owned_end = g->end;
    m->ghosts = g->ids;
    m->num_ghosts = g->count;
    g->ids = NULL;
    g->count = 0;
    err = build_recv(m, n);
    if (err == STRATA_OK && peer_requests)
        err = build_send(m, peer_requests);
    if (err != STRATA_OK) {
        strata_halo_map_destroy(m);
        return err;
    }
    *out = m;
    return STRATA_OK;
}

static strata_err check_world(const strata_csr_view *csr, uint32_t world,
                              uint32_t rank, const void *out, const char *who,
                              const char *out_name)
{
    if (!csr || !out)
        return base_fail_null(who, !csr ? "csr" : out_name);
    if (world == 0 || rank >= world)
        return base_fail(STRATA_EINVAL,
                         "%s: need world > 0 and rank < world (got rank %u, "
                         "world %u)",
                         who, rank, world);
    if (csr->num_rows != csr->num_entities)
        return base_fail(STRATA_EINVAL,
                         "%s: halo maps need num_rows == num_entities (got "
                         "%llu rows, %llu entities)",
                         who, (unsigned long long)csr->num_rows,
                         (unsigned long long)csr->num_entities);
    return STRATA_OK;
}

/* Rank's ghosts from an already validated csr. */
static strata_err ghosts_of(const strata_csr_view *csr, uint32_t world,
                            uint32_t rank, struct graph_ghosts *g)
{
    uint64_t begin;
    uint64_t end;
    int64_t first;
    int64_t last;
    strata_err err;

    err = strata_owned_range(csr->num_rows, world, rank, &begin, &end);
    if (err != STRATA_OK)
        return err;
    first = csr->row_ptr[begin];
    last = csr->row_ptr[end];
    graph_ghosts_init(g, begin, end,
                      (size_t)(last - first) < GRAPH_GHOST_CHUNK
                          ? (size_t)(last - first) + 1
                          : GRAPH_GHOST_CHUNK);
    if ((uint64_t)(last - first) > GRAPH_GHOST_CHUNK &&
        csr->num_entities / 64 <= (uint64_t)(last - first))
        graph_ghosts_use_bitmap(g, csr->num_entities);
    /* An empty graph may have no column array at all. */
    err = last > first ? graph_ghosts_add(g, csr->col_idx + first,
                                          (size_t)(last - first))
                       : STRATA_OK;
    if (err == STRATA_OK)
        err = graph_ghosts_finish(g);
    if (err != STRATA_OK)
        graph_ghosts_fini(g);
    return err;
}

strata_err strata_halo_map_derive(const strata_csr_view *csr, uint32_t world,
                                  uint32_t rank,
                                  const strata_id_list *peer_requests,
                                  strata_halo_map **out)
{
    const char *who = "strata_halo_map_derive";
    struct graph_ghosts g;
    strata_err err;

    err = check_world(csr, world, rank, out, who, "out");
    if (err == STRATA_OK)
        err = graph_csr_check(csr, who);
    if (err == STRATA_OK)
        err = ghosts_of(csr, world, rank, &g);
    if (err != STRATA_OK)
        return err;
    return graph_halo_map_build(csr->num_rows, world, rank, &g, peer_requests,
                                out);
}

/* Fills every map's send_to from the others' receive_from: rank q's entry
 * (p, ids) becomes rank p's entry (q, ids). Visiting q in ascending order
 * keeps each send_to sorted by peer. */
static strata_err derive_sends(strata_halo_map **maps, uint32_t world)
{
    size_t *totals = base_calloc(world, sizeof(*totals));

    if (!totals)
        return base_fail(STRATA_ENOMEM, "halo maps: no memory");
    for (uint32_t q = 0; q < world; q++)
        for (size_t i = 0; i < maps[q]->num_recv; i++)
            totals[maps[q]->recv[i].peer] += maps[q]->recv[i].count;
    for (uint32_t p = 0; p < world; p++) {
        if (totals[p] == 0)
            continue;
        maps[p]->send_ids = base_malloc(totals[p] * sizeof(int64_t));
        maps[p]->send = base_calloc(totals[p] < world ? totals[p] : world,
                                    sizeof(struct halo_peer));
        if (!maps[p]->send_ids || !maps[p]->send) {
            strata_err err = base_fail(STRATA_ENOMEM,
                                       "halo maps: no memory "
                                       "for %zu send ids",
                                       totals[p]);

            base_free(totals);
            return err;
        }
        totals[p] = 0; /* now the fill position */
    }
    for (uint32_t q = 0; q < world; q++) {
        for (size_t i = 0; i < maps[q]->num_recv; i++) {
            const struct halo_peer *r = &maps[q]->recv[i];
            strata_halo_map *to = maps[r->peer];

            memcpy(to->send_ids + totals[r->peer], maps[q]->ghosts + r->offset,
                   r->count * sizeof(int64_t));
            to->send[to->num_send].peer = q;
            to->send[to->num_send].offset = totals[r->peer];
            to->send[to->num_send].count = r->count;
            to->num_send++;
            totals[r->peer] += r->count;
        }
    }
    base_free(totals);
    return STRATA_OK;
}

strata_err strata_halo_maps_collective(const strata_csr_view *csr,
                                       uint32_t world,
                                       strata_halo_map **maps_out)
{
    return graph_halo_maps(csr, world, maps_out, "strata_halo_maps_collective");
}

strata_err graph_halo_maps(const strata_csr_view *csr, uint32_t world,
                           strata_halo_map **maps_out, const char *who)
{
    strata_halo_map **maps;
    struct graph_ghosts g;
    strata_err err;
    uint32_t r;

    err = check_world(csr, world, 0, maps_out, who, "maps_out");
    if (err == STRATA_OK)
        err = graph_csr_check(csr, who);
    if (err != STRATA_OK)
        return err;
    maps = base_calloc(world, sizeof(*maps));
    if (!maps)
        return base_fail(STRATA_ENOMEM, "%s: no memory for %u maps", who,
                         world);
    for (r = 0; r < world; r++) {
        err = ghosts_of(csr, world, r, &g);
        if (err == STRATA_OK)
            err = graph_halo_map_build(csr->num_rows, world, r, &g, NULL,
                                       &maps[r]);
        if (err != STRATA_OK)
            goto err_destroy_maps;
    }
    err = derive_sends(maps, world);
    if (err != STRATA_OK)
        goto err_destroy_maps;
    memcpy(maps_out, maps, world * sizeof(*maps));
    base_free(maps);
    return STRATA_OK;

err_destroy_maps:
    for (r = 0; r < world; r++)
        strata_halo_map_destroy(maps[r]);
    base_free(maps);
    return err;
}

void strata_halo_map_destroy(strata_halo_map *m)
{
    if (!m)
        return;
    base_free(m->ghosts);
    base_free(m->recv);
    base_free(m->send_ids);
    base_free(m->send);
    base_free(m);
}

uint32_t strata_halo_map_rank(const strata_halo_map *m)
{
    return m ? m->rank : 0;
}

uint32_t strata_halo_map_world(const strata_halo_map *m)
{
    return m ? m->world : 0;
}

uint64_t strata_halo_map_owned_begin(const strata_halo_map *m)
{
    return m ? m->owned_begin : 0;
}

uint64_t strata_halo_map_owned_end(const strata_halo_map *m)
{
    return m ? m->owned_end : 0;
}

size_t strata_halo_map_num_ghosts(const strata_halo_map *m)
{
    return m ? m->num_ghosts : 0;
}

const int64_t *strata_halo_map_ghost_ids(const strata_halo_map *m)
{
    return m && m->num_ghosts ? m->ghosts : NULL;
}

size_t strata_halo_map_num_receive_peers(const strata_halo_map *m)
{
    return m ? m->num_recv : 0;
}

size_t strata_halo_map_num_send_peers(const strata_halo_map *m)
{
    return m ? m->num_send : 0;
}

static strata_err entry(const char *who, const struct halo_peer *list, size_t n,
                        const int64_t *ids, size_t i, uint32_t *peer_out,
                        const int64_t **ids_out, size_t *count_out)
{
    if (!peer_out || !ids_out || !count_out)
        return base_fail_null(who, !peer_out  ? "peer_out"
                                   : !ids_out ? "ids_out"
                                              : "count_out");
    if (i >= n)
        return base_fail(STRATA_EINVAL, "%s: i is %zu, of %zu entries", who, i,
                         n);
    *peer_out = list[i].peer;
    *ids_out = ids + list[i].offset;
    *count_out = list[i].count;
    return STRATA_OK;
}

strata_err strata_halo_map_receive_from(const strata_halo_map *m, size_t i,
                                        uint32_t *peer_out,
                                        const int64_t **ids_out,
                                        size_t *count_out)
{
    if (!m)
        return base_fail_null("strata_halo_map_receive_from", "m");
    return entry("strata_halo_map_receive_from", m->recv, m->num_recv,
                 m->ghosts, i, peer_out, ids_out, count_out);
}

strata_err strata_halo_map_send_to(const strata_halo_map *m, size_t i,
                                   uint32_t *peer_out, const int64_t **ids_out,
                                   size_t *count_out)
{
    if (!m)
        return base_fail_null("strata_halo_map_send_to", "m");
    return entry("strata_halo_map_send_to", m->send, m->num_send, m->send_ids,
                 i, peer_out, ids_out, count_out);
}

size_t strata_halo_map_bytes_for(const strata_halo_map *m, size_t itemsize,
                                 size_t trailing)
{
    size_t bytes;

    if (!m)
        return 0;
    if (__builtin_mul_overflow(m->num_ghosts, itemsize, &bytes) ||
        __builtin_mul_overflow(bytes, trailing, &bytes))
        return SIZE_MAX;
    return bytes;
}
