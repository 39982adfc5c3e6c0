/*
 * Graph partitioning, halo maps and the .gfg store. Included by strata.h.
 *
 * A graph is a CSR relation by destination: row d lists the sources whose
 * values flow into destination d. Rows are split over `world` ranks by the
 * balanced block partition below; a rank computes its owned rows and needs
 * the values of the sources of those rows that other ranks own (its
 * ghosts). A halo map says, for one rank, which ghosts it receives from
 * whom and which owned values it sends to whom. Every function here is
 * pure or file-based: nothing communicates. See docs/graph.md.
 */
#ifndef STRATA_GRAPH_H
#define STRATA_GRAPH_H

#include <strata/strata.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Partition                                                           */
/* ------------------------------------------------------------------ */

/* Rank r of world owns rows [r*floor(n/world) + min(r, n mod world),
 * (r+1)*floor(n/world) + min(r+1, n mod world)): the first n mod world
 * ranks own one row more; ranks past n own an empty range. STRATA_EINVAL
 * for world == 0, rank >= world or a NULL output. Any thread. */
STRATA_API STRATA_MUST_CHECK strata_err strata_owned_range(uint64_t n,
                                                           uint32_t world,
                                                           uint32_t rank,
                                                           uint64_t *begin_out,
                                                           uint64_t *end_out);
/* The rank that owns entity under strata_owned_range. STRATA_EINVAL if
 * entity >= n, world == 0 or rank_out is NULL. Any thread. */
STRATA_API STRATA_MUST_CHECK strata_err strata_destination_owner(
    uint64_t entity, uint64_t n, uint32_t world, uint32_t *rank_out);

/* ------------------------------------------------------------------ */
/* Halo maps                                                           */
/* ------------------------------------------------------------------ */

/* A borrowed CSR relation by destination. Valid when row_ptr[0] == 0,
 * row_ptr is non-decreasing (so the entry count is row_ptr[num_rows]) and
 * every column lies in [0, num_entities). Halo maps need num_rows ==
 * num_entities (sources and destinations share one id space); the .gfg
 * store also takes rectangular relations (num_src = num_entities,
 * num_dst = num_rows). */
typedef struct strata_csr_view {
    uint64_t num_rows;      /* destinations */
    uint64_t num_entities;  /* sources share the id space */
    const int64_t *row_ptr; /* num_rows + 1 */
    const int64_t *col_idx; /* row_ptr[num_rows] entries; NULL if none */
} strata_csr_view;

/* A borrowed list of entity ids (ids may be NULL when count is 0). */
typedef struct strata_id_list {
    const int64_t *ids;
    size_t count;
} strata_id_list;

/* One rank's halo map: owned range, ghosts, receive_from and send_to.
 * Immutable once made, so any thread may read it concurrently. */
typedef struct strata_halo_map strata_halo_map;

/* Derives rank's halo map from the owned rows of csr:
 * - ghosts: the sorted, unique sources of owned rows outside the owned
 *   range (self loops and multi-edges collapse);
 * - receive_from: the ghosts grouped by ascending owner, peers with nothing
 *   omitted (concatenated, they are the ghosts);
 * - send_to: from peer_requests, an array of world entries where entry p
 *   lists the ids peer p needs from this rank (for example the ghosts p
 *   derived that this rank owns, after an exchange of counts and ids).
 *   Each is sorted and de-duplicated; peers with nothing are omitted.
 *   Every id must be owned by this rank, and this rank's own entry must be
 *   empty. With peer_requests NULL, send_to is empty (use
 *   strata_halo_maps_collective to derive it from the whole graph).
 * The whole CSR is validated. STRATA_EINVAL, naming the reason, for a NULL
 * argument, world == 0, rank >= world, num_rows != num_entities, CSR
 * endpoints wrong (row_ptr[0] != 0), row_ptr not monotonic, a column out of
 * range, or a peer requesting an id this rank does not own (or a NULL id
 * array with a count); STRATA_ENOMEM. On STRATA_OK the caller owns *out
 * (strata_halo_map_destroy). Nothing is retained from csr or
 * peer_requests. Any thread. */
STRATA_API STRATA_MUST_CHECK strata_err strata_halo_map_derive(
    const strata_csr_view *csr, uint32_t world, uint32_t rank,
    const strata_id_list *peer_requests, strata_halo_map **out);

/* Derives every rank's map from the whole csr at once: maps_out must hold
 * world pointers, and maps_out[r] gets rank r's map, whose send_to is what
 * the other ranks' receive_from ask of r (so every send_to entry matches
 * the peer's receive_from entry). Errors as strata_halo_map_derive; on any
 * error nothing is written to maps_out. On STRATA_OK the caller owns each
 * map. Any thread. */
STRATA_API STRATA_MUST_CHECK strata_err strata_halo_maps_collective(
    const strata_csr_view *csr, uint32_t world, strata_halo_map **maps_out);

/* Frees a map (NULL is a no-op). */
STRATA_API void strata_halo_map_destroy(strata_halo_map *m);

/* Accessors. m must be a live map (NULL reads as an empty map); returned
 * arrays live as long as m. Any thread. */
STRATA_API uint32_t strata_halo_map_rank(const strata_halo_map *m);
STRATA_API uint32_t strata_halo_map_world(const strata_halo_map *m);
STRATA_API uint64_t strata_halo_map_owned_begin(const strata_halo_map *m);
STRATA_API uint64_t strata_halo_map_owned_end(const strata_halo_map *m);
STRATA_API size_t strata_halo_map_num_ghosts(const strata_halo_map *m);
/* The sorted ghost ids (NULL when there are none). */
STRATA_API const int64_t *strata_halo_map_ghost_ids(const strata_halo_map *m);
/* Number of receive_from entries (peers with at least one ghost). */
STRATA_API size_t strata_halo_map_num_receive_peers(const strata_halo_map *m);
/* Entry i of receive_from (ascending peer): the peer and the sorted ghost
 * ids it owns. STRATA_EINVAL if i >= strata_halo_map_num_receive_peers or
 * an argument is NULL. */
STRATA_API STRATA_MUST_CHECK strata_err strata_halo_map_receive_from(
    const strata_halo_map *m, size_t i, uint32_t *peer_out,
    const int64_t **ids_out, size_t *count_out);
/* Number of send_to entries (peers that need at least one owned id). */
STRATA_API size_t strata_halo_map_num_send_peers(const strata_halo_map *m);
/* Entry i of send_to (ascending peer): the peer and the sorted owned ids
 * it needs. STRATA_EINVAL if i >= strata_halo_map_num_send_peers or an
 * argument is NULL. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_halo_map_send_to(const strata_halo_map *m, size_t i, uint32_t *peer_out,
                        const int64_t **ids_out, size_t *count_out);
/* Bytes of a ghost buffer: num_ghosts * itemsize * trailing (trailing =
 * elements per entity, e.g. features). SIZE_MAX if that overflows. */
STRATA_API size_t strata_halo_map_bytes_for(const strata_halo_map *m,
                                            size_t itemsize, size_t trailing);

/* ------------------------------------------------------------------ */
/* The .gfg store                                                      */
/* ------------------------------------------------------------------ */

/* An open .gfg store: a directory holding manifest.json, row_ptr.bin
 * ((num_dst + 1) indices) and col_idx.bin (num_edges indices), raw
 * little-endian int32 or int64. Byte-compatible with "tiga.gfg.csr.v1";
 * "tiga.gfg.csr.v2" stores (extra manifest keys, fields/) are read too.
 * The handle is immutable and reads with pread, so any thread may use it
 * concurrently. */
typedef struct strata_gfg strata_gfg;

/* Writes csr as a new "tiga.gfg.csr.v1" store at path, with indices of
 * index_dtype (STRATA_I32 or STRATA_I64; num_src = num_entities, num_dst =
 * num_rows, sorted_by_dst true). The store is written and fsynced in a
 * temporary directory beside path (".<name>.XXXXXX", mode 0700 like
 * mkdtemp) and renamed into place, so path either does not exist or holds
 * a complete store. The parent directory must exist. STRATA_EEXIST if path
 * exists (nothing is replaced); STRATA_EINVAL for a NULL or empty path, a
 * bad dtype, an invalid csr (as strata_halo_map_derive, except that rows
 * and entities may differ) or an index that does not fit int32;
 * STRATA_ENOENT if the parent is missing; STRATA_EIO / STRATA_ESYS when a
 * write or sync fails (the temporary directory is removed; only when the
 * last step, the fsync of the parent after the rename, fails is the store
 * left in place); STRATA_ENOMEM. Any thread. */
STRATA_API STRATA_MUST_CHECK strata_err strata_gfg_save(
    const char *path, const strata_csr_view *csr, strata_dtype index_dtype);

/* Opens the store at path: parses manifest.json, checks that the two
 * files have the sizes it implies and that row_ptr[0] == 0 and
 * row_ptr[num_dst] == num_edges. Reads nothing else. STRATA_ENOENT if the
 * manifest or an index file is missing; STRATA_ENOTSUP for a format other
 * than tiga.gfg.csr.v1/v2; STRATA_EINVAL for a malformed manifest (bad
 * JSON, a missing or mistyped key, an unknown key in v1), wrong file sizes
 * or wrong endpoints; STRATA_ESYS / STRATA_EIO / STRATA_ENOMEM. On
 * STRATA_OK the caller owns *out (strata_gfg_close). Any thread. */
STRATA_API STRATA_MUST_CHECK strata_err strata_gfg_open(const char *path,
                                                        strata_gfg **out);
/* Closes the store's files and frees g (NULL is a no-op). */
STRATA_API void strata_gfg_close(strata_gfg *g);

/* Manifest values of an open store (0 for NULL). Any thread. */
STRATA_API uint64_t strata_gfg_num_rows(const strata_gfg *g);     /* num_dst */
STRATA_API uint64_t strata_gfg_num_entities(const strata_gfg *g); /* num_src */
STRATA_API uint64_t strata_gfg_num_edges(const strata_gfg *g);
/* STRATA_I32 or STRATA_I64. */
STRATA_API strata_dtype strata_gfg_index_dtype(const strata_gfg *g);

/* Number of edges of rows [begin, end) (row_ptr[end] - row_ptr[begin]),
 * reading two indices: how to size col_out for strata_gfg_read_rows.
 * STRATA_EINVAL for begin > end, end > num_rows or corrupt indices;
 * STRATA_EIO / STRATA_ESYS when the read fails. Any thread. */
STRATA_API STRATA_MUST_CHECK strata_err strata_gfg_row_edges(
    const strata_gfg *g, uint64_t begin, uint64_t end, uint64_t *count_out);

/* Reads rows [begin, end) and nothing else: row_ptr_out (end - begin + 1
 * entries) gets their offsets rebased so row_ptr_out[0] == 0, col_out gets
 * their global source ids. col_capacity is col_out's length in entries;
 * size it with strata_gfg_row_edges (col_out may be NULL when the rows
 * have no edges). Indices read are checked: offsets non-decreasing within
 * [0, num_edges], columns within [0, num_entities). STRATA_EINVAL for a
 * NULL argument, begin > end, end > num_rows, col_capacity too small (the
 * message names the count needed) or corrupt indices; STRATA_EIO /
 * STRATA_ESYS when a read fails. On failure the contents of row_ptr_out
 * and col_out are unspecified. Any thread. */
STRATA_API STRATA_MUST_CHECK strata_err strata_gfg_read_rows(
    const strata_gfg *g, uint64_t begin, uint64_t end, int64_t *row_ptr_out,
    int64_t *col_out, size_t col_capacity);

/* strata_halo_map_derive for the graph in an open store, reading only
 * rank's rows (row_ptr[owned_begin..owned_end] and their columns, in
 * bounded pages), so memory stays O(ghosts + page). The rows read are
 * validated as strata_gfg_read_rows does; the rest of the store is not
 * read. The same map as strata_halo_map_derive on the whole graph. Errors
 * as strata_halo_map_derive (num_rows != num_entities included) plus the
 * read errors of strata_gfg_read_rows. Any thread. */
STRATA_API STRATA_MUST_CHECK strata_err strata_halo_map_derive_gfg(
    const strata_gfg *g, uint32_t world, uint32_t rank,
    const strata_id_list *peer_requests, strata_halo_map **out);
/* Opens the store at gfg_path, derives as strata_halo_map_derive_gfg and
 * closes it. Errors of strata_gfg_open and strata_halo_map_derive_gfg. */
STRATA_API STRATA_MUST_CHECK strata_err strata_halo_map_derive_paged(
    const char *gfg_path, uint32_t world, uint32_t rank,
    const strata_id_list *peer_requests, strata_halo_map **out);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_GRAPH_H */
