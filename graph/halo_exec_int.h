/* Private interfaces of halo execution (halo_exec*.c): the layout of the
 * plan buffer the orchestrator builds and the chips read, and the helpers
 * the host side and the chip side share. Offsets only, never pointers: the
 * plan lives in a host buffer mapped at different addresses in every
 * process. */
#ifndef GRAPH_HALO_EXEC_INT_H
#define GRAPH_HALO_EXEC_INT_H

#include "graph_int.h"

#include <strata/strata.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HALO_PLAN_MAGIC 0x504c4148u /* "HALP" */
#define HALO_PLAN_VERSION 3u
#define HALO_EDGE_NAME_MAX 64
#define HALO_EDGE_MAX 64
#define HALO_PATH_MAX 4096
#define HALO_ALIGN 64
#define HALO_DEFAULT_TIMEOUT_S 60.0
/* With chunk_bytes 0, no block is handed over in more chunks than this. */
#define HALO_DEFAULT_MAX_CHUNKS 8

#define HALO_KERNEL_FORWARD "strata.halo.forward"
#define HALO_KERNEL_VJP "strata.halo.vjp"
/* The node orch callable of global handles (halo_exec_global.c). */
#define HALO_NODE_CALLABLE "strata.halo.node"
/* A node's task carries the plan and, per member, a stats slot and two row
 * tensors; its scalars are 4 plus one per member. */
_Static_assert(STRATA_HALO_NODE_MAX_MEMBERS * 3 + 1 <= STRATA_MAX_TENSORS &&
                   STRATA_HALO_NODE_MAX_MEMBERS + 4 <= STRATA_MAX_SCALARS,
               "a node's halo task must fit one argument list");

/* Read-only header at offset 0 of the plan buffer. */
struct halo_plan_hdr {
    uint32_t magic;
    uint32_t version;
    uint32_t world;
    uint32_t dtype;        /* strata_dtype: F32 or F64 */
    uint32_t reducer;      /* strata_halo_reducer */
    uint32_t schedule;     /* strata_halo_schedule */
    uint64_t num_rows;     /* N; sources share the id space */
    uint64_t features;     /* elements per row */
    double timeout_s;      /* bound on each in-kernel signal wait */
    uint64_t ranks_off;    /* struct halo_rank_plan[world] */
    uint64_t gfg_path_off; /* NUL-terminated path; 0 when in memory */
    uint64_t ro_size;      /* bytes of the read-only part */
    uint64_t stats_off;    /* struct halo_stats[world], kernel-written */
    uint64_t plan_id;      /* unique per plan: chips cache by it */
    uint64_t chunk_rows;   /* forward hand-off unit, rows, >= 1 */
    /* The store the plan was made from (paged plans): a rank reads it
     * only while it is still that store. */
    struct graph_gfg_stamp store;
    char edge_name[HALO_EDGE_NAME_MAX];
};

/* One rank's plan. Counts are rows; offsets are bytes from the plan. */
struct halo_rank_plan {
    uint64_t owned_begin;
    uint64_t owned_end;
    uint64_t nnz;         /* entries of the owned rows */
    uint64_t row_ptr_off; /* int64[rows + 1], rebased; 0 when paged */
    uint64_t col_off;     /* int64[nnz], global ids; 0 when paged/empty */
    uint64_t num_ghosts;
    uint64_t ghost_off; /* int64[num_ghosts], sorted */
    uint64_t num_recv;
    uint64_t recv_off; /* struct halo_peer[num_recv], ascending peer */
    uint64_t num_send;
    uint64_t send_off;  /* struct halo_peer[num_send], ascending peer */
    uint64_t pack_rows; /* sum of the send counts */
};

/* One exchange partner.
 * receive entry of rank q from owner p: local_start = index of the group
 *   in q's ghost list; remote_start = row of q's slot in p's pack region.
 * send entry of rank p to q: local_start = row of q's slot in p's pack
 *   region; remote_start = index of the group in q's ghost list (the ids
 *   sent are q's ghosts from there, so they are never stored twice). */
struct halo_peer {
    uint64_t peer;
    uint64_t count;
    uint64_t local_start;
    uint64_t remote_start;
};

/* What a rank's kernel reports; one slot per rank, 64-byte aligned. */
struct halo_stats {
    int64_t exchange_start_ns;
    int64_t exchange_end_ns; /* own sends done and every ghost arrived */
    int64_t wait_end_ns;     /* when this rank saw the last arrival */
    int64_t compute_start_ns;
    int64_t compute_end_ns;
    uint64_t interior_rows;
    uint64_t boundary_rows;
    uint64_t edges;
    uint64_t sent_rows;      /* forward: rows packed for peers */
    int64_t pack_ns;         /* forward: packing and handing over */
    uint64_t boundary_edges; /* entries of the boundary rows */
    int64_t boundary_ns;     /* computing boundary rows, waits excluded */
    uint64_t done;           /* 1 once the fields above are written */
};

#define HALO_STATS_STRIDE                                                      \
    ((sizeof(struct halo_stats) + HALO_ALIGN - 1) / HALO_ALIGN * HALO_ALIGN)

/* One node of a global handle: the ranks of its members, ascending. */
struct halo_node_group {
    int node;
    size_t count;
    uint32_t *ranks; /* into strata_halo.group_ranks */
};

/* A prepared halo execution (strata_halo_create). */
struct strata_halo {
    strata_worker *w;
    strata_buffer *plan;
    uint32_t world;
    int *chips; /* rank -> chip id (of its node, for a global handle) */
    uint64_t num_rows;
    size_t row_bytes;
    strata_halo_spec spec; /* scalars only; pointers cleared */
    bool edge_has_vjp;
    uint64_t max_pack;   /* rows, forward window */
    uint64_t max_ghosts; /* rows, VJP window */
    /* Local handles: the rows exchanged live in one host buffer made at
     * the first call, rank r's region at r * xchg_stride, so that its
     * pages are faulted in once, not by every call's fresh window (NULL
     * until then, and for a global handle: its rows go through the
     * domain's windows). */
    strata_buffer *xchg;
    size_t xchg_stride;
    char *trace_path;
    int busy;
    bool have_trace;
    strata_halo_rank_trace *last; /* world records */
    /* Global handles only (NULL / 0 for a local one). */
    strata_global_member *members;  /* rank -> (node, chip) */
    int *nodes;                     /* rank -> node id */
    struct halo_node_group *groups; /* member nodes, first appearance */
    size_t num_groups;
    int *group_nodes;      /* groups[i].node: the targets of the group */
    uint32_t *group_ranks; /* world entries, the groups' rank lists */
    /* strata_halo_forward_pages: which pages of x each rank's rows in
     * each page of out read, for the page sizes last used. */
    struct halo_page_needs *needs;
};

/* A registered per-edge kernel (the table is in halo_exec.c). */
struct halo_edge_entry {
    char name[HALO_EDGE_NAME_MAX];
    strata_halo_edge_fn forward;
    strata_halo_edge_fn vjp;
};

/* Looks name up in this process's edge table (inherited by chips). */
const struct halo_edge_entry *halo_edge_find(const char *name);

/* Builds the plan buffer on worker w for spec (already checked); returns
 * the buffer and the largest pack and ghost row counts of any rank
 * (halo_exec_plan.c). */
strata_err halo_plan_build(strata_worker *w, const strata_halo_spec *spec,
                           strata_buffer **plan_out, uint64_t *max_pack_out,
                           uint64_t *max_ghosts_out);

/* The library's halo callables, registered when it loads. */
strata_callable halo_kernel(bool vjp);
strata_callable halo_node_callable(void);

/* Rank r's plan inside the plan buffer's bytes. */
static inline const struct halo_rank_plan *halo_plan_rank(const void *plan,
                                                          uint64_t r)
{
    const struct halo_plan_hdr *hdr = plan;

    return (const struct halo_rank_plan *)((const char *)plan +
                                           hdr->ranks_off) +
           r;
}

/* Appends the read-only plan (IN), every halo task's first tensor. */
strata_err halo_add_plan(strata_args *a, const strata_halo *h);
/* Appends rank r's stats slot of the plan (OUT). */
strata_err halo_add_stats(strata_args *a, const strata_halo *h, uint64_t r);

/* Appends rows [b, e) of a field buffer as an N x features tensor. */
strata_err halo_add_rows(strata_args *a, const strata_halo *h,
                         strata_buffer *buf, uint64_t b, uint64_t e,
                         strata_tag tag);

/* The task of member node group g (the layout at the top of
 * halo_exec_global.c): the plan, each member's stats and owned rows of in
 * and out, then the scalars first (the domain id; the mpi transport: the
 * mailbox stride), vjp, the data offset, the member count and one
 * chip << 32 | rank per member. The mpi transport appends its own. */
strata_err halo_node_args(const strata_halo *h, const struct halo_node_group *g,
                          uint64_t first, bool vjp, strata_buffer *in,
                          strata_buffer *out, strata_args *a);

/* Global handles (halo_exec_global.c). halo_global_check validates
 * spec->members against w; halo_global_setup fills h->chips, h->nodes and
 * the node groups; halo_global_free frees them; halo_global_run allocates
 * a global domain of window bytes per rank over the members, submits the
 * node callable to every member node as one group, waits for it and
 * releases the domain. halo_node_orch is the node callable. */
strata_err halo_global_check(const strata_worker *w,
                             const strata_halo_spec *spec);
strata_err halo_global_setup(strata_halo *h, const strata_halo_spec *spec);
void halo_global_free(strata_halo *h);
strata_err halo_global_run(strata_orch *o, strata_halo *h, bool vjp,
                           strata_buffer *in, strata_buffer *out,
                           size_t window);
strata_err halo_node_orch(strata_orch *o, const strata_args *args, void *user);
/* On a node: STRATA_EINVAL when halo member r (the spec's members[r])
 * names a chip this node does not have, naming it as the spec does (the
 * node's group of kernels would name it by its place in that group). */
strata_err halo_member_chip_check(strata_orch *o, uint32_t r, int chip);

/* The mpi transport (halo_exec_mpi.c). halo_mpi_check: the transport
 * of spec s on w is possible; halo_mpi_run: one call of a global handle
 * over it (in place of halo_global_run); halo_mpi_node_orch: its node
 * callable, on every MPI rank with members. */
#define HALO_MPI_CALLABLE "strata.halo.mpinode"
/* The fifth scalar of a rank kernel over an mpi mailbox. */
#define HALO_MPI_MARK 0x4d504948u
strata_err halo_mpi_check(const strata_worker *w, const strata_halo_spec *s);
/* The default transport of a global handle picks mpi when windows cannot
 * work: a member's node is on another host, and every member is a rank
 * of one MPI group (halo_mpi_check passes). */
bool halo_mpi_auto(const strata_halo *h);
strata_err halo_mpi_run(strata_orch *o, strata_halo *h, bool vjp,
                        strata_buffer *in, strata_buffer *out, size_t window);
strata_err halo_mpi_node_orch(strata_orch *o, const strata_args *args,
                              void *user);

/* The chip kernels (halo_exec_kernel.c). Tensors: 0 the read-only plan
 * (IN), 1 the rank's stats slot (OUT), then, for a rank with rows, its
 * input rows (IN) and output rows (OUT). Scalars: device_ctx, the byte
 * offset of the data region in the window, the rank. */
strata_err halo_kernel_forward(strata_chip *chip, const strata_args *args);
strata_err halo_kernel_vjp(strata_chip *chip, const strata_args *args);

/* One call at a time per handle: STRATA_EBUSY when another holds it;
 * release with __atomic_store_n(&h->busy, 0, __ATOMIC_RELEASE). */
strata_err halo_busy_take(strata_halo *h);

/* halo_store.c: a paged plan's store is still the one the plan was
 * made from (two stats), else STRATA_EINVAL "<who>: the store changed
 * since the plan was made"; halo_store_open also opens it and checks the
 * files it opened. halo_store_same is STRATA_OK for a plan in memory. */
strata_err halo_store_same(const void *plan, const char *who);
strata_err halo_store_open(const void *plan, const char *who, strata_gfg **out);

/* Paged fields (halo_exec_pages.c, halo_pages_needs.c,
 * halo_pages_kernel.c). */
#define HALO_KERNEL_PAGES "strata.halo.forward_pages"
/* The kernel's scalars: rank, first row, end row, x's page_rows, x's
 * page count, the count of x pages named, then their indices, four
 * 16-bit indices per scalar; tensors: the plan, the rows of out, then
 * the pages of x named, in that order. */
#define HALO_PAGES_SCALARS 6
#define HALO_PAGES_PER_SCALAR 4
#define HALO_PAGES_MAX_X 65535u
strata_callable halo_pages_kernel(void);
strata_err halo_kernel_forward_pages(strata_chip *chip,
                                     const strata_args *args);
void halo_needs_free(struct halo_page_needs *n);

/* Submits fn to every rank's chip as one group inside a scope, rank r's
 * arguments filled by fill(h, r, a, ctx) (halo_exec.c). */
typedef strata_err (*halo_rank_args_fn)(const strata_halo *h, uint32_t r,
                                        strata_args *a, void *ctx);
strata_err halo_submit_ranks(strata_orch *o, const strata_halo *h,
                             strata_callable fn, halo_rank_args_fn fill,
                             void *ctx);

/* STRATA_HALO_IN_PLACE (halo_exec_inplace.c, halo_inplace.c). The
 * kernel's tensors: the plan, the rank's stats slot, the whole input
 * field (when the graph has rows), the rank's rows of the output (when
 * it has some); scalars: the rank, then 1 for the VJP. */
#define HALO_KERNEL_INPLACE "strata.halo.inplace"
strata_callable halo_inplace_kernel(void);
strata_err halo_kernel_inplace(strata_chip *chip, const strata_args *args);
/* One call of a local in-place handle: one task per rank, as a group. */
strata_err halo_inplace_run(strata_orch *o, strata_halo *h, bool vjp,
                            strata_buffer *in, strata_buffer *out);

/* Fills one record per rank from the plan's stats slots
 * (halo_exec_trace.c); nodes is NULL for a local handle (node -1). */
void halo_trace_collect(const void *plan, const int *chips, const int *nodes,
                        strata_halo_rank_trace *records);
/* Writes the "strata.halo-trace.v1" JSON file at path (through a temporary
 * file renamed into place). STRATA_EIO when it cannot. */
strata_err halo_trace_write(const char *path, bool vjp, const void *plan,
                            const strata_halo_rank_trace *records);

/* Chunks of a block of count rows handed over chunk_rows at a time. */
static inline uint64_t halo_chunks(uint64_t count, uint64_t chunk_rows)
{
    return (count + chunk_rows - 1) / chunk_rows;
}

/* Window layout: flag word s of rank r's window counts what sender s
 * handed over (forward: chunks of its block for r; VJP: 1 when done);
 * stamp s (int64, after the flags) is when sender s signalled, so the
 * receiver knows when its ghosts arrived, not only when it looked; the
 * data region starts at the first aligned byte after the stamps. */
static inline size_t halo_stamp_offset(uint32_t world)
{
    return ((size_t)world * sizeof(uint32_t) + 7) / 8 * 8;
}

static inline size_t halo_data_offset(uint32_t world)
{
    return (halo_stamp_offset(world) + (size_t)world * sizeof(int64_t) +
            HALO_ALIGN - 1) /
           HALO_ALIGN * HALO_ALIGN;
}

#endif
