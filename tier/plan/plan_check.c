/* Bundle plans: the checks a plan passes when it is made. Names and
 * fields first, then the DAG (dependencies resolved, topological order, a
 * cycle named by two of its invocations), then the legality rule: every
 * pair of accesses to one resource of which one writes must be ordered by
 * a dependency path, unless the same partitioning proves them disjoint. */
#include "base/alloc.h"
#include "base/err.h"
#include "plan_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bool bad_name(const char *s)
{
    return !s || !s[0] || strlen(s) > STRATA_PLAN_NAME_MAX;
}

static strata_err check_resources(struct strata_plan *p)
{
    for (size_t i = 0; i < p->num_res; i++) {
        const strata_plan_resource *r = &p->res[i];

        if (bad_name(r->name) || bad_name(r->memory_space) ||
            bad_name(r->layout) || bad_name(r->device))
            return base_fail(STRATA_EINVAL,
                             "plan: resource %zu has an empty or too long "
                             "name, memory_space, layout or device",
                             i);
        if (r->capacity_bytes > INT64_MAX || r->snapshot_version > INT64_MAX)
            return base_fail(STRATA_EINVAL,
                             "plan: resource '%s': capacity_bytes or "
                             "snapshot_version above 2^63 - 1",
                             r->name);
        if (!plan_index_put(&p->decl_index, r->name, i))
            return base_fail(STRATA_EINVAL,
                             "plan: resource '%s' is declared twice", r->name);
    }
    p->num_decl = p->num_res;
    return STRATA_OK;
}

static strata_err check_arguments(struct strata_plan *p,
                                  const strata_plan_invocation *v)
{
    for (size_t i = 0; i < v->num_arguments; i++) {
        const strata_plan_argument *a = &v->arguments[i];

        if (bad_name(a->parameter) || bad_name(a->resource))
            return base_fail(STRATA_EINVAL,
                             "plan: invocation '%s': argument %zu has an "
                             "empty or too long parameter or resource",
                             v->name, i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(v->arguments[j].parameter, a->parameter) == 0)
                return base_fail(STRATA_EINVAL,
                                 "plan: invocation '%s' has parameter '%s' "
                                 "twice",
                                 v->name, a->parameter);
        /* An argument's resource is one the caller binds: declared. */
        if (plan_index_put(&p->decl_index, a->resource, p->num_decl))
            p->num_decl++;
    }
    if (strcmp(v->callable, STRATA_PLAN_TRANSFER) == 0 &&
        (v->num_arguments != 2 ||
         strcmp(v->arguments[0].parameter, "source") +
                 strcmp(v->arguments[1].parameter, "destination") !=
             0))
        return base_fail(STRATA_EINVAL,
                         "plan: transfer '%s' needs exactly the parameters "
                         "'source' and 'destination', in that order",
                         v->name);
    return STRATA_OK;
}

static strata_err check_invocation(struct strata_plan *p, size_t k)
{
    const strata_plan_invocation *v = &p->inv[k];

    if (bad_name(v->name))
        return base_fail(STRATA_EINVAL,
                         "plan: invocation %zu has an empty or too long name",
                         k);
    if (!plan_index_put(&p->inv_index, v->name, k))
        return base_fail(STRATA_EINVAL, "plan: invocation '%s' appears twice",
                         v->name);
    if (bad_name(v->callable))
        return base_fail(STRATA_EINVAL,
                         "plan: invocation '%s' has an empty or too long "
                         "callable (executable_symbol)",
                         v->name);
    if (bad_name(v->task_kind))
        return base_fail(STRATA_EINVAL,
                         "plan: invocation '%s' has an empty or too long "
                         "task_kind",
                         v->name);
    if (strcmp(v->phase, "materialize") != 0 &&
        strcmp(v->phase, "execute") != 0)
        return base_fail(STRATA_EINVAL,
                         "plan: invocation '%s' has phase '%.64s', not "
                         "'materialize' or 'execute'",
                         v->name, v->phase);
    if (v->snapshot_version > INT64_MAX ||
        v->snapshot_version != p->inv[0].snapshot_version)
        return base_fail(STRATA_EINVAL,
                         "plan: invocation '%s' has snapshot_version %llu, "
                         "invocation '%s' %llu: one plan is one snapshot",
                         v->name, (unsigned long long)v->snapshot_version,
                         p->inv[0].name ? p->inv[0].name : "(null)",
                         (unsigned long long)p->inv[0].snapshot_version);
    return check_arguments(p, v);
}

static strata_err check_accesses(struct strata_plan *p,
                                 const strata_plan_invocation *v)
{
    for (size_t i = 0; i < v->num_accesses; i++) {
        const strata_plan_access *a = &v->accesses[i];

        if (bad_name(a->resource))
            return base_fail(STRATA_EINVAL,
                             "plan: invocation '%s': access %zu has an empty "
                             "or too long resource",
                             v->name, i);
        if (plan_index_get(&p->decl_index, a->resource) == SIZE_MAX)
            return base_fail(STRATA_EINVAL,
                             "plan: invocation '%s' accesses undeclared "
                             "resource '%s'",
                             v->name, a->resource);
        if (!plan_mode_name(a->mode))
            return base_fail(STRATA_EINVAL,
                             "plan: invocation '%s': access to '%s' has mode "
                             "%d, not read, write or read_write",
                             v->name, a->resource, (int)a->mode);
        if ((a->partitioning == NULL) != (a->partition == NULL) ||
            (a->partitioning &&
             (bad_name(a->partitioning) || bad_name(a->partition))))
            return base_fail(STRATA_EINVAL,
                             "plan: invocation '%s': access to '%s' needs "
                             "both a partitioning and a partition, non-empty, "
                             "or neither",
                             v->name, a->resource);
        if (a->snapshot_version != v->snapshot_version)
            return base_fail(STRATA_EINVAL,
                             "plan: invocation '%s' mixes snapshot versions: "
                             "its access to '%s' is at %llu, it is at %llu",
                             v->name, a->resource,
                             (unsigned long long)a->snapshot_version,
                             (unsigned long long)v->snapshot_version);
    }
    return STRATA_OK;
}

static strata_err resolve_deps(struct strata_plan *p)
{
    size_t total = 0, at = 0;

    for (size_t i = 0; i < p->num_inv; i++)
        total += p->inv[i].num_depends_on;
    p->dep_off = plan_arena_alloc(&p->arena, (p->num_inv + 1) * sizeof(size_t));
    p->dep_idx = plan_arena_alloc(&p->arena, total * sizeof(size_t));
    if (!p->dep_off || !p->dep_idx)
        return base_fail(STRATA_ENOMEM, "plan: no memory for dependencies");
    for (size_t i = 0; i < p->num_inv; i++) {
        const strata_plan_invocation *v = &p->inv[i];

        p->dep_off[i] = at;
        for (size_t j = 0; j < v->num_depends_on; j++) {
            const char *d = v->depends_on[j];
            size_t k = plan_index_get(&p->inv_index, d);

            if (k == SIZE_MAX)
                return base_fail(STRATA_EINVAL,
                                 "plan: invocation '%s' depends on unknown "
                                 "invocation '%.255s'",
                                 v->name, d ? d : "(null)");
            if (k == i)
                return base_fail(STRATA_EINVAL,
                                 "plan: invocation '%s' depends on itself",
                                 v->name);
            for (size_t m = p->dep_off[i]; m < at; m++)
                if (p->dep_idx[m] == k)
                    return base_fail(STRATA_EINVAL,
                                     "plan: invocation '%s' depends on '%s' "
                                     "twice",
                                     v->name, d);
            p->dep_idx[at++] = k;
        }
    }
    p->dep_off[p->num_inv] = at;
    return STRATA_OK;
}

/* Names two invocations of a cycle among those Kahn's walk left (left[i]
 * true): from one of them, follow left dependencies until one repeats. */
static strata_err name_cycle(const struct strata_plan *p, const bool *left)
{
    size_t n = p->num_inv, x = 0, steps = 0;
    size_t *seen = base_calloc(n, sizeof(*seen));
    size_t prev;

    if (!seen)
        return base_fail(STRATA_ENOMEM, "plan: no memory");
    while (!left[x])
        x++;
    /* seen[x] = step at which x was visited, plus one. */
    for (;;) {
        size_t next = SIZE_MAX;

        seen[x] = ++steps;
        for (size_t m = p->dep_off[x]; m < p->dep_off[x + 1]; m++)
            if (left[p->dep_idx[m]]) {
                next = p->dep_idx[m];
                break;
            }
        prev = x;
        x = next; /* never SIZE_MAX: a left node has a left dependency */
        if (seen[x])
            break;
    }
    steps = steps - seen[x] + 1;
    base_free(seen);
    return base_fail(STRATA_EINVAL,
                     "plan: dependency cycle: invocation '%s' depends on '%s', "
                     "which depends back on '%s' (a cycle of %zu)",
                     p->inv[prev].name, p->inv[x].name, p->inv[prev].name,
                     steps);
}

/* Kahn's walk in index order: dependencies first, ties as given. */
static strata_err topo_order(struct strata_plan *p, size_t *succ_off,
                             size_t *succ)
{
    size_t n = p->num_inv, head = 0, tail = 0;
    size_t *indeg = base_calloc(n, sizeof(*indeg));
    bool *left = base_calloc(n, sizeof(*left));
    strata_err err = STRATA_OK;

    p->order = plan_arena_alloc(&p->arena, n * sizeof(*p->order));
    if (!indeg || !left || !p->order) {
        err = base_fail(STRATA_ENOMEM, "plan: no memory for the order");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        indeg[i] = p->dep_off[i + 1] - p->dep_off[i];
        if (!indeg[i])
            p->order[tail++] = i;
    }
    while (head < tail) {
        size_t i = p->order[head++];

        for (size_t m = succ_off[i]; m < succ_off[i + 1]; m++)
            if (--indeg[succ[m]] == 0)
                p->order[tail++] = succ[m];
    }
    if (tail < n) {
        for (size_t i = 0; i < n; i++)
            left[i] = indeg[i] > 0;
        err = name_cycle(p, left);
    }
out:
    base_free(indeg);
    base_free(left);
    return err;
}

struct acc_ref {
    size_t res; /* declared resource index */
    size_t inv;
    const strata_plan_access *a;
};

static int acc_cmp(const void *x, const void *y)
{
    const struct acc_ref *a = x, *b = y;

    if (a->res != b->res)
        return a->res < b->res ? -1 : 1;
    if (a->inv != b->inv)
        return a->inv < b->inv ? -1 : 1;
    return 0;
}

static bool disjoint(const strata_plan_access *a, const strata_plan_access *b)
{
    return a->partitioning && b->partitioning &&
           strcmp(a->partitioning, b->partitioning) == 0 &&
           strcmp(a->partition, b->partition) != 0;
}

#define BIT(m, n, i, j)                                                        \
    ((m)[(i) * (((n) + 63) / 64) + (j) / 64] >> ((j) % 64) & 1)

/* Every conflicting pair ordered: reach is the descendant bit matrix. */
static strata_err check_hazards(const struct strata_plan *p,
                                const uint64_t *reach)
{
    size_t total = 0, k = 0, n = p->num_inv;
    struct acc_ref *refs;
    strata_err err = STRATA_OK;

    for (size_t i = 0; i < n; i++)
        total += p->inv[i].num_accesses;
    refs = base_calloc(total ? total : 1, sizeof(*refs));
    if (!refs)
        return base_fail(STRATA_ENOMEM, "plan: no memory for the accesses");
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < p->inv[i].num_accesses; j++) {
            const strata_plan_access *a = &p->inv[i].accesses[j];

            refs[k++] = (struct acc_ref){
                plan_index_get(&p->decl_index, a->resource), i, a};
        }
    qsort(refs, total, sizeof(*refs), acc_cmp);
    for (size_t s = 0; s < total && !err; s++)
        for (size_t t = s + 1; t < total && refs[t].res == refs[s].res; t++) {
            const struct acc_ref *x = &refs[s], *y = &refs[t];

            if (x->inv == y->inv)
                continue;
            if (x->a->mode == STRATA_PLAN_READ &&
                y->a->mode == STRATA_PLAN_READ)
                continue;
            if (disjoint(x->a, y->a) || BIT(reach, n, x->inv, y->inv) ||
                BIT(reach, n, y->inv, x->inv))
                continue;
            err = base_fail(STRATA_EINVAL,
                            "plan: hazard: invocations '%s' (%s) and '%s' "
                            "(%s) access resource '%s' with no dependency "
                            "path between them; order them or give them "
                            "disjoint partitions",
                            p->inv[x->inv].name, plan_mode_name(x->a->mode),
                            p->inv[y->inv].name, plan_mode_name(y->a->mode),
                            x->a->resource);
            break;
        }
    base_free(refs);
    return err;
}

static strata_err check_terminals(struct strata_plan *p, const size_t *succ_off)
{
    size_t n = p->num_inv, derived = 0, at = 0;

    for (size_t i = 0; i < n; i++)
        derived += succ_off[i + 1] == succ_off[i];
    if (p->num_terms == 0) {
        p->terms = plan_arena_alloc(&p->arena, derived * sizeof(*p->terms));
        if (!p->terms)
            return base_fail(STRATA_ENOMEM, "plan: no memory");
        for (size_t i = 0; i < n; i++)
            if (succ_off[i + 1] == succ_off[i])
                p->terms[at++] = p->inv[i].name;
        p->num_terms = derived;
        return STRATA_OK;
    }
    for (size_t t = 0; t < p->num_terms; t++) {
        size_t i = plan_index_get(&p->inv_index, p->terms[t]);

        if (i == SIZE_MAX)
            return base_fail(STRATA_EINVAL,
                             "plan: terminal '%.255s' is not an invocation",
                             p->terms[t] ? p->terms[t] : "(null)");
        if (succ_off[i + 1] != succ_off[i])
            return base_fail(STRATA_EINVAL,
                             "plan: terminal '%s' disagrees with the DAG: "
                             "other invocations depend on it",
                             p->terms[t]);
        for (size_t u = 0; u < t; u++)
            if (strcmp(p->terms[u], p->terms[t]) == 0)
                return base_fail(STRATA_EINVAL,
                                 "plan: terminal '%s' is listed twice",
                                 p->terms[t]);
    }
    if (p->num_terms != derived)
        for (size_t i = 0; i < n; i++) {
            bool listed = false;

            if (succ_off[i + 1] != succ_off[i])
                continue;
            for (size_t t = 0; t < p->num_terms && !listed; t++)
                listed = strcmp(p->terms[t], p->inv[i].name) == 0;
            if (!listed)
                return base_fail(STRATA_EINVAL,
                                 "plan: terminals disagree with the DAG: "
                                 "nothing depends on invocation '%s', but "
                                 "it is not a terminal",
                                 p->inv[i].name);
        }
    return STRATA_OK;
}

/* Successors (CSR) from the dependencies. */
static strata_err successors(const struct strata_plan *p, size_t **off_out,
                             size_t **succ_out)
{
    size_t n = p->num_inv, total = p->dep_off[n];
    size_t *off = base_calloc(n + 2, sizeof(*off));
    size_t *succ = base_calloc(total ? total : 1, sizeof(*succ));

    if (!off || !succ) {
        base_free(off);
        base_free(succ);
        return base_fail(STRATA_ENOMEM, "plan: no memory for successors");
    }
    for (size_t m = 0; m < total; m++)
        off[p->dep_idx[m] + 2]++;
    for (size_t i = 0; i < n; i++)
        off[i + 2] += off[i + 1];
    for (size_t i = 0; i < n; i++)
        for (size_t m = p->dep_off[i]; m < p->dep_off[i + 1]; m++)
            succ[off[p->dep_idx[m] + 1]++] = i;
    *off_out = off;
    *succ_out = succ;
    return STRATA_OK;
}

static strata_err check_dag(struct strata_plan *p)
{
    size_t n = p->num_inv, words = (n + 63) / 64;
    size_t *succ_off = NULL, *succ = NULL;
    uint64_t *reach = NULL;
    strata_err err;

    err = resolve_deps(p);
    if (!err)
        err = successors(p, &succ_off, &succ);
    if (!err)
        err = topo_order(p, succ_off, succ);
    if (!err) {
        reach = base_calloc(n * words, sizeof(*reach));
        if (!reach)
            err = base_fail(STRATA_ENOMEM, "plan: no memory for reachability");
    }
    /* Descendants, from the sinks up. */
    for (size_t r = n; !err && r-- > 0;) {
        size_t i = p->order[r];

        for (size_t m = succ_off[i]; m < succ_off[i + 1]; m++) {
            size_t s = succ[m];

            reach[i * words + s / 64] |= 1ull << (s % 64);
            for (size_t w = 0; w < words; w++)
                reach[i * words + w] |= reach[s * words + w];
        }
    }
    if (!err)
        err = check_hazards(p, reach);
    if (!err)
        err = check_terminals(p, succ_off);
    base_free(reach);
    base_free(succ_off);
    base_free(succ);
    return err;
}

strata_err plan_check(struct strata_plan *p)
{
    size_t args = 0;
    strata_err err;

    for (size_t i = 0; i < p->num_inv; i++)
        args += p->inv[i].num_arguments;
    err = plan_index_init(&p->inv_index, p->num_inv);
    if (!err)
        err = plan_index_init(&p->decl_index, p->num_res + args);
    if (!err)
        err = check_resources(p);
    for (size_t i = 0; !err && i < p->num_inv; i++)
        err = check_invocation(p, i);
    for (size_t i = 0; !err && i < p->num_inv; i++)
        err = check_accesses(p, &p->inv[i]);
    return err ? err : check_dag(p);
}
