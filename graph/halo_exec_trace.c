/* The halo trace: per-rank records of the last call and the
 * "strata.halo-trace.v1" JSON file. */
#include "base/alloc.h"
#include "base/err.h"
#include "halo_exec_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

void halo_trace_collect(const void *plan, const int *chips, const int *nodes,
                        strata_halo_rank_trace *records)
{
    const struct halo_plan_hdr *hdr = plan;
    const char *base = plan;

    for (uint32_t r = 0; r < hdr->world; r++) {
        const struct halo_rank_plan *rp = halo_plan_rank(plan, r);
        const struct halo_stats *st =
            (const struct halo_stats *)(base + hdr->stats_off +
                                        r * HALO_STATS_STRIDE);
        strata_halo_rank_trace *t = &records[r];

        memset(t, 0, sizeof(*t));
        t->rank = r;
        t->chip = chips[r];
        t->node = nodes ? nodes[r] : -1;
        t->owned_begin = rp->owned_begin;
        t->owned_end = rp->owned_end;
        t->interior_rows = st->interior_rows;
        t->boundary_rows = st->boundary_rows;
        t->ghosts = rp->num_ghosts;
        t->edges = st->edges;
        t->exchange_start_ns = st->exchange_start_ns;
        t->exchange_end_ns = st->exchange_end_ns;
        t->wait_end_ns = st->wait_end_ns;
        t->compute_start_ns = st->compute_start_ns;
        t->compute_end_ns = st->compute_end_ns;
        t->sent_rows = st->sent_rows;
        t->pack_ns = st->pack_ns;
        t->boundary_edges = st->boundary_edges;
        t->boundary_ns = st->boundary_ns;
        t->overlap_ns =
            max64(0, min64(t->exchange_end_ns, t->compute_end_ns) -
                         max64(t->exchange_start_ns, t->compute_start_ns));
    }
}

static const char *reducer_name(uint32_t reducer)
{
    switch (reducer) {
    case STRATA_HALO_SUM:
        return "sum";
    case STRATA_HALO_MEAN:
        return "mean";
    default:
        return "edge";
    }
}

static void write_rank(FILE *f, const strata_halo_rank_trace *t, bool last)
{
    /* Only global handles' ranks name a node: local traces are unchanged. */
    if (t->node >= 0)
        fprintf(f, "    {\"rank\": %u, \"node\": %d,", t->rank, t->node);
    else
        fprintf(f, "    {\"rank\": %u,", t->rank);
    fprintf(f,
            " \"chip\": %d, \"owned_begin\": %llu, "
            "\"owned_end\": %llu, \"interior_rows\": %llu, "
            "\"boundary_rows\": %llu, \"ghosts\": %llu, \"edges\": %llu,\n"
            "     \"exchange_start_ns\": %lld, \"exchange_end_ns\": %lld, "
            "\"wait_end_ns\": %lld, \"compute_start_ns\": %lld, "
            "\"compute_end_ns\": %lld, "
            "\"measured_overlap_ns\": %lld,\n"
            "     \"sent_rows\": %llu, \"pack_ns\": %lld, "
            "\"boundary_edges\": %llu, \"boundary_ns\": %lld}%s\n",
            t->chip, (unsigned long long)t->owned_begin,
            (unsigned long long)t->owned_end,
            (unsigned long long)t->interior_rows,
            (unsigned long long)t->boundary_rows, (unsigned long long)t->ghosts,
            (unsigned long long)t->edges, (long long)t->exchange_start_ns,
            (long long)t->exchange_end_ns, (long long)t->wait_end_ns,
            (long long)t->compute_start_ns, (long long)t->compute_end_ns,
            (long long)t->overlap_ns, (unsigned long long)t->sent_rows,
            (long long)t->pack_ns, (unsigned long long)t->boundary_edges,
            (long long)t->boundary_ns, last ? "" : ",");
}

static void write_json(FILE *f, bool vjp, const struct halo_plan_hdr *hdr,
                       const strata_halo_rank_trace *records)
{
    uint64_t interior = 0;
    uint64_t boundary = 0;
    int64_t overlap = 0;

    for (uint32_t r = 0; r < hdr->world; r++) {
        interior += records[r].interior_rows;
        boundary += records[r].boundary_rows;
        if (records[r].overlap_ns > overlap)
            overlap = records[r].overlap_ns;
    }
    fprintf(f,
            "{\n  \"schema\": \"strata.halo-trace.v1\",\n"
            "  \"op\": \"%s\",\n  \"schedule\": \"%s\",\n"
            "  \"reducer\": \"%s\",\n  \"dtype\": \"%s\",\n"
            "  \"graph\": \"%s\",\n  \"num_rows\": %llu,\n"
            "  \"features\": %llu,\n  \"world\": %u,\n"
            "  \"interior_rows\": %llu,\n  \"boundary_rows\": %llu,\n"
            "  \"measured_overlap_ns\": %lld,\n"
            "  \"measured_overlap_ms\": %.6f,\n  \"ranks\": [\n",
            vjp ? "vjp" : "forward",
            hdr->schedule == STRATA_HALO_SERIALIZED ? "serialized"
            : hdr->schedule == STRATA_HALO_IN_PLACE ? "in_place"
                                                    : "overlapped",
            reducer_name(hdr->reducer),
            hdr->dtype == STRATA_F64 ? "float64" : "float32",
            hdr->gfg_path_off ? "paged" : "memory",
            (unsigned long long)hdr->num_rows,
            (unsigned long long)hdr->features, hdr->world,
            (unsigned long long)interior, (unsigned long long)boundary,
            (long long)overlap, (double)overlap / 1e6);
    for (uint32_t r = 0; r < hdr->world; r++)
        write_rank(f, &records[r], r + 1 == hdr->world);
    fprintf(f, "  ]\n}\n");
}

strata_err halo_trace_write(const char *path, bool vjp, const void *plan,
                            const strata_halo_rank_trace *records)
{
    size_t len = strlen(path) + 32;
    char *tmp = base_malloc(len);
    FILE *f;
    int bad;

    if (!tmp)
        return base_fail(STRATA_ENOMEM, "halo trace: out of memory");
    snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
    f = fopen(tmp, "w");
    if (!f) {
        base_fail(STRATA_EIO, "halo trace: cannot create %s: %s", tmp,
                  strerror(errno));
        base_free(tmp);
        return STRATA_EIO;
    }
    write_json(f, vjp, plan, records);
    bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        base_fail(STRATA_EIO, "halo trace: cannot write %s: %s", path,
                  strerror(errno));
        unlink(tmp);
        base_free(tmp);
        return STRATA_EIO;
    }
    base_free(tmp);
    return STRATA_OK;
}
