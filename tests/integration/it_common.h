/*
 * Helpers shared by the integration tests (header only; static inline so
 * unused ones cost nothing). They return strata_err instead of asserting,
 * because orch fns and kernels must never longjmp out of strata code.
 */
#ifndef STRATA_IT_COMMON_H
#define STRATA_IT_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <setjmp.h>

#include <cmocka.h>

#include <strata/strata.h>

#include "testutil.h"

/* Asserts a strata call returned want, printing the detail message. */
#define it_expect(want, call)                                                  \
    do {                                                                       \
        strata_err it_e_ = (call);                                             \
        if (it_e_ != (want)) {                                                 \
            char it_m_[STRATA_ERRMSG_MAX];                                     \
            snprintf(it_m_, sizeof(it_m_), "%s", strata_errmsg());             \
            fail_msg("%s: got %s, want %s (errmsg: %s)", #call,                \
                     strata_errname(it_e_), strata_errname(want), it_m_);      \
        }                                                                      \
    } while (0)
#define it_ok(call) it_expect(STRATA_OK, call)

/* Runs a statement that returns strata_err inside an orch fn or kernel and
 * returns its error from the enclosing function on failure. */
#define it_try(call)                                                           \
    do {                                                                       \
        strata_err it_t_ = (call);                                             \
        if (it_t_ != STRATA_OK)                                                \
            return it_t_;                                                      \
    } while (0)

/* Appends a 1-D u32 tensor of count elements at element offset off. */
static inline strata_err it_add_u32(strata_args *a, strata_buffer *b,
                                    size_t off, size_t count, strata_tag tag)
{
    size_t shape[1] = {count};
    return strata_args_add_tensor(a, b, off * sizeof(uint32_t), STRATA_U32, 1,
                                  shape, tag);
}

/* Creates an args list with one u32 tensor. */
static inline strata_err it_args1(strata_buffer *b, size_t off, size_t count,
                                  strata_tag tag, strata_args **out)
{
    strata_args *a = NULL;
    it_try(strata_args_create(&a));
    strata_err e = it_add_u32(a, b, off, count, tag);
    if (e != STRATA_OK) {
        strata_args_destroy(a);
        return e;
    }
    *out = a;
    return STRATA_OK;
}

/* Submits kernel c to chip with one u32 tensor plus optional scalar. */
static inline strata_err it_submit1(strata_orch *o, strata_callable c, int chip,
                                    strata_buffer *b, size_t off, size_t count,
                                    strata_tag tag)
{
    strata_args *a = NULL;
    it_try(it_args1(b, off, count, tag, &a));
    strata_err e = strata_orch_submit_next_level(o, c, a, chip);
    strata_args_destroy(a);
    return e;
}

/* Word i of a buffer viewed as u32. */
static inline uint32_t *it_u32(strata_buffer *b)
{
    return (uint32_t *)strata_buffer_data(b);
}

/* Word i of a tensor argument inside a kernel or sub. */
static inline uint32_t *it_arg_u32(const strata_args *a, size_t i)
{
    return (uint32_t *)strata_args_tensor_data(a, i);
}

static inline size_t it_arg_count(const strata_args *a, size_t i)
{
    return strata_args_tensor_nbytes(a, i) / sizeof(uint32_t);
}

/* Registers or aborts the group setup (returns -1 on failure). */
#define it_register(kind, name, fn, out)                                       \
    do {                                                                       \
        if (strata_register_##kind((name), (fn), (out)) != STRATA_OK) {        \
            print_error("register %s: %s\n", (name), strata_errmsg());         \
            return -1;                                                         \
        }                                                                      \
    } while (0)

#endif /* STRATA_IT_COMMON_H */
