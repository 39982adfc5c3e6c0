/* Argument lists: validation, encoding, strict decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "wire/args.h"

#include <stdlib.h>
#include <string.h>

static strata_buffer fake(uint64_t id, size_t size)
{
    static char storage[1 << 16];
    strata_buffer b;

    memset(&b, 0, sizeof(b));
    b.id = id;
    b.size = size;
    b.data = storage;
    b.creator = 1;
    return b;
}

static void test_args_add_tensor_validates_input(void **state)
{
    strata_buffer b = fake(1, 64);
    size_t shape[2] = {4, 2};
    size_t big[1] = {17};
    strata_args *a;

    (void)state;
    assert_int_equal(strata_args_create(&a), STRATA_OK);
    assert_int_equal(
        strata_args_add_tensor(a, &b, 0, STRATA_F32, 2, shape, STRATA_IN),
        STRATA_OK);
    assert_int_equal(strata_args_tensor_nbytes(a, 0), 32);
    assert_ptr_equal(strata_args_tensor_data(a, 0), b.data);
    assert_int_equal(
        strata_args_add_tensor(a, &b, 0, STRATA_F32, 1, big, STRATA_IN),
        STRATA_EINVAL);
    assert_non_null(strstr(strata_errmsg(), "outside its buffer"));
    assert_int_equal(
        strata_args_add_tensor(a, &b, 40, STRATA_F32, 2, shape, STRATA_IN),
        STRATA_EINVAL);
    assert_int_equal(
        strata_args_add_tensor(a, &b, 0, (strata_dtype)99, 1, shape, STRATA_IN),
        STRATA_EINVAL);
    assert_string_equal(strata_errmsg(), "tensor 1: unknown dtype 99");
    /* A value past a byte is named as given, not as it would narrow. */
    assert_int_equal(strata_args_add_tensor(a, &b, 0, (strata_dtype)267, 1,
                                            shape, STRATA_IN),
                     STRATA_EINVAL);
    assert_string_equal(strata_errmsg(), "tensor 1: unknown dtype 267");
    assert_int_equal(
        strata_args_add_tensor(a, &b, 0, STRATA_F32, 1, shape, (strata_tag)0),
        STRATA_EINVAL);
    assert_string_equal(strata_errmsg(), "tensor 1: unknown tag 0");
    assert_int_equal(
        strata_args_add_tensor(a, &b, 0, STRATA_F32, 1, shape, (strata_tag)258),
        STRATA_EINVAL);
    assert_string_equal(strata_errmsg(), "tensor 1: unknown tag 258");
    assert_int_equal(
        strata_args_add_tensor(a, &b, 0, STRATA_F32, 0, shape, STRATA_IN),
        STRATA_EINVAL);
    assert_int_equal(
        strata_args_add_tensor(a, &b, 0, STRATA_F32, 6, shape, STRATA_IN),
        STRATA_EINVAL);
    assert_int_equal(strata_args_num_tensors(a), 1);
    strata_args_destroy(a);
}

static void test_args_limits_enforced(void **state)
{
    strata_buffer b = fake(1, 64);
    size_t one[1] = {1};
    strata_args *a;

    (void)state;
    assert_int_equal(strata_args_create(&a), STRATA_OK);
    for (int i = 0; i < STRATA_MAX_TENSORS; i++)
        assert_int_equal(
            strata_args_add_tensor(a, &b, 0, STRATA_U8, 1, one, STRATA_IN),
            STRATA_OK);
    assert_int_equal(
        strata_args_add_tensor(a, &b, 0, STRATA_U8, 1, one, STRATA_IN),
        STRATA_ENOMEM);
    for (int i = 0; i < STRATA_MAX_SCALARS; i++)
        assert_int_equal(strata_args_add_scalar(a, (uint64_t)i), STRATA_OK);
    assert_int_equal(strata_args_add_scalar(a, 1), STRATA_ENOMEM);
    /* The largest legal list fits a frame exactly. */
    assert_int_equal(wire_args_encoded_size(a), WIRE_ARGS_MAX);
    strata_args_destroy(a);
}

static void test_args_round_trip_preserves_everything(void **state)
{
    strata_buffer b = fake(7, 4096);
    size_t shape[3] = {2, 3, 4};
    static uint8_t blob[WIRE_ARGS_MAX];
    strata_args *a;
    strata_args *d;
    size_t n;

    (void)state;
    assert_int_equal(strata_args_create(&a), STRATA_OK);
    assert_int_equal(strata_args_create(&d), STRATA_OK);
    assert_int_equal(
        strata_args_add_tensor(a, &b, 8, STRATA_F64, 3, shape, STRATA_INOUT),
        STRATA_OK);
    assert_int_equal(strata_args_add_scalar(a, UINT64_MAX), STRATA_OK);
    assert_int_equal(strata_args_add_scalar(a, 42), STRATA_OK);
    n = wire_args_encode(a, blob, sizeof(blob));
    assert_int_equal(n, wire_args_encoded_size(a));
    assert_int_equal(wire_args_decode(blob, n, d), STRATA_OK);
    assert_int_equal(strata_args_num_tensors(d), 1);
    assert_int_equal(strata_args_tensor_dtype(d, 0), STRATA_F64);
    assert_int_equal(strata_args_tensor_ndims(d, 0), 3);
    assert_int_equal(strata_args_tensor_dim(d, 0, 2), 4);
    assert_int_equal(strata_args_tensor_tag(d, 0), STRATA_INOUT);
    assert_int_equal(strata_args_tensor_nbytes(d, 0), 2 * 3 * 4 * 8);
    assert_int_equal(d->tensors[0].offset, 8);
    assert_int_equal(d->tensors[0].buffer_id, 7);
    assert_null(strata_args_tensor_data(d, 0)); /* not mapped here */
    assert_int_equal(strata_args_num_scalars(d), 2);
    assert_true(strata_args_scalar(d, 0) == UINT64_MAX);
    assert_int_equal(strata_args_scalar(d, 1), 42);
    assert_int_equal(strata_args_scalar(d, 2), 0); /* out of range */
    strata_args_destroy(a);
    strata_args_destroy(d);
}

static void test_args_decode_rejects_bad_blobs(void **state)
{
    strata_buffer b = fake(7, 64);
    size_t shape[1] = {4};
    static uint8_t blob[WIRE_ARGS_MAX];
    struct wire_args_header h;
    struct wire_tensor *t;
    strata_args *a;
    strata_args *d;
    size_t n;

    (void)state;
    assert_int_equal(strata_args_create(&a), STRATA_OK);
    assert_int_equal(strata_args_create(&d), STRATA_OK);
    assert_int_equal(
        strata_args_add_tensor(a, &b, 0, STRATA_F32, 1, shape, STRATA_IN),
        STRATA_OK);
    n = wire_args_encode(a, blob, sizeof(blob));
    t = (struct wire_tensor *)(blob + sizeof(h));

    assert_int_equal(wire_args_decode(blob, 3, d), STRATA_EPROTO);
    assert_int_equal(wire_args_decode(blob, n - 1, d), STRATA_EPROTO);
    assert_non_null(strstr(strata_errmsg(), "length"));
    memcpy(&h, blob, sizeof(h));
    h.num_tensors = STRATA_MAX_TENSORS + 1;
    memcpy(blob, &h, sizeof(h));
    assert_int_equal(wire_args_decode(blob, n, d), STRATA_EPROTO);
    assert_non_null(strstr(strata_errmsg(), "num_tensors"));
    h.num_tensors = 1;
    memcpy(blob, &h, sizeof(h));
    t->flags = 0x80;
    assert_int_equal(wire_args_decode(blob, n, d), STRATA_EPROTO);
    assert_non_null(strstr(strata_errmsg(), "unknown flags 0x80"));
    t->flags = WIRE_TENSOR_DEVICE; /* a device tensor decodes */
    assert_int_equal(wire_args_decode(blob, n, d), STRATA_OK);
    assert_int_equal(d->tensors[0].flags, WIRE_TENSOR_DEVICE);
    t->flags = 0;
    t->nbytes = 1000;
    assert_int_equal(wire_args_decode(blob, n, d), STRATA_EPROTO);
    t->nbytes = 16;
    t->offset = 60;
    assert_int_equal(wire_args_decode(blob, n, d), STRATA_EPROTO);
    t->offset = 0;
    assert_int_equal(wire_args_decode(blob, n, d), STRATA_OK);
    strata_args_destroy(a);
    strata_args_destroy(d);
}

static void test_args_dtype_sizes(void **state)
{
    (void)state;
    assert_int_equal(strata_dtype_size(STRATA_U8), 1);
    assert_int_equal(strata_dtype_size(STRATA_BF16), 2);
    assert_int_equal(strata_dtype_size(STRATA_I32), 4);
    assert_int_equal(strata_dtype_size(STRATA_F64), 8);
    assert_int_equal(strata_dtype_size((strata_dtype)0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_args_add_tensor_validates_input),
        cmocka_unit_test(test_args_limits_enforced),
        cmocka_unit_test(test_args_round_trip_preserves_everything),
        cmocka_unit_test(test_args_decode_rejects_bad_blobs),
        cmocka_unit_test(test_args_dtype_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
