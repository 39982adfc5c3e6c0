/* Building, encoding and decoding task argument lists. */
#include "wire/args.h"
#include "base/alloc.h"
#include "base/err.h"

#include <string.h>

size_t strata_dtype_size(strata_dtype dtype)
{
    switch (dtype) {
    case STRATA_U8:
    case STRATA_I8:
    case STRATA_BOOL:
        return 1;
    case STRATA_U16:
    case STRATA_I16:
    case STRATA_F16:
    case STRATA_BF16:
        return 2;
    case STRATA_U32:
    case STRATA_I32:
    case STRATA_F32:
        return 4;
    case STRATA_U64:
    case STRATA_I64:
    case STRATA_F64:
        return 8;
    }
    return 0;
}

strata_err strata_args_create(strata_args **out)
{
    strata_args *a;

    if (!out)
        return base_fail_null("strata_args_create", "out");
    base_alloc_lock_hooks();
    a = base_malloc(sizeof(*a));
    if (!a)
        return base_fail(STRATA_ENOMEM, "strata_args_create: out of memory");
    a->num_tensors = 0;
    a->num_scalars = 0;
    *out = a;
    return STRATA_OK;
}

void strata_args_destroy(strata_args *a)
{
    base_free(a);
}

void strata_args_clear(strata_args *a)
{
    if (a) {
        a->num_tensors = 0;
        a->num_scalars = 0;
    }
}

static bool tag_valid(unsigned tag)
{
    return tag >= STRATA_IN && tag <= STRATA_NO_DEP;
}

strata_err wire_tensor_check(const struct wire_tensor *t, size_t i)
{
    size_t esize = strata_dtype_size((strata_dtype)t->dtype);
    uint64_t n = esize;

    if (!esize)
        return base_fail(STRATA_EINVAL, "tensor %zu: unknown dtype %u", i,
                         t->dtype);
    if (!tag_valid(t->tag))
        return base_fail(STRATA_EINVAL, "tensor %zu: unknown tag %u", i,
                         t->tag);
    if (t->ndims < 1 || t->ndims > STRATA_MAX_DIMS)
        return base_fail(STRATA_EINVAL, "tensor %zu: ndims %u outside 1..%d", i,
                         t->ndims, STRATA_MAX_DIMS);
    for (unsigned d = 0; d < t->ndims; d++) {
        if (t->shape[d] && n > UINT64_MAX / t->shape[d])
            return base_fail(STRATA_EINVAL, "tensor %zu: shape overflows", i);
        n *= t->shape[d];
    }
    if (n != t->nbytes)
        return base_fail(
            STRATA_EINVAL, "tensor %zu: nbytes %llu != shape x dtype size %llu",
            i, (unsigned long long)t->nbytes, (unsigned long long)n);
    if (t->offset > t->buffer_size || t->nbytes > t->buffer_size - t->offset)
        return base_fail(STRATA_EINVAL,
                         "tensor %zu: bytes [%llu, %llu) outside its buffer "
                         "of %llu bytes",
                         i, (unsigned long long)t->offset,
                         (unsigned long long)(t->offset + t->nbytes),
                         (unsigned long long)t->buffer_size);
    return STRATA_OK;
}

strata_err strata_args_add_tensor(strata_args *a, strata_buffer *buf,
                                  size_t byte_offset, strata_dtype dtype,
                                  size_t ndims, const size_t *shape,
                                  strata_tag tag)
{
    struct wire_tensor t;
    strata_err err;

    if (!a || !buf || !shape)
        return base_fail_null("strata_args_add_tensor", !a     ? "a"
                                                        : !buf ? "buf"
                                                               : "shape");
    if (a->num_tensors == STRATA_MAX_TENSORS)
        return base_fail(STRATA_ENOMEM,
                         "strata_args_add_tensor: more than %d tensors",
                         STRATA_MAX_TENSORS);
    if (ndims < 1 || ndims > STRATA_MAX_DIMS)
        return base_fail(STRATA_EINVAL, "tensor %u: ndims %zu outside 1..%d",
                         a->num_tensors, ndims, STRATA_MAX_DIMS);
    /* Checked before they narrow to a byte on the wire, so the message
     * names the value given. */
    if ((unsigned)dtype > 0xff || !strata_dtype_size(dtype))
        return base_fail(STRATA_EINVAL, "tensor %u: unknown dtype %d",
                         a->num_tensors, (int)dtype);
    if (!tag_valid((unsigned)tag))
        return base_fail(STRATA_EINVAL, "tensor %u: unknown tag %d",
                         a->num_tensors, (int)tag);
    memset(&t, 0, sizeof(t));
    t.buffer_id = buf->id;
    t.creator = buf->creator;
    t.buffer_size = buf->size;
    t.offset = byte_offset;
    t.dtype = (uint8_t)dtype;
    t.ndims = (uint8_t)ndims;
    t.tag = (uint8_t)tag;
    t.flags = buf->device ? WIRE_TENSOR_DEVICE : 0;
    t.nbytes = strata_dtype_size(dtype);
    for (size_t d = 0; d < ndims; d++) {
        t.shape[d] = shape[d];
        if (shape[d] && t.nbytes > UINT64_MAX / shape[d])
            return base_fail(STRATA_EINVAL, "tensor %u: shape overflows",
                             a->num_tensors);
        t.nbytes *= shape[d];
    }
    err = wire_tensor_check(&t, a->num_tensors);
    if (err)
        return err;
    a->tensors[a->num_tensors] = t;
    a->buffers[a->num_tensors] = buf;
    /* A remote buffer has no bytes here. */
    a->data[a->num_tensors] =
        buf->data ? (char *)buf->data + byte_offset : NULL;
    a->num_tensors++;
    return STRATA_OK;
}

strata_err strata_args_add_scalar(strata_args *a, uint64_t value)
{
    if (!a)
        return base_fail_null("strata_args_add_scalar", "a");
    if (a->num_scalars == STRATA_MAX_SCALARS)
        return base_fail(STRATA_ENOMEM,
                         "strata_args_add_scalar: more than %d scalars",
                         STRATA_MAX_SCALARS);
    a->scalars[a->num_scalars++] = value;
    return STRATA_OK;
}

size_t strata_args_num_tensors(const strata_args *a)
{
    return a ? a->num_tensors : 0;
}

void *strata_args_tensor_data(const strata_args *a, size_t i)
{
    return a && i < a->num_tensors ? a->data[i] : NULL;
}

size_t strata_args_tensor_nbytes(const strata_args *a, size_t i)
{
    return a && i < a->num_tensors ? (size_t)a->tensors[i].nbytes : 0;
}

strata_dtype strata_args_tensor_dtype(const strata_args *a, size_t i)
{
    return a && i < a->num_tensors ? (strata_dtype)a->tensors[i].dtype
                                   : (strata_dtype)0;
}

size_t strata_args_tensor_ndims(const strata_args *a, size_t i)
{
    return a && i < a->num_tensors ? a->tensors[i].ndims : 0;
}

size_t strata_args_tensor_dim(const strata_args *a, size_t i, size_t d)
{
    if (!a || i >= a->num_tensors || d >= a->tensors[i].ndims)
        return 0;
    return (size_t)a->tensors[i].shape[d];
}

strata_tag strata_args_tensor_tag(const strata_args *a, size_t i)
{
    return a && i < a->num_tensors ? (strata_tag)a->tensors[i].tag
                                   : (strata_tag)0;
}

strata_buffer *strata_args_tensor_buffer(const strata_args *a, size_t i)
{
    return a && i < a->num_tensors ? a->buffers[i] : NULL;
}

size_t strata_args_tensor_offset(const strata_args *a, size_t i)
{
    return a && i < a->num_tensors ? (size_t)a->tensors[i].offset : 0;
}

size_t strata_args_num_scalars(const strata_args *a)
{
    return a ? a->num_scalars : 0;
}

uint64_t strata_args_scalar(const strata_args *a, size_t i)
{
    return a && i < a->num_scalars ? a->scalars[i] : 0;
}

size_t wire_args_encoded_size(const strata_args *a)
{
    return sizeof(struct wire_args_header) +
           a->num_tensors * sizeof(struct wire_tensor) +
           a->num_scalars * sizeof(uint64_t);
}

size_t wire_args_encode(const strata_args *a, void *dst, size_t cap)
{
    struct wire_args_header h = {a->num_tensors, a->num_scalars};
    size_t tn = a->num_tensors * sizeof(struct wire_tensor);
    size_t sn = a->num_scalars * sizeof(uint64_t);
    char *p = dst;

    if (cap < sizeof(h) + tn + sn)
        return 0;
    memcpy(p, &h, sizeof(h));
    memcpy(p + sizeof(h), a->tensors, tn);
    memcpy(p + sizeof(h) + tn, a->scalars, sn);
    return sizeof(h) + tn + sn;
}

strata_err wire_args_decode(const void *src, size_t len, strata_args *out)
{
    struct wire_args_header h;
    const char *p = src;
    size_t need;
    strata_err err;

    if (len < sizeof(h))
        return base_fail(STRATA_EPROTO,
                         "args: %zu bytes, shorter than the "
                         "header",
                         len);
    memcpy(&h, p, sizeof(h));
    if (h.num_tensors > STRATA_MAX_TENSORS)
        return base_fail(STRATA_EPROTO, "args: num_tensors %u > %d",
                         h.num_tensors, STRATA_MAX_TENSORS);
    if (h.num_scalars > STRATA_MAX_SCALARS)
        return base_fail(STRATA_EPROTO, "args: num_scalars %u > %d",
                         h.num_scalars, STRATA_MAX_SCALARS);
    need = sizeof(h) + h.num_tensors * sizeof(struct wire_tensor) +
           h.num_scalars * sizeof(uint64_t);
    if (len != need)
        return base_fail(STRATA_EPROTO, "args: length %zu, expected %zu", len,
                         need);
    out->num_tensors = h.num_tensors;
    out->num_scalars = h.num_scalars;
    memcpy(out->tensors, p + sizeof(h),
           h.num_tensors * sizeof(struct wire_tensor));
    memcpy(out->scalars,
           p + sizeof(h) + h.num_tensors * sizeof(struct wire_tensor),
           h.num_scalars * sizeof(uint64_t));
    for (uint32_t i = 0; i < h.num_tensors; i++) {
        const struct wire_tensor *t = &out->tensors[i];

        err = wire_tensor_check(t, i);
        if (err) {
            base_errmsg_prefix("args");
            return STRATA_EPROTO;
        }
        if (t->flags & ~WIRE_TENSOR_DEVICE)
            return base_fail(STRATA_EPROTO,
                             "args: tensor %u has unknown flags 0x%x", i,
                             t->flags);
        if (t->creator <= 0)
            return base_fail(STRATA_EPROTO,
                             "args: tensor %u has no creator pid", i);
        out->buffers[i] = NULL;
        out->data[i] = NULL;
    }
    return STRATA_OK;
}
