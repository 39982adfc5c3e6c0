/*
 * The callables of vector_add_mixed_l3, built twice from this one file:
 *
 * - into the example program, for its forked L3 node (a forked child
 *   inherits the parent's registry), and
 * - as libvector_add_mixed_l3_kernels.so, the module the example's
 *   strata-node loads with --module. The daemon runs only callables its
 *   modules registered; the network carries their names, never code.
 *
 * examples/mpirun_vector_add builds the same two from this file, its
 * module loaded by every MPI rank (strata-rank) instead.
 *
 * The module is built without linking libstrata: the strata_* functions it
 * calls resolve from the process that loads it (strata-node, strata-rank).
 *
 *   kernel "vadd.add":  c = a + b on one chip; records who ran it.
 *   orch   "vadd.node": a node's share, split over the node's chips.
 */
#include <time.h>
#include <unistd.h>

#include <strata/strata.h>

#include "kernels.h"

static strata_callable add_kernel_c;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t f32_count(const strata_args *args, size_t i)
{
    if (strata_args_tensor_dtype(args, i) != STRATA_F32)
        return 0;
    return strata_args_tensor_nbytes(args, i) / sizeof(float);
}

/* Tensors: a (IN), b (IN), c (OUT), one struct vadd_who (NO_DEP). */
static strata_err add_kernel(strata_chip *chip, const strata_args *args)
{
    uint64_t start = now_ns();
    size_t n = f32_count(args, 2);
    const float *a = strata_args_tensor_data(args, 0);
    const float *b = strata_args_tensor_data(args, 1);
    float *c = strata_args_tensor_data(args, 2);
    struct vadd_who *who = strata_args_tensor_data(args, 3);

    if (strata_args_num_tensors(args) != 4 || n == 0 ||
        f32_count(args, 0) != n || f32_count(args, 1) != n ||
        strata_args_tensor_nbytes(args, 3) != sizeof(*who)) {
        strata_errmsg_set("vadd.add: expected a, b, c (float32, equal "
                          "length) and one vadd_who record");
        return STRATA_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        c[i] = a[i] + b[i];
    who->pid = (int64_t)getpid();
    who->chip = strata_chip_id(chip);
    who->elements = (int64_t)n;
    who->ns = (int64_t)(now_ns() - start);
    return STRATA_OK;
}

/* Appends tensor i of args, narrowed to [first, first + count) elements,
 * passed on by buffer identity (on a remote node: the node's copy). */
static strata_err pass_on(strata_args *to, const strata_args *from, size_t i,
                          size_t first, size_t count)
{
    size_t elem = strata_dtype_size(strata_args_tensor_dtype(from, i));
    const size_t shape[1] = {count};

    return strata_args_add_tensor(to, strata_args_tensor_buffer(from, i),
                                  strata_args_tensor_offset(from, i) +
                                      first * elem,
                                  strata_args_tensor_dtype(from, i), 1, shape,
                                  strata_args_tensor_tag(from, i));
}

/* A node's share. Tensors: a (IN), b (IN), c (OUT), who (NO_DEP, one
 * struct vadd_who per chip). One vadd.add per chip (ids 0..n-1), each on
 * a contiguous slice. */
static strata_err node_orch(strata_orch *o, const strata_args *args, void *user)
{
    size_t chips = strata_worker_num_chips(strata_orch_worker(o));
    size_t n = f32_count(args, 2);
    strata_args *k = NULL;
    strata_err err;

    (void)user;
    if (chips == 0 || strata_args_num_tensors(args) != 4 ||
        strata_args_tensor_nbytes(args, 3) != chips * sizeof(struct vadd_who)) {
        strata_errmsg_set("vadd.node: expected a, b, c and one vadd_who per "
                          "chip (%zu chips)",
                          chips);
        return STRATA_EINVAL;
    }
    err = strata_args_create(&k);
    for (size_t chip = 0; chip < chips && err == STRATA_OK; chip++) {
        size_t first = n * chip / chips, last = n * (chip + 1) / chips;

        strata_args_clear(k);
        err = pass_on(k, args, 0, first, last - first);
        if (err == STRATA_OK)
            err = pass_on(k, args, 1, first, last - first);
        if (err == STRATA_OK)
            err = pass_on(k, args, 2, first, last - first);
        if (err == STRATA_OK)
            err = pass_on(k, args, 3, chip * sizeof(struct vadd_who),
                          sizeof(struct vadd_who));
        if (err == STRATA_OK)
            err = strata_orch_submit_next_level(o, add_kernel_c, k, (int)chip);
    }
    strata_args_destroy(k);
    return err;
}

strata_err strata_module_init(void)
{
    strata_callable node;
    strata_err err =
        strata_register_kernel(VADD_KERNEL, add_kernel, &add_kernel_c);

    if (err == STRATA_OK)
        err = strata_register_orch(VADD_NODE_ORCH, node_orch, &node);
    return err;
}
