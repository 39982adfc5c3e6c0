/*
 * Bundle plans: a validated DAG of invocations (a callable and the
 * resources it is given), in the form of the reference compiler's
 * executable bundle plan (JSON schema "tiga.executable-bundle-plan.v1"),
 * submitted to the orchestrator as ordinary tasks. See docs/plans.md.
 *
 * A plan is checked once, when it is made: every dependency names a known
 * invocation, there is no cycle, every access names a declared resource,
 * and every pair of accesses to one resource of which at least one writes
 * is ordered by a dependency path, unless both carry the same partitioning
 * and different partitions. The runtime never adds a dependency the plan
 * lacks to make it legal: an illegal plan is refused, naming both
 * invocations. Submission then maps each invocation onto one task whose
 * dependencies are exactly the plan's edges (plus, as for any task, the
 * order its buffers impose on earlier and later work).
 */
/* Before the guard, as in domain.h. */
#include <strata/strata.h>

#ifndef STRATA_PLAN_H
#define STRATA_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

/* The schema name plans are read and written with. */
#define STRATA_PLAN_SCHEMA "tiga.executable-bundle-plan.v1"
/* Reserved callables: a move between tiers, the end of an instance's life,
 * and a pure synchronization point. */
#define STRATA_PLAN_TRANSFER "__gf_transfer"
#define STRATA_PLAN_RELEASE "__gf_release"
#define STRATA_PLAN_JOIN "__gf_join"

/* Limits of one plan, so that checking it stays bounded. */
#define STRATA_PLAN_MAX_INVOCATIONS 4096
#define STRATA_PLAN_MAX_RESOURCES 4096
#define STRATA_PLAN_MAX_ITEMS 256 /* deps, arguments, accesses per call */
#define STRATA_PLAN_NAME_MAX 255  /* bytes of any name */

typedef struct strata_plan strata_plan;
typedef struct strata_plan_bindings strata_plan_bindings;

typedef enum strata_plan_mode {
    STRATA_PLAN_READ = 1,       /* "read" */
    STRATA_PLAN_WRITE = 2,      /* "write" */
    STRATA_PLAN_READ_WRITE = 3, /* "read_write" */
} strata_plan_mode;

/* A resource requirement: what the plan needs allocated or bound. */
typedef struct strata_plan_resource {
    const char *name;          /* unique among resources */
    const char *memory_space;  /* "ram", "device", "nvme", ...; NULL: "ram" */
    const char *layout;        /* NULL: "packed" */
    const char *device;        /* NULL: "host" */
    uint64_t capacity_bytes;   /* <= INT64_MAX */
    uint64_t snapshot_version; /* <= INT64_MAX */
    bool external;             /* bound by the caller, not allocated */
} strata_plan_resource;

/* Parameter `parameter` of the callable gets resource `resource`. */
typedef struct strata_plan_argument {
    const char *parameter; /* unique within its invocation */
    const char *resource;
} strata_plan_argument;

/* How an invocation uses a resource. partitioning and partition are both
 * NULL or both non-empty; two accesses with the same partitioning and
 * different partitions are disjoint. */
typedef struct strata_plan_access {
    const char *resource; /* "binding" in the JSON form */
    strata_plan_mode mode;
    uint64_t snapshot_version; /* equal to its invocation's */
    const char *partitioning;
    const char *partition;
} strata_plan_access;

typedef struct strata_plan_invocation {
    const char *name;      /* unique among invocations */
    const char *callable;  /* "executable_symbol": a callable's name, or
                              one of the reserved STRATA_PLAN_* names */
    const char *task_kind; /* free text; NULL: "local" */
    const char *phase;     /* "materialize" or "execute"; NULL: "execute" */
    const char *const *depends_on; /* invocation names, unique */
    size_t num_depends_on;
    const strata_plan_argument *arguments; /* the callable's tensors, in
                                               order */
    size_t num_arguments;
    const strata_plan_access *accesses;
    size_t num_accesses;
    uint64_t snapshot_version; /* one version per plan */
    const uint64_t *scalars;   /* appended to the task's scalars */
    size_t num_scalars;        /* <= STRATA_MAX_SCALARS */
    const char *metadata_json; /* other keys, as a JSON object; NULL: none */
} strata_plan_invocation;

typedef struct strata_plan_spec {
    const strata_plan_resource *resources;
    size_t num_resources;
    const strata_plan_invocation *invocations; /* at least one */
    size_t num_invocations;
    const char *const *terminals; /* NULL (num 0): derived; otherwise must
                                     be the invocations nothing depends on */
    size_t num_terminals;
} strata_plan_spec;

/* Makes a plan from spec (deep-copied: spec may be freed after). A
 * resource is declared when it is a requirement of spec->resources or the
 * resource of some argument (one the caller binds). STRATA_EINVAL, with
 * the offending invocations and resources named, for: no invocation; a
 * count past the limits above; an empty, too long or repeated name; a
 * bad mode, phase, partition pair or metadata object; a dependency on an
 * unknown invocation or on itself; a cycle (two invocations on it named);
 * an access to an undeclared resource; mixed snapshot versions; a
 * transfer without exactly the parameters "source" and "destination"; a
 * hazard (two invocations that access one resource, one of them writing,
 * with no dependency path between them and not proven disjoint by their
 * partitions); terminals that disagree with the DAG. STRATA_ENOMEM.
 * Any thread. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_plan_create(const strata_plan_spec *spec, strata_plan **out);

/* Reads a plan from len bytes of JSON in the reference schema (schema key
 * "tiga.executable-bundle-plan.v1") and checks it as strata_plan_create
 * does. Keys of an invocation that the schema does not name are kept as
 * its metadata; "scalars" (integers) become its scalars. STRATA_EINVAL for
 * text that is not JSON (line and column named), a wrong schema, and any
 * missing, mistyped or out-of-range field: the message names the field's
 * path ("$.invocations[2].accesses[0].mode"). The text is untrusted input;
 * it need not be NUL-terminated. Any thread. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_plan_from_json(const char *json, size_t len, strata_plan **out);

/* Writes p as JSON in the reference schema (2-space indent, a trailing
 * newline) to a new NUL-terminated string *json_out of *len_out bytes
 * (len_out may be NULL); free it with strata_plan_json_free.
 * strata_plan_from_json reads it back to an equal plan. STRATA_ENOMEM. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_plan_to_json(const strata_plan *p, char **json_out, size_t *len_out);
/* Frees a string from strata_plan_to_json. NULL is a no-op. */
STRATA_API void strata_plan_json_free(char *json);

/* Frees p. A plan is immutable: any thread may read or submit it at once;
 * destroy it after its last use. NULL is a no-op. */
STRATA_API void strata_plan_destroy(strata_plan *p);

/* Accessors (NULL / 0 for a NULL plan or an index out of range). The
 * structs returned live as long as p; their strings are p's copies, with
 * the NULL defaults filled in. */
/* Number of invocations in p. */
STRATA_API size_t strata_plan_num_invocations(const strata_plan *p);
/* The i-th invocation, in the order given (not the submission order). */
STRATA_API const strata_plan_invocation *
strata_plan_invocation_at(const strata_plan *p, size_t i);
/* Number of resources p declares. */
STRATA_API size_t strata_plan_num_resources(const strata_plan *p);
/* The i-th resource, in the order given. */
STRATA_API const strata_plan_resource *
strata_plan_resource_at(const strata_plan *p, size_t i);
/* Number of terminal invocations (those nothing in the plan depends on). */
STRATA_API size_t strata_plan_num_terminals(const strata_plan *p);
/* The name of the i-th terminal invocation. */
STRATA_API const char *strata_plan_terminal_at(const strata_plan *p, size_t i);
/* Index of the i-th invocation of the submission order (a topological
 * order: dependencies first, ties in the order given); SIZE_MAX when out
 * of range. */
STRATA_API size_t strata_plan_order_at(const strata_plan *p, size_t i);

/* ------------------------------------------------------------------ */
/* Submission                                                          */
/* ------------------------------------------------------------------ */

/* One argument of a reserved operation, as bound. */
typedef struct strata_plan_operand {
    const char *parameter;
    const char *resource;
    strata_buffer *buffer; /* NULL when the resource is bound to a handle */
    size_t offset, nbytes; /* the bytes of buffer it names */
    void *handle;          /* strata_plan_bind_handle's; may be NULL */
} strata_plan_operand;

/* A reserved operation at submission. args holds the operands' tensors
 * (tagged by the accesses), then tensors that carry the operation's place
 * in the plan: a callback orders its work after the operation's
 * dependencies and before its dependants by submitting one task whose
 * arguments are args (it may append scalars). Work done at once, in the
 * callback, is not ordered. */
typedef struct strata_plan_op {
    const char *invocation;              /* its name */
    const char *callable;                /* STRATA_PLAN_TRANSFER or _RELEASE */
    const strata_plan_operand *operands; /* the arguments, in order */
    size_t num_operands;
    strata_args *args;
    int worker_id; /* strata_plan_bind_target's, or -1 */
} strata_plan_op;

typedef strata_err (*strata_plan_op_fn)(strata_orch *o,
                                        const strata_plan_op *op, void *ctx);

/* Callbacks for the reserved operations; a NULL slot keeps the default.
 * Defaults: a transfer copies source's bytes to destination's (equal
 * sizes, strata buffers) in a task (a sub worker's if the worker has any,
 * else the invocation's bound target chip); a release ends nothing (strata
 * buffers are released by their owner after the run) and, like a join,
 * only orders. The tiered-memory module fills these for tier instances. */
typedef struct strata_plan_reserved_ops {
    strata_plan_op_fn transfer;
    strata_plan_op_fn release;
} strata_plan_reserved_ops;

/* Makes the bindings of one plan on worker w: which buffers its resources
 * are, where its callables run. It owns a small buffer of w (one byte per
 * invocation) that carries the plan's edges. p must outlive it.
 * STRATA_EINVAL for a NULL argument; the buffer's errors. Any thread. */
STRATA_API STRATA_MUST_CHECK strata_err strata_plan_bindings_create(
    const strata_plan *p, strata_worker *w, strata_plan_bindings **out);
/* Releases the bindings' buffer and frees b: STRATA_ESTATE (b kept) while
 * an unfinished run names it. NULL is a no-op (STRATA_OK). */
STRATA_API STRATA_MUST_CHECK strata_err
strata_plan_bindings_destroy(strata_plan_bindings *b);

/* Resource `resource` is bytes [offset, offset + nbytes) of buf (nbytes
 * 0: to the end of buf). Binding again replaces. STRATA_EINVAL for a NULL
 * argument, a resource the plan does not declare, a buf of another worker
 * than b's, bytes outside buf. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_plan_bind_buffer(strata_plan_bindings *b, const char *resource,
                        strata_buffer *buf, size_t offset, size_t nbytes);
/* An access of `resource` in partition `partition` of `partitioning` uses
 * bytes [offset, offset + nbytes) of the resource's binding: disjoint
 * partitions bound to disjoint bytes run at once. Unbound partitions use
 * the whole resource (correct, but serialized). Binding the same
 * (resource, partitioning, partition) again replaces the range.
 * STRATA_EINVAL for a NULL or empty argument, an undeclared resource,
 * nbytes 0, offset + nbytes past SIZE_MAX; a range outside the resource is
 * refused at submission. */
STRATA_API STRATA_MUST_CHECK strata_err strata_plan_bind_partition(
    strata_plan_bindings *b, const char *resource, const char *partitioning,
    const char *partition, size_t offset, size_t nbytes);
/* Resource `resource` is handle (for reserved-operation callbacks, such
 * as a tier instance); it passes no tensor to tasks. */
STRATA_API STRATA_MUST_CHECK strata_err strata_plan_bind_handle(
    strata_plan_bindings *b, const char *resource, void *handle);
/* Invocations whose callable is `name` run c; worker_id is the chip (a
 * kernel) or node (an orch callable at level 4) they go to, ignored for a
 * sub. Without this, `name` is looked up in the registry (sub, then
 * kernel, then orch). STRATA_EINVAL for a NULL or reserved name, or a bad
 * callable kind. */
STRATA_API STRATA_MUST_CHECK strata_err
strata_plan_bind_callable(strata_plan_bindings *b, const char *name,
                          strata_callable c, int worker_id);
/* Invocation `invocation` goes to worker_id (>= 0), whatever its
 * callable's binding says. STRATA_EINVAL for an unknown invocation. */
STRATA_API STRATA_MUST_CHECK strata_err strata_plan_bind_target(
    strata_plan_bindings *b, const char *invocation, int worker_id);
/* Callbacks for the reserved operations of this submission (ops copied;
 * NULL restores the defaults). */
STRATA_API STRATA_MUST_CHECK strata_err strata_plan_bind_reserved(
    strata_plan_bindings *b, const strata_plan_reserved_ops *ops, void *ctx);

/* Submits p, as bound by b, from inside an orch fn: one task per
 * invocation in strata_plan_order_at's order, none for a join or a
 * default release (they only order). Task tensors: the arguments in
 * order (tagged IN for read, OUT_EXISTING for write, INOUT for
 * read_write or both; IN when the invocation declares no access), then
 * tensors the callable must ignore, which order it. Scalars: the
 * invocation's. Returns at once, as any submit does; the run's fence (or
 * a scope) waits. STRATA_EINVAL, naming the invocation, for a plan and
 * bindings that do not match, an unbound argument, a callable that is
 * not registered or has no target, a transfer between buffers of unequal
 * size; the submit's own errors. Tasks submitted before an error stay
 * submitted. Thread of the orch fn. */
STRATA_API STRATA_MUST_CHECK strata_err strata_orch_submit_plan(
    strata_orch *o, const strata_plan *p, const strata_plan_bindings *b);

#ifdef __cplusplus
}
#endif

#endif /* STRATA_PLAN_H */
