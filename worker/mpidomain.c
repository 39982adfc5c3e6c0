/* Global domains over a whole MPI group (worker/mpidomain.h). The L4
 * sends each rank one PREPARE_EXPORT with gather set; each rank prepares
 * its windows, then the ranks exchange what they made with one
 * MPI_Allgather of fixed-size blocks (outcome, then descriptors), import
 * the whole table and commit before answering (keeping the window names
 * until ABORT: another rank may still be importing). A rank whose import
 * failed says so and the L4 ABORTs the domain on every rank. So the L4 waits
 * for one round instead of three, and no descriptor table travels through it.
 */
#include "mpidomain.h"

#include "base/alloc.h"
#include "base/err.h"
#include "mpigroup.h"
#include "worker/groupcoll.h"
#include "worker/mpidomain_stats.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG_MAX 240

/* ---- the rank's collective --------------------------------------------- */

static worker_allgather_fn coll_fn;
static void *coll_user;
static int coll_rank, coll_size;

void worker_group_set_allgather(worker_allgather_fn fn, int rank, int size,
                                void *user)
{
    coll_fn = fn;
    coll_user = user;
    coll_rank = rank;
    coll_size = size;
}

/* ---- the L4 ------------------------------------------------------------ */

static pthread_mutex_t gather_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t gathers;

uint64_t worker_mpi_gathers(void)
{
    return __atomic_load_n(&gathers, __ATOMIC_RELAXED);
}

/* Remote node id of w, or NULL (no such node, or a forked one). */
static const struct remote_node *remote_of(const strata_worker *w, int id)
{
    if (!w || id < 0 || (size_t)id >= w->num_nodes)
        return NULL;
    return w->nodes[id].remote;
}

uint64_t worker_node_tasks_sent(const strata_worker *w, int id)
{
    const struct remote_node *r = remote_of(w, id);

    return r ? __atomic_load_n(&r->tasks_sent, __ATOMIC_RELAXED) : 0;
}

uint64_t worker_node_frames_kicked(const strata_worker *w, int id)
{
    const struct remote_node *r = remote_of(w, id);

    return r ? __atomic_load_n(&r->kicked, __ATOMIC_RELAXED) : 0;
}

bool mpidomain_whole_group(const strata_worker *w, const int *nodes, uint32_t n)
{
    const struct mpi_group *g = NULL;
    const char *off = getenv("STRATA_MPI_GATHER");

    /* STRATA_MPI_GATHER=0: the L4 path always (benchmarks, debugging). */
    if (off && strcmp(off, "0") == 0)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        const struct remote_node *r = w->nodes[nodes[i]].remote;

        if (!r || !r->group || (g && r->group != g))
            return false;
        g = r->group;
    }
    /* Member nodes are distinct: n of them, all of one group of n ranks. */
    return g && g->n == n;
}

void mpidomain_lock(void)
{
    pthread_mutex_lock(&gather_mu);
    __atomic_add_fetch(&gathers, 1, __ATOMIC_RELAXED);
}

void mpidomain_unlock(void)
{
    pthread_mutex_unlock(&gather_mu);
}

/* ---- a rank's node ----------------------------------------------------- */

struct block_head {
    int32_t err;
    uint32_t ndesc;
    char msg[MSG_MAX];
};

struct block_desc {
    uint32_t domain_rank;
    uint32_t rank_count;
    uint64_t mapping_size;
    char profile[WIRE_PROFILE_MAX + 1];
    char handle[WIRE_NAME_MAX + 1];
};

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/* The most members one node has: every rank computes the same from c. */
static strata_err max_per_node(const struct wire_domain_cmd *c, size_t *out)
{
    uint32_t *ids = base_calloc(c->num_members, sizeof(*ids));
    size_t best = 0, run = 0;

    if (!ids)
        return base_fail(STRATA_ENOMEM, "out of memory for %zu members",
                         c->num_members);
    for (size_t i = 0; i < c->num_members; i++)
        ids[i] = c->members[i].node_worker_id;
    qsort(ids, c->num_members, sizeof(*ids), cmp_u32);
    for (size_t i = 0; i < c->num_members; i++) {
        run = i && ids[i] == ids[i - 1] ? run + 1 : 1;
        best = run > best ? run : best;
    }
    base_free(ids);
    *out = best;
    return STRATA_OK;
}

static strata_err run_allgather(const void *send, size_t len, void *recv)
{
    strata_err err;

    err = coll_fn(send, len, recv, coll_user);
    if (err)
        return base_fail(err, "MPI_Allgather in the group: %s",
                         strata_errmsg());
    return STRATA_OK;
}

/* Rank r's block: its descriptors into table (checked), or its error. */
static strata_err take_block(const struct wire_domain_cmd *c, int r,
                             const uint8_t *blk, size_t maxper,
                             struct wire_descriptor *table, char *filled)
{
    struct block_head h;

    memcpy(&h, blk, sizeof(h));
    h.msg[MSG_MAX - 1] = '\0';
    if (h.err)
        return base_fail((strata_err)h.err, "MPI rank %d: %s", r, h.msg);
    if (h.ndesc > maxper)
        return base_fail(STRATA_EPROTO, "MPI rank %d sent %u descriptors", r,
                         h.ndesc);
    for (uint32_t k = 0; k < h.ndesc; k++) {
        struct block_desc d;
        struct wire_descriptor *t;
        char *s;

        memcpy(&d, blk + sizeof(h) + k * sizeof(d), sizeof(d));
        if (d.domain_rank >= c->num_members || filled[d.domain_rank])
            return base_fail(STRATA_EPROTO,
                             "MPI rank %d exported rank %u twice or out of "
                             "range",
                             r, d.domain_rank);
        filled[d.domain_rank] = 1;
        t = &table[d.domain_rank];
        t->version = WIRE_DESCRIPTOR_VERSION;
        t->domain_rank = d.domain_rank;
        t->rank_count = d.rank_count;
        t->mapping_size = d.mapping_size;
        /* The strings live after the table (mpidomain_gather). */
        s = (char *)(table + c->num_members) +
            (size_t)d.domain_rank * (WIRE_PROFILE_MAX + 1 + WIRE_NAME_MAX + 1);
        memcpy(s, d.profile, WIRE_PROFILE_MAX);
        s[WIRE_PROFILE_MAX] = '\0';
        memcpy(s + WIRE_PROFILE_MAX + 1, d.handle, WIRE_NAME_MAX);
        s[WIRE_PROFILE_MAX + 1 + WIRE_NAME_MAX] = '\0';
        t->profile = s;
        t->handle = s + WIRE_PROFILE_MAX + 1;
    }
    return STRATA_OK;
}

static void fill_block(uint8_t *blk, strata_err prep_err,
                       const struct wire_descriptor *descs, size_t ndesc)
{
    struct block_head h;

    memset(&h, 0, sizeof(h));
    h.err = (int32_t)prep_err;
    h.ndesc = prep_err ? 0 : (uint32_t)ndesc;
    if (prep_err)
        snprintf(h.msg, sizeof(h.msg), "%s", strata_errmsg());
    memcpy(blk, &h, sizeof(h));
    for (uint32_t k = 0; k < h.ndesc; k++) {
        struct block_desc d;

        memset(&d, 0, sizeof(d));
        d.domain_rank = descs[k].domain_rank;
        d.rank_count = descs[k].rank_count;
        d.mapping_size = descs[k].mapping_size;
        snprintf(d.profile, sizeof(d.profile), "%s", descs[k].profile);
        snprintf(d.handle, sizeof(d.handle), "%s", descs[k].handle);
        memcpy(blk + sizeof(h) + k * sizeof(d), &d, sizeof(d));
    }
}

strata_err mpidomain_gather(const struct wire_domain_cmd *c,
                            strata_err prep_err,
                            const struct wire_descriptor *descs, size_t ndesc,
                            struct wire_descriptor **table)
{
    size_t maxper = 0, blen;
    uint8_t *send = NULL, *recv = NULL;
    struct wire_descriptor *t = NULL;
    char *filled = NULL;
    strata_err err;

    *table = NULL;
    if (!coll_fn)
        return base_fail(STRATA_ENOTSUP,
                         "a gathering PREPARE_EXPORT reached a node that is "
                         "not an MPI rank");
    err = max_per_node(c, &maxper);
    if (err)
        return err; /* every rank fails alike: c is the same everywhere */
    if (ndesc > maxper)
        maxper = ndesc; /* cannot be: then take_block refuses it */
    blen = sizeof(struct block_head) + maxper * sizeof(struct block_desc);
    send = base_calloc(1, blen);
    recv = base_calloc((size_t)coll_size, blen);
    t = base_calloc(c->num_members,
                    sizeof(*t) + WIRE_PROFILE_MAX + 1 + WIRE_NAME_MAX + 1);
    filled = base_calloc(c->num_members, 1);
    if (!send || !recv) {
        /* Cannot take part: the others' deadline ends the job. */
        base_free(send);
        base_free(recv);
        base_free(t);
        base_free(filled);
        return base_fail(STRATA_ENOMEM,
                         "out of memory for the descriptor gather");
    }
    if (!t || !filled) /* take part, failed: no rank waits for this one */
        prep_err = base_fail(STRATA_ENOMEM,
                             "out of memory for %zu "
                             "descriptors",
                             c->num_members);
    fill_block(send, prep_err, descs, ndesc);
    err = run_allgather(send, blen, recv);
    /* This rank's own failure first, then the lowest failing rank's. */
    for (int r = coll_rank; !err && r < coll_rank + coll_size; r++)
        err =
            take_block(c, r % coll_size, recv + (size_t)(r % coll_size) * blen,
                       maxper, t, filled);
    for (size_t i = 0; !err && i < c->num_members; i++)
        if (!filled[i])
            err = base_fail(STRATA_EPROTO,
                            "no MPI rank exported domain rank %zu", i);
    if (!err)
        err = wire_descriptor_table_check(t, (uint32_t)c->num_members,
                                          c->profile, c->window_size);
    base_free(send);
    base_free(recv);
    base_free(filled);
    if (err) {
        base_free(t);
        return err;
    }
    *table = t;
    return STRATA_OK;
}

void mpidomain_table_free(struct wire_descriptor *table)
{
    base_free(table);
}
