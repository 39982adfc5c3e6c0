/*
 * Validation of a global domain spec: every malformed spec is refused with
 * STRATA_EINVAL and a message naming the problem, before any command
 * leaves the L4. "Nothing sent" is checked where it shows: no process
 * below the test maps a window, no window segment exists, the handle is
 * not written, and the same worker then allocates a good domain whose
 * allreduce is right.
 */
#define _GNU_SOURCE
#include "gd_kit.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define COUNT 64

/* One bad spec: what to break, and a word the message must contain. */
struct bad {
    const char *what;
    void (*make)(struct gd_spec *s);
    const char *needle;
};

/* A good 4-rank spec over nodes 0 and 1 (2 chips each). */
static void good(struct gd_spec *s)
{
    gd_spec_init(s, "good", 8192);
    gd_spec_grid(s, 0, 2, 2);
    gd_spec_buf(s, "vec", STRATA_U32, COUNT);
    gd_spec_buf(s, "flag", STRATA_U32, 1);
}

static void no_name(struct gd_spec *s)
{
    s->spec.name = NULL;
}
static void empty_name(struct gd_spec *s)
{
    s->spec.name = "";
}
static void long_name(struct gd_spec *s)
{
    static char name[STRATA_DOMAIN_NAME_MAX + 1];

    memset(name, 'n', STRATA_DOMAIN_NAME_MAX);
    s->spec.name = name; /* one byte over: the limit counts the NUL */
}
static void no_members(struct gd_spec *s)
{
    s->spec.num_members = 0;
}
static void null_members(struct gd_spec *s)
{
    s->spec.members = NULL;
}
static void duplicate_member(struct gd_spec *s)
{
    s->m[3] = s->m[1];
}
static void unknown_node(struct gd_spec *s)
{
    s->m[2].node_worker_id = 7;
}
static void negative_node(struct gd_spec *s)
{
    s->m[0].node_worker_id = -1;
}
static void missing_chip(struct gd_spec *s)
{
    s->m[3].local_chip = 5;
}
static void negative_chip(struct gd_spec *s)
{
    s->m[1].local_chip = -1;
}
static void members_past_chips(struct gd_spec *s)
{
    /* More than all nodes' chips: refused before any entry past the
     * array is read (a read would fault or find garbage). */
    s->spec.num_members = 1000000;
}
static void attachments_past_pairs(struct gd_spec *s)
{
    s->spec.attachments = s->at;
    s->spec.num_attachments = 1000000;
}
static void window_zero(struct gd_spec *s)
{
    s->spec.window_size = 0;
}
static void window_huge(struct gd_spec *s)
{
    s->spec.window_size = SIZE_MAX; /* rounds up past the address space */
}
static void windows_over_64tib(struct gd_spec *s)
{
    s->spec.window_size = (1ull << 46) / s->spec.num_members + 1;
}
static void buffers_null(struct gd_spec *s)
{
    s->spec.buffers = NULL;
}
static void buffer_no_name(struct gd_spec *s)
{
    s->b[1].name = NULL;
}
static void buffer_empty_name(struct gd_spec *s)
{
    s->b[0].name = "";
}
static void buffer_twice(struct gd_spec *s)
{
    s->b[1].name = "vec";
}
static void buffer_size_mismatch(struct gd_spec *s)
{
    s->b[0].nbytes = COUNT * 4 + 1;
}
static void buffer_bad_dtype(struct gd_spec *s)
{
    s->b[1].dtype = (strata_dtype)99;
}
static void buffer_zero_bytes(struct gd_spec *s)
{
    s->b[1].count = 0;
    s->b[1].nbytes = 0;
}
static void buffers_too_big(struct gd_spec *s)
{
    s->spec.window_size = COUNT * 4; /* the flag no longer fits */
}
static void buffers_overflow(struct gd_spec *s)
{
    /* Each fine alone; their total wraps around SIZE_MAX. */
    s->b[0].dtype = s->b[1].dtype = STRATA_U8;
    s->b[0].count = s->b[0].nbytes = SIZE_MAX / 2 + 1;
    s->b[1].count = s->b[1].nbytes = SIZE_MAX / 2 + 1;
}

/* One attachment, otherwise valid, then broken by the caller. */
static strata_attachment *attach(struct gd_spec *s)
{
    strata_attachment *a = &s->at[s->spec.num_attachments++];

    a->receiving_node = 0;
    a->member_rank = 2;
    a->address_space = STRATA_SPACE_HOST;
    a->role = STRATA_ROLE_CONSUMER;
    a->adapter = STRATA_ADAPTER_NONE;
    a->adapter_profile = NULL;
    return a;
}
static void at_unknown_node(struct gd_spec *s)
{
    attach(s)->receiving_node = 9;
}
static void at_node_without_member(struct gd_spec *s)
{
    /* Node 2 exists but owns no member of this domain. */
    attach(s)->receiving_node = 2;
}
static void at_rank_out_of_range(struct gd_spec *s)
{
    attach(s)->member_rank = 4;
}
static void at_space_zero(struct gd_spec *s)
{
    attach(s)->address_space = 0;
}
static void at_space_unknown(struct gd_spec *s)
{
    attach(s)->address_space = 3;
}
static void at_role_zero(struct gd_spec *s)
{
    attach(s)->role = 0;
}
static void at_role_unknown(struct gd_spec *s)
{
    attach(s)->role = 77;
}
static void at_adapter_unknown(struct gd_spec *s)
{
    attach(s)->adapter = 6;
}
static void at_adapter_without_profile(struct gd_spec *s)
{
    attach(s)->adapter = STRATA_ADAPTER_DIRECT_MAP;
}
static void at_adapter_empty_profile(struct gd_spec *s)
{
    strata_attachment *a = attach(s);

    a->adapter = STRATA_ADAPTER_COLLECTIVE;
    a->adapter_profile = "";
}
static void at_none_with_profile(struct gd_spec *s)
{
    attach(s)->adapter_profile = "sim";
}
static void at_twice(struct gd_spec *s)
{
    attach(s);
    attach(s)->address_space = STRATA_SPACE_DEVICE;
}
static void at_second_bad(struct gd_spec *s)
{
    attach(s);
    attach(s)->role = 3; /* the first is fine, the second is not */
}

static const struct bad bads[] = {
    {"no name", no_name, "name"},
    {"empty name", empty_name, "name"},
    {"64-byte name", long_name, "name"},
    {"no members", no_members, "no members"},
    {"members NULL", null_members, "no members"},
    {"duplicate member", duplicate_member, "both chip 1 of node 0"},
    {"unknown node", unknown_node, "node 7"},
    {"negative node", negative_node, "node -1"},
    {"chip missing on its node", missing_chip, "no chip 5"},
    {"negative chip", negative_chip, "no chip -1"},
    {"num_members past every chip", members_past_chips,
     "num_members 1000000 is more than the"},
    {"num_attachments past every pair", attachments_past_pairs,
     "num_attachments 1000000 is more than"},
    {"window_size 0", window_zero, "window_size is 0"},
    {"window_size SIZE_MAX", window_huge, "a member can map"},
    {"windows over 64 TiB", windows_over_64tib, "a member can map"},
    {"buffers NULL", buffers_null, "buffers"},
    {"buffer without a name", buffer_no_name, "name"},
    {"buffer with an empty name", buffer_empty_name, "name"},
    {"buffer name twice", buffer_twice, "'vec' twice"},
    {"count x size != nbytes", buffer_size_mismatch, "nbytes"},
    {"unknown dtype", buffer_bad_dtype, "dtype"},
    {"empty buffer", buffer_zero_bytes, "flag"},
    {"buffers over the window", buffers_too_big, "window_size"},
    {"buffers whose total overflows", buffers_overflow, "overflow"},
    {"attachment: unknown receiving node", at_unknown_node, "receiving_node"},
    {"attachment: receiving node owns no member", at_node_without_member,
     "receiving_node 2"},
    {"attachment: member_rank out of range", at_rank_out_of_range,
     "member_rank 4"},
    {"attachment: address_space 0", at_space_zero, "address_space"},
    {"attachment: address_space 3", at_space_unknown, "address_space"},
    {"attachment: role 0", at_role_zero, "role"},
    {"attachment: role 77", at_role_unknown, "role"},
    {"attachment: adapter 6", at_adapter_unknown, "adapter"},
    {"attachment: adapter without profile", at_adapter_without_profile,
     "profile"},
    {"attachment: adapter with an empty profile", at_adapter_empty_profile,
     "profile"},
    {"attachment: NONE with a profile", at_none_with_profile, "profile"},
    {"attachment: the second of two is bad", at_second_bad, "attachments[1]"},
    {"attachment: one entry twice", at_twice,
     "attachments[0] and [1] both describe member 2 on node 0"},
};
#define NUM_BAD (sizeof(bads) / sizeof(bads[0]))

struct result {
    strata_err err;
    char msg[STRATA_ERRMSG_MAX];
    bool out_written;
    size_t maps, shm;
};

struct job {
    const struct bad *cases;
    size_t n;
    struct result res[NUM_BAD + 4];
    strata_buffer *out;
    uint64_t good_id;
    size_t good_maps;
};

static void record(struct result *r, strata_err e,
                   const strata_global_domain *g)
{
    r->err = e;
    snprintf(r->msg, sizeof(r->msg), "%s", strata_errmsg());
    r->out_written = g != (const strata_global_domain *)(uintptr_t)0x1;
    r->maps = gd_window_maps_below();
    r->shm = gd_shm_windows_below(NULL, 0);
}

/* Every bad spec, then a good one with an allreduce. */
static strata_err bad_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct job *j = user;
    struct gd_spec s;
    strata_global_domain *g;

    (void)args;
    for (size_t i = 0; i < j->n; i++) {
        good(&s);
        j->cases[i].make(&s);
        g = (strata_global_domain *)(uintptr_t)0x1;
        record(&j->res[i], strata_orch_allocate_global_domain(o, &s.spec, &g),
               g);
    }
    good(&s);
    gd_try(strata_orch_allocate_global_domain(o, &s.spec, &g));
    j->good_id = strata_global_domain_id(g);
    gd_try(strata_orch_scope_begin(o));
    gd_try(gd_submit_allreduce(o, &s, j->good_id, j->out, COUNT, 3, 1));
    gd_try(strata_orch_scope_end(o));
    j->good_maps = gd_domain_maps_below(j->good_id);
    return strata_global_domain_release(g);
}

static void check_results(const struct job *j)
{
    for (size_t i = 0; i < j->n; i++) {
        const struct result *r = &j->res[i];

        if (r->err != STRATA_EINVAL)
            fail_msg("%s: %s, want STRATA_EINVAL (%s)", j->cases[i].what,
                     strata_errname(r->err), r->msg);
        if (!strstr(r->msg, j->cases[i].needle))
            fail_msg("%s: message \"%s\" does not name \"%s\"",
                     j->cases[i].what, r->msg, j->cases[i].needle);
        if (r->out_written)
            fail_msg("%s: the handle was written on failure", j->cases[i].what);
        if (r->maps || r->shm)
            fail_msg("%s: %zu window mappings and %zu segments after a "
                     "refused spec",
                     j->cases[i].what, r->maps, r->shm);
    }
}

static void test_gd_validate_bad_spec_einval(void **state)
{
    (void)state;
    testutil_snapshot before;
    static struct job j;
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&j, 0, sizeof(j));
    j.cases = bads;
    j.n = NUM_BAD;
    /* Three nodes: node 2 exists but is never a member. */
    gd_ok(gd_l4_start(3, 2, NULL, 0, 0, &w));
    gd_ok(strata_worker_create_buffer(w, 4 * COUNT * 4, &j.out));
    gd_ok(strata_worker_run(w, bad_orch, NULL, &j));
    check_results(&j);
    assert_int_equal(j.good_maps, 16); /* 4 members x 4 windows */
    assert_int_equal(gd_check_allreduce(j.out, 4, COUNT, 3), 0);
    assert_int_equal(gd_window_maps_below(), 0);
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

/* ---- NULL arguments and the wrong level */

struct nulls {
    strata_err null_spec, null_out, null_orch;
    strata_err null_attachments;
    char msg[STRATA_ERRMSG_MAX];
    size_t maps;
};

static strata_err nulls_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    struct nulls *n = user;
    struct gd_spec s;
    strata_global_domain *g = NULL;

    (void)args;
    good(&s);
    n->null_spec = strata_orch_allocate_global_domain(o, NULL, &g);
    n->null_out = strata_orch_allocate_global_domain(o, &s.spec, NULL);
    n->null_orch = strata_orch_allocate_global_domain(NULL, &s.spec, &g);
    n->maps = gd_window_maps_below();
    return STRATA_OK;
}

static void test_gd_validate_null_arguments_einval(void **state)
{
    (void)state;
    testutil_snapshot before;
    struct nulls n;
    strata_worker *w = NULL;

    testutil_snapshot_take(&before);
    memset(&n, 0, sizeof(n));
    gd_ok(gd_l4_start(2, 2, NULL, 0, 0, &w));
    gd_ok(strata_worker_run(w, nulls_orch, NULL, &n));
    assert_int_equal(n.null_spec, STRATA_EINVAL);
    assert_int_equal(n.null_out, STRATA_EINVAL);
    assert_int_equal(n.null_orch, STRATA_EINVAL);
    assert_int_equal(n.maps, 0);
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

/* num_attachments > 0 with attachments NULL: refused like a NULL members
 * or buffers array, not dereferenced. Runs in a child process so that a
 * crash fails this test only. */
static strata_err null_attach_orch(strata_orch *o, const strata_args *args,
                                   void *user)
{
    struct gd_spec s;
    strata_global_domain *g = NULL;

    (void)args;
    good(&s);
    s.spec.attachments = NULL;
    s.spec.num_attachments = 1;
    *(strata_err *)user = strata_orch_allocate_global_domain(o, &s.spec, &g);
    return STRATA_OK;
}

static int null_attach_child(void *arg)
{
    strata_worker *w = NULL;
    strata_err got = STRATA_OK;

    (void)arg;
    /* CMocka's handlers would resume the test runner in this child. */
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    signal(SIGILL, SIG_DFL);
    signal(SIGFPE, SIG_DFL);
    signal(SIGABRT, SIG_DFL);
    if (gd_l4_start(2, 2, NULL, 0, 0, &w) != STRATA_OK)
        return 10;
    if (strata_worker_run(w, null_attach_orch, NULL, &got) != STRATA_OK)
        return 11;
    if (strata_worker_destroy(w) != STRATA_OK)
        return 12;
    return got == STRATA_EINVAL ? 0 : 13;
}

static void test_gd_validate_null_attachments_einval(void **state)
{
    (void)state;
    testutil_snapshot before;
    int status;

    testutil_snapshot_take(&before);
    status = testutil_run_in_child(null_attach_child, NULL);
    if (WIFSIGNALED(status))
        fail_msg("num_attachments 1 with attachments NULL: the L4 died of "
                 "signal %d (want STRATA_EINVAL)",
                 WTERMSIG(status));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("num_attachments 1 with attachments NULL: child status "
                 "0x%x (13: not STRATA_EINVAL)",
                 status);
    testutil_assert_clean(&before);
}

/* A level-3 worker has no nodes: a global domain is refused there. */
static strata_err l3_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct gd_spec s;
    strata_global_domain *g = NULL;
    struct nulls *n = user;

    (void)args;
    good(&s);
    n->null_spec = strata_orch_allocate_global_domain(o, &s.spec, &g);
    snprintf(n->msg, sizeof(n->msg), "%s", strata_errmsg());
    return STRATA_OK;
}

static void test_gd_validate_level3_worker_einval(void **state)
{
    (void)state;
    testutil_snapshot before;
    static const int ids[2] = {0, 1};
    strata_worker_config cfg;
    strata_worker *w = NULL;
    struct nulls n;

    testutil_snapshot_take(&before);
    memset(&n, 0, sizeof(n));
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = 2;
    gd_ok(strata_worker_create(&cfg, &w));
    gd_ok(strata_worker_init(w));
    gd_ok(strata_worker_run(w, l3_orch, NULL, &n));
    assert_int_equal(n.null_spec, STRATA_EINVAL);
    gd_assert_contains(n.msg, "level-4");
    gd_destroy(w, STRATA_OK);
    testutil_assert_clean(&before);
}

/* ---- the sim profile needs one host */

/* A non-loopback IPv4 address of this machine, or false. */
static bool own_address(char *buf, size_t cap)
{
    struct ifaddrs *list, *i;
    bool found = false;

    if (getifaddrs(&list) != 0)
        return false;
    for (i = list; i && !found; i = i->ifa_next) {
        const struct sockaddr_in *a = (const void *)i->ifa_addr;

        if (!a || a->sin_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
            !(i->ifa_flags & IFF_UP))
            continue;
        found = inet_ntop(AF_INET, &a->sin_addr, buf, (socklen_t)cap) != NULL;
    }
    freeifaddrs(list);
    return found;
}

struct far {
    strata_err err;
    char msg[STRATA_ERRMSG_MAX];
    size_t maps;
};

static strata_err far_orch(strata_orch *o, const strata_args *args, void *user)
{
    struct far *f = user;
    struct gd_spec s;
    strata_global_domain *g = NULL;

    (void)args;
    good(&s); /* node 1 is the remote one */
    f->err = strata_orch_allocate_global_domain(o, &s.spec, &g);
    snprintf(f->msg, sizeof(f->msg), "%s", strata_errmsg());
    f->maps = gd_window_maps_below();
    return STRATA_OK;
}

/* One domain over a forked node and a daemon; addr NULL: loopback. host_id
 * set: the daemon reports that host ("NAME/BOOT", testing builds). */
static void across(const char *addr, const char *host_id, struct far *f)
{
    testutil_snapshot before;
    struct gd_daemon d;
    const struct gd_daemon *ds[1] = {&d};
    strata_worker *w = NULL;

    if (host_id)
        setenv("STRATA_TEST_HOST_ID", host_id, 1);
    assert_int_equal(gd_daemon_start(&d, addr, NULL), 0);
    unsetenv("STRATA_TEST_HOST_ID");
    testutil_snapshot_take(&before);
    memset(f, 0, sizeof(*f));
    gd_ok(gd_l4_start(1, 2, ds, 1, 2, &w));
    gd_ok(strata_worker_run(w, far_orch, NULL, f));
    gd_destroy(w, STRATA_OK);
    assert_true(gd_daemon_idle(&d, 10.0));
    testutil_assert_clean_within(&before, 5.0);
    assert_int_equal(gd_daemon_stop(&d), 0);
}

/* A daemon that reports another host (boot id and name): refused before
 * anything is mapped, naming both hosts. */
static void test_gd_validate_sim_across_hosts_einval(void **state)
{
    struct far f;
    char me[256] = "";

    (void)state;
    assert_int_equal(gethostname(me, sizeof(me) - 1), 0);
    across(NULL, "strata-other-host/00000000-0000-4000-8000-000000000007", &f);
    assert_int_equal(f.err, STRATA_EINVAL);
    gd_assert_contains(f.msg, "one host");
    gd_assert_contains(f.msg, "node 1 is on host strata-other-host");
    gd_assert_contains(f.msg, "00000000-0000-4000-8000-000000000007");
    gd_assert_contains(f.msg, me);
    assert_int_equal(f.maps, 0);
}

/* A daemon on this host reached at a non-loopback address is on this host:
 * the host is judged by boot id and name, not by address. */
static void test_gd_validate_sim_same_host_other_address_ok(void **state)
{
    struct far f;
    char addr[64];

    (void)state;
    if (!own_address(addr, sizeof(addr))) {
        print_message("no non-loopback IPv4 address here: skipped\n");
        skip();
    }
    across(addr, NULL, &f);
    if (f.err)
        print_error("allocate: %s\n", f.msg);
    assert_int_equal(f.err, STRATA_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        gd_test(test_gd_validate_bad_spec_einval),
        gd_test(test_gd_validate_null_arguments_einval),
        gd_test(test_gd_validate_null_attachments_einval),
        gd_test(test_gd_validate_level3_worker_einval),
        gd_test(test_gd_validate_sim_across_hosts_einval),
        gd_test(test_gd_validate_sim_same_host_other_address_ok),
    };

    return cmocka_run_group_tests(tests, gd_setup, NULL);
}
