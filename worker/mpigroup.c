/* Adding an Open MPI group to an L4: the spec is checked and copied, and
 * every rank gets a node slot holding a remote_node that waits for its
 * rank to dial back (mpiaccept.c) instead of dialing a strata-node. */
#define _GNU_SOURCE /* dladdr */
#include "mpigroup.h"
#include "base/alloc.h"
#include "base/err.h"
#include "wire/msg.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef STRATA_RANK_DEFAULT
#define STRATA_RANK_DEFAULT "/usr/local/bin/strata-rank"
#endif

#define MAX_RANKS 4096

/* strata-rank beside this library's install: <libdir>/../bin, or
 * <libdir>/../../bin for a multiarch libdir (lib/x86_64-linux-gnu), so a
 * tree installed with `cmake --install --prefix P` or unpacked from the
 * packages finds its own strata-rank wherever P is; the configured
 * STRATA_RANK_DEFAULT otherwise. Written into buf (PATH_MAX bytes). */
static const char rank_anchor; /* an address inside this library */

static const char *default_rank_program(char *buf)
{
    static const char *const up[] = {"/../bin/strata-rank",
                                     "/../../bin/strata-rank"};
    Dl_info info;
    char lib[PATH_MAX];
    char *slash;

    if (dladdr(&rank_anchor, &info) && info.dli_fname &&
        realpath(info.dli_fname, lib) && (slash = strrchr(lib, '/'))) {
        *slash = '\0';
        for (size_t i = 0; i < sizeof(up) / sizeof(up[0]); i++) {
            if (snprintf(buf, PATH_MAX, "%s%s", lib, up[i]) < PATH_MAX &&
                access(buf, X_OK) == 0)
                return buf;
        }
    }
    snprintf(buf, PATH_MAX, "%s", STRATA_RANK_DEFAULT);
    return buf;
}
#define ENDPOINT_CAP 384

static void group_free(struct mpi_group *g)
{
    if (!g)
        return;
    wire_tls_ctx_free(g->ctx);
    base_free(g->mpirun_path);
    for (size_t i = 0; g->mpirun_args && i < g->num_mpirun_args; i++)
        base_free(g->mpirun_args[i]);
    base_free(g->mpirun_args);
    base_free(g->hostfile);
    base_free(g->hosts);
    base_free(g->rank_program);
    for (size_t i = 0; g->modules && i < g->num_modules; i++)
        base_free(g->modules[i]);
    base_free(g->modules);
    base_free(g->callback_host);
    base_free(g->key_dir);
    base_free(g->local_pids);
    base_free(g->local_starts);
    base_free(g);
}

/* True when path is a file this process may execute (a directory's
 * search permission is not that). */
static bool executable_file(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
           access(path, X_OK) == 0;
}

/* True when an executable named prog is found (a path, or in PATH). */
static bool runnable(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[PATH_MAX];

    if (strchr(prog, '/'))
        return executable_file(prog);
    while (path && *path) {
        size_t len = strcspn(path, ":");

        if (len > 0 &&
            snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, path, prog) <
                (int)sizeof(buf) &&
            executable_file(buf))
            return true;
        path += len + (path[len] == ':');
    }
    return false;
}

static bool oversubscribed(const strata_mpi_group_spec *s)
{
    for (size_t i = 0; i < s->num_mpirun_args; i++)
        if (s->mpirun_args[i] &&
            strcmp(s->mpirun_args[i], "--oversubscribe") == 0)
            return true;
    return false;
}

/* How to name a character a host name cannot hold. */
static const char *what_char(char c)
{
    return c == ',' ? "a comma" : c == ':' ? "a colon" : "a blank";
}

static strata_err check_hosts(const strata_mpi_group_spec *s)
{
    size_t slots = s->slots_per_host ? s->slots_per_host : 1;

    if (s->hostfile && s->num_hosts > 0)
        return base_fail(STRATA_EINVAL,
                         "MPI group: give a hostfile or hosts, not both");
    if (s->hostfile && access(s->hostfile, R_OK) != 0)
        return base_fail(STRATA_EINVAL, "MPI group: cannot read hostfile %s",
                         s->hostfile);
    if (s->num_hosts > 0 && !s->hosts)
        return base_fail(STRATA_EINVAL,
                         "MPI group: num_hosts is %zu but hosts is NULL",
                         s->num_hosts);
    for (size_t i = 0; i < s->num_hosts; i++) {
        const char *h = s->hosts[i];

        if (!h || !h[0])
            return base_fail(STRATA_EINVAL, "MPI group: hosts[%zu] is %s", i,
                             h ? "empty" : "NULL");
        if (strlen(h) > 255)
            return base_fail(STRATA_EINVAL,
                             "MPI group: hosts[%zu] is longer than 255 bytes",
                             i);
        if (h[strcspn(h, ",: \t\n")])
            return base_fail(STRATA_EINVAL,
                             "MPI group: hosts[%zu] '%s' is not a host name: "
                             "it holds %s (one name a host; slots go in "
                             "slots_per_host)",
                             i, h, what_char(h[strcspn(h, ",: \t\n")]));
    }
    if (s->num_hosts > 0 && s->num_hosts * slots < s->ranks &&
        !oversubscribed(s))
        return base_fail(STRATA_EINVAL,
                         "MPI group: %zu host%s with %zu slot%s each give%s "
                         "%zu slot%s for %zu ranks (or pass --oversubscribe)",
                         s->num_hosts, s->num_hosts == 1 ? "" : "s", slots,
                         slots == 1 ? "" : "s", s->num_hosts == 1 ? "s" : "",
                         s->num_hosts * slots,
                         s->num_hosts * slots == 1 ? "" : "s", s->ranks);
    return STRATA_OK;
}

static strata_err check_spec(const strata_mpi_group_spec *s, size_t n)
{
    const char *mpirun = s->mpirun_path ? s->mpirun_path : "mpirun";
    char def[PATH_MAX];
    const char *prog =
        s->rank_program ? s->rank_program : default_rank_program(def);
    strata_err err;

    if (s->ranks == 0 || s->ranks > MAX_RANKS)
        return base_fail(STRATA_EINVAL, "MPI group: ranks is %zu, not 1..%d",
                         s->ranks, MAX_RANKS);
    if (n < s->ranks)
        return base_fail(STRATA_EINVAL,
                         "MPI group: ids_out holds %zu ids for %zu ranks", n,
                         s->ranks);
    if (s->num_chips > 0 && !s->chip_ids)
        return base_fail(STRATA_EINVAL,
                         "MPI group: num_chips is %zu but chip_ids is NULL",
                         s->num_chips);
    if (s->num_chips > WIRE_MAX_CHIPS)
        return base_fail(STRATA_EINVAL,
                         "MPI group: num_chips is %zu, more than the %d a node "
                         "may have",
                         s->num_chips, WIRE_MAX_CHIPS);
    for (size_t i = 0; i < s->num_chips; i++) {
        if (s->chip_ids[i] < 0)
            return base_fail(STRATA_EINVAL, "MPI group: chip_ids[%zu] < 0", i);
        for (size_t j = 0; j < i; j++)
            if (s->chip_ids[j] == s->chip_ids[i])
                return base_fail(STRATA_EINVAL,
                                 "MPI group: chip_ids[%zu] repeats chip %d", i,
                                 s->chip_ids[i]);
    }
    if (s->num_mpirun_args > 0 && !s->mpirun_args)
        return base_fail(STRATA_EINVAL,
                         "MPI group: num_mpirun_args is %zu but mpirun_args "
                         "is NULL",
                         s->num_mpirun_args);
    for (size_t i = 0; i < s->num_mpirun_args; i++)
        if (!s->mpirun_args[i])
            return base_fail(STRATA_EINVAL,
                             "MPI group: mpirun_args[%zu] is NULL", i);
    if (s->num_modules > 0 && !s->modules)
        return base_fail(STRATA_EINVAL,
                         "MPI group: num_modules is %zu but modules is NULL",
                         s->num_modules);
    for (size_t i = 0; i < s->num_modules; i++)
        if (!s->modules[i] || !s->modules[i][0])
            return base_fail(STRATA_EINVAL,
                             "MPI group: modules[%zu] is not a path", i);
    if (s->callback_port < 0 || s->callback_port > 65535)
        return base_fail(STRATA_EINVAL,
                         "MPI group: callback_port %d is not 0..65535",
                         s->callback_port);
    err = check_hosts(s);
    if (err)
        return err;
    if (!runnable(mpirun))
        return base_fail(STRATA_EINVAL, "MPI group: cannot run mpirun %s%s",
                         mpirun,
                         strchr(mpirun, '/') ? " (not an executable file)"
                                             : " (not in PATH)");
    if (!executable_file(prog))
        return base_fail(STRATA_EINVAL,
                         "MPI group: cannot run the rank program %s (not an "
                         "executable file)",
                         prog);
    return STRATA_OK;
}

static char *join_hosts(const strata_mpi_group_spec *s, bool *fail)
{
    size_t slots = s->slots_per_host ? s->slots_per_host : 1;
    size_t cap = 1, len = 0;
    char *out;

    if (s->num_hosts == 0)
        return NULL;
    for (size_t i = 0; i < s->num_hosts; i++)
        cap += strlen(s->hosts[i]) + 24;
    out = base_calloc(1, cap);
    if (!out) {
        *fail = true;
        return NULL;
    }
    for (size_t i = 0; i < s->num_hosts; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s:%zu", i ? "," : "",
                                s->hosts[i], slots);
    return out;
}

static strata_err copy_group(struct mpi_group *g,
                             const strata_mpi_group_spec *s)
{
    char def[PATH_MAX];
    bool fail = false;

    g->mpirun_path =
        base_strdup_opt(s->mpirun_path ? s->mpirun_path : "mpirun", &fail);
    g->mpirun_args = base_calloc(s->num_mpirun_args + 1, sizeof(char *));
    fail |= !g->mpirun_args;
    for (size_t i = 0; g->mpirun_args && i < s->num_mpirun_args; i++)
        g->mpirun_args[i] = base_strdup_opt(s->mpirun_args[i], &fail);
    g->num_mpirun_args = s->num_mpirun_args;
    g->modules = base_calloc(s->num_modules + 1, sizeof(char *));
    fail |= !g->modules;
    for (size_t i = 0; g->modules && i < s->num_modules; i++)
        g->modules[i] = base_strdup_opt(s->modules[i], &fail);
    g->num_modules = s->num_modules;
    g->hostfile = base_strdup_opt(s->hostfile, &fail);
    g->hosts = join_hosts(s, &fail);
    g->rank_program = base_strdup_opt(
        s->rank_program ? s->rank_program : default_rank_program(def), &fail);
    g->callback_host = base_strdup_opt(
        s->callback_host ? s->callback_host : "127.0.0.1", &fail);
    g->callback_port = s->callback_port;
    g->key_dir = base_strdup_opt(s->key_dir, &fail);
    g->n = s->ranks;
    g->local_pids = base_calloc(s->ranks, sizeof(*g->local_pids));
    g->local_starts = base_calloc(s->ranks, sizeof(*g->local_starts));
    fail |= !g->local_pids || !g->local_starts;
    g->lfd = -1;
    g->pidfd = -1;
    return fail ? base_fail(STRATA_ENOMEM, "out of memory copying an MPI spec")
                : STRATA_OK;
}

static struct remote_node *rank_node(const strata_mpi_group_spec *s,
                                     struct mpi_group *g, size_t rank)
{
    struct remote_node *r = base_calloc(1, sizeof(*r));
    size_t n = s->num_chips ? s->num_chips : 1;
    bool fail = false;

    if (!r)
        return NULL;
    r->endpoint = base_calloc(1, ENDPOINT_CAP);
    r->platform = base_strdup_opt(s->platform ? s->platform : "sim", &fail);
    r->comm_profile =
        base_strdup_opt(s->comm_profile ? s->comm_profile : "sim", &fail);
    r->chip_ids = base_calloc(n, sizeof(*r->chip_ids));
    if (fail || !r->endpoint || !r->chip_ids) {
        remote_node_free(r);
        return NULL;
    }
    snprintf(r->endpoint, ENDPOINT_CAP, "MPI rank %zu", rank);
    for (size_t i = 0; i < s->num_chips; i++)
        r->chip_ids[i] = (uint32_t)s->chip_ids[i];
    r->num_chips = s->num_chips;
    r->num_subs = s->num_sub_workers;
    r->group = g;
    r->rank = (uint32_t)rank;
    return r;
}

/* Takes the slots back, newest first (nothing of the group is left). */
static void drop_slots(strata_worker *w, size_t first)
{
    while (w->num_nodes > first) {
        w->num_nodes--;
        remote_node_free(w->nodes[w->num_nodes].remote);
        w->nodes[w->num_nodes].remote = NULL;
    }
}

static strata_err add_ranks(strata_worker *w, const strata_mpi_group_spec *s,
                            struct mpi_group *g)
{
    g->first = w->num_nodes;
    for (size_t i = 0; i < s->ranks; i++) {
        struct worker_node *slot;
        struct remote_node *r = rank_node(s, g, i);
        strata_err err =
            r ? worker_node_slot(w, &slot)
              : base_fail(STRATA_ENOMEM, "out of memory for MPI rank %zu", i);

        if (err) {
            remote_node_free(r);
            drop_slots(w, g->first);
            return err;
        }
        slot->remote = r;
        r->w = w;
        r->index = w->num_nodes - 1;
    }
    return STRATA_OK;
}

strata_err
strata_worker_add_mpirun_worker_group(strata_worker *parent,
                                      const strata_mpi_group_spec *spec,
                                      int *ids_out, size_t n)
{
    struct mpi_group *g;
    strata_err err;

    if (!parent || !spec || !ids_out)
        return base_fail_null("strata_worker_add_mpirun_worker_group",
                              !parent ? "parent"
                              : !spec ? "spec"
                                      : "ids_out");
    if (parent->level < 4)
        return base_fail(STRATA_EINVAL,
                         "MPI groups belong to a level-4 worker, not level %d",
                         parent->level);
    if (parent->state != WORKER_CREATED)
        return base_fail(STRATA_ESTATE, "add MPI groups before init");
    err = check_spec(spec, n);
    if (err)
        return err;
    g = base_calloc(1, sizeof(*g));
    if (!g)
        return base_fail(STRATA_ENOMEM, "out of memory for an MPI group");
    g->w = parent;
    err = copy_group(g, spec);
    if (!err)
        err = add_ranks(parent, spec, g);
    if (err) {
        group_free(g);
        return err;
    }
    for (size_t i = 0; i < g->n; i++)
        ids_out[i] = (int)(g->first + i);
    mpihalo_install();
    return STRATA_OK;
}

/* The group whose first node is node i, or NULL. */
static struct mpi_group *group_at(strata_worker *w, size_t i)
{
    struct remote_node *r = w->nodes[i].remote;

    return r && r->group && r->group->first == i ? r->group : NULL;
}

strata_err mpigroup_start(strata_worker *w, struct event_base *base,
                          uint64_t deadline)
{
    for (size_t i = 0; i < w->num_nodes; i++) {
        struct mpi_group *g = group_at(w, i);
        strata_err err = g ? mpilaunch_start(g, base, deadline) : STRATA_OK;

        if (err)
            return err;
    }
    return STRATA_OK;
}

void mpigroup_stop(strata_worker *w)
{
    for (size_t i = 0; i < w->num_nodes; i++) {
        struct mpi_group *g = group_at(w, i);

        if (g)
            mpilaunch_stop(g);
    }
}

void mpigroup_free_all(strata_worker *w)
{
    for (size_t i = 0; i < w->num_nodes; i++) {
        struct mpi_group *g = group_at(w, i);

        if (!g)
            continue;
        mpilaunch_stop(g);
        /* The ranks' nodes point at g: they go with it. */
        for (size_t k = 0; k < g->n; k++)
            mpigroup_node(g, k)->group = NULL;
        group_free(g);
    }
}
