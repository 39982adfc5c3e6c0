/* Bundle plans: bindings, which say which buffers a plan's resources are
 * and where its callables run, for one submission or many. */
#include "base/alloc.h"
#include "base/err.h"
#include "plan_bind_int.h"
#include "wire/args.h"

#include <stdint.h>
#include <string.h>

strata_err strata_plan_bindings_create(const strata_plan *p, strata_worker *w,
                                       strata_plan_bindings **out)
{
    struct strata_plan_bindings *b;
    strata_err err;

    if (!p)
        return base_fail_null("strata_plan_bindings_create", "p");
    if (!w)
        return base_fail_null("strata_plan_bindings_create", "w");
    if (!out)
        return base_fail_null("strata_plan_bindings_create", "out");
    b = base_calloc(1, sizeof(*b));
    if (!b)
        return base_fail(STRATA_ENOMEM, "plan bindings: no memory");
    b->plan = p;
    b->w = w;
    b->res = base_calloc(p->num_decl ? p->num_decl : 1, sizeof(*b->res));
    b->targets = base_calloc(p->num_inv, sizeof(*b->targets));
    if (!b->res || !b->targets) {
        err = base_fail(STRATA_ENOMEM, "plan bindings: no memory");
        goto err_free;
    }
    for (size_t i = 0; i < p->num_inv; i++)
        b->targets[i] = -1;
    err = strata_worker_create_buffer(w, p->num_inv, &b->tokens);
    if (err)
        goto err_free;
    *out = b;
    return STRATA_OK;
err_free:
    base_free(b->res);
    base_free(b->targets);
    base_free(b);
    return err;
}

strata_err strata_plan_bindings_destroy(strata_plan_bindings *b)
{
    strata_err err;

    if (!b)
        return STRATA_OK;
    err = strata_buffer_release(b->tokens);
    if (err)
        return err;
    for (size_t i = 0; i < b->num_parts; i++) {
        base_free(b->parts[i].partitioning);
        base_free(b->parts[i].partition);
    }
    for (size_t i = 0; i < b->num_calls; i++)
        base_free(b->calls[i].name);
    base_free(b->parts);
    base_free(b->calls);
    base_free(b->res);
    base_free(b->targets);
    base_free(b);
    return STRATA_OK;
}

/* The declared index of resource, or SIZE_MAX with the error set. */
static size_t declared(const strata_plan_bindings *b, const char *fn,
                       const char *resource)
{
    size_t k = plan_index_get(&b->plan->decl_index, resource);

    if (k == SIZE_MAX)
        base_fail(STRATA_EINVAL,
                  "%s: resource '%.255s' is not declared by "
                  "the plan",
                  fn, resource);
    return k;
}

strata_err strata_plan_bind_buffer(strata_plan_bindings *b,
                                   const char *resource, strata_buffer *buf,
                                   size_t offset, size_t nbytes)
{
    size_t k, size;

    if (!b)
        return base_fail_null("strata_plan_bind_buffer", "b");
    if (!resource)
        return base_fail_null("strata_plan_bind_buffer", "resource");
    if (!buf)
        return base_fail_null("strata_plan_bind_buffer", "buf");
    k = declared(b, "strata_plan_bind_buffer", resource);
    if (k == SIZE_MAX)
        return STRATA_EINVAL;
    if (buf->owner != b->w)
        return base_fail(STRATA_EINVAL,
                         "strata_plan_bind_buffer: buf belongs to another "
                         "worker than the bindings'");
    size = strata_buffer_size(buf);
    if (offset >= size || nbytes > size - offset)
        return base_fail(STRATA_EINVAL,
                         "strata_plan_bind_buffer: offset %zu and nbytes %zu "
                         "are outside the buffer of %zu bytes",
                         offset, nbytes, size);
    b->res[k] = (struct bind_res){true, buf, offset,
                                  nbytes ? nbytes : size - offset, NULL};
    return STRATA_OK;
}

strata_err strata_plan_bind_handle(strata_plan_bindings *b,
                                   const char *resource, void *handle)
{
    size_t k;

    if (!b)
        return base_fail_null("strata_plan_bind_handle", "b");
    if (!resource)
        return base_fail_null("strata_plan_bind_handle", "resource");
    k = declared(b, "strata_plan_bind_handle", resource);
    if (k == SIZE_MAX)
        return STRATA_EINVAL;
    b->res[k] = (struct bind_res){true, NULL, 0, 0, handle};
    return STRATA_OK;
}

strata_err strata_plan_bind_partition(strata_plan_bindings *b,
                                      const char *resource,
                                      const char *partitioning,
                                      const char *partition, size_t offset,
                                      size_t nbytes)
{
    static const char fn[] = "strata_plan_bind_partition";
    struct bind_part *pt;
    size_t k;

    if (!b || !resource || !partitioning || !partition)
        return base_fail_null(fn, !b              ? "b"
                                  : !resource     ? "resource"
                                  : !partitioning ? "partitioning"
                                                  : "partition");
    if (!partitioning[0] || !partition[0] || nbytes == 0)
        return base_fail(STRATA_EINVAL,
                         "%s: partitioning, partition and nbytes must not be "
                         "empty",
                         fn);
    k = declared(b, fn, resource);
    if (k == SIZE_MAX)
        return STRATA_EINVAL;
    if (offset > SIZE_MAX - nbytes)
        return base_fail(STRATA_EINVAL, "%s: offset %zu + nbytes %zu overflows",
                         fn, offset, nbytes);
    /* Binding the same partition again replaces, as bind_buffer does. */
    for (size_t i = 0; i < b->num_parts; i++) {
        pt = &b->parts[i];
        if (pt->res == k && strcmp(pt->partitioning, partitioning) == 0 &&
            strcmp(pt->partition, partition) == 0) {
            pt->off = offset;
            pt->n = nbytes;
            return STRATA_OK;
        }
    }
    if (b->num_parts == b->cap_parts) {
        size_t cap = b->cap_parts ? 2 * b->cap_parts : 8;

        pt = base_realloc(b->parts, cap * sizeof(*pt));
        if (!pt)
            return base_fail(STRATA_ENOMEM, "%s: no memory", fn);
        b->parts = pt;
        b->cap_parts = cap;
    }
    pt = &b->parts[b->num_parts];
    pt->res = k;
    pt->off = offset;
    pt->n = nbytes;
    pt->partitioning = base_strdup(partitioning);
    pt->partition = base_strdup(partition);
    if (!pt->partitioning || !pt->partition) {
        base_free(pt->partitioning);
        base_free(pt->partition);
        return base_fail(STRATA_ENOMEM, "%s: no memory", fn);
    }
    b->num_parts++;
    return STRATA_OK;
}

strata_err strata_plan_bind_callable(strata_plan_bindings *b, const char *name,
                                     strata_callable c, int worker_id)
{
    static const char fn[] = "strata_plan_bind_callable";
    struct bind_callable *bc;

    if (!b)
        return base_fail_null(fn, "b");
    if (!name)
        return base_fail_null(fn, "name");
    if (!name[0] || plan_is_reserved(name))
        return base_fail(STRATA_EINVAL,
                         "%s: name '%.255s' is empty or "
                         "reserved",
                         fn, name);
    if (c.kind < STRATA_CALLABLE_KERNEL || c.kind > STRATA_CALLABLE_SUB)
        return base_fail(STRATA_EINVAL,
                         "%s: c has kind %u, not a kernel, "
                         "orch or sub",
                         fn, c.kind);
    for (size_t i = 0; i < b->num_calls; i++)
        if (strcmp(b->calls[i].name, name) == 0) {
            b->calls[i].c = c;
            b->calls[i].worker_id = worker_id;
            return STRATA_OK;
        }
    if (b->num_calls == b->cap_calls) {
        size_t cap = b->cap_calls ? 2 * b->cap_calls : 8;

        bc = base_realloc(b->calls, cap * sizeof(*bc));
        if (!bc)
            return base_fail(STRATA_ENOMEM, "%s: no memory", fn);
        b->calls = bc;
        b->cap_calls = cap;
    }
    bc = &b->calls[b->num_calls];
    bc->name = base_strdup(name);
    if (!bc->name)
        return base_fail(STRATA_ENOMEM, "%s: no memory", fn);
    bc->c = c;
    bc->worker_id = worker_id;
    b->num_calls++;
    return STRATA_OK;
}

strata_err strata_plan_bind_target(strata_plan_bindings *b,
                                   const char *invocation, int worker_id)
{
    size_t k;

    if (!b)
        return base_fail_null("strata_plan_bind_target", "b");
    if (!invocation)
        return base_fail_null("strata_plan_bind_target", "invocation");
    if (worker_id < 0)
        return base_fail(STRATA_EINVAL,
                         "strata_plan_bind_target: worker_id %d is negative",
                         worker_id);
    k = plan_index_get(&b->plan->inv_index, invocation);
    if (k == SIZE_MAX)
        return base_fail(STRATA_EINVAL,
                         "strata_plan_bind_target: invocation '%.255s' is not "
                         "in the plan",
                         invocation);
    b->targets[k] = worker_id;
    return STRATA_OK;
}

strata_err strata_plan_bind_reserved(strata_plan_bindings *b,
                                     const strata_plan_reserved_ops *ops,
                                     void *ctx)
{
    if (!b)
        return base_fail_null("strata_plan_bind_reserved", "b");
    if (ops)
        b->ops = *ops;
    else
        memset(&b->ops, 0, sizeof(b->ops));
    b->ops_ctx = ctx;
    return STRATA_OK;
}
