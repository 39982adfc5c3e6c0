/*
 * Helpers shared by the L4 tests (see l4_kit.h).
 */
#include "l4_kit.h"
#include "node_launch.h"

#include <stdlib.h>
#include <unistd.h>

strata_callable l4_k_boom, l4_k_block, l4_k_handshake;
strata_callable l4_o_forward, l4_o_fill, l4_o_scale, l4_o_check;
static strata_callable kernels[L4_K_COUNT];

/* ---- kernels */

static strata_err boom_kernel(strata_chip *chip, const strata_args *a)
{
    if (strata_args_num_tensors(a) > 1) {
        uint32_t *f = it_arg_u32(a, 1);
        if (!testutil_wait_u32(&f[0], 1, IT_WAIT_S)) {
            strata_errmsg_set("boom on chip %d: never told to go",
                              strata_chip_id(chip));
            return STRATA_ETIMEDOUT;
        }
        testutil_store_u32(&f[1], 1);
    }
    strata_errmsg_set("boom from chip %d", strata_chip_id(chip));
    return STRATA_EIO;
}

static strata_err block_kernel(strata_chip *chip, const strata_args *a)
{
    uint32_t *f = it_arg_u32(a, 0);
    if (it_arg_count(a, 0) > 2)
        testutil_store_u32(&f[2], (uint32_t)getpid());
    testutil_store_u32(&f[1], 1);
    if (!testutil_wait_u32(&f[0], 1, IT_WAIT_S)) {
        strata_errmsg_set("block on chip %d: never released",
                          strata_chip_id(chip));
        return STRATA_ETIMEDOUT;
    }
    return STRATA_OK;
}

static strata_err handshake_kernel(strata_chip *chip, const strata_args *a)
{
    uint32_t *f = it_arg_u32(a, 0);
    testutil_store_u32(&f[0], 1);
    if (!testutil_wait_u32(&f[1], 1, IT_WAIT_S)) {
        strata_errmsg_set("handshake on chip %d: never released",
                          strata_chip_id(chip));
        return STRATA_ETIMEDOUT;
    }
    testutil_store_u32(&f[3], testutil_load_u32(&f[2]) * 2 + 1);
    return STRATA_OK;
}

/* ---- node orch callables (run inside an L3 node process) */

/* Appends tensor i of src (the parent's buffer, by identity) to dst with
 * its offset, dtype, shape and tag. */
static strata_err pass_on(strata_args *dst, const strata_args *src, size_t i)
{
    size_t shape[STRATA_MAX_DIMS];
    size_t nd = strata_args_tensor_ndims(src, i);
    strata_buffer *b = strata_args_tensor_buffer(src, i);

    if (!b) {
        strata_errmsg_set("node orch: tensor %zu has no buffer", i);
        return STRATA_EINVAL;
    }
    for (size_t d = 0; d < nd; d++)
        shape[d] = strata_args_tensor_dim(src, i, d);
    return strata_args_add_tensor(dst, b, strata_args_tensor_offset(src, i),
                                  strata_args_tensor_dtype(src, i), nd, shape,
                                  strata_args_tensor_tag(src, i));
}

static strata_err forward_orch(strata_orch *o, const strata_args *args,
                               void *user)
{
    (void)user;
    uint64_t k = strata_args_scalar(args, 0);
    int chip = (int)strata_args_scalar(args, 1);
    strata_args *a = NULL;
    strata_err e;

    if (strata_args_num_scalars(args) < 2 || k >= L4_K_COUNT) {
        strata_errmsg_set("forward: bad kernel index");
        return STRATA_EINVAL;
    }
    it_try(strata_args_create(&a));
    e = STRATA_OK;
    for (size_t i = 0; e == STRATA_OK && i < strata_args_num_tensors(args); i++)
        e = pass_on(a, args, i);
    for (size_t i = 2; e == STRATA_OK && i < strata_args_num_scalars(args); i++)
        e = strata_args_add_scalar(a, strata_args_scalar(args, i));
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, kernels[k], a, chip);
    strata_args_destroy(a);
    return e;
}

/* Submits one u32 slice kernel per chip: tensor j of the node's args,
 * split into equal runs of elements (the last chip takes the rest). */
static strata_err split(strata_orch *o, const strata_args *args,
                        size_t num_tensors, strata_callable k, bool rebase)
{
    size_t chips = strata_worker_num_chips(strata_orch_worker(o));
    size_t n = it_arg_count(args, 0);
    size_t per = chips ? (n + chips - 1) / chips : n;

    for (size_t c = 0; c < chips; c++) {
        size_t lo = c * per, hi = lo + per > n ? n : lo + per;
        strata_args *a = NULL;
        strata_err e = STRATA_OK;

        if (lo >= hi)
            break;
        it_try(strata_args_create(&a));
        for (size_t j = 0; e == STRATA_OK && j < num_tensors; j++)
            e = it_add_u32(a, strata_args_tensor_buffer(args, j),
                           strata_args_tensor_offset(args, j) / 4 + lo, hi - lo,
                           strata_args_tensor_tag(args, j));
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a, strata_args_scalar(args, 0) +
                                              (rebase ? lo : 0));
        if (e == STRATA_OK)
            e = strata_args_add_scalar(a, strata_args_scalar(args, 1));
        if (e == STRATA_OK)
            e = strata_orch_submit_next_level(o, k, a, (int)c);
        strata_args_destroy(a);
        it_try(e);
    }
    return STRATA_OK;
}

static strata_err fill_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)user;
    return split(o, args, 1, it_k_fill, true);
}

static strata_err scale_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)user;
    if (it_arg_count(args, 0) != it_arg_count(args, 1)) {
        strata_errmsg_set("scale: counts differ");
        return STRATA_EINVAL;
    }
    return split(o, args, 2, it_k_scale, false);
}

static strata_err check_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    (void)o;
    (void)user;
    for (size_t i = 0; i < strata_args_num_tensors(args); i++) {
        strata_buffer *b = strata_args_tensor_buffer(args, i);
        size_t size = (size_t)strata_args_scalar(args, 2 * i);
        size_t off = (size_t)strata_args_scalar(args, 2 * i + 1);

        if (!b || strata_buffer_size(b) != size ||
            strata_args_tensor_offset(args, i) != off ||
            (char *)strata_buffer_data(b) + off !=
                (char *)strata_args_tensor_data(args, i)) {
            strata_errmsg_set("check: tensor %zu: buffer %p size %zu offset "
                              "%zu, want size %zu offset %zu",
                              i, (void *)b, strata_buffer_size(b),
                              strata_args_tensor_offset(args, i), size, off);
            return STRATA_EINVAL;
        }
    }
    return STRATA_OK;
}

int l4_kit_register(void)
{
    if (it_kernels_register() != 0)
        return -1;
    it_register(kernel, "l4.boom", boom_kernel, &l4_k_boom);
    it_register(kernel, "l4.block", block_kernel, &l4_k_block);
    it_register(kernel, "l4.handshake", handshake_kernel, &l4_k_handshake);
    it_register(orch, "l4.forward", forward_orch, &l4_o_forward);
    it_register(orch, "l4.fill", fill_orch, &l4_o_fill);
    it_register(orch, "l4.scale", scale_orch, &l4_o_scale);
    it_register(orch, "l4.check", check_orch, &l4_o_check);
    kernels[L4_K_FILL] = it_k_fill;
    kernels[L4_K_SCALE] = it_k_scale;
    kernels[L4_K_WAIT_FLAG] = it_k_wait_flag;
    kernels[L4_K_BOOM] = l4_k_boom;
    kernels[L4_K_BLOCK] = l4_k_block;
    kernels[L4_K_HANDSHAKE] = l4_k_handshake;
    return 0;
}

int l4_setup(void **state)
{
    (void)state;
    return l4_kit_register();
}

/* ---- workers */

static const int chip_ids[L4_MAX_CHIPS] = {0, 1, 2, 3};

strata_err l4_create(size_t num_nodes, size_t chips, double startup_s,
                     strata_worker **out)
{
    strata_worker_config cfg;
    strata_worker *w = NULL, *n = NULL;
    int id;

    if (num_nodes > L4_MAX_NODES || chips > L4_MAX_CHIPS)
        return STRATA_EINVAL;
    strata_worker_config_init(&cfg, 4);
    cfg.startup_timeout_s = startup_s;
    it_try(it_worker_create(&cfg, &w));
    for (size_t i = 0; i < num_nodes; i++) {
        strata_err e;

        strata_worker_config_init(&cfg, 3);
        cfg.chip_ids = chip_ids;
        cfg.num_chips = chips;
        e = strata_worker_create(&cfg, &n);
        if (e == STRATA_OK) {
            e = strata_worker_add_worker(w, n, &id);
            if (e != STRATA_OK) {
                strata_err d = strata_worker_destroy(n);
                (void)d; /* the add error is the one to report */
            } else if (id != (int)i)
                e = STRATA_EINVAL;
        }
        if (e != STRATA_OK) {
            strata_err d = it_worker_destroy(w);
            (void)d;
            return e;
        }
    }
    *out = w;
    return STRATA_OK;
}

strata_err l4_start(size_t num_nodes, size_t chips, strata_worker **out)
{
    strata_worker *w = NULL;

    it_try(l4_create(num_nodes, chips, 30.0, &w));
    strata_err e = strata_worker_init(w);
    if (e != STRATA_OK) {
        char msg[STRATA_ERRMSG_MAX];
        snprintf(msg, sizeof(msg), "%s", strata_errmsg());
        strata_err d = it_worker_destroy(w);
        (void)d;
        strata_errmsg_set("%s", msg);
        return e;
    }
    *out = w;
    return STRATA_OK;
}

/* ---- submitting from an L4 orch fn */

strata_err l4_forward(strata_orch *o, int node, enum l4_kernel_index k,
                      int chip, const struct l4_t *t, size_t nt,
                      const uint64_t *s, size_t ns)
{
    strata_args *a = NULL;
    strata_err e = STRATA_OK;

    it_try(strata_args_create(&a));
    for (size_t i = 0; e == STRATA_OK && i < nt; i++)
        e = it_add_u32(a, t[i].b, t[i].off, t[i].n, t[i].tag);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, (uint64_t)k);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, (uint64_t)chip);
    for (size_t i = 0; e == STRATA_OK && i < ns; i++)
        e = strata_args_add_scalar(a, s[i]);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, l4_o_forward, a, node);
    strata_args_destroy(a);
    return e;
}

strata_err l4_fill(strata_orch *o, int node, strata_buffer *b, size_t off,
                   size_t n, uint32_t base, uint32_t busy_us)
{
    strata_args *a = NULL;
    it_try(it_args1(b, off, n, STRATA_OUT, &a));
    strata_err e = strata_args_add_scalar(a, base);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, busy_us);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, l4_o_fill, a, node);
    strata_args_destroy(a);
    return e;
}

strata_err l4_scale(strata_orch *o, int node, strata_buffer *in, size_t io,
                    strata_buffer *out, size_t oo, size_t n, uint32_t mul,
                    uint32_t add)
{
    strata_args *a = NULL;
    it_try(it_args1(in, io, n, STRATA_IN, &a));
    strata_err e = it_add_u32(a, out, oo, n, STRATA_OUT);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, mul);
    if (e == STRATA_OK)
        e = strata_args_add_scalar(a, add);
    if (e == STRATA_OK)
        e = strata_orch_submit_next_level(o, l4_o_scale, a, node);
    strata_args_destroy(a);
    return e;
}

/* ---- /proc */

size_t l4_children_of(pid_t pid, pid_t *out, size_t cap)
{
    size_t n = 0;

    testutil_children_of(pid, out, &n, cap);
    return n;
}

bool l4_maps_has(pid_t pid, const char *segment)
{
    char path[64], line[1024];
    bool found = false;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, segment) != NULL;
    fclose(f);
    return found;
}

void l4_assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}
