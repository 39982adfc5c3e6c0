/* Private interfaces of the graph module, shared by its files and its
 * tests. Nothing outside graph/ and tests/graph/ includes this. */
#ifndef GRAPH_INT_H
#define GRAPH_INT_H

#include <strata/strata.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Remote columns buffered before a sort-and-merge into the ghost set
 * (8 MiB of int64); bounds derive's working memory. */
#define GRAPH_GHOST_CHUNK ((size_t)1 << 20)
/* Rows of row_ptr read per page by the paged derive. */
#define GRAPH_PAGE_ROWS ((size_t)1 << 16)
/* Largest manifest.json accepted (v2 manifests list their fields). */
#define GRAPH_MANIFEST_MAX ((size_t)1 << 20)

#define GRAPH_FORMAT_V1 "tiga.gfg.csr.v1"
#define GRAPH_FORMAT_V2 "tiga.gfg.csr.v2"

/* ---- CSR validation (halo_map.c) ---- */

/* Checks row_ptr[0] == 0, row_ptr monotonic, columns in [0, num_entities)
 * and that both counts fit int64. who prefixes the message. */
strata_err graph_csr_check(const strata_csr_view *csr, const char *who);
/* strata_halo_maps_collective, its errors prefixed by who (the caller
 * the user called, e.g. a halo plan naming its spec's csr). */
strata_err graph_halo_maps(const strata_csr_view *csr, uint32_t world,
                           strata_halo_map **maps_out, const char *who);

/* ---- Ghost accumulator (ghosts.c) ---- */

/* Collects the sorted unique columns outside [begin, end) in bounded
 * memory: remote columns are buffered into chunk (chunk_cap entries) and
 * merged into ids when it fills. */
struct graph_ghosts {
    uint64_t begin;
    uint64_t end;
    int64_t *ids; /* sorted, unique */
    size_t count;
    int64_t *chunk;
    size_t chunk_len;
    size_t chunk_cap;
    /* With graph_ghosts_use_bitmap: one bit per id of [0, n) instead of
     * the chunks (allocated at the first add). */
    uint64_t n;
    uint64_t *bits;
};

/* chunk_cap 0 means GRAPH_GHOST_CHUNK; the chunk is allocated lazily. */
void graph_ghosts_init(struct graph_ghosts *g, uint64_t begin, uint64_t end,
                       size_t chunk_cap);
/* Marks ghosts in a bitmap over ids [0, n) (n / 8 bytes) instead of
 * sorting and merging chunks: linear in the columns added, where merging
 * costs the ghosts so far at every chunk (minutes for a billion-edge
 * random graph). The derives use it for a rank fed more columns than one
 * chunk and at least n / 64 of them, so the bitmap is at most 8 bytes
 * per column. */
void graph_ghosts_use_bitmap(struct graph_ghosts *g, uint64_t n);
/* Adds n columns (already range-checked); owned ones are ignored. */
strata_err graph_ghosts_add(struct graph_ghosts *g, const int64_t *cols,
                            size_t n);
/* Merges what is buffered; afterwards ids/count is the full ghost set. */
strata_err graph_ghosts_finish(struct graph_ghosts *g);
/* Frees everything still held (idempotent). */
void graph_ghosts_fini(struct graph_ghosts *g);

/* ---- Halo map construction (halo_map.c) ---- */

/* Makes rank's map from a finished ghost set over n entities, taking the
 * ghost array (g->ids is NULL afterwards, on success and failure alike),
 * with send_to from peer_requests (may be NULL). */
strata_err graph_halo_map_build(uint64_t n, uint32_t world, uint32_t rank,
                                struct graph_ghosts *g,
                                const strata_id_list *peer_requests,
                                strata_halo_map **out);

/* ---- Manifest (gfg_manifest.c) ---- */

struct graph_manifest {
    int version; /* 1 or 2 */
    strata_dtype index_dtype;
    uint64_t num_src; /* <= INT64_MAX */
    uint64_t num_dst;
    uint64_t num_edges;
    bool sorted_by_dst; /* true when absent */
};

/* Parses manifest text of len bytes (strict JSON). STRATA_EINVAL for bad
 * JSON or content, STRATA_ENOTSUP for an unknown format. */
strata_err graph_manifest_parse(const char *text, size_t len,
                                struct graph_manifest *out);
/* Writes the v1 manifest text exactly as the reference system does
 * (sorted keys, 2-space indent, trailing newline) into buf; returns its
 * length, or 0 if size is too small. */
size_t graph_manifest_format(const struct graph_manifest *m, char *buf,
                             size_t size);

/* ---- Index files (gfg.c) ---- */

/* Reads count indices starting at index first of row_ptr.bin (or
 * col_idx.bin) into out, decoded to int64. STRATA_EIO on a short read. */
strata_err graph_gfg_read_row_ptr(const strata_gfg *g, uint64_t first,
                                  size_t count, int64_t *out);
strata_err graph_gfg_read_cols(const strata_gfg *g, uint64_t first,
                               size_t count, int64_t *out);

/* Which files a store's index files are, and how they last changed:
 * device, inode, size and mtime (ns) of row_ptr.bin, then col_idx.bin. A
 * store saved again, or written in place, gets another stamp. */
struct graph_gfg_stamp {
    uint64_t w[8];
};

/* The stamp of an open store (its open files). */
strata_err graph_gfg_stamp_of(const strata_gfg *g, struct graph_gfg_stamp *out);
/* The stamp of the store at path now. */
strata_err graph_gfg_stamp_at(const char *path, struct graph_gfg_stamp *out);

#endif /* GRAPH_INT_H */
