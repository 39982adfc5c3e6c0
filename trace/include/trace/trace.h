/* Timeline traces: what the modules record (docs/tracing.md).
 *
 * A traced tree has one session, started by its top-level worker: each
 * process of the tree gets its own bounded buffer in /dev/shm, and at the
 * end the session's process merges every buffer into one trace-event JSON
 * file. Recording is a relaxed atomic add and a few stores into shared
 * memory: no system call, no lock; a full buffer drops the record and
 * counts it. With no session, every record site is one predictable branch
 * (trace_enabled()). */
#ifndef TRACE_TRACE_H
#define TRACE_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <strata/strata.h>
#include <sys/types.h>

/* What a record is; the fields each kind fills are in the comments. */
enum trace_kind {
    TRACE_K_NONE = 0, /* not (yet) written */
    /* A task run by this process (chip, sub worker, node): t0..t1, a = run
     * id, b = bytes of its tensor arguments, d = TRACE_SLOT_KEY of the
     * frame (its orchestrator is this process's parent), name = callable. */
    TRACE_K_RUN = 1,
    /* A task seen by its orchestrator: t0 = submitted, c = posted to the
     * target, t1 = completed; a = run id, b = task number, d =
     * TRACE_SLOT_KEY; cat = enum trace_target, lane = target id. */
    TRACE_K_TASK = 2,
    /* A dependency edge between two tasks of this orchestrator: a = the
     * producer's TRACE_SLOT_KEY, b = the consumer's; t0 = when recorded. */
    TRACE_K_EDGE = 3,
    /* A child parked on its mailbox from t0 until woken at t1. */
    TRACE_K_WAKE = 4,
    /* A phase: t0..t1, cat = enum trace_cat, lane = enum trace_lane, name,
     * a and b per cat. */
    TRACE_K_SPAN = 5,
    /* A remote frame at t0: a = bytes, b = 1 sent / 0 received, c = the
     * frame type. */
    TRACE_K_FRAME = 6,
    /* A TRACE_K_TASK (same fields) that the task's target recorded on
     * behalf of its orchestrator, this process's parent, from what the
     * orchestrator put in the task's frame (mbx_trace_ran). */
    TRACE_K_PTASK = 7,
    /* A TRACE_K_RUN and the TRACE_K_PTASK of the same task in one record
     * (trace_put_runtask): t0, t1, a and d as the run's, b its tensors'
     * bytes, c the post, cat and lane the task's; the name in the first
     * TRACE_RUNTASK_NAME bytes of name, the submission time and the
     * task's number in the last 16 (trace_runtask_split). */
    TRACE_K_RUNTASK = 8,
};

/* TRACE_K_TASK's cat: the kind of target, or'ed with the marks below. */
enum trace_target { TRACE_TGT_CHIP = 0, TRACE_TGT_NODE, TRACE_TGT_SUB };
/* Or'ed into a TRACE_K_TASK's or TRACE_K_PTASK's cat (and a
 * TRACE_K_RUN's): the task failed; it never ran (failed before it was
 * posted: a failed predecessor, a dead target). */
#define TRACE_TASK_FAILED 0x100u
#define TRACE_TASK_NOT_RUN 0x200u
#define TRACE_TASK_MARKS (TRACE_TASK_FAILED | TRACE_TASK_NOT_RUN)

/* Lanes (threads in the JSON) of TRACE_K_SPAN records. */
enum trace_lane {
    TRACE_LANE_TASKS = 0, /* nested inside the task that runs them */
    TRACE_LANE_MAILBOX = 1,
    TRACE_LANE_DOMAIN = 2,
    TRACE_LANE_WIRE = 3,
    TRACE_LANE_ORCH = 4,
    TRACE_LANE_HALO_XCHG = 5,
    TRACE_LANE_HALO_COMPUTE = 6,
    TRACE_LANE_GDOMAIN = 7,
    TRACE_LANES = 8,
};

/* TRACE_K_SPAN's cat. */
enum trace_cat {
    TRACE_CAT_HALO = 0, /* a = rank; b = pack ns (exchange), edges */
    TRACE_CAT_DOMAIN,   /* a = domain id, b = members */
    TRACE_CAT_RUN,      /* a = run id; t0 = its orch fn began, c = the fn
                           returned, t1 = the run's fence passed */
    TRACE_CAT_GDOMAIN,  /* a = domain id, b = phase (1..4), c = strata_err */
    TRACE_CATS,
};

/* A task's frame identity, unique per orchestrator for its life. */
#define TRACE_SLOT_KEY(slot, gen) (((uint64_t)(slot) << 32) | (uint32_t)(gen))

/* This process's buffer, or NULL when it records nothing. */
extern struct trace_hdr *trace_self;

static inline bool trace_enabled(void)
{
    return __builtin_expect(trace_self != NULL, 0);
}

/* Whether this session's records hold TSC ticks (set at the session's
 * start, inherited by its children): an x86 TSC that is constant, does
 * not stop and is the kernel's clocksource, so every CPU's is the same
 * clock. The merge converts ticks to CLOCK_MONOTONIC ns. */
extern bool trace_clock_tsc;

/* CLOCK_MONOTONIC in ns (clock_gettime, through the vDSO). */
uint64_t trace_now_ns(void);

/* The record clock: TSC ticks when trace_clock_tsc (one instruction,
 * about a third of clock_gettime's cost), else CLOCK_MONOTONIC ns. Only
 * for record times; a time taken from another clock goes into a record
 * flagged TRACE_F_NS. */
static inline uint64_t trace_now(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_expect(trace_clock_tsc, 1))
        return __builtin_ia32_rdtsc();
#endif
    return trace_now_ns();
}

/* Or'ed into a record's kind: its times (t0, t1, c) are CLOCK_MONOTONIC
 * ns already, not the record clock (trace_record_ns). */
#define TRACE_F_NS 0x100u

/* Appends a record to this process's buffer, or counts it dropped when
 * the buffer is full; nothing when tracing is off. Any thread; never
 * blocks. name is cut to fit (NULL: none); name_array says that name is
 * a char array of at least TRACE_NAME_BYTES (a callable's name in the
 * registry), which is then copied whole, without measuring it. */
void trace_put(enum trace_kind kind, uint16_t cat, uint16_t lane, uint64_t t0,
               uint64_t t1, uint64_t a, uint64_t b, uint64_t c, uint64_t d,
               const char *name, bool name_array);

/* The bytes of a record's name, its terminating NUL included. */
#define TRACE_NAME_BYTES 48

/* The bytes of a TRACE_K_RUNTASK's name, its NUL included: a longer name
 * takes two records (TRACE_K_RUN and TRACE_K_PTASK). */
#define TRACE_RUNTASK_NAME 32

/* One TRACE_K_RUNTASK: a task that ran here from t0 until t1 (run id
 * run_id, its tensors' bytes, frame key), which its orchestrator (this
 * process's parent) submitted at submit and posted at post as task seq
 * to target cat (with marks) and lane; name_array as for trace_put,
 * holding a name shorter than TRACE_RUNTASK_NAME. Half the cost of the
 * two records. */
void trace_put_runtask(uint16_t cat, uint16_t lane, uint64_t t0, uint64_t t1,
                       uint64_t run_id, uint64_t bytes, uint64_t key,
                       uint64_t submit, uint64_t post, uint64_t seq,
                       const char *name_array);

static inline void trace_record(enum trace_kind kind, uint16_t cat,
                                uint16_t lane, uint64_t t0, uint64_t t1,
                                uint64_t a, uint64_t b, uint64_t c, uint64_t d,
                                const char *name)
{
    trace_put(kind, cat, lane, t0, t1, a, b, c, d, name, false);
}

/* trace_record for times taken from CLOCK_MONOTONIC (base_now_ns), not
 * from trace_now. */
static inline void trace_record_ns(enum trace_kind kind, uint16_t cat,
                                   uint16_t lane, uint64_t t0, uint64_t t1,
                                   uint64_t a, uint64_t b, uint64_t c,
                                   uint64_t d, const char *name)
{
    trace_record((enum trace_kind)(kind | TRACE_F_NS), cat, lane, t0, t1, a, b,
                 c, d, name);
}

/* A remote frame (or a batch of them, type 0) of bytes sent or received
 * by this process: one branch when tracing is off. */
static inline void trace_frame(uint64_t bytes, bool sent, uint32_t type)
{
    if (trace_enabled())
        trace_record(TRACE_K_FRAME, 0, TRACE_LANE_WIRE, trace_now(), 0, bytes,
                     sent, type, 0, NULL);
}

/* A global domain transaction phase (PREPARE_EXPORT 1, IMPORT 2, COMMIT
 * 3, ABORT 4) this node ran from t0 (trace_now, or 0 when not tracing)
 * until now, for domain_id, ending with err. */
static inline void trace_gdomain_phase(uint64_t t0, unsigned phase,
                                       uint64_t domain_id, int err)
{
    static const char *const names[] = {"phase", "PREPARE_EXPORT", "IMPORT",
                                        "COMMIT", "ABORT"};

    if (t0 && trace_enabled())
        trace_record(TRACE_K_SPAN, TRACE_CAT_GDOMAIN, TRACE_LANE_GDOMAIN, t0,
                     trace_now(), domain_id, phase, (uint64_t)(int64_t)err, 0,
                     names[phase < 5 ? phase : 0]);
}

/* Starts (or joins: counted) the session of this process: its own buffer,
 * named role, and the JSON file written at the last trace_session_finish
 * (path NULL: none; a strata-node session, whose records its parent asks
 * for with trace_session_collect). STRATA_EINVAL for an empty path,
 * STRATA_ENOMEM / STRATA_ESYS when the buffer cannot be made. Call before
 * the tree forks. */
STRATA_MUST_CHECK strata_err trace_session_start(const char *path,
                                                 const char *role);

/* In a child just forked from a traced process: gives it a buffer of its
 * own, named by the printf-style role. Nothing without a session; a
 * failure is logged and leaves the child unrecorded. */
void trace_proc_open(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* One process's records, as trace_session_collect hands them over: recs
 * are n records of 104 bytes (trace_rec's layout, docs/wire.md), times
 * in CLOCK_MONOTONIC ns, kinds plain; role NUL-terminated. */
typedef void (*trace_collect_fn)(void *ctx, int32_t pid, int32_t ppid,
                                 const char *role, uint64_t dropped,
                                 const void *recs, uint32_t n);

/* In the process that started the session: hands every buffer of the
 * session (recorded so far; they stay) to fn, by pid. */
STRATA_MUST_CHECK strata_err trace_session_collect(trace_collect_fn fn,
                                                   void *ctx);

/* In a traced L4: records of one process of its remote node `node`, whose
 * session process is session_pid, received over the wire; they join the
 * merge at trace_session_finish with times + shift_ns (the node's clock to
 * this host's), pids moved out of this host's range, and the session
 * process named "node <node> (L3)" as a child of this one. Any thread;
 * records of a pid already added are appended. */
void trace_remote_add(unsigned node, int32_t session_pid, int32_t pid,
                      int32_t ppid, const char *role, uint64_t dropped,
                      const void *recs, size_t n, int64_t shift_ns);

/* Leaves the session; the last leave, in the process that started it,
 * merges every buffer of the session into the JSON file and removes them
 * all from /dev/shm. Call after the tree's processes are gone. Errors
 * (the file cannot be written) come back with the buffers removed all the
 * same. */
STRATA_MUST_CHECK strata_err trace_session_finish(void);

#endif
