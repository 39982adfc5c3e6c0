/*
 * Helpers shared by the global domain tests (see gd_kit.h).
 */
#define _GNU_SOURCE
#include "gd_kit.h"
#include "node_launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef GD_NODE_PATH
#error "GD_NODE_PATH (the strata-node binary) must be defined"
#endif
#ifndef GD_MODULE_PATH
#error "GD_MODULE_PATH (the test module) must be defined"
#endif

#define GLOBAL_TAG (1ull << 62) /* window ids of global domains */
#define DAEMON_WAIT_S 10.0

extern char **environ;

strata_callable gd_o_query, gd_o_fill, gd_o_allreduce, gd_o_read;
strata_callable gd_o_sleep, gd_o_wait;

static strata_worker *tracked[4]; /* started by gd_l4_start, not destroyed */

static const int chip_ids[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};

int gd_register(void)
{
    if (strata_module_init() != STRATA_OK ||
        strata_callable_by_name(STRATA_CALLABLE_ORCH, GD_O_QUERY,
                                &gd_o_query) ||
        strata_callable_by_name(STRATA_CALLABLE_ORCH, GD_O_FILL, &gd_o_fill) ||
        strata_callable_by_name(STRATA_CALLABLE_ORCH, GD_O_ALLREDUCE,
                                &gd_o_allreduce) ||
        strata_callable_by_name(STRATA_CALLABLE_ORCH, GD_O_READ, &gd_o_read) ||
        strata_callable_by_name(STRATA_CALLABLE_ORCH, GD_O_SLEEP,
                                &gd_o_sleep) ||
        strata_callable_by_name(STRATA_CALLABLE_ORCH, GD_O_WAIT, &gd_o_wait)) {
        print_error("registering the gdomain callables: %s\n", strata_errmsg());
        return -1;
    }
    return 0;
}

int gd_setup(void **state)
{
    (void)state;
    return gd_register();
}

void gd_assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

/* ---- the daemon ------------------------------------------------------ */

static void print_log(const struct gd_daemon *d)
{
    testutil_print_file(d->log, "strata-node log");
}

int gd_daemon_start(struct gd_daemon *d, const char *host, const char *fault)
{
    char port_file[GD_PATH_MAX], listen[64];
    const char *argv[] = {
        GD_NODE_PATH,  "--listen", listen,          "--module", GD_MODULE_PATH,
        "--port-file", port_file,  "--secret-file", d->secret,  NULL};
    struct testutil_node_launch l = {.argv = argv,
                                     .dir = d->dir,
                                     .port_file = port_file,
                                     .log = d->log,
                                     .log_level = "warn",
                                     .fault = fault,
                                     .wait_s = DAEMON_WAIT_S};
    int port;

    memset(d, 0, sizeof(*d));
    snprintf(d->dir, sizeof(d->dir), "/tmp/strata-gd-node-XXXXXX");
    if (!mkdtemp(d->dir)) {
        print_error("mkdtemp: %s\n", strerror(errno));
        d->dir[0] = '\0';
        return -1;
    }
    snprintf(d->secret, sizeof(d->secret), "%s/secret", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/node.log", d->dir);
    snprintf(port_file, sizeof(port_file), "%s/port", d->dir);
    snprintf(listen, sizeof(listen), "%s:0", host ? host : "127.0.0.1");
    if (devkit_write_secret(d->secret) != 0) {
        print_error("cannot write %s\n", d->secret);
        gd_daemon_stop(d);
        return -1;
    }
    port = testutil_node_launch(&l, &d->pid);
    if (port <= 0) {
        print_log(d);
        gd_daemon_stop(d);
        return -1;
    }
    snprintf(d->endpoint, sizeof(d->endpoint), "%s:%d",
             host ? host : "127.0.0.1", port);
    unlink(port_file);
    return 0;
}

int gd_daemon_stop(struct gd_daemon *d)
{
    char p[GD_PATH_MAX + 16];
    int status = 0, rc = 0;

    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        if (!testutil_wait_child(d->pid, DAEMON_WAIT_S, &status)) {
            print_error("strata-node ignored SIGTERM\n");
            kill(d->pid, SIGKILL);
            waitpid(d->pid, &status, 0);
            rc = -1;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            print_error("strata-node ended with status 0x%x\n", status);
            rc = -1;
        }
        if (rc != 0)
            print_log(d);
        d->pid = 0;
    }
    if (d->dir[0]) {
        unlink(d->secret);
        unlink(d->log);
        snprintf(p, sizeof(p), "%s/port", d->dir);
        unlink(p);
        snprintf(p, sizeof(p), "%s/port.tmp", d->dir);
        unlink(p);
        rmdir(d->dir);
        d->dir[0] = '\0';
    }
    return rc;
}

size_t gd_daemon_sessions(const struct gd_daemon *d, pid_t *out, size_t cap)
{
    size_t n = 0;

    if (d->pid > 0)
        testutil_children_of(d->pid, out, &n, cap);
    return n;
}

static bool daemon_idle(void *arg)
{
    pid_t p[4];

    return gd_daemon_sessions(arg, p, 4) == 0;
}

bool gd_daemon_idle(const struct gd_daemon *d, double timeout_s)
{
    return testutil_wait_until(daemon_idle, (void *)(uintptr_t)d, timeout_s);
}

/* ---- L4 workers --------------------------------------------------------- */

static strata_err add_forked(strata_worker *w, size_t chips)
{
    strata_worker_config cfg;
    strata_worker *n = NULL;
    strata_err e;
    int id;

    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = chip_ids;
    cfg.num_chips = chips;
    e = strata_worker_create(&cfg, &n);
    if (e == STRATA_OK) {
        e = strata_worker_add_worker(w, n, &id);
        if (e != STRATA_OK && strata_worker_destroy(n) != STRATA_OK)
            print_error("destroying a node never added: %s\n", strata_errmsg());
    }
    return e;
}

static strata_err add_remote(strata_worker *w, const struct gd_daemon *d,
                             size_t chips)
{
    strata_remote_spec rs;
    int id;

    memset(&rs, 0, sizeof(rs));
    rs.endpoint = d->endpoint;
    rs.secret_file = d->secret;
    rs.chip_ids = chip_ids;
    rs.num_chips = chips;
    return strata_worker_add_remote_worker(w, &rs, &id);
}

strata_err gd_l4_start(size_t forked, size_t chips,
                       const struct gd_daemon *const *daemons, size_t nremote,
                       size_t rchips, strata_worker **out)
{
    strata_worker_config cfg;
    strata_worker *w = NULL;
    strata_err e;

    if (chips > 32 || rchips > 32)
        return STRATA_EINVAL;
    strata_worker_config_init(&cfg, 4);
    cfg.startup_timeout_s = 60.0;
    gd_try(strata_worker_create(&cfg, &w));
    e = STRATA_OK;
    for (size_t i = 0; i < forked && e == STRATA_OK; i++)
        e = add_forked(w, chips);
    for (size_t i = 0; i < nremote && e == STRATA_OK; i++)
        e = add_remote(w, daemons[i], rchips);
    if (e == STRATA_OK)
        e = strata_worker_init(w);
    if (e != STRATA_OK) {
        char msg[STRATA_ERRMSG_MAX];

        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        if (strata_worker_destroy(w) != STRATA_OK)
            print_error("destroy after a failed start: %s\n", strata_errmsg());
        strata_errmsg_set("%s", msg);
        return e;
    }
    for (size_t i = 0; i < 4; i++) {
        if (!tracked[i]) {
            tracked[i] = w;
            break;
        }
    }
    *out = w;
    return STRATA_OK;
}

static void untrack(strata_worker *w)
{
    for (size_t i = 0; i < 4; i++)
        if (tracked[i] == w)
            tracked[i] = NULL;
}

int gd_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < 4; i++) {
        if (tracked[i] && strata_worker_destroy(tracked[i]) != STRATA_OK)
            print_error("teardown destroy: %s\n", strata_errmsg());
        tracked[i] = NULL;
    }
    return 0;
}

void gd_destroy(strata_worker *w, strata_err ok_too)
{
    strata_err e;

    untrack(w);
    e = strata_worker_destroy(w);

    if (e != STRATA_OK && e != ok_too)
        fail_msg("destroy: %s (%s)", strata_errname(e), strata_errmsg());
}

/* ---- specs ------------------------------------------------------------- */

void gd_spec_init(struct gd_spec *s, const char *name, size_t window_size)
{
    memset(s, 0, sizeof(*s));
    s->spec.name = name;
    s->spec.members = s->m;
    s->spec.window_size = window_size;
    s->spec.buffers = s->b;
    s->spec.attachments = s->at;
}

void gd_spec_member(struct gd_spec *s, int node, int chip)
{
    assert_true(s->spec.num_members < GD_MAX_MEMBERS);
    s->m[s->spec.num_members].node_worker_id = node;
    s->m[s->spec.num_members].local_chip = chip;
    s->spec.num_members++;
}

void gd_spec_grid(struct gd_spec *s, int first, size_t nodes, size_t chips)
{
    for (size_t n = 0; n < nodes; n++)
        for (size_t c = 0; c < chips; c++)
            gd_spec_member(s, first + (int)n, (int)c);
}

void gd_spec_buf(struct gd_spec *s, const char *name, strata_dtype dtype,
                 size_t count)
{
    strata_comm_buffer_spec *b = &s->b[s->spec.num_buffers++];

    b->name = name;
    b->dtype = dtype;
    b->count = count;
    b->nbytes = count * strata_dtype_size(dtype);
}

/* ---- node tasks ---------------------------------------------------------- */

strata_err gd_node_task(strata_orch *o, int node, strata_callable c,
                        strata_buffer *b, size_t off, size_t nbytes,
                        strata_tag tag, const uint64_t *s, size_t ns)
{
    strata_args *a = NULL;
    strata_err e;

    gd_try(strata_args_create(&a));
    e = STRATA_OK;
    if (b) {
        size_t shape[1] = {nbytes};

        e = strata_args_add_tensor(a, b, off, STRATA_U8, 1, shape, tag);
    }
    for (size_t i = 0; e == STRATA_OK && i < ns; i++)
        e = strata_args_add_scalar(a, s[i]);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, c, a, node);
    strata_args_destroy(a);
    return e;
}

/* The members of s grouped by node (nodes in order of first appearance,
 * members in rank order): a node's chips and its first slot. */
struct node_group {
    int node;
    size_t first; /* slot of its first member */
    size_t count;
    uint64_t chips[GD_MAX_MEMBERS];
};

static size_t node_groups(const struct gd_spec *s, struct node_group *g)
{
    size_t k = 0, slot = 0;

    for (size_t r = 0; r < s->spec.num_members; r++) {
        size_t j = 0;

        while (j < k && g[j].node != s->m[r].node_worker_id)
            j++;
        if (j == k) {
            g[k].node = s->m[r].node_worker_id;
            g[k].count = 0;
            k++;
        }
        g[j].chips[g[j].count++] = (uint64_t)s->m[r].local_chip;
    }
    for (size_t j = 0; j < k; j++) {
        g[j].first = slot;
        slot += g[j].count;
    }
    return k;
}

size_t gd_slot_of(const struct gd_spec *s, size_t rank)
{
    static struct node_group g[GD_MAX_NODES * 4];
    size_t k = node_groups(s, g);

    for (size_t j = 0; j < k; j++) {
        size_t seen = 0;

        if (g[j].node != s->m[rank].node_worker_id)
            continue;
        for (size_t r = 0; r < rank; r++)
            seen += s->m[r].node_worker_id == g[j].node;
        return g[j].first + seen;
    }
    return SIZE_MAX;
}

/* Submits c to every node of s with scalars head[0..nh), then the node's
 * chips, and slots [first, first + count) of out (slice bytes each). */
static strata_err per_node(strata_orch *o, const struct gd_spec *s,
                           strata_callable c, const uint64_t *head, size_t nh,
                           strata_buffer *out, size_t slice)
{
    static struct node_group g[GD_MAX_NODES * 4];
    size_t k = node_groups(s, g);

    for (size_t j = 0; j < k; j++) {
        uint64_t sc[GD_MAX_MEMBERS + 16];
        size_t ns = 0;

        for (size_t i = 0; i < nh; i++)
            sc[ns++] = head[i];
        sc[ns++] = g[j].count;
        for (size_t i = 0; i < g[j].count; i++)
            sc[ns++] = g[j].chips[i];
        gd_try(gd_node_task(o, g[j].node, c, out, g[j].first * slice,
                            g[j].count * slice, STRATA_OUT, sc, ns));
    }
    return STRATA_OK;
}

strata_err gd_submit_allreduce(strata_orch *o, const struct gd_spec *s,
                               uint64_t id, strata_buffer *out, size_t count,
                               uint32_t seed, uint32_t round)
{
    uint64_t head[6] = {id,    0,
                        count, gd_flag_off(count),
                        seed,  (uint64_t)round * s->spec.num_members};

    return per_node(o, s, gd_o_allreduce, head, 6, out, count * 4);
}

strata_err gd_submit_wait(strata_orch *o, const struct gd_spec *s, uint64_t id,
                          size_t flag_off, uint64_t tag)
{
    uint64_t head[3] = {id, flag_off, tag};

    return per_node(o, s, gd_o_wait, head, 3, NULL, 0);
}

size_t gd_check_allreduce(strata_buffer *out, size_t n, size_t count,
                          uint32_t seed)
{
    const uint32_t *v = strata_buffer_data(out);
    size_t bad = 0;

    for (size_t i = 0; i < count; i++) {
        uint32_t want = 0;

        for (size_t r = 0; r < n; r++)
            want += gd_value(seed, (uint32_t)r, (uint32_t)i);
        for (size_t r = 0; r < n; r++) {
            if (v[r * count + i] == want)
                continue;
            if (bad++ == 0)
                print_message("allreduce: rank %zu [%zu] = %u, want %u\n", r, i,
                              v[r * count + i], want);
        }
    }
    return bad;
}

strata_err gd_submit_fill(strata_orch *o, const struct gd_spec *s, uint64_t id,
                          size_t off, size_t count, uint32_t seed)
{
    uint64_t head[4] = {id, off, count, seed};

    return per_node(o, s, gd_o_fill, head, 4, NULL, 0);
}

strata_err gd_submit_read(strata_orch *o, const struct gd_spec *s, uint64_t id,
                          uint32_t rank, size_t off, size_t nbytes,
                          strata_buffer *out)
{
    uint64_t head[4] = {id, rank, off, nbytes};

    return per_node(o, s, gd_o_read, head, 4, out, nbytes);
}

strata_err gd_submit_query(strata_orch *o, const struct gd_spec *s, uint64_t id,
                           strata_buffer *out)
{
    uint64_t head[1] = {id};

    return per_node(o, s, gd_o_query, head, 1, out, sizeof(struct gd_query));
}

/* ---- probes ----------------------------------------------------------------
 */

size_t gd_descendants(pid_t root, pid_t *out, size_t cap)
{
    size_t n = 0;

    testutil_children_of(root, out, &n, cap);
    /* Breadth first: out[] grows while it is walked. */
    for (size_t i = 0; i < n; i++)
        testutil_children_of(out[i], out, &n, cap);
    return n;
}

/* Whether a maps line names a window ("/dev/shm/strata-U-P-dN-rM"). */
static bool window_line(const char *line, unsigned long long *id_out)
{
    const char *p = strstr(line, "/dev/shm/strata-");
    unsigned uid, rank;
    unsigned long long id;
    int pid;

    if (!p || sscanf(p, "/dev/shm/strata-%u-%d-d%llu-r%u", &uid, &pid, &id,
                     &rank) != 4)
        return false;
    *id_out = id;
    return true;
}

static size_t maps_of(pid_t pid, bool any, unsigned long long want)
{
    char path[64], line[512];
    size_t n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    f = fopen(path, "re");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long id;

        if (window_line(line, &id) && (any || id == want))
            n++;
    }
    fclose(f);
    return n;
}

size_t gd_window_maps(pid_t pid)
{
    return maps_of(pid, true, 0);
}

static size_t maps_below(bool any, unsigned long long want)
{
    pid_t pids[1024];
    size_t n = gd_descendants(getpid(), pids, 1024), total = 0;

    for (size_t i = 0; i < n; i++)
        total += maps_of(pids[i], any, want);
    return total;
}

size_t gd_window_maps_below(void)
{
    return maps_below(true, 0);
}

size_t gd_domain_maps_below(uint64_t id)
{
    return maps_below(false, GLOBAL_TAG | id);
}

/* Window segments (and control pages) named for one of pids[0..n), of
 * global domain id only when id is not 0. */
static size_t shm_windows(const pid_t *pids, size_t n, uint64_t id)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    size_t found = 0;

    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL) {
        unsigned long long alloc = 0;
        unsigned uid;
        int pid;
        char kind;

        if (sscanf(e->d_name, "strata-%u-%d-%c%llu", &uid, &pid, &kind,
                   &alloc) < 3 ||
            kind != 'd' || uid != (unsigned)getuid() ||
            (id && alloc != (GLOBAL_TAG | id)))
            continue;
        for (size_t i = 0; i < n; i++) {
            if (pids[i] != pid)
                continue;
            print_message("window segment /dev/shm/%s\n", e->d_name);
            found++;
        }
    }
    closedir(d);
    return found;
}

size_t gd_shm_windows(const pid_t *pids, size_t n)
{
    return shm_windows(pids, n, 0);
}

size_t gd_shm_domain_windows(const pid_t *pids, size_t n, uint64_t id)
{
    return shm_windows(pids, n, id);
}

size_t gd_shm_windows_below(const pid_t *extra, size_t ne)
{
    pid_t pids[1024];
    size_t n = gd_descendants(getpid(), pids, 1024 - 17);

    /* Global domains' lazily mapped windows carry the L4's pid: ours. */
    pids[n++] = getpid();

    for (size_t i = 0; i < ne && i < 16; i++)
        pids[n++] = extra[i];
    return gd_shm_windows(pids, n);
}
