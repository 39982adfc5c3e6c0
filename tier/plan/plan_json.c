/* Bundle plans in the reference compiler's JSON schema
 * ("tiga.executable-bundle-plan.v1"), read with jansson. The text is
 * untrusted: every field is checked for presence, type and range before
 * use, and a refusal names the field's path ("$.invocations[2].mode"). */
#include "base/alloc.h"
#include "base/err.h"
#include "plan_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATH_MAX_LEN 160

/* Keys of an invocation the schema names; the rest are its metadata. */
static const char *const inv_keys[] = {
    "name",       "task_kind", "phase",    "executable_symbol",
    "depends_on", "arguments", "accesses", "snapshot_version",
    "scalars",
};

static strata_err bad(const char *path, const char *what)
{
    return base_fail(STRATA_EINVAL, "plan JSON: %s: %s", path, what);
}

/* Paths stay far below PATH_MAX_LEN (names of keys are short, depth is
 * fixed); a longer one would only be cut. */
static void sub(char *out, const char *path, const char *key)
{
    if (snprintf(out, PATH_MAX_LEN, "%s.%s", path, key) >= PATH_MAX_LEN)
        out[PATH_MAX_LEN - 1] = '\0';
}

static void item(char *out, const char *path, size_t i)
{
    if (snprintf(out, PATH_MAX_LEN, "%s[%zu]", path, i) >= PATH_MAX_LEN)
        out[PATH_MAX_LEN - 1] = '\0';
}

static strata_err get_string(json_t *obj, const char *path, const char *key,
                             bool optional, const char **out)
{
    char p[PATH_MAX_LEN];
    json_t *v = json_object_get(obj, key);

    sub(p, path, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return optional ? STRATA_OK : bad(p, "missing");
    if (!json_is_string(v))
        return bad(p, "expected a string");
    if (json_string_length(v) == 0 ||
        json_string_length(v) > STRATA_PLAN_NAME_MAX)
        return bad(p, "expected 1 to 255 bytes");
    *out = json_string_value(v);
    return STRATA_OK;
}

static strata_err get_count(json_t *obj, const char *path, const char *key,
                            uint64_t *out)
{
    char p[PATH_MAX_LEN];
    json_t *v = json_object_get(obj, key);

    sub(p, path, key);
    if (!v)
        return bad(p, "missing");
    if (!json_is_integer(v))
        return bad(p, "expected an integer");
    if (json_integer_value(v) < 0)
        return bad(p, "expected a non-negative integer");
    *out = (uint64_t)json_integer_value(v);
    return STRATA_OK;
}

/* The array at obj[key] (missing: *out NULL when optional), of at most
 * max entries. */
static strata_err get_array(json_t *obj, const char *path, const char *key,
                            bool optional, size_t max, json_t **out)
{
    char p[PATH_MAX_LEN];
    json_t *v = json_object_get(obj, key);

    sub(p, path, key);
    *out = NULL;
    if (!v)
        return optional ? STRATA_OK : bad(p, "missing");
    if (!json_is_array(v))
        return bad(p, "expected an array");
    if (json_array_size(v) > max)
        return base_fail(STRATA_EINVAL,
                         "plan JSON: %s: %zu entries, more than %zu", p,
                         json_array_size(v), max);
    *out = v;
    return STRATA_OK;
}

static strata_err parse_resource(json_t *r, const char *path,
                                 strata_plan_resource *out)
{
    static const char *const keys[] = {
        "name",           "memory_space",     "layout",  "device",
        "capacity_bytes", "snapshot_version", "external"};
    const char *key;
    json_t *v, *ext;
    char p[PATH_MAX_LEN];
    strata_err err;

    if (!json_is_object(r))
        return bad(path, "expected an object");
    json_object_foreach(r, key, v)
    {
        bool known = false;

        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
            known = known || strcmp(key, keys[i]) == 0;
        if (!known) {
            if (snprintf(p, sizeof(p), "%s.%.64s", path, key) >= (int)sizeof(p))
                p[sizeof(p) - 1] = '\0';
            return bad(p, "not a key of a resource");
        }
    }
    if ((err = get_string(r, path, "name", false, &out->name)) ||
        (err =
             get_string(r, path, "memory_space", false, &out->memory_space)) ||
        (err = get_string(r, path, "layout", false, &out->layout)) ||
        (err = get_string(r, path, "device", false, &out->device)) ||
        (err = get_count(r, path, "capacity_bytes", &out->capacity_bytes)) ||
        (err = get_count(r, path, "snapshot_version", &out->snapshot_version)))
        return err;
    ext = json_object_get(r, "external");
    sub(p, path, "external");
    if (!ext)
        return bad(p, "missing");
    if (!json_is_boolean(ext))
        return bad(p, "expected true or false");
    out->external = json_is_true(ext);
    return STRATA_OK;
}

static strata_err parse_mode(json_t *a, const char *path, strata_plan_mode *out)
{
    const char *m;
    char p[PATH_MAX_LEN];
    strata_err err = get_string(a, path, "mode", false, &m);

    if (err)
        return err;
    for (int k = STRATA_PLAN_READ; k <= STRATA_PLAN_READ_WRITE; k++)
        if (strcmp(m, plan_mode_name((strata_plan_mode)k)) == 0) {
            *out = (strata_plan_mode)k;
            return STRATA_OK;
        }
    sub(p, path, "mode");
    return bad(p, "expected \"read\", \"write\" or \"read_write\"");
}

static strata_err parse_accesses(struct plan_arena *ar, json_t *list,
                                 const char *path, strata_plan_invocation *v)
{
    strata_plan_access *acc;
    char p[PATH_MAX_LEN];
    strata_err err;

    v->num_accesses = json_array_size(list);
    acc = plan_arena_alloc(ar, v->num_accesses * sizeof(*acc));
    if (!acc)
        return base_fail(STRATA_ENOMEM, "plan JSON: no memory");
    for (size_t i = 0; i < v->num_accesses; i++) {
        json_t *a = json_array_get(list, i);

        item(p, path, i);
        if (!json_is_object(a))
            return bad(p, "expected an object");
        if ((err = get_string(a, p, "binding", false, &acc[i].resource)) ||
            (err = parse_mode(a, p, &acc[i].mode)) ||
            (err = get_count(a, p, "snapshot_version",
                             &acc[i].snapshot_version)) ||
            (err = get_string(a, p, "partitioning", true,
                              &acc[i].partitioning)) ||
            (err = get_string(a, p, "partition", true, &acc[i].partition)))
            return err;
        if ((acc[i].partitioning == NULL) != (acc[i].partition == NULL))
            return bad(p, "partitioning and partition go together");
    }
    v->accesses = acc;
    return STRATA_OK;
}

static strata_err parse_arguments(struct plan_arena *ar, json_t *list,
                                  const char *path, strata_plan_invocation *v)
{
    strata_plan_argument *args;
    char p[PATH_MAX_LEN];
    strata_err err;

    v->num_arguments = json_array_size(list);
    args = plan_arena_alloc(ar, v->num_arguments * sizeof(*args));
    if (!args)
        return base_fail(STRATA_ENOMEM, "plan JSON: no memory");
    for (size_t i = 0; i < v->num_arguments; i++) {
        json_t *a = json_array_get(list, i);

        item(p, path, i);
        if (!json_is_object(a))
            return bad(p, "expected an object");
        if ((err = get_string(a, p, "parameter", false, &args[i].parameter)) ||
            (err = get_string(a, p, "resource", false, &args[i].resource)))
            return err;
    }
    v->arguments = args;
    return STRATA_OK;
}

static strata_err parse_strings(struct plan_arena *ar, json_t *list,
                                const char *path, const char ***out,
                                size_t *n_out)
{
    size_t n = json_array_size(list);
    const char **s = plan_arena_alloc(ar, n * sizeof(*s));
    char p[PATH_MAX_LEN];

    if (!s)
        return base_fail(STRATA_ENOMEM, "plan JSON: no memory");
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(list, i);

        item(p, path, i);
        if (!json_is_string(v))
            return bad(p, "expected a string");
        if (json_string_length(v) == 0 ||
            json_string_length(v) > STRATA_PLAN_NAME_MAX)
            return bad(p, "expected 1 to 255 bytes");
        s[i] = json_string_value(v);
    }
    *out = s;
    *n_out = n;
    return STRATA_OK;
}

static strata_err parse_scalars(struct plan_arena *ar, json_t *list,
                                const char *path, strata_plan_invocation *v)
{
    uint64_t *sc;
    char p[PATH_MAX_LEN];

    v->num_scalars = json_array_size(list);
    sc = plan_arena_alloc(ar, v->num_scalars * sizeof(*sc));
    if (!sc)
        return base_fail(STRATA_ENOMEM, "plan JSON: no memory");
    for (size_t i = 0; i < v->num_scalars; i++) {
        json_t *x = json_array_get(list, i);

        item(p, path, i);
        if (!json_is_integer(x))
            return bad(p, "expected an integer");
        /* Two's complement: a u64 above 2^63 - 1 is written negative. */
        sc[i] = (uint64_t)json_integer_value(x);
    }
    v->scalars = sc;
    return STRATA_OK;
}

/* The keys the schema does not name, as a compact JSON object (NULL when
 * there are none). */
static strata_err parse_metadata(struct plan_arena *ar, json_t *inv,
                                 strata_plan_invocation *v)
{
    json_t *meta = json_object();
    const char *key;
    json_t *val;
    char *text;
    bool fail = false;

    if (!meta)
        return base_fail(STRATA_ENOMEM, "plan JSON: no memory");
    json_object_foreach(inv, key, val)
    {
        bool fixed = false;

        for (size_t i = 0; i < sizeof(inv_keys) / sizeof(inv_keys[0]); i++)
            fixed = fixed || strcmp(key, inv_keys[i]) == 0;
        if (!fixed && json_object_set(meta, key, val) != 0) {
            json_decref(meta);
            return base_fail(STRATA_ENOMEM, "plan JSON: no memory");
        }
    }
    if (json_object_size(meta) == 0) {
        json_decref(meta);
        return STRATA_OK;
    }
    text = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(meta);
    if (!text)
        return base_fail(STRATA_ENOMEM, "plan JSON: no memory");
    v->metadata_json = plan_arena_strdup(ar, text, NULL, &fail);
    free(text);
    return fail ? base_fail(STRATA_ENOMEM, "plan JSON: no memory") : STRATA_OK;
}

static strata_err parse_invocation(struct plan_arena *ar, json_t *inv,
                                   const char *path, strata_plan_invocation *v)
{
    json_t *deps, *args, *acc, *sc;
    char p[PATH_MAX_LEN];
    const char **d = NULL;
    strata_err err;

    if (!json_is_object(inv))
        return bad(path, "expected an object");
    if ((err = get_string(inv, path, "name", false, &v->name)) ||
        (err = get_string(inv, path, "task_kind", false, &v->task_kind)) ||
        (err = get_string(inv, path, "phase", false, &v->phase)) ||
        (err =
             get_string(inv, path, "executable_symbol", false, &v->callable)) ||
        (err =
             get_count(inv, path, "snapshot_version", &v->snapshot_version)) ||
        (err = get_array(inv, path, "depends_on", false, STRATA_PLAN_MAX_ITEMS,
                         &deps)) ||
        (err = get_array(inv, path, "arguments", false, STRATA_PLAN_MAX_ITEMS,
                         &args)) ||
        (err = get_array(inv, path, "accesses", false, STRATA_PLAN_MAX_ITEMS,
                         &acc)) ||
        (err = get_array(inv, path, "scalars", true, STRATA_MAX_SCALARS, &sc)))
        return err;
    sub(p, path, "depends_on");
    err = parse_strings(ar, deps, p, &d, &v->num_depends_on);
    v->depends_on = d;
    sub(p, path, "arguments");
    if (!err)
        err = parse_arguments(ar, args, p, v);
    sub(p, path, "accesses");
    if (!err)
        err = parse_accesses(ar, acc, p, v);
    sub(p, path, "scalars");
    if (!err && sc)
        err = parse_scalars(ar, sc, p, v);
    return err ? err : parse_metadata(ar, inv, v);
}

static strata_err parse_document(struct plan_arena *ar, json_t *doc,
                                 strata_plan_spec *s)
{
    json_t *res, *invs, *terms, *schema = json_object_get(doc, "schema");
    strata_plan_resource *r;
    strata_plan_invocation *v;
    const char **t = NULL;
    char p[PATH_MAX_LEN];
    strata_err err;

    if (!json_is_object(doc))
        return bad("$", "expected an object");
    if (!schema)
        return bad("$.schema", "missing");
    if (!json_is_string(schema) ||
        strcmp(json_string_value(schema), STRATA_PLAN_SCHEMA) != 0)
        return bad("$.schema", "expected \"" STRATA_PLAN_SCHEMA "\"");
    if ((err = get_array(doc, "$", "resources", true, STRATA_PLAN_MAX_RESOURCES,
                         &res)) ||
        (err = get_array(doc, "$", "invocations", false,
                         STRATA_PLAN_MAX_INVOCATIONS, &invs)) ||
        (err = get_array(doc, "$", "terminals", true,
                         STRATA_PLAN_MAX_INVOCATIONS, &terms)))
        return err;
    if (json_array_size(invs) == 0)
        return bad("$.invocations", "expected at least one invocation");
    /* Optional, as in strata_plan_spec: absent means derived. */
    if (terms && json_array_size(terms) == 0)
        return bad("$.terminals", "expected at least one terminal");
    s->num_resources = res ? json_array_size(res) : 0;
    s->num_invocations = json_array_size(invs);
    r = plan_arena_alloc(ar, s->num_resources * sizeof(*r));
    v = plan_arena_alloc(ar, s->num_invocations * sizeof(*v));
    if (!r || !v)
        return base_fail(STRATA_ENOMEM, "plan JSON: no memory");
    for (size_t i = 0; i < s->num_resources && !err; i++) {
        item(p, "$.resources", i);
        err = parse_resource(json_array_get(res, i), p, &r[i]);
    }
    for (size_t i = 0; i < s->num_invocations && !err; i++) {
        item(p, "$.invocations", i);
        err = parse_invocation(ar, json_array_get(invs, i), p, &v[i]);
    }
    if (!err && terms)
        err = parse_strings(ar, terms, "$.terminals", &t, &s->num_terminals);
    s->resources = r;
    s->invocations = v;
    s->terminals = t;
    return err;
}

strata_err strata_plan_from_json(const char *json, size_t len,
                                 strata_plan **out)
{
    struct plan_arena ar = {0};
    strata_plan_spec spec = {0};
    json_error_t jerr;
    json_t *doc;
    strata_err err;

    if (!json)
        return base_fail_null("strata_plan_from_json", "json");
    if (!out)
        return base_fail_null("strata_plan_from_json", "out");
    doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        return base_fail(STRATA_EINVAL, "plan JSON: line %d column %d: %.200s",
                         jerr.line, jerr.column, jerr.text);
    err = parse_document(&ar, doc, &spec);
    if (!err)
        err = strata_plan_create(&spec, out);
    json_decref(doc);
    plan_arena_free(&ar);
    return err;
}

/* ---- writing ---- */

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *write_resource(const strata_plan_resource *r)
{
    json_t *o = json_object();

    if (!o)
        return NULL;
    if (json_object_set_new(o, "name", json_string(r->name)) ||
        json_object_set_new(o, "memory_space", json_string(r->memory_space)) ||
        json_object_set_new(o, "layout", json_string(r->layout)) ||
        json_object_set_new(o, "device", json_string(r->device)) ||
        json_object_set_new(o, "capacity_bytes",
                            json_integer((json_int_t)r->capacity_bytes)) ||
        json_object_set_new(o, "snapshot_version",
                            json_integer((json_int_t)r->snapshot_version)) ||
        json_object_set_new(o, "external", json_boolean(r->external))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *write_access(const strata_plan_access *a)
{
    json_t *o = json_object();

    if (!o)
        return NULL;
    if (json_object_set_new(o, "binding", json_string(a->resource)) ||
        json_object_set_new(o, "mode", json_string(plan_mode_name(a->mode))) ||
        json_object_set_new(o, "snapshot_version",
                            json_integer((json_int_t)a->snapshot_version)) ||
        (a->partitioning &&
         (json_object_set_new(o, "partitioning",
                              str_or_null(a->partitioning)) ||
          json_object_set_new(o, "partition", str_or_null(a->partition))))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *write_lists(const strata_plan_invocation *v, json_t *o)
{
    json_t *deps = json_array(), *args = json_array(), *acc = json_array();
    bool fail = !deps || !args || !acc;

    for (size_t i = 0; !fail && i < v->num_depends_on; i++)
        fail = json_array_append_new(deps, json_string(v->depends_on[i]));
    for (size_t i = 0; !fail && i < v->num_arguments; i++) {
        json_t *a = json_object();

        fail = !a ||
               json_object_set_new(a, "parameter",
                                   json_string(v->arguments[i].parameter)) ||
               json_object_set_new(a, "resource",
                                   json_string(v->arguments[i].resource)) ||
               json_array_append_new(args, a);
    }
    for (size_t i = 0; !fail && i < v->num_accesses; i++)
        fail = json_array_append_new(acc, write_access(&v->accesses[i]));
    if (fail || json_object_set(o, "depends_on", deps) ||
        json_object_set(o, "arguments", args) ||
        json_object_set(o, "accesses", acc))
        o = NULL;
    json_decref(deps);
    json_decref(args);
    json_decref(acc);
    return o;
}

static json_t *write_invocation(const strata_plan_invocation *v)
{
    json_t *o = json_object(), *meta = NULL, *sc = NULL;

    if (!o)
        return NULL;
    if (json_object_set_new(o, "name", json_string(v->name)) ||
        json_object_set_new(o, "task_kind", json_string(v->task_kind)) ||
        json_object_set_new(o, "phase", json_string(v->phase)) ||
        json_object_set_new(o, "executable_symbol", json_string(v->callable)) ||
        !write_lists(v, o) ||
        json_object_set_new(o, "snapshot_version",
                            json_integer((json_int_t)v->snapshot_version)))
        goto fail;
    if (v->num_scalars) {
        sc = json_array();
        for (size_t i = 0; sc && i < v->num_scalars; i++)
            if (json_array_append_new(sc,
                                      json_integer((json_int_t)v->scalars[i])))
                goto fail;
        if (!sc || json_object_set(o, "scalars", sc))
            goto fail;
    }
    if (v->metadata_json) {
        meta = json_loads(v->metadata_json, 0, NULL);
        if (!meta || json_object_update(o, meta))
            goto fail;
    }
    json_decref(sc);
    json_decref(meta);
    return o;
fail:
    json_decref(sc);
    json_decref(meta);
    json_decref(o);
    return NULL;
}

static json_t *write_document(const strata_plan *p)
{
    json_t *doc = json_object(), *res = json_array(), *invs = json_array();
    json_t *terms = json_array();
    bool fail = !doc || !res || !invs || !terms;

    for (size_t i = 0; !fail && i < p->num_res; i++)
        fail = json_array_append_new(res, write_resource(&p->res[i]));
    for (size_t i = 0; !fail && i < p->num_inv; i++)
        fail = json_array_append_new(invs, write_invocation(&p->inv[i]));
    for (size_t i = 0; !fail && i < p->num_terms; i++)
        fail = json_array_append_new(terms, json_string(p->terms[i]));
    fail =
        fail ||
        json_object_set_new(doc, "schema", json_string(STRATA_PLAN_SCHEMA)) ||
        json_object_set(doc, "resources", res) ||
        json_object_set(doc, "invocations", invs) ||
        json_object_set(doc, "terminals", terms);
    json_decref(res);
    json_decref(invs);
    json_decref(terms);
    if (fail) {
        json_decref(doc);
        return NULL;
    }
    return doc;
}

strata_err strata_plan_to_json(const strata_plan *p, char **json_out,
                               size_t *len_out)
{
    json_t *doc;
    char *text, *copy;
    size_t n;

    if (!p)
        return base_fail_null("strata_plan_to_json", "p");
    if (!json_out)
        return base_fail_null("strata_plan_to_json", "json_out");
    doc = write_document(p);
    text = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;
    json_decref(doc);
    if (!text)
        return base_fail(STRATA_ENOMEM, "plan JSON: no memory to write");
    n = strlen(text);
    copy = base_malloc(n + 2);
    if (!copy) {
        free(text);
        return base_fail(STRATA_ENOMEM, "plan JSON: no memory to write");
    }
    memcpy(copy, text, n);
    copy[n] = '\n';
    copy[n + 1] = '\0';
    free(text);
    *json_out = copy;
    if (len_out)
        *len_out = n + 1;
    return STRATA_OK;
}

void strata_plan_json_free(char *json)
{
    base_free(json);
}
