/*
 * strata: a C runtime that runs work on a tree of processes.
 *
 * This is the only header a user includes. Conventions, for every function
 * below unless its comment says otherwise:
 * - Fallible functions return strata_err (0 = STRATA_OK) and the detail of a
 *   failure is in the calling thread's strata_errmsg().
 * - Output parameters end in _out, come last, and are written only on
 *   STRATA_OK. Ownership moves only on STRATA_OK.
 * - destroy/free/release functions accept NULL as a no-op.
 */
#ifndef STRATA_STRATA_H
#define STRATA_STRATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every call that can fail is marked STRATA_MUST_CHECK: ignoring its
 * result is a warning. gcc does not accept a (void) cast for it; a
 * program that must discard results may define STRATA_MUST_CHECK as
 * empty before including this header. */
#if defined(__GNUC__)
#ifndef STRATA_MUST_CHECK
#define STRATA_MUST_CHECK __attribute__((warn_unused_result))
#endif
#define STRATA_API __attribute__((visibility("default")))
#define STRATA_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#ifndef STRATA_MUST_CHECK
#define STRATA_MUST_CHECK
#endif
#define STRATA_API
#define STRATA_PRINTF(f, a)
#endif

#define STRATA_VERSION_MAJOR 0
#define STRATA_VERSION_MINOR 1
#define STRATA_VERSION_PATCH 0

/* ------------------------------------------------------------------ */
/* Errors. The numbers are a wire contract: append, never renumber.    */
/* ------------------------------------------------------------------ */

#define STRATA_ERRORS(X)                                                       \
    X(STRATA_OK, 0, "success")                                                 \
    X(STRATA_EINVAL, 1, "invalid argument")                                    \
    X(STRATA_ENOMEM, 2, "out of memory")                                       \
    X(STRATA_ENOENT, 3, "not found")                                           \
    X(STRATA_EEXIST, 4, "already exists")                                      \
    X(STRATA_ESTATE, 5, "operation not valid in this state")                   \
    X(STRATA_ETASK, 6, "a task failed")                                        \
    X(STRATA_EPEER, 7, "a peer process failed")                                \
    X(STRATA_ETIMEDOUT, 8, "timed out")                                        \
    X(STRATA_ENOTSUP, 9, "not supported")                                      \
    X(STRATA_EIO, 10, "input/output error")                                    \
    X(STRATA_EPROTO, 11, "protocol error")                                     \
    X(STRATA_EAUTH, 12, "authentication failed")                               \
    X(STRATA_EBUSY, 13, "resource busy")                                       \
    X(STRATA_ESYS, 14, "system call failed")                                   \
    X(STRATA_EBUDGET, 15, "memory budget exceeded")

typedef enum strata_err {
#define STRATA_ERR_ENUM_(name, value, text) name = value,
    STRATA_ERRORS(STRATA_ERR_ENUM_)
#undef STRATA_ERR_ENUM_
} strata_err;

/* Static text for an error code ("unknown error" for an unknown one). Any
 * thread. */
STRATA_API const char *strata_strerror(strata_err err);
/* Symbolic name of an error code ("STRATA_EINVAL"). Any thread. */
STRATA_API const char *strata_errname(strata_err err);
/* Detail of the calling thread's last failure; "" when none. Valid until
 * the thread's next strata call. */
STRATA_API const char *strata_errmsg(void);
/* Replaces the calling thread's detail message (truncated to
 * STRATA_ERRMSG_MAX - 1 bytes; fmt NULL clears it). Kernels and subs use
 * it to explain a failure; the message travels back to the orchestrating
 * process. */
STRATA_API void strata_errmsg_set(const char *fmt, ...) STRATA_PRINTF(1, 2);
#define STRATA_ERRMSG_MAX 512

/* ------------------------------------------------------------------ */
/* Allocation hooks                                                    */
/* ------------------------------------------------------------------ */

typedef struct strata_alloc_hooks {
    void *(*malloc_fn)(size_t size, void *ctx);
    void *(*realloc_fn)(void *ptr, size_t size, void *ctx);
    void (*free_fn)(void *ptr, void *ctx);
    void *ctx;
} strata_alloc_hooks;

/* Routes strata's own heap allocations through hooks (NULL restores libc).
 * Call before creating any strata object; STRATA_ESTATE afterwards.
 * STRATA_EINVAL if a hook function is missing. Main thread. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_set_alloc_hooks(const strata_alloc_hooks *hooks);

/* ------------------------------------------------------------------ */
/* Data types, tags, limits                                            */
/* ------------------------------------------------------------------ */

typedef enum strata_dtype {
    STRATA_U8 = 1,
    STRATA_I8 = 2,
    STRATA_U16 = 3,
    STRATA_I16 = 4,
    STRATA_U32 = 5,
    STRATA_I32 = 6,
    STRATA_U64 = 7,
    STRATA_I64 = 8,
    STRATA_F16 = 9,
    STRATA_BF16 = 10,
    STRATA_F32 = 11,
    STRATA_F64 = 12,
    STRATA_BOOL = 13,
} strata_dtype;

/* Bytes per element; 0 for an unknown dtype. */
STRATA_API size_t strata_dtype_size(strata_dtype dtype);

/* How a task uses a tensor; drives dependency inference.
 * IN: reads. OUT: overwrites (previous contents irrelevant).
 * INOUT: reads and writes. OUT_EXISTING: writes into an existing buffer the
 * task does not read (ordered like OUT). NO_DEP: passed, never tracked. */
typedef enum strata_tag {
    STRATA_IN = 1,
    STRATA_OUT = 2,
    STRATA_INOUT = 3,
    STRATA_OUT_EXISTING = 4,
    STRATA_NO_DEP = 5,
} strata_tag;

#define STRATA_MAX_TENSORS 256
#define STRATA_MAX_SCALARS 128
#define STRATA_MAX_DIMS 5

/* ------------------------------------------------------------------ */
/* Opaque objects and callables                                        */
/* ------------------------------------------------------------------ */

typedef struct strata_worker strata_worker;
typedef struct strata_orch strata_orch;
typedef struct strata_chip strata_chip;
typedef struct strata_args strata_args;
typedef struct strata_buffer strata_buffer;
typedef struct strata_run strata_run;

typedef enum strata_callable_kind {
    STRATA_CALLABLE_KERNEL = 1,
    STRATA_CALLABLE_ORCH = 2,
    STRATA_CALLABLE_SUB = 3,
} strata_callable_kind;

/* A registered function, passed by value. digest = SHA-256("kind:name") with
 * kind one of "kernel", "orch", "sub"; it identifies the callable in every
 * process of the tree. */
typedef struct strata_callable {
    uint32_t kind; /* strata_callable_kind */
    uint32_t reserved;
    uint8_t digest[32];
} strata_callable;

typedef strata_err (*strata_kernel_fn)(strata_chip *chip,
                                       const strata_args *args);
typedef strata_err (*strata_sub_fn)(const strata_args *args);
typedef strata_err (*strata_orch_fn)(strata_orch *orch, const strata_args *args,
                                     void *user);

/* Registers fn under name in the process-wide registry. Registering the same
 * name and function again returns the same callable; a different function
 * under a used name is STRATA_EEXIST. Names are 1..127 bytes. Forked
 * children inherit the registry, so register before strata_worker_init.
 * Main thread (the registry is locked, but registration while workers run
 * is not seen by their children). */
STRATA_API STRATA_MUST_CHECK strata_err strata_register_kernel(
    const char *name, strata_kernel_fn fn, strata_callable *out);
/* As strata_register_kernel, for an orch fn (runs on a worker). */
STRATA_API STRATA_MUST_CHECK strata_err
strata_register_orch(const char *name, strata_orch_fn fn, strata_callable *out);
/* As strata_register_kernel, for a sub (runs on a sub worker). */
STRATA_API STRATA_MUST_CHECK strata_err
strata_register_sub(const char *name, strata_sub_fn fn, strata_callable *out);
/* The callable kind:name names anywhere in a tree, registered here or not:
 * how an L4 names a callable that only a remote node's module has.
 * STRATA_EINVAL for a bad kind or name. */
STRATA_API STRATA_MUST_CHECK strata_err strata_callable_by_name(
    strata_callable_kind kind, const char *name, strata_callable *out);
/* Name a callable was registered under, or looked up by
 * (strata_callable_by_name) in this process; NULL if unknown here. */
STRATA_API const char *strata_callable_name(strata_callable c);
/* Lower-case hex of the digest into buf (65 bytes); returns buf (NULL
 * when buf is NULL). */
STRATA_API char *strata_callable_digest_hex(strata_callable c, char buf[65]);

/* What a module defines (the library does not): registers the module's
 * callables when strata_load_module loads it. Declared here so that a
 * module's definition is checked and exported (visibility default). */
STRATA_API strata_err strata_module_init(void);

/* dlopen()s a shared object and calls its
 *   strata_err strata_module_init(void);
 * STRATA_EIO if it cannot be loaded, STRATA_ENOENT if it lacks the symbol,
 * the init's own error otherwise. shared_object_path is a file's path
 * (absolute, or from the working directory), not a bare library name: the
 * library search path is not used, and the file is known by its real
 * path, so loading it twice, by any path, is a no-op. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_load_module(const char *shared_object_path);

/* ------------------------------------------------------------------ */
/* Workers                                                             */
/* ------------------------------------------------------------------ */

typedef struct strata_worker_config {
    int level; /* 3: a node (chips and subs); 4: a cluster of nodes; up to
                  STRATA_MAX_LEVEL */
    const char *platform; /* "sim" (default when NULL) */
    const int *chip_ids;  /* one chip process per id; ids unique, >= 0 */
    size_t num_chips;
    size_t num_sub_workers;
    const char *comm_profile; /* default "sim" */
    double startup_timeout_s; /* whole-tree deadline, (0, 1e7]; default 120 */
    /* platform "cuda": NULL, or num_chips device ordinals, the device of
     * chip_ids[i] being device_ordinals[i] (among the devices
     * CUDA_VISIBLE_DEVICES leaves visible; chips may share one). NULL:
     * STRATA_CUDA_DEVICES, else ordinal = chip id. See docs/cuda.md. */
    const int *device_ordinals;
    /* Memory budgets, "tier=size,..." as <strata/tier.h> reads them
     * ("ram=16GiB"); NULL: unlimited. The worker's host buffers count
     * against "ram", spilled ones against "nvme"; "device" and
     * "host-pinned" never bind (docs/tiers.md). */
    const char *budgets;
    /* Directory for spilled buffers (NULL: none); creating the worker
     * checks that it takes a file (STRATA_EINVAL naming it otherwise) and
     * removes the spill files there of processes that are gone. */
    const char *spill_dir;
    int eviction; /* strata_eviction; default STRATA_EVICT_NONE */
    /* Timeline trace (docs/tracing.md): every process of the tree records
     * spans, merged at strata_worker_destroy into this Chrome/Perfetto
     * trace-event JSON file. NULL or "": the STRATA_TRACE environment
     * variable's path, else no trace. Read by the top-level worker only (the
     * one the caller starts with strata_worker_init). Appended last: code
     * that fills the config with strata_worker_config_init keeps working. */
    const char *trace_path;
} strata_worker_config;

/* What a worker does when a new buffer would exceed its ram budget:
 * refuse it (STRATA_EBUDGET), or (LRU, which needs spill_dir) spill idle
 * buffers, least recently used first, to files in spill_dir, and restore
 * each when a task, a run's arguments, strata_buffer_data or
 * strata_buffer_read/_write name it again (the caller waits; nothing
 * fails for it). Idle: named by no unfinished task, no submission in
 * progress and no running orch fn's arguments. With nothing idle, the
 * allocation waits until a task naming a buffer finishes; when nothing
 * ever can (every resident buffer is held by running orch fns'
 * arguments), or the buffer is larger than the budget, STRATA_EBUDGET.
 * See docs/tiers.md. */
typedef enum strata_eviction {
    STRATA_EVICT_NONE = 0,
    STRATA_EVICT_LRU = 1,
} strata_eviction;

/* The deepest worker: each level is a layer of processes below it. */
#define STRATA_MAX_LEVEL 8

/* Fills cfg with defaults for a worker at level (no chips, no subs). */
STRATA_API void strata_worker_config_init(strata_worker_config *cfg, int level);

/* Creates an un-started worker from cfg (copied; cfg may be freed after).
 * STRATA_EINVAL for a bad config, the field named in strata_errmsg: a
 * level outside 3..STRATA_MAX_LEVEL, chips above level 3, chip_ids NULL with
 * chips, a negative or repeated chip id, more than 4096 chips and subs, a
 * startup_timeout_s that is NaN, <= 0 or > 1e7, an unknown platform or
 * comm_profile, device_ordinals on a platform other than "cuda" or with a
 * negative entry (the chip named). An ordinal past the visible devices is
 * found by the chip, at strata_worker_init: STRATA_EINVAL naming it. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_worker_create(const strata_worker_config *cfg, strata_worker **out);

/* Forks every chip and sub process, waits until all report ready under the
 * startup deadline, then starts the scheduler thread. On any failure the
 * whole tree is rolled back (children killed and reaped) and the worker can
 * be destroyed. STRATA_ESTATE if already initialized. Call it from a
 * thread that lives as long as the worker (the main thread, say): the
 * children die with the thread that forked them. */
STRATA_API STRATA_MUST_CHECK strata_err strata_worker_init(strata_worker *w);

/* Runs fn(orch, args, user) on the calling thread, then waits for the run
 * fence (every submitted task finished). Returns the run's first error:
 * STRATA_ETASK when a task returned an error (strata_errmsg names the
 * callable, the target and the task's message), STRATA_EPEER when a child
 * died, STRATA_ETIMEDOUT when a node task passed its deadline
 * (strata_orch_set_deadline), or fn's own error. The worker stays usable
 * after a failed run. The orch is fn's alone: it is freed before this
 * returns, so do not keep it. */
STRATA_API STRATA_MUST_CHECK strata_err strata_worker_run(
    strata_worker *w, strata_orch_fn fn, const strata_args *args, void *user);

/* Like strata_worker_run but returns once fn has returned; the run's tasks
 * go on in the background. Wait with strata_run_wait, then strata_run_free.
 * If fn fails, its error is what strata_run_wait reports. Until
 * strata_run_free, a strata_orch call with fn's orch fails with
 * STRATA_ESTATE; after it, the orch is freed. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_worker_submit(strata_worker *w, strata_orch_fn fn,
                     const strata_args *args, void *user, strata_run **out);

/* Waits up to timeout_s (< 0: forever) for the run fence. STRATA_ETIMEDOUT
 * leaves the run going (wait again); otherwise returns the run's result as
 * strata_worker_run does, and the same result on every later call. */
STRATA_API STRATA_MUST_CHECK strata_err strata_run_wait(strata_run *run,
                                                        double timeout_s);
/* Frees a run handle. An unfinished run goes on and cleans up at its fence.
 * A handle outlives its worker: after strata_worker_destroy (not during
 * it), strata_run_wait returns the run's final result at once and
 * strata_run_free frees the handle. */
STRATA_API void strata_run_free(strata_run *run);

/* Creates a host buffer of nbytes (> 0) in POSIX shared memory, zeroed,
 * visible without copies to every process of the worker's tree. Usable
 * after strata_worker_create; the worker owns it until released. Its
 * pages are reserved in /dev/shm now (posix_fallocate), so touching it
 * never faults for want of space: STRATA_ENOMEM, naming nbytes and the
 * free space, when /dev/shm cannot hold it. */
STRATA_API STRATA_MUST_CHECK strata_err strata_worker_create_buffer(
    strata_worker *w, size_t nbytes, strata_buffer **out);
/* The buffer's bytes as mapped in the calling process (NULL for NULL); a
 * remote buffer's bytes are reached with strata_buffer_read/_write. Under
 * LRU eviction a spilled buffer is restored first (NULL, with the reason
 * in strata_errmsg, if that fails), and the pointer holds the buffer's
 * bytes only until the buffer is spilled again: call this again after
 * creating buffers or running tasks that do not name it. */
STRATA_API void *strata_buffer_data(strata_buffer *b);
/* The buffer's size in bytes, as created. */
STRATA_API size_t strata_buffer_size(const strata_buffer *b);
/* Unmaps and frees a buffer everywhere. STRATA_ESTATE (buffer kept) while
 * an unfinished task names it (in its arguments; a run's own arguments
 * that no task of it names do not hold the buffer). */
STRATA_API STRATA_MUST_CHECK strata_err strata_buffer_release(strata_buffer *b);

/* Copies n bytes from src into b at offset (write), or from b at offset
 * into dst (read). A host buffer is copied with memcpy; a remote buffer's
 * bytes travel over its node's connection, in pieces under 1 MiB, each
 * after the node's earlier work. Returns when the bytes have arrived. n = 0
 * is a no-op. STRATA_EINVAL for a NULL argument or bytes outside b;
 * STRATA_ESTATE (nothing copied) while an unfinished task names b;
 * STRATA_EPEER when the node is lost (the copy may be partial). Any thread
 * but a kernel's; not concurrently with a submit naming b. */
STRATA_API STRATA_MUST_CHECK strata_err strata_buffer_write(strata_buffer *b,
                                                            size_t offset,
                                                            const void *src,
                                                            size_t n);
/* The read direction of strata_buffer_write (same rules and errors). */
STRATA_API STRATA_MUST_CHECK strata_err strata_buffer_read(strata_buffer *b,
                                                           size_t offset,
                                                           void *dst, size_t n);

/* Drains every unfinished run, shuts the subtree down (SHUTDOWN, then
 * SIGTERM, then SIGKILL of each child's process group under one deadline),
 * reaps every child, frees every buffer and segment, frees w. The drain
 * has no deadline: a kernel that never returns (a strata_signal_wait with
 * timeout -1 that nobody signals) holds destroy for ever, so give such
 * waits a timeout, or a node task a deadline (strata_orch_set_deadline).
 * STRATA_ESTATE, and nothing done, from inside one of w's own orch fns
 * (the drain would wait for it) and in a process forked from w's creator:
 * a fork has a copy of w that it can neither run, nor give buffers, nor
 * destroy (it may simply exit). */
STRATA_API STRATA_MUST_CHECK strata_err strata_worker_destroy(strata_worker *w);

/* Adds child (an un-started worker one level down) under parent (level 4
 * or above, not started). Ownership moves to parent on STRATA_OK: the
 * parent starts, runs and destroys it. *worker_id_out is its node id, the
 * target of strata_orch_submit_next_level in the parent's orch fns.
 * STRATA_EINVAL for a wrong level, STRATA_ESTATE if either is started or
 * child already has a parent. */
STRATA_API STRATA_MUST_CHECK strata_err strata_worker_add_worker(
    strata_worker *parent, strata_worker *child, int *worker_id_out);
/* A remote L3 node: a strata-node daemon the parent connects to at init. */
typedef struct strata_remote_spec {
    const char *endpoint;    /* "host:port", "[v6]:port" */
    const char *secret_file; /* cluster PSK, or cert_file/key_file/ca_file */
    const char *cert_file, *key_file, *ca_file;
    bool insecure;        /* plaintext; loopback only */
    const char *platform; /* "sim" when NULL */
    const int *chip_ids;  /* the node's chips */
    size_t num_chips;
    size_t num_sub_workers;
    const char *comm_profile;       /* "sim" when NULL */
    const int *global_device_ranks; /* optional, one per chip */
} strata_remote_spec;

/* Adds a remote node under parent (level 4+, not started); spec is copied.
 * Its id shares the space of strata_worker_add_worker. The connection is
 * made, authenticated and sized at strata_worker_init, under the tree's
 * start-up deadline. STRATA_EINVAL for a bad spec (insecure off loopback,
 * no or two authentication modes, a bad endpoint). */
STRATA_API STRATA_MUST_CHECK strata_err strata_worker_add_remote_worker(
    strata_worker *parent, const strata_remote_spec *spec, int *worker_id_out);
/* An Open MPI group of L3 nodes: mpirun starts `ranks` copies of the rank
 * program (strata-rank), each an L3 node of the parent with the same chips
 * and sub workers. Every rank dials back to the parent over TLS 1.3 with a
 * one-time key the parent draws at init (a mode-600 file in key_dir whose
 * path, not the key, is on the rank's command line). docs/mpi.md. */
typedef struct strata_mpi_group_spec {
    size_t ranks;                   /* MPI ranks, one node each; >= 1 */
    const char *hostfile;           /* mpirun --hostfile; or hosts, or */
    const char *const *hosts;       /* neither: every rank on this host */
    size_t num_hosts;               /* entries of hosts */
    size_t slots_per_host;          /* with hosts: slots each; 0 = 1 */
    const int *chip_ids;            /* every rank's chips */
    size_t num_chips;               /* entries of chip_ids */
    size_t num_sub_workers;         /* per rank */
    const char *mpirun_path;        /* NULL: "mpirun" from PATH */
    const char *const *mpirun_args; /* extra arguments, before -np */
    size_t num_mpirun_args;         /* entries of mpirun_args */
    const char *comm_profile;       /* "sim" when NULL */
    const char *platform;           /* "sim" when NULL */
    const char *rank_program;       /* NULL: the installed strata-rank */
    const char *const *modules;     /* callable modules every rank loads
                                       (strata-node's --module), by path */
    size_t num_modules;             /* entries of modules */
    const char *callback_host;      /* address the ranks dial back to
                                       (bound here); NULL: 127.0.0.1 */
    int callback_port;              /* 0: any free port */
    const char *key_dir;            /* for the key file; must be seen by
                                       every host. NULL: $TMPDIR or /tmp */
} strata_mpi_group_spec;

/* Adds an Open MPI group of spec->ranks L3 nodes under parent (level 4+,
 * not started); spec is copied. ids_out[0..ranks) receive the nodes' ids
 * (rank r is ids_out[r]); n is ids_out's capacity. At strata_worker_init
 * the parent starts mpirun in a process group of its own; the ids become
 * usable only when every rank has dialed back and reported ready within
 * the tree's start-up deadline, otherwise init fails naming the ranks
 * that did not and rolls the tree back, mpirun included. A lost rank (or
 * mpirun exiting) fails the group's work with STRATA_EPEER naming the rank
 * and its host. strata_worker_destroy ends mpirun and removes the key.
 * STRATA_EINVAL for a bad spec (no ranks, n < ranks, a hostfile and hosts
 * both, too few slots, a bad host name or chip list, an mpirun or rank
 * program that cannot be run); STRATA_ESTATE after init. Nothing is added
 * unless STRATA_OK. Call from the thread that created parent. */
STRATA_API STRATA_MUST_CHECK strata_err strata_worker_add_mpirun_worker_group(
    strata_worker *parent, const strata_mpi_group_spec *spec, int *ids_out,
    size_t n);
/* Creates nbytes (> 0) of zeroed memory that lives on remote node node_id
 * of w (level 4+, after strata_worker_init) and nowhere else: tasks sent to
 * that node name it like any buffer, and no bytes move with them. Fill and
 * drain it with strata_buffer_write / strata_buffer_read. Its data pointer
 * here is NULL; strata_buffer_release frees it on the node. Submitting it
 * to any other target is STRATA_EINVAL. STRATA_EINVAL for a NULL argument,
 * nbytes 0, no such node or a forked node (it maps host buffers directly);
 * STRATA_ESTATE before init; STRATA_EPEER when the node is lost; the
 * node's own error (STRATA_ENOMEM) otherwise. */
STRATA_API STRATA_MUST_CHECK strata_err strata_worker_create_remote_buffer(
    strata_worker *w, int node_id, size_t nbytes, strata_buffer **out);
/* The node a remote buffer lives on; -1 for a host buffer (or NULL). */
STRATA_API int strata_buffer_node(const strata_buffer *b);
/* The nodes of a level-4+ worker: forked ones (strata_worker_add_worker),
 * remote ones (strata_worker_add_remote_worker) and every rank of its MPI
 * groups, which share one id space. */
STRATA_API size_t strata_worker_num_nodes(const strata_worker *w);
/* Process id of node node_id: a forked node's own, a remote node's
 * session process on its host (as its strata-node reported it), an MPI
 * rank's when it runs on this host (0 on another host, or before the node
 * connected); -1 for NULL, before init or an id out of range. */
STRATA_API int strata_worker_node_pid(const strata_worker *w, int node_id);

/* Chip ids, as configured. Accessors for tools and tests. */
STRATA_API size_t strata_worker_num_chips(const strata_worker *w);
/* Number of sub workers, as configured. */
STRATA_API size_t strata_worker_num_sub_workers(const strata_worker *w);
/* Process id of chip chip_id (or -1). For diagnostics and fault tests. */
STRATA_API int strata_worker_chip_pid(const strata_worker *w, int chip_id);
/* Process id of sub worker index (or -1). */
STRATA_API int strata_worker_sub_pid(const strata_worker *w, size_t index);

/* ------------------------------------------------------------------ */
/* Task arguments                                                      */
/* ------------------------------------------------------------------ */

/* Argument lists are built by the orchestrating code and copied at submit,
 * so one list may be reused and destroyed right after submitting. */
STRATA_API STRATA_MUST_CHECK strata_err strata_args_create(strata_args **out);
/* Frees a list (NULL is a no-op). */
STRATA_API void strata_args_destroy(strata_args *a);
/* Empties the list for reuse. */
STRATA_API void strata_args_clear(strata_args *a);
/* Appends a tensor: ndims (1..STRATA_MAX_DIMS) dims of dtype at byte_offset
 * in buf. STRATA_EINVAL for a bad dtype/tag/shape or a range outside the
 * buffer; STRATA_ENOMEM past STRATA_MAX_TENSORS. */
STRATA_API STRATA_MUST_CHECK strata_err strata_args_add_tensor(
    strata_args *a, strata_buffer *buf, size_t byte_offset, strata_dtype dtype,
    size_t ndims, const size_t *shape, strata_tag tag);
/* Appends a 64-bit scalar (STRATA_ENOMEM past STRATA_MAX_SCALARS). */
STRATA_API STRATA_MUST_CHECK strata_err strata_args_add_scalar(strata_args *a,
                                                               uint64_t value);

/* Accessors, valid inside a kernel, sub or orch fn (and on lists the caller
 * built). Out-of-range indexes return NULL/0. */
STRATA_API size_t strata_args_num_tensors(const strata_args *a);
/* Pointer to tensor i's first byte, valid in the calling process. */
STRATA_API void *strata_args_tensor_data(const strata_args *a, size_t i);
/* Tensor i's size in bytes. */
STRATA_API size_t strata_args_tensor_nbytes(const strata_args *a, size_t i);
/* Tensor i's element type. */
STRATA_API strata_dtype strata_args_tensor_dtype(const strata_args *a,
                                                 size_t i);
/* Tensor i's number of dimensions. */
STRATA_API size_t strata_args_tensor_ndims(const strata_args *a, size_t i);
/* Tensor i's extent in dimension d. */
STRATA_API size_t strata_args_tensor_dim(const strata_args *a, size_t i,
                                         size_t d);
/* Tensor i's dependency tag. */
STRATA_API strata_tag strata_args_tensor_tag(const strata_args *a, size_t i);
/* The buffer tensor i lives in, and its byte offset there. Inside an orch
 * fn of a node, this is how a parent's tensor is passed on to kernels:
 * the buffer is the parent's, mapped here by identity, never copied. NULL
 * inside kernels and subs, which get data pointers only. */
STRATA_API strata_buffer *strata_args_tensor_buffer(const strata_args *a,
                                                    size_t i);
/* Tensor i's byte offset in its buffer. */
STRATA_API size_t strata_args_tensor_offset(const strata_args *a, size_t i);
/* Number of scalars. */
STRATA_API size_t strata_args_num_scalars(const strata_args *a);
/* Scalar i (0 when out of range). */
STRATA_API uint64_t strata_args_scalar(const strata_args *a, size_t i);

/* ------------------------------------------------------------------ */
/* Orchestrator (valid only inside an orch fn, on its thread)          */
/* ------------------------------------------------------------------ */

/* Submits kernel c with args to chip worker_id (args NULL: no tensors and
 * no scalars; so for a NULL entry of a group's list). Dependencies on
 * earlier tasks (of this and earlier runs) are inferred from tensor tags
 * by buffer identity and byte-range overlap. STRATA_EINVAL at submit for an
 * unknown chip, an unregistered or wrong-kind callable, a tensor outside its
 * buffer or two writes of one task to overlapping bytes. */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_submit_next_level(
    strata_orch *o, strata_callable c, const strata_args *a, int worker_id);
/* Submits one task per worker_ids[i] with args a[i]; the group launches
 * only when every target is idle, so its kernels may wait on each other. */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_submit_next_level_group(
    strata_orch *o, strata_callable c, const strata_args *const *a,
    const int *worker_ids, size_t n);
/* Submits sub callable c to the shared sub-worker queue. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_orch_submit_sub(strata_orch *o, strata_callable c, const strata_args *a);
/* Scopes nest (up to 16). scope_end waits for every task submitted since the
 * matching scope_begin and returns their first error (STRATA_ETASK /
 * STRATA_EPEER) or STRATA_OK; STRATA_ESTATE without an open scope. A
 * failed task fails its run as well, whatever the orch fn does after
 * scope_end (the run reports its first error). A scope
 * left open when the orch fn returns makes the run fail with STRATA_ESTATE. */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_scope_begin(strata_orch *o);
/* Closes the innermost scope (see strata_orch_scope_begin). */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_scope_end(strata_orch *o);
/* Sets a deadline on the tasks this orch fn submits from now on to nodes
 * (level-4 workers; forked or remote): a task not finished seconds after
 * its node started it fails with STRATA_ETIMEDOUT, and its results are
 * dropped. The node cannot stop it: it goes on in the background until it
 * ends, and may still read and write the buffers it was given, so do not
 * give those buffers to other work meanwhile (the node keeps them mapped
 * while it runs); it is killed with the node's chips when the worker is
 * destroyed. A deadline is separate from
 * liveness: without one, a task may run for as long as it needs on a
 * healthy node. 0 clears it. Submitting a chip or sub task while a
 * deadline is set is STRATA_ENOTSUP (a kernel cannot be interrupted).
 * STRATA_EINVAL for a negative, NaN or absurd (> 1e7 s) value. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_orch_set_deadline(strata_orch *o, double seconds);
/* The worker an orch fn runs on. */
STRATA_API strata_worker *strata_orch_worker(strata_orch *o);

/* ------------------------------------------------------------------ */
/* Chip side (inside a kernel)                                         */
/* ------------------------------------------------------------------ */

/* The id of the chip a kernel runs on. */
STRATA_API int strata_chip_id(const strata_chip *chip);

#ifdef __cplusplus
}
#endif

#include <strata/domain.h>
#include <strata/graph.h>

#endif /* STRATA_STRATA_H */
