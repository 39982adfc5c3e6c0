/* Bundle plans: making one (a deep copy of the caller's spec, then the
 * checks of plan_check.c), the accessors, and the arena and name index
 * the plan's files share. */
#include "base/alloc.h"
#include "base/err.h"
#include "plan_int.h"

#include <jansson.h>
#include <stdint.h>
#include <string.h>

/* ---- arena ---- */

void *plan_arena_alloc(struct plan_arena *a, size_t size)
{
    void *p;

    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        void **ptrs = base_realloc(a->ptrs, cap * sizeof(*ptrs));

        if (!ptrs)
            return NULL;
        a->ptrs = ptrs;
        a->cap = cap;
    }
    p = base_calloc(1, size ? size : 1);
    if (p)
        a->ptrs[a->n++] = p;
    return p;
}

char *plan_arena_strdup(struct plan_arena *a, const char *s, const char *def,
                        bool *fail)
{
    size_t n;
    char *c;

    if (!s)
        s = def;
    if (!s)
        return NULL;
    n = strlen(s);
    c = plan_arena_alloc(a, n + 1);
    if (!c) {
        *fail = true;
        return NULL;
    }
    memcpy(c, s, n + 1);
    return c;
}

void plan_arena_free(struct plan_arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        base_free(a->ptrs[i]);
    base_free(a->ptrs);
    memset(a, 0, sizeof(*a));
}

/* ---- name index ---- */

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;

    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

strata_err plan_index_init(struct plan_index *x, size_t n)
{
    size_t cap = 16;

    while (cap < 2 * n)
        cap *= 2;
    x->keys = base_calloc(cap, sizeof(*x->keys));
    x->vals = base_calloc(cap, sizeof(*x->vals));
    x->cap = cap;
    if (!x->keys || !x->vals) {
        plan_index_fini(x);
        return base_fail(STRATA_ENOMEM, "plan: no memory for a name index");
    }
    return STRATA_OK;
}

void plan_index_fini(struct plan_index *x)
{
    base_free(x->keys);
    base_free(x->vals);
    memset(x, 0, sizeof(*x));
}

bool plan_index_put(struct plan_index *x, const char *key, size_t val)
{
    size_t i = (size_t)hash_name(key) & (x->cap - 1);

    while (x->keys[i]) {
        if (strcmp(x->keys[i], key) == 0)
            return false;
        i = (i + 1) & (x->cap - 1);
    }
    x->keys[i] = key;
    x->vals[i] = val;
    return true;
}

size_t plan_index_get(const struct plan_index *x, const char *key)
{
    size_t i;

    if (!x->cap || !key)
        return SIZE_MAX;
    i = (size_t)hash_name(key) & (x->cap - 1);
    while (x->keys[i]) {
        if (strcmp(x->keys[i], key) == 0)
            return x->vals[i];
        i = (i + 1) & (x->cap - 1);
    }
    return SIZE_MAX;
}

/* ---- copying a spec ---- */

const char *plan_mode_name(strata_plan_mode m)
{
    switch (m) {
    case STRATA_PLAN_READ:
        return "read";
    case STRATA_PLAN_WRITE:
        return "write";
    case STRATA_PLAN_READ_WRITE:
        return "read_write";
    }
    return NULL;
}

bool plan_is_reserved(const char *callable)
{
    return callable && (strcmp(callable, STRATA_PLAN_TRANSFER) == 0 ||
                        strcmp(callable, STRATA_PLAN_RELEASE) == 0 ||
                        strcmp(callable, STRATA_PLAN_JOIN) == 0);
}

static strata_err check_counts(const strata_plan_spec *s)
{
    if (s->num_invocations == 0 || !s->invocations)
        return base_fail(STRATA_EINVAL, "plan: no invocations");
    if (s->num_invocations > STRATA_PLAN_MAX_INVOCATIONS)
        return base_fail(STRATA_EINVAL, "plan: %zu invocations, more than %d",
                         s->num_invocations, STRATA_PLAN_MAX_INVOCATIONS);
    if (s->num_resources > STRATA_PLAN_MAX_RESOURCES ||
        (s->num_resources && !s->resources))
        return base_fail(STRATA_EINVAL,
                         "plan: resources is NULL or has more than %d",
                         STRATA_PLAN_MAX_RESOURCES);
    if (s->num_terminals > s->num_invocations ||
        (s->num_terminals && !s->terminals))
        return base_fail(STRATA_EINVAL,
                         "plan: terminals is NULL or longer than invocations");
    for (size_t i = 0; i < s->num_invocations; i++) {
        const strata_plan_invocation *v = &s->invocations[i];
        const char *name = v->name ? v->name : "(null)";

        if (v->num_depends_on > STRATA_PLAN_MAX_ITEMS ||
            v->num_arguments > STRATA_PLAN_MAX_ITEMS ||
            v->num_accesses > STRATA_PLAN_MAX_ITEMS ||
            v->num_scalars > STRATA_MAX_SCALARS)
            return base_fail(STRATA_EINVAL,
                             "plan: invocation '%.255s' has more than %d "
                             "dependencies, arguments or accesses, or more "
                             "than %d scalars",
                             name, STRATA_PLAN_MAX_ITEMS, STRATA_MAX_SCALARS);
        if ((v->num_depends_on && !v->depends_on) ||
            (v->num_arguments && !v->arguments) ||
            (v->num_accesses && !v->accesses) ||
            (v->num_scalars && !v->scalars))
            return base_fail(STRATA_EINVAL,
                             "plan: invocation '%.255s' has a NULL list with "
                             "a non-zero count",
                             name);
    }
    return STRATA_OK;
}

/* The canonical text of a metadata object (compact, sorted keys), or NULL
 * in *out for none/empty. */
static strata_err canon_metadata(struct plan_arena *a, const char *inv,
                                 const char *text, const char **out)
{
    static const char *const fixed[] = {
        "name",       "task_kind", "phase",    "executable_symbol",
        "depends_on", "arguments", "accesses", "snapshot_version",
        "scalars",
    };
    json_error_t jerr;
    json_t *obj;
    char *dump;
    bool fail = false;

    *out = NULL;
    if (!text)
        return STRATA_OK;
    obj = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!obj || !json_is_object(obj)) {
        json_decref(obj);
        return base_fail(STRATA_EINVAL,
                         "plan: invocation '%.255s': metadata_json is not "
                         "a JSON object",
                         inv);
    }
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (json_object_get(obj, fixed[i])) {
            json_decref(obj);
            return base_fail(STRATA_EINVAL,
                             "plan: invocation '%.255s': metadata_json has "
                             "the schema's key '%s'",
                             inv, fixed[i]);
        }
    if (json_object_size(obj) == 0) {
        json_decref(obj);
        return STRATA_OK;
    }
    dump = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(obj);
    if (!dump)
        return base_fail(STRATA_ENOMEM, "plan: no memory for metadata");
    *out = plan_arena_strdup(a, dump, NULL, &fail);
    free(dump);
    return fail ? base_fail(STRATA_ENOMEM, "plan: no memory for metadata")
                : STRATA_OK;
}

static strata_err copy_invocation(struct plan_arena *a,
                                  strata_plan_invocation *d,
                                  const strata_plan_invocation *s)
{
    bool fail = false;
    const char **deps;
    strata_plan_argument *args;
    strata_plan_access *acc;
    uint64_t *sc;

    *d = *s;
    d->name = plan_arena_strdup(a, s->name, NULL, &fail);
    d->callable = plan_arena_strdup(a, s->callable, NULL, &fail);
    d->task_kind = plan_arena_strdup(a, s->task_kind, "local", &fail);
    d->phase = plan_arena_strdup(a, s->phase, "execute", &fail);
    deps = plan_arena_alloc(a, s->num_depends_on * sizeof(*deps));
    args = plan_arena_alloc(a, s->num_arguments * sizeof(*args));
    acc = plan_arena_alloc(a, s->num_accesses * sizeof(*acc));
    sc = plan_arena_alloc(a, s->num_scalars * sizeof(*sc));
    if (!deps || !args || !acc || !sc || fail)
        return base_fail(STRATA_ENOMEM, "plan: no memory for a copy");
    for (size_t i = 0; i < s->num_depends_on; i++)
        deps[i] = plan_arena_strdup(a, s->depends_on[i], NULL, &fail);
    for (size_t i = 0; i < s->num_arguments; i++) {
        args[i].parameter =
            plan_arena_strdup(a, s->arguments[i].parameter, NULL, &fail);
        args[i].resource =
            plan_arena_strdup(a, s->arguments[i].resource, NULL, &fail);
    }
    for (size_t i = 0; i < s->num_accesses; i++) {
        acc[i] = s->accesses[i];
        acc[i].resource =
            plan_arena_strdup(a, s->accesses[i].resource, NULL, &fail);
        acc[i].partitioning =
            plan_arena_strdup(a, s->accesses[i].partitioning, NULL, &fail);
        acc[i].partition =
            plan_arena_strdup(a, s->accesses[i].partition, NULL, &fail);
    }
    if (s->num_scalars)
        memcpy(sc, s->scalars, s->num_scalars * sizeof(*sc));
    if (fail)
        return base_fail(STRATA_ENOMEM, "plan: no memory for a copy");
    d->depends_on = deps;
    d->arguments = args;
    d->accesses = acc;
    d->scalars = sc;
    if (!d->name)
        return STRATA_OK; /* plan_check names it */
    return canon_metadata(a, d->name, s->metadata_json, &d->metadata_json);
}

static strata_err copy_spec(struct strata_plan *p, const strata_plan_spec *s)
{
    struct plan_arena *a = &p->arena;
    bool fail = false;
    strata_err err;

    p->num_res = s->num_resources;
    p->num_inv = s->num_invocations;
    p->num_terms = s->num_terminals;
    p->res = plan_arena_alloc(a, p->num_res * sizeof(*p->res));
    p->inv = plan_arena_alloc(a, p->num_inv * sizeof(*p->inv));
    p->terms = plan_arena_alloc(a, p->num_terms * sizeof(*p->terms));
    if (!p->res || !p->inv || !p->terms)
        return base_fail(STRATA_ENOMEM, "plan: no memory for a copy");
    for (size_t i = 0; i < p->num_res; i++) {
        const strata_plan_resource *r = &s->resources[i];

        p->res[i] = *r;
        p->res[i].name = plan_arena_strdup(a, r->name, NULL, &fail);
        p->res[i].memory_space =
            plan_arena_strdup(a, r->memory_space, "ram", &fail);
        p->res[i].layout = plan_arena_strdup(a, r->layout, "packed", &fail);
        p->res[i].device = plan_arena_strdup(a, r->device, "host", &fail);
    }
    for (size_t i = 0; i < p->num_terms; i++)
        p->terms[i] = plan_arena_strdup(a, s->terminals[i], NULL, &fail);
    if (fail)
        return base_fail(STRATA_ENOMEM, "plan: no memory for a copy");
    for (size_t i = 0; i < p->num_inv; i++) {
        err = copy_invocation(a, &p->inv[i], &s->invocations[i]);
        if (err)
            return err;
    }
    return STRATA_OK;
}

strata_err strata_plan_create(const strata_plan_spec *spec, strata_plan **out)
{
    struct strata_plan *p;
    strata_err err;

    if (!spec)
        return base_fail_null("strata_plan_create", "spec");
    if (!out)
        return base_fail_null("strata_plan_create", "out");
    err = check_counts(spec);
    if (err)
        return err;
    p = base_calloc(1, sizeof(*p));
    if (!p)
        return base_fail(STRATA_ENOMEM, "plan: no memory");
    err = copy_spec(p, spec);
    if (!err)
        err = plan_check(p);
    if (err) {
        strata_plan_destroy(p);
        return err;
    }
    *out = p;
    return STRATA_OK;
}

void strata_plan_destroy(strata_plan *p)
{
    if (!p)
        return;
    plan_index_fini(&p->inv_index);
    plan_index_fini(&p->decl_index);
    plan_arena_free(&p->arena);
    base_free(p);
}

/* ---- accessors ---- */

size_t strata_plan_num_invocations(const strata_plan *p)
{
    return p ? p->num_inv : 0;
}

const strata_plan_invocation *strata_plan_invocation_at(const strata_plan *p,
                                                        size_t i)
{
    return p && i < p->num_inv ? &p->inv[i] : NULL;
}

size_t strata_plan_num_resources(const strata_plan *p)
{
    return p ? p->num_res : 0;
}

const strata_plan_resource *strata_plan_resource_at(const strata_plan *p,
                                                    size_t i)
{
    return p && i < p->num_res ? &p->res[i] : NULL;
}

size_t strata_plan_num_terminals(const strata_plan *p)
{
    return p ? p->num_terms : 0;
}

const char *strata_plan_terminal_at(const strata_plan *p, size_t i)
{
    return p && i < p->num_terms ? p->terms[i] : NULL;
}

size_t strata_plan_order_at(const strata_plan *p, size_t i)
{
    return p && i < p->num_inv ? p->order[i] : SIZE_MAX;
}
