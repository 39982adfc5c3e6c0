/* Global domains over a whole MPI group (private to worker/): the
 * window descriptors are gathered among the ranks with one MPI_Allgather
 * instead of an IMPORT and a COMMIT fanned out by the L4 (docs/mpi.md).
 * The L4 side says when a domain qualifies and keeps gathers of one L4
 * from crossing; the node side runs the collectives (through the rank
 * program's worker_allgather_fn) and assembles the table. */
#ifndef WORKER_MPIDOMAIN_H
#define WORKER_MPIDOMAIN_H

#include "wire/msg.h"
#include "worker_int.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- the L4 ---------------------------------------------------------- */

/* True when nodes[0..n) are exactly every rank of one MPI group of w. */
bool mpidomain_whole_group(const strata_worker *w, const int *nodes,
                           uint32_t n);
/* Around a gathering PREPARE_EXPORT: one at a time per process, so that
 * every rank enters the same collectives in the same order. */
void mpidomain_lock(void);
void mpidomain_unlock(void);

/* ---- a rank's node ----------------------------------------------------- */

/* PREPARE_EXPORT with gather, after the node prepared (prep_err: how that
 * went; descs: its ndesc descriptors): gathers every rank's outcome and
 * descriptors; on STRATA_OK *table holds the whole rank-ordered table of
 * c->num_members descriptors (free it with mpidomain_table_free). Runs
 * the collective whatever prep_err is, so no rank waits for one that
 * failed. */
strata_err mpidomain_gather(const struct wire_domain_cmd *c,
                            strata_err prep_err,
                            const struct wire_descriptor *descs, size_t ndesc,
                            struct wire_descriptor **table);
void mpidomain_table_free(struct wire_descriptor *table);

#endif
