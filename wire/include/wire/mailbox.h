/* The shared-memory mailbox between a worker and one child process.
 *
 * Fixed, versioned layout in one MAP_SHARED region created before fork.
 * The parent posts frames into a ring (head), the child completes them in
 * order (tail). Tasks and control operations share the ring, so control is
 * serialized with tasks. Words are read and written with atomics only. */
#ifndef WIRE_MAILBOX_H
#define WIRE_MAILBOX_H

#include "wire/args.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define MBX_MAGIC 0x41525453u /* "STRA" */
#define MBX_VERSION 1u
#define MBX_RING 8u
#define MBX_STAGING_SIZE (1u << 20)

enum mbx_init_state {
    MBX_INIT_STARTING = 0,
    MBX_INIT_READY = 1,
    MBX_INIT_FAILED = 2,
};

enum mbx_kind {
    MBX_TASK = 1,
    MBX_CONTROL = 2,
};

enum mbx_control_op {
    MBX_CTL_PING = 1,         /* no-op round trip */
    MBX_CTL_UNMAP_BUFFER = 2, /* arg[0] = buffer id, arg[1] = creator */
    /* arg[0] = rank, arg[1] = size among the worker's chips. */
    MBX_CTL_COMM_INIT = 3,
    /* arg = alloc id, rank, rank count, window size; replies a
     * chip_window_desc in the frame's args area. */
    MBX_CTL_WINDOW_PREPARE = 4,
    /* arg = alloc id, own rank, rank count; the staging area holds the
     * descriptor table; replies arg[0] = device ctx, arg[1] = base. */
    MBX_CTL_WINDOW_IMPORT = 5,
    MBX_CTL_WINDOW_RELEASE = 6, /* arg[0] = alloc id */
    /* arg = alloc id, window offset, nbytes; args hold one tensor: the
     * source (TO) or destination (FROM) in a host buffer. */
    MBX_CTL_COPY_TO_WINDOW = 7,
    MBX_CTL_COPY_FROM_WINDOW = 8,
    /* To a node: the staging area holds a packed DOMAIN_CMD or COMM_INIT
     * frame, arg[1] its request id; the packed reply comes back in the
     * staging area (staged_len). */
    MBX_CTL_NODE_CMD = 9,
    /* arg = alloc id (node: domain id), offset, nbytes, (node: rank):
     * staged bytes into a window / window bytes back into staging. */
    MBX_CTL_WINDOW_WRITE = 10,
    MBX_CTL_WINDOW_READ = 11,
    /* arg = alloc id, rank | rank count << 16 | name token << 32,
     * mapping size | creator pid << MBX_ADOPT_CREATOR_SHIFT (0: the
     * chip's worker), base: map every rank's window, named by the worker,
     * at base + r * mapping. */
    MBX_CTL_WINDOW_ADOPT = 12,
    /* Device buffers (chip/devmem.c). arg = buffer id, creator pid, size:
     * allocate (zeroed) / free the chip's device memory of that buffer. */
    MBX_CTL_DEV_ALLOC = 13,
    MBX_CTL_DEV_FREE = 14,
    /* arg = buffer id, creator pid, offset, nbytes (at most the staging
     * area): staged bytes into the device buffer / back into staging. */
    MBX_CTL_DEV_WRITE = 15,
    MBX_CTL_DEV_READ = 16,
    /* args hold two tensors of arg[0] bytes each: 0 the destination, 1
     * the source, each a host or a device tensor of this chip. */
    MBX_CTL_DEV_COPY = 17,
};

/* Or'ed into a frame's result by a target that could not begin the task
 * at all (a remote node without the callable): the run reports the code
 * itself, not STRATA_ETASK. */
#define MBX_RESULT_NOT_RUN (1 << 30)
#define MBX_ADOPT_CREATOR_SHIFT 40
#define MBX_ADOPT_MAP_MASK ((1ull << MBX_ADOPT_CREATOR_SHIFT) - 1)

/* An ADOPT frame's arg[1] and arg[2], as its posters (local and global
 * domains) pack them; the chip reads them back (chip/control.c). */
static inline uint64_t mbx_adopt_arg1(uint32_t rank, uint32_t rank_count,
                                      uint32_t name_token)
{
    return rank | (uint64_t)rank_count << 16 | (uint64_t)name_token << 32;
}

static inline uint64_t mbx_adopt_arg2(uint64_t mapping, uint64_t creator_pid)
{
    return mapping | creator_pid << MBX_ADOPT_CREATOR_SHIFT;
}

/* One unit of work. Identity (run, slot, generation) lets the parent match
 * a completion to the task it posted and reject a stale one. */
struct mbx_frame {
    uint64_t run_id;
    uint32_t slot;
    uint32_t gen;
    uint32_t kind;       /* enum mbx_kind */
    uint32_t op;         /* enum mbx_control_op for MBX_CONTROL */
    uint8_t digest[32];  /* callable, for MBX_TASK */
    uint64_t arg[4];     /* control operands */
    uint64_t staged_len; /* bytes of payload in the staging area */
    uint32_t args_len;   /* bytes used in args */
    int32_t result;      /* strata_err written by the child, with
                            MBX_RESULT_NOT_RUN when the task never began */
    uint32_t done;       /* remote nodes: result final (may be out of order) */
    uint32_t claim;      /* enum mbx_claim: a control frame may be withdrawn */
    /* Timeline trace: the child recorded the task on its orchestrator's
     * behalf (mbx_trace_ran), which then records nothing of its own. */
    uint32_t trace_recorded;
    char msg[STRATA_ERRMSG_MAX];
    _Alignas(8) uint8_t args[WIRE_ARGS_MAX];
    /* Timeline trace, written by the orchestrator only while it traces
     * (a line of its own, untouched otherwise): the task as it saw it,
     * which the child records on its behalf when it runs the task
     * (mbx_trace_ran), so that a traced task costs the orchestrator no
     * record of its own. submit 0: none. */
    _Alignas(64) struct {
        uint64_t submit; /* trace_now when submitted */
        uint64_t post;   /* trace_now when posted */
        uint64_t seq;    /* the task's number */
        uint16_t cat;    /* enum trace_target */
        uint16_t lane;   /* the target's id */
    } trace;
};

struct mbx_header {
    uint32_t magic;
    uint32_t version;
    uint32_t init_state; /* enum mbx_init_state, written once by the child */
    uint32_t shutdown;   /* sticky: the parent sets 0 -> 1, never back */
    uint32_t head;       /* frames posted; parent writes */
    uint32_t tail;       /* frames completed; child writes */
    uint32_t bell;       /* futex word the child parks on */
    uint32_t parked;     /* child is (about to be) parked on bell */
    int32_t init_err;
    uint32_t reserved;
    char init_msg[STRATA_ERRMSG_MAX];
};

struct mbx {
    struct mbx_header h;
    struct mbx_frame ring[MBX_RING];
    _Alignas(64) uint8_t staging[MBX_STAGING_SIZE];
};

/* Who has a posted control frame: the child takes it before running it;
 * until then the parent may withdraw it, and the child skips it. */
enum mbx_claim { MBX_CLAIM_POSTED = 0, MBX_CLAIM_TAKEN, MBX_CLAIM_WITHDRAWN };

/* Child: claims f; false when the parent withdrew it (skip it). */
static inline bool mbx_frame_take(struct mbx_frame *f)
{
    uint32_t posted = MBX_CLAIM_POSTED;

    return __atomic_compare_exchange_n(&f->claim, &posted, MBX_CLAIM_TAKEN,
                                       false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}

/* Parent: withdraws f unless the child took it already (false then). */
static inline bool mbx_frame_withdraw(struct mbx_frame *f)
{
    uint32_t posted = MBX_CLAIM_POSTED;

    return __atomic_compare_exchange_n(&f->claim, &posted, MBX_CLAIM_WITHDRAWN,
                                       false, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}

/* A page every child of one worker shares with it. */
struct mbx_shared {
    uint32_t sched_parked; /* parent's scheduler parked: ring the doorbell */
    /* Chips parked in strata_signal_wait on a word of a window adopted from
     * the worker's address range (chip/signal.c). */
    uint32_t signal_parked;
    uint32_t reserved[14];
};

/* Maps a zeroed mailbox (MAP_SHARED | MAP_ANONYMOUS) and stamps it. */
strata_err mbx_create(struct mbx **out);
void mbx_destroy(struct mbx *m);
strata_err mbx_shared_create(struct mbx_shared **out);
void mbx_shared_destroy(struct mbx_shared *s);

/* Parent side. */
static inline uint32_t mbx_in_flight(const struct mbx *m)
{
    return __atomic_load_n(&m->h.head, __ATOMIC_SEQ_CST) -
           __atomic_load_n(&m->h.tail, __ATOMIC_SEQ_CST);
}
/* The frame the next post will use (caller checks in_flight < MBX_RING). */
static inline struct mbx_frame *mbx_next_frame(struct mbx *m)
{
    return &m->ring[m->h.head % MBX_RING];
}
/* Publishes the frame from mbx_next_frame and wakes the child if parked. */
void mbx_post(struct mbx *m);
/* Publishes the next frame without waking a parked child: it runs the
 * frame when something else wakes it (mbx_ring, the next mbx_post). */
void mbx_post_quiet(struct mbx *m);
/* Wakes the child if it is parked. */
void mbx_ring(struct mbx *m);
/* Sets the sticky shutdown word and wakes the child. */
void mbx_shutdown(struct mbx *m);

/* Child side. Waits until a frame is posted or shutdown is set, spinning
 * first, then parking. Returns the frame, or NULL on shutdown. */
struct mbx_frame *mbx_child_wait(struct mbx *m);
/* The same, spinning first only when spin is true (the previous frame was
 * a task, so more may follow at once); otherwise it parks at once. */
struct mbx_frame *mbx_child_wait_spin(struct mbx *m, bool spin);
/* Marks the oldest frame complete. Returns true if the parent's scheduler
 * is parked and must be woken through its doorbell. */
bool mbx_child_complete(struct mbx *m, const struct mbx_shared *s);
/* Publishes the init outcome (err = STRATA_OK means ready). */
void mbx_child_init_done(struct mbx *m, strata_err err, const char *msg);
/* While tracing: the child ran f's task from t0 (trace_now) until now,
 * over bytes of tensors, calling the registry name name_array (an array
 * of at least TRACE_NAME_BYTES, or NULL), with the outcome err. Sets
 * f->trace_recorded and records the run, and the task as its orchestrator saw
 * it when f carries that (both marked TRACE_TASK_FAILED if err). */
void mbx_trace_ran(struct mbx_frame *f, uint64_t t0, uint64_t bytes,
                   const char *name_array, strata_err err);

#endif
