/* libFuzzer target: a node's side of global domain commands (gnode_handle
 * in domain/global/gnode.c): COMM_INIT, DOMAIN_CMD PREPARE_EXPORT / IMPORT /
 * COMMIT / ABORT and the WINDOW_WRITE / WINDOW_READ controls, as a
 * session hands them over, on one L3 sim worker with two chips started
 * once for the whole run.
 *
 * An input is a sequence of records (fuzz_records.h); each framed or raw
 * record is one command frame. For each:
 * - a frame that decodes to a node command must get a reply of the right
 *   type and request id, which decodes; anything else must be refused;
 * - an IMPORT (or COMMIT) descriptor whose handle is "=" gets the handle
 *   (and mapping size) this node exported for that rank at the input's
 *   PREPARE_EXPORT, or for another node's rank the name that node would
 *   make: an input cannot know them (names hold pids), and imports can
 *   work;
 * - COMM_INIT's cluster id names windows by the L4's pid (its high 32
 *   bits): the harness puts its own pid there, so no input can name (or
 *   unlink) another process's windows.
 * After the input every domain still here is aborted; then no chip may have
 * died, no view may remain and no name of this process may be left in
 * /dev/shm.
 *
 * FUZZ_WRITE_SEEDS=DIR writes the seed corpus to DIR and exits. */
#include "fuzz_domain_seeds.h"
#include "fuzz_module.h"
#include "fuzz_records.h"
#include "gview.h"
#include "orch/control.h"
#include "sim/sim.h"
#include "worker_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__asan_default_options(void);

#define NCHIPS 2
#define MAX_WINDOW (1u << 20)
#define MAX_EXPORTS 16

const char *__asan_default_options(void)
{
    return "abort_on_error=1";
}

static strata_worker *w;
static bool trace; /* FUZZ_TRACE=1: each reply on stderr */

/* Reports what went wrong and aborts: libFuzzer keeps the input. */
#define die(...)                                                               \
    do {                                                                       \
        fprintf(stderr, "fuzz_gnode: ");                                       \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        abort();                                                               \
    } while (0)

/* What the input's PREPARE_EXPORTs exported: rank -> handle. */
struct exported {
    uint64_t domain_id;
    uint32_t rank;
    uint64_t mapping_size;
    char handle[WIRE_NAME_MAX + 1];
};
static struct exported exports[MAX_EXPORTS];
static size_t num_exports;

static void remember(const struct wire_domain_reply *r)
{
    for (size_t i = 0; i < r->num_descriptors && num_exports < MAX_EXPORTS;
         i++) {
        struct exported *e = &exports[num_exports++];

        e->domain_id = r->domain_id;
        e->rank = r->descriptors[i].domain_rank;
        e->mapping_size = r->descriptors[i].mapping_size;
        snprintf(e->handle, sizeof(e->handle), "%s", r->descriptors[i].handle);
    }
}

static const struct exported *exported(uint64_t domain_id, uint32_t rank)
{
    for (size_t i = 0; i < num_exports; i++)
        if (exports[i].domain_id == domain_id && exports[i].rank == rank)
            return &exports[i];
    return NULL;
}

/* The harness's rewrites of a decoded command (see the top); true if m
 * changed and must be packed again. False in *ok: not to be sent. */
static bool rewrite(struct wire_msg *m, struct wire_descriptor *descs, bool *ok)
{
    static char names[16][WIRE_NAME_MAX + 1];

    *ok = true;
    if (m->type == WIRE_MSG_COMM_INIT) {
        uint64_t mine = (uint64_t)(uint32_t)getpid() << 32;

        m->u.comm_init.cluster_id =
            mine | (m->u.comm_init.cluster_id & 0xffffffffu);
        return true;
    }
    if (m->type != WIRE_MSG_DOMAIN_CMD)
        return false;
    if (m->u.domain_cmd.window_size > MAX_WINDOW ||
        m->u.domain_cmd.num_members > 16) {
        *ok = false;
        return false;
    }
    if (m->u.domain_cmd.num_descriptors == 0 ||
        m->u.domain_cmd.num_descriptors > 16)
        return false;
    for (size_t i = 0; i < m->u.domain_cmd.num_descriptors; i++) {
        const struct wire_descriptor *d = &m->u.domain_cmd.descriptors[i];
        const struct exported *e =
            exported(m->u.domain_cmd.domain_id, d->domain_rank);

        descs[i] = *d;
        if (strcmp(d->handle, "=") != 0)
            continue;
        if (e) {
            descs[i].handle = e->handle;
            descs[i].mapping_size = e->mapping_size;
        } else if (d->domain_rank < 16) {
            /* Another node's member: the name its node would make. */
            struct chip_window_req q =
                gwin_req(w->gd.cluster_id, m->u.domain_cmd.domain_id,
                         d->domain_rank, (uint32_t)m->u.domain_cmd.num_members,
                         m->u.domain_cmd.window_size);

            sim_window_name(names[d->domain_rank], sizeof(names[0]),
                            q.creator_pid, q.alloc_id, q.rank, q.name_token);
            descs[i].handle = names[d->domain_rank];
        }
    }
    m->u.domain_cmd.descriptors = descs;
    return true;
}

static bool node_command(unsigned type)
{
    return type == WIRE_MSG_COMM_INIT || type == WIRE_MSG_DOMAIN_CMD ||
           type == WIRE_MSG_CONTROL;
}

/* Several frames as one command (gnode_handle_batch, how a forked node
 * takes a transaction sent at once), each rewritten as handle() does:
 * refused whole, or one reply per frame, each decoding. */
static void handle_batch(const uint8_t *frames, size_t len, uint32_t count)
{
    static const uint8_t none[1];
    struct wire_descriptor descs[16];
    struct wire_buf cmd, reply;
    const uint8_t *p = frames ? frames : none; /* empty records only */
    size_t left = len;
    uint32_t got = 0;
    strata_err err;

    wire_buf_init(&cmd);
    wire_buf_init(&reply);
    for (uint32_t k = 0; k < count; k++) {
        struct wire_frame_header h;
        struct wire_msg m;
        size_t n = left;
        bool ok = true, packed = false;

        if (wire_frame_header_unpack(p, left, &h) == STRATA_OK &&
            WIRE_FRAME_HEADER_SIZE + (size_t)h.body_len <= left)
            n = WIRE_FRAME_HEADER_SIZE + (size_t)h.body_len;
        if (wire_frame_unpack(p, n, &m) == STRATA_OK) {
            if (rewrite(&m, descs, &ok) && ok)
                packed = wire_msg_pack(&m, &cmd) == STRATA_OK;
            wire_msg_free(&m);
            if (!ok)
                goto out; /* no command an L4 could send */
        }
        if (!packed && wire_buf_append(&cmd, p, n) != STRATA_OK)
            die("%s", "out of memory");
        p += n;
        left -= n;
    }
    err = gnode_handle_batch(w, cmd.data, cmd.len, count, &reply);
    for (size_t at = 0; err == STRATA_OK && at < reply.len; got++) {
        struct wire_frame_header h;
        struct wire_msg r;

        if (wire_frame_header_unpack(reply.data + at, reply.len - at, &h) !=
                STRATA_OK ||
            wire_frame_unpack(reply.data + at,
                              WIRE_FRAME_HEADER_SIZE + (size_t)h.body_len,
                              &r) != STRATA_OK)
            die("reply %u of a batch does not decode: %s", got + 1,
                strata_errmsg());
        if (trace && r.type == WIRE_MSG_DOMAIN_REPLY)
            fprintf(stderr, "fuzz_gnode: batch %s -> %s: %s\n",
                    wire_phase_name(r.u.domain_reply.phase),
                    strata_strerror(r.u.domain_reply.error),
                    r.u.domain_reply.message);
        if (r.type == WIRE_MSG_DOMAIN_REPLY && !r.u.domain_reply.error &&
            r.u.domain_reply.phase == WIRE_PHASE_PREPARE_EXPORT)
            remember(&r.u.domain_reply);
        wire_msg_free(&r);
        at += WIRE_FRAME_HEADER_SIZE + (size_t)h.body_len;
    }
    if (err == STRATA_OK && got != count)
        die("a batch of %u commands got %u replies", count, got);
out:
    wire_buf_fini(&cmd);
    wire_buf_fini(&reply);
}

/* One command frame through gnode_handle, and its reply checked. */
static void handle(const uint8_t *frame, size_t len)
{
    struct wire_descriptor descs[16];
    struct wire_buf packed, reply;
    struct wire_msg m, r;
    bool ok = true;
    strata_err err;

    wire_buf_init(&packed);
    wire_buf_init(&reply);
    if (wire_frame_unpack(frame, len, &m) == STRATA_OK) {
        if (rewrite(&m, descs, &ok) && ok) {
            /* Real sizes in place of the input's can break the command's
             * own consistency (every rank maps the same size): then it is
             * no command an L4 could send, and is skipped. */
            ok = wire_msg_pack(&m, &packed) == STRATA_OK;
            frame = packed.data;
            len = packed.len;
        }
        if (!ok) {
            wire_msg_free(&m);
            wire_buf_fini(&packed);
            return;
        }
    } else {
        m.type = 0;
    }
    err = gnode_handle(w, frame, len, &reply);
    if (!node_command(m.type)) {
        if (err == STRATA_OK)
            die("%s", "gnode_handle answered what is no node command");
        goto out;
    }
    if (err != STRATA_OK)
        die("no reply to a node command: %s", strata_errmsg());
    if (wire_frame_unpack(reply.data, reply.len, &r) != STRATA_OK)
        die("the reply does not decode: %s", strata_errmsg());
    if (trace)
        fprintf(stderr, "fuzz_gnode: %s -> %s: %s\n", wire_msg_name(m.type),
                strata_strerror(r.type == WIRE_MSG_DOMAIN_REPLY
                                    ? r.u.domain_reply.error
                                    : r.u.control_reply.error),
                r.type == WIRE_MSG_DOMAIN_REPLY ? r.u.domain_reply.message
                                                : r.u.control_reply.message);
    if (m.type == WIRE_MSG_DOMAIN_CMD) {
        if (r.type != WIRE_MSG_DOMAIN_REPLY ||
            r.u.domain_reply.request_id != m.u.domain_cmd.request_id ||
            r.u.domain_reply.phase != m.u.domain_cmd.phase)
            die("%s", "DOMAIN_CMD answered with the wrong reply");
        if (r.u.domain_reply.error && r.u.domain_reply.num_descriptors)
            die("%s", "a failed DOMAIN_CMD returned descriptors");
        if (!r.u.domain_reply.error &&
            m.u.domain_cmd.phase == WIRE_PHASE_PREPARE_EXPORT)
            remember(&r.u.domain_reply);
    } else {
        uint64_t id = m.type == WIRE_MSG_COMM_INIT ? m.u.comm_init.request_id
                                                   : m.u.control.request_id;

        if (r.type != WIRE_MSG_CONTROL_REPLY ||
            r.u.control_reply.request_id != id)
            die("%s", "a command answered with the wrong reply");
        if (m.type == WIRE_MSG_CONTROL &&
            m.u.control.op == WIRE_CTRL_WINDOW_READ &&
            !r.u.control_reply.error &&
            r.u.control_reply.results.data_len != m.u.control.operands.nbytes)
            die("%s", "WINDOW_READ returned the wrong number of bytes");
    }
    wire_msg_free(&r);
out:
    if (m.type)
        wire_msg_free(&m);
    wire_buf_fini(&packed);
    wire_buf_fini(&reply);
}

/* ---- after each input ------------------------------------------------ */

static void abort_all(void)
{
    struct wire_domain_member one = {(uint32_t)w->gd.node_id, 0, 0, 0};
    struct wire_msg m = {.type = WIRE_MSG_DOMAIN_CMD};
    struct wire_domain_cmd *c = &m.u.domain_cmd;
    uint64_t ids[64], gens[64];
    size_t n = 0;

    if (w->gd.node_id < 0)
        one.node_worker_id = 0;
    pthread_mutex_lock(&w->gd.gv_mu);
    for (struct strata_global_view *v = w->gd.gviews; v && n < 64;
         v = v->next) {
        if (v->state == VIEW_GONE)
            continue;
        ids[n] = v->domain_id;
        gens[n++] = v->generation;
    }
    pthread_mutex_unlock(&w->gd.gv_mu);
    c->version = WIRE_DOMAIN_CMD_VERSION;
    c->phase = WIRE_PHASE_ABORT;
    c->window_size = 1;
    c->name = "cleanup";
    c->profile = "sim";
    c->members = &one;
    c->num_members = 1;
    for (size_t i = 0; i < n; i++) {
        struct wire_buf b, reply;
        struct wire_msg r;

        wire_buf_init(&b);
        wire_buf_init(&reply);
        c->request_id = 1 + i;
        c->domain_id = ids[i];
        c->generation = gens[i];
        if (wire_msg_pack(&m, &b) != STRATA_OK ||
            gnode_handle(w, b.data, b.len, &reply) != STRATA_OK ||
            wire_frame_unpack(reply.data, reply.len, &r) != STRATA_OK)
            die("cannot abort a domain: %s", strata_errmsg());
        if (r.u.domain_reply.error)
            fprintf(stderr, "fuzz_gnode: ABORT: %s\n",
                    r.u.domain_reply.message);
        wire_msg_free(&r);
        wire_buf_fini(&b);
        wire_buf_fini(&reply);
    }
}

/* gjournal_remove zeroes a record; any other byte is a live one. */
static int journal_is_empty(const char *path)
{
    unsigned char buf[512];
    ssize_t got;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int empty = 1;

    if (fd < 0)
        return 1;
    while (empty && (got = read(fd, buf, sizeof(buf))) > 0)
        for (ssize_t k = 0; k < got; k++)
            if (buf[k])
                empty = 0;
    close(fd);
    return empty;
}

static void check_clean(void)
{
    char prefix[64];
    DIR *d;
    struct dirent *e;
    int left = 0;

    for (int i = 0; i < NCHIPS; i++)
        if (orch_chip_check(w->sched, i) != STRATA_OK)
            die("a chip died: %s", strata_errmsg());
    pthread_mutex_lock(&w->gd.gv_mu);
    for (struct strata_global_view *v = w->gd.gviews; v; v = v->next)
        if (v->state != VIEW_GONE)
            die("%s", "a domain is still here after ABORT");
    pthread_mutex_unlock(&w->gd.gv_mu);
    snprintf(prefix, sizeof(prefix), "strata-%u-%d-", (unsigned)getuid(),
             (int)getpid());
    d = opendir("/dev/shm");
    while (d && (e = readdir(d))) {
        char path[300];

        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
        /* The node's journal of global domains lives as long as the
         * node; what it must not hold after ABORT is a live record. */
        if (strcmp(e->d_name + strlen(prefix), "gdoms") == 0) {
            if (!journal_is_empty(path)) {
                fprintf(stderr, "fuzz_gnode: %s holds a live record\n",
                        e->d_name);
                left++;
            }
            continue;
        }
        fprintf(stderr, "fuzz_gnode: left in /dev/shm: %s\n", e->d_name);
        unlink(path);
        left++;
    }
    if (d)
        closedir(d);
    if (left)
        die("%s", "names left in /dev/shm after every domain was aborted");
}

/* ---- the target ------------------------------------------------------ */

static void destroy_worker(void)
{
    if (w && strata_worker_destroy(w) != STRATA_OK)
        fprintf(stderr, "fuzz_gnode: destroy: %s\n", strata_errmsg());
    w = NULL;
}

static void write_seeds(const char *dir);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const int ids[NCHIPS] = {0, 1};
    struct fuzz_callables calls;
    strata_worker_config cfg;
    const char *seeds = getenv("FUZZ_WRITE_SEEDS");

    (void)argc;
    (void)argv;
    setenv("STRATA_LOG", "error", 0);
    trace = getenv("FUZZ_TRACE") && strcmp(getenv("FUZZ_TRACE"), "1") == 0;
    if (seeds) {
        write_seeds(seeds);
        exit(0);
    }
    if (fuzz_module_register(&calls) != 0)
        exit(1);
    strata_worker_config_init(&cfg, 3);
    cfg.chip_ids = ids;
    cfg.num_chips = NCHIPS;
    if (strata_worker_create(&cfg, &w) != STRATA_OK ||
        strata_worker_init(w) != STRATA_OK) {
        fprintf(stderr, "fuzz_gnode: cannot start the worker: %s\n",
                strata_errmsg());
        exit(1);
    }
    atexit(destroy_worker);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_record r;
    struct wire_buf frame, batch;
    uint32_t nbatch = 0;

    /* Each input starts as a node before its COMM_INIT. */
    w->gd.node_id = -1;
    w->gd.cluster_id = 0;
    num_exports = 0;
    wire_buf_init(&frame);
    wire_buf_init(&batch);
    while (fuzz_record_next(&data, &size, &r)) {
        wire_buf_reset(&frame);
        if (r.type) {
            struct wire_frame_header h = {WIRE_FRAME_VERSION, (uint8_t)r.type,
                                          0, (uint32_t)r.len};

            if (wire_buf_reserve(&frame, WIRE_FRAME_HEADER_SIZE) != STRATA_OK)
                die("%s", "out of memory");
            wire_frame_header_pack(&h, frame.data);
            frame.len = WIRE_FRAME_HEADER_SIZE;
        }
        if (wire_buf_append(&frame, r.payload, r.len) != STRATA_OK)
            die("%s", "out of memory");
        if (!r.batch && !nbatch) {
            handle(frame.data, frame.len);
            continue;
        }
        if (wire_buf_append(&batch, frame.data, frame.len) != STRATA_OK)
            die("%s", "out of memory");
        nbatch++;
        if (!r.batch) {
            handle_batch(batch.data, batch.len, nbatch);
            wire_buf_reset(&batch);
            nbatch = 0;
        }
    }
    if (nbatch)
        handle_batch(batch.data, batch.len, nbatch);
    wire_buf_fini(&frame);
    wire_buf_fini(&batch);
    abort_all();
    check_clean();
    return 0;
}

/* ---- seeds ----------------------------------------------------------- */

static void write_seeds(const char *dir)
{
    struct fuzz_seed sd;

    wire_buf_init(&sd.b);

    fuzz_seed_comm_init(&sd, 0, 1, 0);
    fuzz_seed_write(&sd, dir, "comm_init");

    /* A whole domain on this node: prepare, import, commit, window
     * bytes both ways, abort. */
    fuzz_seed_comm_init(&sd, 0, 1, 0);
    fuzz_seed_domain_cmd(&sd, 1, WIRE_PHASE_PREPARE_EXPORT, 1, 1, false, 0);
    fuzz_seed_domain_cmd(&sd, 2, WIRE_PHASE_IMPORT, 1, 1, false, 0);
    fuzz_seed_domain_cmd(&sd, 3, WIRE_PHASE_COMMIT, 1, 1, false, 0);
    fuzz_seed_window(&sd, 4, WIRE_CTRL_WINDOW_WRITE, 1, 1, 128, 256, 0);
    fuzz_seed_window(&sd, 5, WIRE_CTRL_WINDOW_READ, 1, 1, 0, 512, 0);
    fuzz_seed_window(&sd, 6, WIRE_CTRL_WINDOW_READ, 1, 0, 4000, 96, 0);
    fuzz_seed_domain_cmd(&sd, 7, WIRE_PHASE_ABORT, 1, 1, false, 0);
    fuzz_seed_write(&sd, dir, "domain_lifecycle");

    /* Two nodes: only the local members are prepared here; the peer's
     * window is never made. */
    fuzz_seed_comm_init(&sd, 0, 2, 0);
    fuzz_seed_domain_cmd(&sd, 1, WIRE_PHASE_PREPARE_EXPORT, 2, 1, true, 0);
    fuzz_seed_domain_cmd(&sd, 2, WIRE_PHASE_IMPORT, 2, 1, true, 0);
    fuzz_seed_domain_cmd(&sd, 3, WIRE_PHASE_COMMIT, 2, 1, true, 0);
    fuzz_seed_domain_cmd(&sd, 4, WIRE_PHASE_ABORT, 2, 1, true, 0);
    fuzz_seed_write(&sd, dir, "two_nodes");

    /* Out of order: before COMM_INIT, COMMIT before IMPORT, another
     * generation, PREPARE twice, a window of no domain. */
    fuzz_seed_domain_cmd(&sd, 1, WIRE_PHASE_PREPARE_EXPORT, 3, 1, false, 0);
    fuzz_seed_comm_init(&sd, 0, 1, 0);
    fuzz_seed_domain_cmd(&sd, 2, WIRE_PHASE_PREPARE_EXPORT, 3, 1, false, 0);
    fuzz_seed_domain_cmd(&sd, 3, WIRE_PHASE_COMMIT, 3, 1, false, 0);
    fuzz_seed_domain_cmd(&sd, 4, WIRE_PHASE_IMPORT, 3, 2, false, 0);
    fuzz_seed_domain_cmd(&sd, 5, WIRE_PHASE_PREPARE_EXPORT, 3, 1, false, 0);
    fuzz_seed_window(&sd, 6, WIRE_CTRL_WINDOW_READ, 9, 0, 0, 8, 0);
    fuzz_seed_domain_cmd(&sd, 7, WIRE_PHASE_ABORT, 3, 1, false, 0);
    fuzz_seed_domain_cmd(&sd, 8, WIRE_PHASE_ABORT, 3, 1, false, 0);
    fuzz_seed_write(&sd, dir, "out_of_order");

    /* The L4's whole transaction at once (gdomain_batch.c), then the
     * same domain's ABORT; then a batch whose IMPORT comes first. */
    fuzz_seed_comm_init(&sd, 0, 1, 0);
    fuzz_seed_domain_cmd(&sd, 1, WIRE_PHASE_PREPARE_EXPORT, 5, 1, false,
                         FUZZ_OP_BATCH);
    fuzz_seed_domain_cmd(&sd, 2, WIRE_PHASE_IMPORT, 5, 1, false, FUZZ_OP_BATCH);
    fuzz_seed_domain_cmd(&sd, 3, WIRE_PHASE_COMMIT, 5, 1, false, 0);
    fuzz_seed_domain_cmd(&sd, 4, WIRE_PHASE_ABORT, 5, 1, false, 0);
    fuzz_seed_domain_cmd(&sd, 5, WIRE_PHASE_IMPORT, 6, 1, true, FUZZ_OP_BATCH);
    fuzz_seed_domain_cmd(&sd, 6, WIRE_PHASE_PREPARE_EXPORT, 6, 1, true,
                         FUZZ_OP_BATCH);
    fuzz_seed_domain_cmd(&sd, 7, WIRE_PHASE_COMMIT, 6, 1, true, 0);
    fuzz_seed_write(&sd, dir, "batch");

    /* A window copy of a prepared domain before it is imported. */
    fuzz_seed_comm_init(&sd, 0, 1, 0);
    fuzz_seed_domain_cmd(&sd, 1, WIRE_PHASE_PREPARE_EXPORT, 4, 1, false, 0);
    fuzz_seed_window(&sd, 2, WIRE_CTRL_WINDOW_WRITE, 4, 0, 0, 64, 0);
    fuzz_seed_write(&sd, dir, "window_before_import");

    wire_buf_fini(&sd.b);
    printf("fuzz_gnode: seeds written to %s\n", dir);
}
