/* Bundle plans: submission. Each invocation, in the plan's topological
 * order, becomes one task. The plan's edges travel as dependency tokens:
 * the bindings own one byte per position of the order; a task writes its
 * own byte (OUT_EXISTING) and reads its predecessors' (IN), so the
 * orchestrator's byte-range tracking orders the tasks by exactly the
 * plan's edges, and the resources, passed with the tags of their
 * accesses, order the plan against other work. Joins (and releases
 * without a callback) submit nothing: their dependants take on their
 * predecessors. */
#include "base/alloc.h"
#include "base/digest.h"
#include "base/err.h"
#include "chip/registry.h"
#include "plan/reserved.h"
#include "plan_bind_int.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_COPY_CALLABLE "strata.plan.copy"

/* ---- the process-wide reserved table (plan/reserved.h) ---- */

static pthread_mutex_t def_lock = PTHREAD_MUTEX_INITIALIZER;
static strata_plan_reserved_ops def_ops;
static void *def_ctx;

void plan_reserved_set_default(const strata_plan_reserved_ops *ops, void *ctx)
{
    pthread_mutex_lock(&def_lock);
    if (ops)
        def_ops = *ops;
    else
        memset(&def_ops, 0, sizeof(def_ops));
    def_ctx = ctx;
    pthread_mutex_unlock(&def_lock);
}

/* ---- the default transfer: a byte copy, as a sub or a kernel ---- */

static strata_err copy_bytes(const strata_args *a)
{
    size_t n = strata_args_tensor_nbytes(a, 0);

    if (strata_args_tensor_nbytes(a, 1) != n)
        return STRATA_EINVAL;
    memcpy(strata_args_tensor_data(a, 1), strata_args_tensor_data(a, 0), n);
    return STRATA_OK;
}

static strata_err copy_kernel_fn(strata_chip *chip, const strata_args *a)
{
    (void)chip;
    return copy_bytes(a);
}

static strata_callable copy_sub, copy_kernel;
static strata_err copy_err = STRATA_ESTATE;

/* Registered as the library loads, so forked children inherit them. */
__attribute__((constructor)) static void register_copy(void)
{
    copy_err = strata_register_sub(PLAN_COPY_CALLABLE, copy_bytes, &copy_sub);
    if (!copy_err)
        copy_err = strata_register_kernel(PLAN_COPY_CALLABLE, copy_kernel_fn,
                                          &copy_kernel);
}

/* ---- one submission ---- */

struct submit {
    strata_orch *o;
    const strata_plan *p;
    const strata_plan_bindings *b;
    strata_plan_reserved_ops ops;
    void *ctx;
    size_t *pos;  /* invocation -> position in the order (token byte) */
    bool *tasked; /* submitted as a task */
    size_t **eff; /* forwarded invocation -> its predecessors' positions */
    size_t *eff_n;
    size_t *gather; /* the current invocation's predecessor positions */
    size_t n_gather;
    size_t *stamp; /* by position: r + 1 when gathered for position r */
};

static void gather_add(struct submit *s, size_t r, size_t q)
{
    if (s->stamp[q] == r + 1)
        return;
    s->stamp[q] = r + 1;
    s->gather[s->n_gather++] = q;
}

static void gather_deps(struct submit *s, size_t r, size_t i)
{
    const strata_plan *p = s->p;

    s->n_gather = 0;
    for (size_t m = p->dep_off[i]; m < p->dep_off[i + 1]; m++) {
        size_t d = p->dep_idx[m];

        if (s->tasked[d])
            gather_add(s, r, s->pos[d]);
        else
            for (size_t e = 0; e < s->eff_n[d]; e++)
                gather_add(s, r, s->eff[d][e]);
    }
}

static int pos_cmp(const void *x, const void *y)
{
    size_t a = *(const size_t *)x, b = *(const size_t *)y;

    return a < b ? -1 : a > b;
}

/* Token tensors for the gathered positions, in at most budget ranges
 * (merging the closest ones: a range also waits for the tasks between,
 * all submitted earlier, which only serializes more), then this task's
 * own token. */
static strata_err add_tokens(struct submit *s, size_t r, strata_args *a,
                             size_t budget, const char *name)
{
    size_t *lo = s->gather, *hi, n = 0, one = 1;
    strata_err err;

    qsort(s->gather, s->n_gather, sizeof(size_t), pos_cmp);
    hi = base_calloc(s->n_gather ? s->n_gather : 1, sizeof(*hi));
    if (!hi)
        return base_fail(STRATA_ENOMEM, "plan: no memory");
    /* In place: lo[k] and hi[k] are range k. */
    for (size_t g = 0; g < s->n_gather; g++) {
        if (n && s->gather[g] == hi[n - 1] + 1) {
            hi[n - 1] = s->gather[g];
            continue;
        }
        lo[n] = s->gather[g];
        hi[n++] = s->gather[g];
    }
    if (n > budget && budget == 0) {
        base_free(hi);
        return base_fail(STRATA_EINVAL,
                         "plan invocation '%s': no tensor left for its "
                         "dependencies (%d at most)",
                         name, STRATA_MAX_TENSORS);
    }
    while (n > budget) {
        size_t best = 0;

        for (size_t k = 1; k + 1 < n; k++)
            if (lo[k + 1] - hi[k] < lo[best + 1] - hi[best])
                best = k;
        hi[best] = hi[best + 1];
        memmove(&lo[best + 1], &lo[best + 2], (n - best - 2) * sizeof(*lo));
        memmove(&hi[best + 1], &hi[best + 2], (n - best - 2) * sizeof(*hi));
        n--;
    }
    err = STRATA_OK;
    for (size_t k = 0; k < n && !err; k++) {
        size_t len = hi[k] - lo[k] + 1;

        err = strata_args_add_tensor(a, s->b->tokens, lo[k], STRATA_U8, 1, &len,
                                     STRATA_IN);
    }
    base_free(hi);
    if (!err)
        err = strata_args_add_tensor(a, s->b->tokens, r, STRATA_U8, 1, &one,
                                     STRATA_OUT_EXISTING);
    return err;
}

/* Tensors left in a for predecessor tokens (one more is the task's own). */
static size_t token_budget(const strata_args *a)
{
    size_t used = strata_args_num_tensors(a) + 1;

    return used >= STRATA_MAX_TENSORS ? 0 : STRATA_MAX_TENSORS - used;
}

/* The bytes an access in a bound partition names, if it has one. */
static strata_err partition_range(const struct submit *s,
                                  const strata_plan_invocation *v, size_t k,
                                  size_t *off, size_t *n)
{
    const strata_plan_bindings *b = s->b;

    for (size_t j = 0; j < v->num_accesses; j++) {
        const strata_plan_access *ac = &v->accesses[j];

        if (!ac->partitioning ||
            plan_index_get(&s->p->decl_index, ac->resource) != k)
            continue;
        for (size_t t = 0; t < b->num_parts; t++) {
            const struct bind_part *pt = &b->parts[t];

            if (pt->res != k || strcmp(pt->partitioning, ac->partitioning) ||
                strcmp(pt->partition, ac->partition))
                continue;
            if (pt->off >= *n || pt->n > *n - pt->off)
                return base_fail(STRATA_EINVAL,
                                 "plan invocation '%s': partition '%s' of "
                                 "'%s' is bound outside resource '%s'",
                                 v->name, ac->partition, ac->partitioning,
                                 ac->resource);
            *off += pt->off;
            *n = pt->n;
            return STRATA_OK;
        }
    }
    return STRATA_OK;
}

static strata_tag access_tag(const struct submit *s,
                             const strata_plan_invocation *v, size_t k)
{
    bool reads = false, writes = false;

    for (size_t j = 0; j < v->num_accesses; j++) {
        strata_plan_mode m = v->accesses[j].mode;

        if (plan_index_get(&s->p->decl_index, v->accesses[j].resource) != k)
            continue;
        reads = reads || m != STRATA_PLAN_WRITE;
        writes = writes || m != STRATA_PLAN_READ;
    }
    if (writes)
        return reads ? STRATA_INOUT : STRATA_OUT_EXISTING;
    return STRATA_IN;
}

/* The arguments' tensors (and operands, for a reserved operation: ops
 * non-NULL, handles allowed). */
static strata_err add_arguments(const struct submit *s,
                                const strata_plan_invocation *v, strata_args *a,
                                strata_plan_operand *ops)
{
    bool transfer = strcmp(v->callable, STRATA_PLAN_TRANSFER) == 0;

    for (size_t j = 0; j < v->num_arguments; j++) {
        const strata_plan_argument *arg = &v->arguments[j];
        size_t k = plan_index_get(&s->p->decl_index, arg->resource);
        const struct bind_res *br = &s->b->res[k];
        size_t off = br->off, n = br->n;
        strata_tag tag = access_tag(s, v, k);
        strata_err err;

        if (!br->bound)
            return base_fail(STRATA_EINVAL,
                             "plan invocation '%s': resource '%s' (parameter "
                             "'%s') is not bound",
                             v->name, arg->resource, arg->parameter);
        if (!br->buf && !ops)
            return base_fail(STRATA_EINVAL,
                             "plan invocation '%s': resource '%s' is bound to "
                             "a handle; only reserved operations take handles",
                             v->name, arg->resource);
        if (transfer) /* the default copy reads source, writes destination */
            tag = j == 0 ? STRATA_IN : STRATA_OUT_EXISTING;
        err = br->buf ? partition_range(s, v, k, &off, &n) : STRATA_OK;
        if (!err && br->buf)
            err =
                strata_args_add_tensor(a, br->buf, off, STRATA_U8, 1, &n, tag);
        if (err)
            return err;
        if (ops)
            ops[j] = (strata_plan_operand){arg->parameter,  arg->resource,
                                           br->buf,         off,
                                           br->buf ? n : 0, br->handle};
    }
    return STRATA_OK;
}

/* The registered callable of kind called name, by its digest
 * (SHA-256 of "kind:name"): a lookup that, unlike strata_callable_by_name,
 * leaves no trace of names that are not registered. */
static bool registered(strata_callable_kind kind, const char *name,
                       strata_callable *c)
{
    static const char *const kinds[] = {"", "kernel", "orch", "sub"};
    char key[STRATA_PLAN_NAME_MAX + 16];
    int n = snprintf(key, sizeof(key), "%s:%s", kinds[kind], name);

    memset(c, 0, sizeof(*c));
    c->kind = kind;
    return n > 0 && (size_t)n < sizeof(key) &&
           base_sha256(key, (size_t)n, c->digest) == STRATA_OK &&
           chip_registry_find(c->digest) != NULL;
}

static strata_err resolve(const struct submit *s, size_t i, strata_callable *c,
                          int *target)
{
    const strata_plan_invocation *v = &s->p->inv[i];
    static const strata_callable_kind kinds[] = {
        STRATA_CALLABLE_SUB, STRATA_CALLABLE_KERNEL, STRATA_CALLABLE_ORCH};
    bool found = false;

    *target = -1;
    for (size_t k = 0; k < s->b->num_calls && !found; k++)
        if (strcmp(s->b->calls[k].name, v->callable) == 0) {
            *c = s->b->calls[k].c;
            *target = s->b->calls[k].worker_id;
            found = true;
        }
    for (size_t k = 0; k < 3 && !found; k++)
        found = registered(kinds[k], v->callable, c);
    if (!found)
        return base_fail(STRATA_EINVAL,
                         "plan invocation '%s': callable '%s' is not "
                         "registered (or bind it with "
                         "strata_plan_bind_callable)",
                         v->name, v->callable);
    if (s->b->targets[i] >= 0)
        *target = s->b->targets[i];
    if (c->kind != STRATA_CALLABLE_SUB && *target < 0)
        return base_fail(STRATA_EINVAL,
                         "plan invocation '%s': %s '%s' has no target: bind "
                         "one with strata_plan_bind_target",
                         v->name,
                         c->kind == STRATA_CALLABLE_KERNEL ? "kernel" : "orch",
                         v->callable);
    return STRATA_OK;
}

static strata_err default_transfer(strata_orch *o, const strata_plan_op *op)
{
    const strata_plan_operand *src = &op->operands[0], *dst = &op->operands[1];

    if (copy_err)
        return base_fail(copy_err, "plan: the copy callable is not "
                                   "registered");
    if (!src->buffer || !dst->buffer)
        return base_fail(STRATA_EINVAL,
                         "plan invocation '%s': the default transfer needs "
                         "source and destination bound to buffers",
                         op->invocation);
    if (src->nbytes != dst->nbytes)
        return base_fail(STRATA_EINVAL,
                         "plan invocation '%s': transfer of %zu bytes of "
                         "'%s' into %zu bytes of '%s': sizes differ",
                         op->invocation, src->nbytes, src->resource,
                         dst->nbytes, dst->resource);
    if (strata_worker_num_sub_workers(strata_orch_worker(o)) > 0)
        return strata_orch_submit_sub(o, copy_sub, op->args);
    if (op->worker_id < 0)
        return base_fail(STRATA_EINVAL,
                         "plan invocation '%s': no sub workers for the "
                         "transfer's copy; bind a chip with "
                         "strata_plan_bind_target",
                         op->invocation);
    return strata_orch_submit_next_level(o, copy_kernel, op->args,
                                         op->worker_id);
}

static strata_err submit_reserved(struct submit *s, size_t i, strata_args *a)
{
    const strata_plan_invocation *v = &s->p->inv[i];
    bool transfer = strcmp(v->callable, STRATA_PLAN_TRANSFER) == 0;
    strata_plan_op_fn fn = transfer ? s->ops.transfer : s->ops.release;
    strata_plan_operand *ops;
    strata_plan_op op;
    strata_err err;

    ops = base_calloc(v->num_arguments ? v->num_arguments : 1, sizeof(*ops));
    if (!ops)
        return base_fail(STRATA_ENOMEM, "plan: no memory");
    op = (strata_plan_op){v->name,          v->callable, ops,
                          v->num_arguments, a,           s->b->targets[i]};
    err = add_arguments(s, v, a, ops);
    if (!err)
        err = add_tokens(s, s->pos[i], a, token_budget(a), v->name);
    if (!err)
        err = fn ? fn(s->o, &op, s->ctx) : default_transfer(s->o, &op);
    base_free(ops);
    return err;
}

static strata_err submit_task(struct submit *s, size_t i, strata_args *a)
{
    const strata_plan_invocation *v = &s->p->inv[i];
    strata_callable c;
    int target;
    strata_err err;

    err = resolve(s, i, &c, &target);
    if (!err)
        err = add_arguments(s, v, a, NULL);
    if (!err)
        err = add_tokens(s, s->pos[i], a, token_budget(a), v->name);
    for (size_t k = 0; !err && k < v->num_scalars; k++)
        err = strata_args_add_scalar(a, v->scalars[k]);
    if (err)
        return err;
    if (c.kind == STRATA_CALLABLE_SUB)
        return strata_orch_submit_sub(s->o, c, a);
    return strata_orch_submit_next_level(s->o, c, a, target);
}

/* Only orders: a join, or a release nobody handles. */
static bool forwarded(const struct submit *s, const strata_plan_invocation *v)
{
    return strcmp(v->callable, STRATA_PLAN_JOIN) == 0 ||
           (strcmp(v->callable, STRATA_PLAN_RELEASE) == 0 && !s->ops.release);
}

static strata_err submit_one(struct submit *s, size_t r, strata_args *a)
{
    size_t i = s->p->order[r];
    const strata_plan_invocation *v = &s->p->inv[i];
    strata_err err;

    gather_deps(s, r, i);
    if (forwarded(s, v)) {
        s->eff[i] = base_calloc(s->n_gather ? s->n_gather : 1, sizeof(size_t));
        if (!s->eff[i])
            return base_fail(STRATA_ENOMEM, "plan: no memory");
        memcpy(s->eff[i], s->gather, s->n_gather * sizeof(size_t));
        s->eff_n[i] = s->n_gather;
        return STRATA_OK;
    }
    strata_args_clear(a);
    if (plan_is_reserved(v->callable))
        err = submit_reserved(s, i, a);
    else
        err = submit_task(s, i, a);
    if (err) {
        if (!strstr(strata_errmsg(), v->name))
            base_errmsg_prefix("plan invocation '%s'", v->name);
        return err;
    }
    s->tasked[i] = true;
    return STRATA_OK;
}

static strata_err submit_all(struct submit *s)
{
    const strata_plan *p = s->p;
    strata_args *a = NULL;
    strata_err err;

    for (size_t r = 0; r < p->num_inv; r++)
        s->pos[p->order[r]] = r;
    err = strata_args_create(&a);
    for (size_t r = 0; r < p->num_inv && !err; r++)
        err = submit_one(s, r, a);
    strata_args_destroy(a);
    return err;
}

strata_err strata_orch_submit_plan(strata_orch *o, const strata_plan *p,
                                   const strata_plan_bindings *b)
{
    static const char fn[] = "strata_orch_submit_plan";
    struct submit s = {0};
    size_t n;
    strata_err err;

    if (!o || !p || !b)
        return base_fail_null(fn, !o ? "o" : !p ? "p" : "b");
    if (b->plan != p)
        return base_fail(STRATA_EINVAL, "%s: b was made for another plan", fn);
    if (strata_orch_worker(o) != b->w)
        return base_fail(STRATA_EINVAL,
                         "%s: b was made for another worker than o's", fn);
    n = p->num_inv;
    s.o = o;
    s.p = p;
    s.b = b;
    pthread_mutex_lock(&def_lock);
    s.ops = def_ops;
    s.ctx = def_ctx;
    pthread_mutex_unlock(&def_lock);
    if (b->ops.transfer || b->ops.release) {
        s.ops = b->ops;
        s.ctx = b->ops_ctx;
    }
    s.pos = base_calloc(n, sizeof(*s.pos));
    s.tasked = base_calloc(n, sizeof(*s.tasked));
    s.eff = base_calloc(n, sizeof(*s.eff));
    s.eff_n = base_calloc(n, sizeof(*s.eff_n));
    s.gather = base_calloc(n, sizeof(*s.gather));
    s.stamp = base_calloc(n, sizeof(*s.stamp));
    if (s.pos && s.tasked && s.eff && s.eff_n && s.gather && s.stamp)
        err = submit_all(&s);
    else
        err = base_fail(STRATA_ENOMEM, "%s: no memory", fn);
    for (size_t i = 0; s.eff && i < n; i++)
        base_free(s.eff[i]);
    base_free(s.pos);
    base_free(s.tasked);
    base_free(s.eff);
    base_free(s.eff_n);
    base_free(s.gather);
    base_free(s.stamp);
    return err;
}
