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
/* Before the guard, as in domain.h. */
#include <strata/strata.h>

#ifndef STRATA_GRAPH_H
#define STRATA_GRAPH_H

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
/* The number of ranks the map was derived for. */
STRATA_API uint32_t strata_halo_map_world(const strata_halo_map *m);
/* First row the map's rank owns. */
STRATA_API uint64_t strata_halo_map_owned_begin(const strata_halo_map *m);
/* One past the last row the map's rank owns. */
STRATA_API uint64_t strata_halo_map_owned_end(const strata_halo_map *m);
/* Number of ghosts (sources outside the owned range). */
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
/* num_edges: the length of col_idx.bin in indices. */
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
 * bounded pages), so memory stays O(ghosts + page) (plus, for a rank of
 * more than 2^20 entries and at least N / 64 of them, an N-bit map of
 * the ghosts: linear time where sorting would not be). The rows read are
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

/* ------------------------------------------------------------------ */
/* Halo execution over a local or a global communication domain         */
/* ------------------------------------------------------------------ */

/* How a row combines the rows of its sources (see docs/halo.md). */
typedef enum strata_halo_reducer {
    STRATA_HALO_SUM = 1,  /* out_i = sum over entries j of row i of x_j */
    STRATA_HALO_MEAN = 2, /* that sum times 1/deg(i) (entries; the
                           * reciprocal rounded to the dtype); 0 for deg 0 */
    STRATA_HALO_EDGE = 3, /* a registered per-edge kernel */
} strata_halo_reducer;

/* When owned rows are computed relative to the ghost exchange. */
typedef enum strata_halo_schedule {
    /* Interior rows (every source owned) while the exchange is in flight,
     * then boundary rows. The default. */
    STRATA_HALO_OVERLAPPED = 0,
    /* The exchange completes first, then every row. */
    STRATA_HALO_SERIALIZED = 1,
    /* No exchange: every rank reads each source row where it lies in the
     * input field, its own rows and its peers' alike (the VJP gathers,
     * for each owned row, the cotangents of the rows that read it, through
     * an index transposed once per plan on each chip). No domain is
     * allocated and no row is copied; the fastest choice for graphs whose
     * contiguous split leaves most rows boundary rows (random, power-law;
     * docs/halo.md, "In place"). Each task names the input field whole.
     * Local handles only (STRATA_EINVAL for members, at create). Results
     * do not depend on the number of chips: the forward is the plain
     * loop's, bit for bit, and the VJP adds each row's terms in row
     * order, as the one-chip VJP does. */
    STRATA_HALO_IN_PLACE = 2,
} strata_halo_schedule;

/* A per-edge kernel for the entry src of row dst. Forward: acc_row is
 * out[dst] (zeroed before the row's first edge), in_row is x[src]. VJP:
 * in_row is grad_out[dst] and acc_row accumulates grad_x[src]. Both rows
 * hold `features` elements of dtype. For the VJP to be the transpose of
 * the forward, the edge must be linear in its input (acc += w(dst, src) *
 * in, with the same w both ways). Runs in chip processes. */
typedef void (*strata_halo_edge_fn)(int64_t dst, int64_t src,
                                    strata_dtype dtype, size_t features,
                                    const void *in_row, void *acc_row);

/* Registers a per-edge kernel under name (1..63 bytes) for
 * STRATA_HALO_EDGE. vjp may be NULL (strata_halo_vjp then answers
 * STRATA_ENOTSUP). Chips inherit the table when they fork, so register
 * before strata_worker_init. The same name with the same functions again
 * is STRATA_OK; other functions under a used name STRATA_EEXIST;
 * STRATA_EINVAL for a bad name or a NULL forward; STRATA_ENOMEM past 64
 * kernels. Main thread. */
STRATA_API STRATA_MUST_CHECK strata_err strata_halo_register_edge(
    const char *name, strata_halo_edge_fn forward, strata_halo_edge_fn vjp);

/* How the ranks of a halo handle hand their rows over (docs/halo.md,
 * "Transports"). */
typedef enum strata_halo_transport {
    /* 0: windows (shared memory) where they work; a global handle whose
     * members are all ranks of one MPI group, one of them on another
     * host than the L4, takes mpi instead (decided at each call). */
    STRATA_HALO_TRANSPORT_DEFAULT = 0,
    /* Windows always: the only transport of local handles and of global
     * handles over forked or strata-node nodes (one host). */
    STRATA_HALO_TRANSPORT_WINDOWS = 1,
    /* Global handles whose members are all ranks of one Open MPI group
     * (strata_worker_add_mpirun_worker_group): rows between ranks of
     * different nodes travel as MPI messages between the ranks' node
     * processes (docs/mpi.md); chips of one node still share memory. */
    STRATA_HALO_TRANSPORT_MPI = 2,
} strata_halo_transport;

/* What to run: a partitioned graph over a list of chips. */
typedef struct strata_halo_spec {
    /* The graph, exactly one of: csr (in memory, num_rows ==
     * num_entities; copied at create) or gfg_path (a .gfg store every
     * chip opens and reads its own rows from inside its kernel). */
    const strata_csr_view *csr;
    const char *gfg_path;
    /* Where the ranks run, exactly one of:
     * - chips: chip ids of the worker (a local handle); chips[r] is rank r
     *   of the partition (rows by strata_owned_range(N, num_chips, r))
     *   and of the local domain each call allocates;
     * - members: chips of the nodes of a level-4 worker (a global handle);
     *   members[r] = (node id, chip id of that node) is rank r of the
     *   partition and of the global domain each call allocates. Nodes
     *   may be forked or remote and their ranks interleaved; a node holds
     *   at most STRATA_HALO_NODE_MAX_MEMBERS members. */
    const int *chips;
    size_t num_chips;
    const strata_global_member *members;
    size_t num_members;
    size_t features;               /* elements per row, > 0 */
    strata_dtype dtype;            /* STRATA_F32 or STRATA_F64 */
    strata_halo_reducer reducer;   /* default STRATA_HALO_SUM */
    const char *edge_kernel;       /* STRATA_HALO_EDGE: a registered name */
    strata_halo_schedule schedule; /* default STRATA_HALO_OVERLAPPED */
    /* When set, every call (re)writes this JSON file, schema
     * "strata.halo-trace.v1" (docs/halo.md). NULL: no file. */
    const char *trace_path;
    double timeout_s; /* bound on each in-kernel wait; <= 0: 60 s; NaN:
                         STRATA_EINVAL. Over the mpi transport it also
                         bounds each call's whole MPI exchange on a rank:
                         past it the rank ends the MPI job (the group is
                         lost, STRATA_EPEER), so give a large call room;
                         there a chip's wait for a row of another node is
                         bounded by max(2 x timeout_s, timeout_s + 30 s),
                         so that the exchange's deadline decides */
    /* Forward: a rank hands its rows to each neighbour in chunks of about
     * this many bytes (whole rows, at least one), and computes a boundary
     * row as soon as the chunks it reads are in (docs/halo.md, "Chunked
     * hand-off"). 0: STRATA_HALO_CHUNK_BYTES_DEFAULT. */
    size_t chunk_bytes;
    /* How rows cross between ranks; 0 (STRATA_HALO_TRANSPORT_DEFAULT):
     * windows where possible. STRATA_HALO_TRANSPORT_MPI needs members
     * that are ranks of one MPI group (STRATA_EINVAL otherwise, at
     * create). */
    strata_halo_transport transport;
} strata_halo_spec;

/* Bytes of a neighbour's rows handed over at a time when
 * strata_halo_spec.chunk_bytes is 0 (docs/halo.md, "Chunked hand-off"). */
#define STRATA_HALO_CHUNK_BYTES_DEFAULT ((size_t)256 << 10)

/* Most members one node may contribute to a global halo handle. */
#define STRATA_HALO_NODE_MAX_MEMBERS 85

/* Fills spec with defaults: F32, 1 feature, sum, overlapped, no trace. */
STRATA_API void strata_halo_spec_init(strata_halo_spec *spec);

/* A prepared halo execution: the checked spec and the per-rank plans
 * (owned rows, receive_from / send_to lists, window offsets) in a host
 * buffer of the worker that every chip reads. Local (spec.chips: the
 * chips of an L3 worker) or global (spec.members: chips of the nodes of an
 * L4 worker); both are called with strata_halo_forward / strata_halo_vjp. */
typedef struct strata_halo strata_halo;

/* Checks spec, derives every rank's halo map (from csr, or from each
 * rank's rows of the store) and builds the plan buffer on w (after
 * strata_worker_create; before or after init; not inside a run that uses
 * the handle). For a global handle w is the level-4 worker whose nodes
 * the members name, and those nodes must already be added. Nothing of
 * spec is retained. STRATA_EINVAL naming the problem for a NULL argument,
 * neither or both graphs, an invalid CSR, neither or both of chips and
 * members, no chips, more chips than w has, a repeated or negative chip,
 * no members, a member with a negative node or chip id, a node id w does
 * not have, a member
 * listed twice, a node with more than STRATA_HALO_NODE_MAX_MEMBERS
 * members, features 0, a dtype other than F32/F64, an unknown reducer or
 * schedule, a NaN timeout_s, STRATA_HALO_EDGE without a registered edge_kernel,
 * an unknown transport, STRATA_HALO_TRANSPORT_MPI on a local handle or with
 * a member that is no rank of one MPI group (or too many members for its
 * tags and scalars), or sizes that overflow; errors of strata_gfg_open and
 * strata_halo_map_derive_gfg for a store; STRATA_ENOMEM. Chips that the worker
 * (or a member's node) lacks are found at the first call. On STRATA_OK the
 * caller owns *out. Main thread (the worker's owner). */
STRATA_API STRATA_MUST_CHECK strata_err strata_halo_create(
    strata_worker *w, const strata_halo_spec *spec, strata_halo **out);

/* Releases the plan buffer and frees h (NULL is a no-op). Call it outside
 * any run that used h, before the worker is destroyed. STRATA_ESTATE (h
 * kept) while an unfinished run names the plan. */
STRATA_API STRATA_MUST_CHECK strata_err strata_halo_destroy(strata_halo *h);

/* Forward: out_i = reduce over the entries j of row i of x_j, for every
 * row, as one group of tasks on the spec's chips. x and out are buffers
 * of the worker holding the N x features field (row-major, from byte 0,
 * dtype of the spec); rank r reads only x's rows [begin_r, end_r) and
 * writes only out's rows there: ghost rows travel through a domain the
 * call allocates (window sized from the halo maps, zeroed, one flag word
 * per sender) and releases: a local domain over the chips, or, for a
 * global handle, a global domain over the members, with the library's
 * node callable "strata.halo.node" submitted to every member node as one
 * group (it finds the domain and submits the rank kernels to its member
 * chips as one group; strata-node carries it, so remote nodes need no
 * module for it). Each rank packs its send_to rows into its window,
 * signals each receiver, computes its interior rows (when overlapped),
 * waits for each owner it receives from, reads those ghosts from the
 * owners' windows and computes its boundary rows. Over the mpi transport
 * (strata_halo_spec.transport) no domain is allocated: each member node
 * runs "strata.halo.mpinode", whose rank process sends and receives the
 * rows between nodes as MPI messages while its chips compute (chips of
 * one node still read each other in place). Returns once every
 * rank is done, and writes the trace. Inside an orch fn of the worker
 * (the L4's for a global handle); one call at a time per handle.
 * A local handle's first call makes its exchange buffer (a host buffer
 * of the worker, kept until strata_halo_destroy; none in place), which
 * can fail as strata_worker_create_buffer does (STRATA_ENOMEM,
 * STRATA_EBUDGET).
 * STRATA_EINVAL for a NULL argument, x == out, a buffer smaller than the
 * field, or a global handle called from another worker's orch fn;
 * STRATA_EBUSY when another call on h is in progress; domain allocation
 * errors (an unknown chip or node, STRATA_EPEER for a dead node);
 * STRATA_ETASK when a rank fails (a wait that times out included; over
 * the mpi transport also a member node that cannot start its chips, at
 * once); STRATA_EPEER when a node dies (over the mpi transport also an
 * MPI exchange past timeout_s: the rank ends the MPI job and the group is
 * lost); STRATA_EIO when the trace cannot be written. */
STRATA_API STRATA_MUST_CHECK strata_err strata_halo_forward(strata_orch *o,
                                                            strata_halo *h,
                                                            strata_buffer *x,
                                                            strata_buffer *out);

/* The VJP of strata_halo_forward: grad_x_j = sum over the entries (i, j)
 * of grad_out_i (times 1/deg(i) for mean; the edge kernel's vjp for
 * STRATA_HALO_EDGE). Each rank accumulates the cotangents of its ghosts in
 * its own window, signals their owners, adds its local contributions into
 * its rows of grad_x (overwritten, not accumulated into), then waits for
 * every peer that holds its rows as ghosts and adds their cotangents from
 * the peers' windows. Same buffers, rules and errors as the forward, plus
 * STRATA_ENOTSUP for an edge kernel without a vjp. */
STRATA_API STRATA_MUST_CHECK strata_err strata_halo_vjp(strata_orch *o,
                                                        strata_halo *h,
                                                        strata_buffer *grad_out,
                                                        strata_buffer *grad_x);

/* A field held as pages, for a worker whose ram budget cannot hold the
 * whole field: buffer k of pages holds rows [k * page_rows, min((k + 1) *
 * page_rows, N)) row-major from byte 0, in the spec's dtype and features.
 * num_pages must be ceil(N / page_rows). */
typedef struct strata_halo_pages {
    strata_buffer *const *pages;
    size_t num_pages;
    uint64_t page_rows;
} strata_halo_pages;

/* Most pages of x that one rank's rows in one page of out may read. */
#define STRATA_HALO_PAGES_MAX_READ 254

/* The forward of a local handle over paged fields: the same values, bit
 * for bit, as strata_halo_forward over the whole fields. Made for a worker
 * with a ram budget and LRU spill (strata_worker_config.budgets, .eviction;
 * docs/tiers.md) whose budget cannot hold x and out at once: each task
 * names only the pages it touches, so the worker restores those before
 * the task runs and spills idle pages to make room.
 *
 * One task per rank and page of out: rank r computes its owned rows that
 * lie in out's page p, reading the rows of x its entries name directly
 * from x's pages (every chip maps them; nothing is exchanged, and no
 * domain is allocated). The pages of x those rows read are found once per
 * pair of page sizes, by reading the graph (the plan's CSR, or the
 * store's rows), and kept in h. Tasks go out in steps, step s holding each
 * rank's s-th page; prefetch > 0 submits prefetch steps and waits for
 * them before the next ones (a spilled page of a later task in the batch
 * is restored while earlier tasks compute); prefetch 0 submits every step
 * at once, as far ahead as the budget lets restores go. Inside an orch fn
 * of the worker; one call at a time per handle; records no trace
 * (strata_halo_last_trace keeps the previous call's).
 *
 * The call opens one scope (strata_orch_scope_begin) of the 16 an orch fn
 * may nest, and returns when its tasks are done.
 *
 * STRATA_EINVAL for a NULL argument or page list, a handle of another
 * worker than the orch fn's, page_rows 0, num_pages
 * other than ceil(N / page_rows), a NULL page, a page smaller than its
 * rows, a buffer used by two pages (of one field or of both), rows of one
 * page of out that read more than STRATA_HALO_PAGES_MAX_READ pages of x,
 * or more pages of x than 65535; STRATA_ENOTSUP for a global handle;
 * STRATA_EBUDGET when one task's buffers (its pages and the handle's
 * plan) exceed the worker's ram budget, naming the rank, the page, the
 * bytes and the budget; STRATA_EBUSY when another call on h is in
 * progress; STRATA_EIO when the handle's plan, spilled under LRU, cannot
 * be restored; for a store, STRATA_EINVAL when it changed since the plan was
 * made and the read errors of strata_gfg_read_rows; the errors of
 * strata_orch_scope_begin and of submitting (STRATA_EINVAL for a page of
 * another worker, found when its task is submitted: earlier tasks may
 * have written their rows; STRATA_EBUDGET when restores cannot make room);
 * STRATA_ETASK / STRATA_EPEER when a task fails or a chip dies (also when
 * an earlier task writing a page failed: its poison reaches the reader). */
STRATA_API STRATA_MUST_CHECK strata_err strata_halo_forward_pages(
    strata_orch *o, strata_halo *h, const strata_halo_pages *x,
    const strata_halo_pages *out, size_t prefetch);

/* One rank's record of the last call (the trace file holds the same). */
typedef struct strata_halo_rank_trace {
    uint32_t rank;
    int chip; /* chip id (of its node, for a global handle) */
    int node; /* node id for a global handle; -1 for a local one */
    uint64_t owned_begin, owned_end; /* rows */
    uint64_t interior_rows;          /* every source owned */
    uint64_t boundary_rows;          /* at least one ghost source */
    uint64_t ghosts;
    uint64_t edges; /* entries of the owned rows */
    /* CLOCK_MONOTONIC ns. The exchange runs from the first pack until
     * the last peer this rank needs signalled (or, without such peers,
     * until its own signals went out); wait_end is when this rank's last
     * wait returned; compute runs from the first to the last owned row.
     * Serialized: compute_start >= wait_end >= exchange_end. */
    int64_t exchange_start_ns, exchange_end_ns, wait_end_ns;
    int64_t compute_start_ns, compute_end_ns;
    int64_t overlap_ns; /* length of the intersection of the two */
    /* Forward: rows this rank packed for its peers and the time packing
     * and handing them over took (VJP: ghost rows handed back, and the
     * time adding the peers' cotangents in); the boundary rows' entries
     * and the time computing them (waits excluded). */
    uint64_t sent_rows;
    int64_t pack_ns;
    uint64_t boundary_edges;
    int64_t boundary_ns;
} strata_halo_rank_trace;

/* Copies rank's record of the last completed call into *out.
 * STRATA_ESTATE before any call completed, STRATA_EINVAL for a NULL
 * argument or rank >= the number of ranks. Any thread, between calls. */
STRATA_API STRATA_MUST_CHECK strata_err strata_halo_last_trace(
    const strata_halo *h, uint32_t rank, strata_halo_rank_trace *out);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_GRAPH_H */
