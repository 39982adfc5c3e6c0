/* Edits of a packed message for rejection tests: pack a message, change
 * one value in its msgpack tree (by a path of map keys and array indexes),
 * repack and decode it. */
#ifndef WIRE_MUTATE_H
#define WIRE_MUTATE_H

#include "wire/msg.h"

#include <msgpack.h>

/* Path steps: a map key in a map, an index in an array. */
#define WIRE_PATH(...)                                                         \
    (const long[]){__VA_ARGS__},                                               \
        (sizeof((const long[]){__VA_ARGS__}) / sizeof(long))

msgpack_object wire_obj_uint(uint64_t v);
msgpack_object wire_obj_int(int64_t v);
msgpack_object wire_obj_str(const char *s);
msgpack_object wire_obj_bin(const void *p, size_t n);
msgpack_object wire_obj_nil(void);

/* Packs m, sets the value at path to *v (v NULL: removes a map entry; a
 * missing last map key is added), repacks and decodes as m's type. Returns
 * the decode result; a decoded message is freed. Aborts the test when m
 * does not pack or the path does not exist. */
strata_err wire_edit_decode(const struct wire_msg *m, const long *path,
                            size_t depth, const msgpack_object *v);

/* wire_edit_decode, then asserts STRATA_EPROTO and that strata_errmsg()
 * contains want. */
#define WIRE_EXPECT_EDIT(m, path, v, want)                                     \
    wire_expect_edit_at((m), path, (v), (want), __FILE__, __LINE__)
void wire_expect_edit_at(const struct wire_msg *m, const long *path,
                         size_t depth, const msgpack_object *v,
                         const char *want, const char *file, int line);

/* Packs m and asserts STRATA_EINVAL with want in strata_errmsg(). */
#define WIRE_EXPECT_PACK_EINVAL(m, want)                                       \
    wire_expect_pack_einval_at((m), (want), __FILE__, __LINE__)
void wire_expect_pack_einval_at(const struct wire_msg *m, const char *want,
                                const char *file, int line);

/* A sample by name, copied (it may then be edited freely). */
struct wire_msg wire_sample_copy(const char *name);

#endif
