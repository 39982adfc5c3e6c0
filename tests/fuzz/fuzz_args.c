/* libFuzzer target: wire_args_decode, the task argument encoding a node
 * and a chip decode from their parent's frames (docs/wire.md, TASK). What
 * decodes must be consistent (every tensor inside its buffer, nbytes the
 * product of its shape), encode back to the very same bytes, and be a
 * list the public builder (strata_args_add_tensor) accepts as well, with
 * the same tensors: the decoder accepts nothing the builder refuses.
 *
 * FUZZ_WRITE_SEEDS=DIR writes the seed corpus to DIR and exits. */
#include "fuzz_common.h"
#include "fuzz_records.h"
#include "wire/args.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

static strata_args a, again, built;

static void check_built(const strata_args *d)
{
    strata_args_clear(&built);
    for (uint32_t i = 0; i < d->num_tensors; i++) {
        const struct wire_tensor *t = &d->tensors[i];
        struct strata_buffer b;
        size_t shape[STRATA_MAX_DIMS];

        memset(&b, 0, sizeof(b));
        b.id = t->buffer_id;
        b.size = (size_t)t->buffer_size;
        b.creator = t->creator;
        b.device = t->flags & WIRE_TENSOR_DEVICE;
        for (unsigned k = 0; k < t->ndims; k++)
            shape[k] = (size_t)t->shape[k];
        fuzz_check(strata_args_add_tensor(
                       &built, &b, (size_t)t->offset, (strata_dtype)t->dtype,
                       t->ndims, shape, (strata_tag)t->tag) == STRATA_OK,
                   "the builder takes a decoded tensor");
        fuzz_check(built.tensors[i].nbytes == t->nbytes &&
                       built.tensors[i].offset == t->offset &&
                       built.tensors[i].buffer_size == t->buffer_size &&
                       built.tensors[i].dtype == t->dtype &&
                       built.tensors[i].tag == t->tag &&
                       built.tensors[i].flags == t->flags,
                   "the builder makes the same tensor");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t enc[WIRE_ARGS_MAX];
    size_t n;

    if (wire_args_decode(data, size, &a) != STRATA_OK)
        return 0;
    fuzz_check(a.num_tensors <= STRATA_MAX_TENSORS &&
                   a.num_scalars <= STRATA_MAX_SCALARS,
               "counts within their limits");
    for (uint32_t i = 0; i < a.num_tensors; i++) {
        const struct wire_tensor *t = &a.tensors[i];

        fuzz_check(t->offset <= t->buffer_size &&
                       t->nbytes <= t->buffer_size - t->offset,
                   "a decoded tensor lies inside its buffer");
        fuzz_check(a.data[i] == NULL && a.buffers[i] == NULL,
                   "a decoded tensor points nowhere");
        fuzz_check(wire_tensor_check(t, i) == STRATA_OK,
                   "a decoded tensor passes the tensor check");
    }
    fuzz_check(wire_args_encoded_size(&a) == size, "encoded size");
    n = wire_args_encode(&a, enc, sizeof(enc));
    fuzz_check(n == size && memcmp(enc, data, size) == 0,
               "encoding gives back the input");
    fuzz_check(wire_args_decode(enc, n, &again) == STRATA_OK,
               "the encoding decodes");
    check_built(&a);
    return 0;
}

/* ---- seeds ------------------------------------------------------------- */

static void seed(const char *dir, const char *name, const strata_args *x)
{
    struct fuzz_seed s;
    uint8_t buf[WIRE_ARGS_MAX];
    size_t n = wire_args_encode(x, buf, sizeof(buf));

    wire_buf_init(&s.b);
    if (wire_buf_append(&s.b, buf, n) != STRATA_OK)
        fuzz_seed_die("out of memory");
    fuzz_seed_write(&s, dir, name);
    wire_buf_fini(&s.b);
}

static void add(strata_args *x, uint64_t id, size_t size, size_t off,
                strata_dtype dt, size_t nd, const size_t *shape, strata_tag tag)
{
    struct strata_buffer b;

    memset(&b, 0, sizeof(b));
    b.id = id;
    b.size = size;
    b.creator = 4242;
    if (strata_args_add_tensor(x, &b, off, dt, nd, shape, tag) != STRATA_OK)
        fuzz_seed_die("add tensor");
}

static void write_seeds(const char *dir)
{
    static const size_t s1[1] = {64}, s2[2] = {8, 16}, s0[2] = {0, 5},
                        s5[STRATA_MAX_DIMS] = {1, 2, 1, 2, 3};

    strata_args_clear(&a);
    seed(dir, "empty", &a);
    add(&a, 1, 4096, 0, STRATA_U8, 1, s1, STRATA_IN);
    seed(dir, "one_u8", &a);
    add(&a, 2, 4096, 512, STRATA_F32, 2, s2, STRATA_OUT);
    add(&a, 3, 16, 0, STRATA_I64, 2, s0, STRATA_INOUT);
    if (strata_args_add_scalar(&a, 7) || strata_args_add_scalar(&a, 1u << 31))
        fuzz_seed_die("add scalar");
    seed(dir, "three_scalars", &a);
    strata_args_clear(&a);
    add(&a, 9, 1u << 20, 1u << 19, STRATA_BF16, STRATA_MAX_DIMS, s5,
        STRATA_NO_DEP);
    seed(dir, "max_dims", &a);
    printf("fuzz_args: seeds written to %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *dir = getenv("FUZZ_WRITE_SEEDS");

    (void)argc;
    (void)argv;
    if (dir) {
        write_seeds(dir);
        exit(0);
    }
    return 0;
}
