/*
 * Helpers shared by the global domain tests: L4 workers with forked L3
 * nodes and remote L3 nodes behind a real strata-node daemon on
 * 127.0.0.1 (port 0, a fresh mode-600 secret, the port read from its
 * --port-file when inotify reports the rename), domain specs, node tasks
 * (the gd.o.* callables of gd_module.h) and probes that see windows from
 * outside: window mappings in the /proc/<pid>/maps of every process below
 * this one, and window segments in /dev/shm.
 *
 * Window segments are unlinked once every member has mapped them (COMMIT)
 * or given up (ABORT), so a leaked window shows only as a mapping
 * "/dev/shm/strata-<uid>-<node pid>-d<id>-r<rank> (deleted)" in a chip.
 */
#ifndef STRATA_GD_KIT_H
#define STRATA_GD_KIT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <setjmp.h>

#include <cmocka.h>

#include <stdbool.h>
#include <sys/types.h>

#include "gd_module.h"
#include "testutil.h"

#define GD_MAX_MEMBERS 128
#define GD_MAX_NODES 8
#define GD_PATH_MAX 160

/* Node callables, looked up by name (gd_register). */
extern strata_callable gd_o_query, gd_o_fill, gd_o_allreduce, gd_o_read;
extern strata_callable gd_o_sleep, gd_o_wait;

/* Registers the module's callables here (forked nodes inherit them) and
 * looks up gd_o_*. 0 or -1. Call from a group setup. */
int gd_register(void);
/* Group setup: gd_register. */
int gd_setup(void **state);

/* Asserts a strata call returned want, printing the detail message. */
#define gd_expect(want, call)                                                  \
    do {                                                                       \
        strata_err gd_e_ = (call);                                             \
        if (gd_e_ != (want)) {                                                 \
            char gd_m_[STRATA_ERRMSG_MAX];                                     \
            snprintf(gd_m_, sizeof(gd_m_), "%s", strata_errmsg());             \
            fail_msg("%s: got %s, want %s (errmsg: %s)", #call,                \
                     strata_errname(gd_e_), strata_errname(want), gd_m_);      \
        }                                                                      \
    } while (0)
#define gd_ok(call) gd_expect(STRATA_OK, call)

/* Returns from the enclosing strata_err function on failure. */
#define gd_try(call)                                                           \
    do {                                                                       \
        strata_err gd_t_ = (call);                                             \
        if (gd_t_ != STRATA_OK)                                                \
            return gd_t_;                                                      \
    } while (0)

/* Fails the current test unless hay contains needle. */
void gd_assert_contains(const char *hay, const char *needle);

/* ---- the daemon ------------------------------------------------------ */

struct gd_daemon {
    pid_t pid; /* 0 when not running */
    char dir[64];
    char secret[GD_PATH_MAX];
    char log[GD_PATH_MAX];
    char endpoint[80]; /* "host:port" */
};

/* Starts strata-node --listen <host>:0 (host NULL: 127.0.0.1) with the
 * test module and a fresh secret; fault (may be NULL) becomes its
 * STRATA_FAULT, inherited by every chip of its sessions. 0 or -1 (the
 * reason and its log printed). */
int gd_daemon_start(struct gd_daemon *d, const char *host, const char *fault);
/* SIGTERM, reap (SIGKILL after 10 s), remove its files. 0 when it exited
 * with status 0. Idempotent. */
int gd_daemon_stop(struct gd_daemon *d);
/* Its session processes (remote L3 nodes), up to cap. */
size_t gd_daemon_sessions(const struct gd_daemon *d, pid_t *out, size_t cap);
/* Waits until it has no session left (a destroyed L4's session tears its
 * chips down after GOODBYE). */
bool gd_daemon_idle(const struct gd_daemon *d, double timeout_s);

/* ---- L4 workers --------------------------------------------------------- */

/* An L4 (startup deadline 60 s) with `forked` forked L3 nodes of `chips`
 * chips (ids 0..chips-1; node ids 0..forked-1), then one remote node per
 * daemon with rchips chips each (ids forked..), initialized. On failure
 * nothing is left and strata_errmsg has the reason. */
strata_err gd_l4_start(size_t forked, size_t chips,
                       const struct gd_daemon *const *daemons, size_t nremote,
                       size_t rchips, strata_worker **out);
/* Destroys w; fails the test unless the result is STRATA_OK or ok_too. */
void gd_destroy(strata_worker *w, strata_err ok_too);
/* CMocka per-test teardown: destroys the workers a failed test left
 * started (gd_l4_start tracks them until gd_destroy), so later tests
 * start clean. Always 0. */
int gd_teardown(void **state);
#define gd_test(f) cmocka_unit_test_teardown(f, gd_teardown)

/* ---- specs ------------------------------------------------------------- */

struct gd_spec {
    strata_global_domain_spec spec;
    strata_global_member m[GD_MAX_MEMBERS];
    strata_comm_buffer_spec b[8];
    strata_attachment at[16];
};

/* No members, no buffers, no attachments, no retain. */
void gd_spec_init(struct gd_spec *s, const char *name, size_t window_size);
/* Appends member (node, chip): its rank is the number of earlier ones. */
void gd_spec_member(struct gd_spec *s, int node, int chip);
/* Appends chips 0..chips-1 of nodes first..first+nodes-1, node-major. */
void gd_spec_grid(struct gd_spec *s, int first, size_t nodes, size_t chips);
/* Appends buffer name of count dtype elements. */
void gd_spec_buf(struct gd_spec *s, const char *name, strata_dtype dtype,
                 size_t count);

/* ---- node tasks ---------------------------------------------------------- */

/* Submits node callable c to node with scalars s[0..ns) and, when b is
 * not NULL, one tensor of nbytes at byte offset off of b (u8, tag). */
strata_err gd_node_task(strata_orch *o, int node, strata_callable c,
                        strata_buffer *b, size_t off, size_t nbytes,
                        strata_tag tag, const uint64_t *s, size_t ns);

/* The node tasks below write one slice of out per member, at the member's
 * slot: members grouped by node (nodes in order of first appearance),
 * in rank order within a node. The slot is the rank when every node's
 * ranks are contiguous (gd_spec_grid). */
size_t gd_slot_of(const struct gd_spec *s, size_t rank);

/* gd.o.allreduce on every node of s, count u32 per member. Data at window
 * offset 0, the flag word at gd_flag_off(count); round k (1, 2, ...) of
 * the same domain waits for k * rank_count. */
strata_err gd_submit_allreduce(strata_orch *o, const struct gd_spec *s,
                               uint64_t id, strata_buffer *out, size_t count,
                               uint32_t seed, uint32_t round);
static inline size_t gd_flag_off(size_t count)
{
    return (count * 4 + 63) / 64 * 64;
}
/* gd.o.wait on every node of s: each member waits with no timeout for
 * its flag word at flag_off (files under tag: gd_lost_path). */
strata_err gd_submit_wait(strata_orch *o, const struct gd_spec *s, uint64_t id,
                          size_t flag_off, uint64_t tag);
/* Number of wrong words in out (n slots of count), the first printed. */
size_t gd_check_allreduce(strata_buffer *out, size_t n, size_t count,
                          uint32_t seed);
/* gd.o.fill on every node of s: rank r's window [off, off + 4 count) =
 * gd_value(seed, r, i). */
strata_err gd_submit_fill(strata_orch *o, const struct gd_spec *s, uint64_t id,
                          size_t off, size_t count, uint32_t seed);
/* gd.o.read on every node of s: each member reads rank (GD_OWN: its
 * own)'s window [off, off + nbytes) into its slot of out. */
strata_err gd_submit_read(strata_orch *o, const struct gd_spec *s, uint64_t id,
                          uint32_t rank, size_t off, size_t nbytes,
                          strata_buffer *out);
/* gd.o.query on every node of s into out (a struct gd_query per slot). */
strata_err gd_submit_query(strata_orch *o, const struct gd_spec *s, uint64_t id,
                           strata_buffer *out);

/* ---- probes ----------------------------------------------------------------
 */

/* Every process below root (children, grandchildren, ...), up to cap. */
size_t gd_descendants(pid_t root, pid_t *out, size_t cap);
/* Window mappings in process pid (live or deleted segments). */
size_t gd_window_maps(pid_t pid);
/* Window mappings in every process below this one. */
size_t gd_window_maps_below(void);
/* The same, of global domain id only. */
size_t gd_domain_maps_below(uint64_t id);
/* /dev/shm window segments whose name carries one of pids[0..n). */
size_t gd_shm_windows(const pid_t *pids, size_t n);
/* The same, of global domain id only. */
size_t gd_shm_domain_windows(const pid_t *pids, size_t n, uint64_t id);
/* Every /dev/shm window segment named for a process below this one or
 * for one of extra[0..ne) (a node that died). */
size_t gd_shm_windows_below(const pid_t *extra, size_t ne);

#endif /* STRATA_GD_KIT_H */
