/* Edits of packed messages for the rejection tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "wire_mutate.h"
#include "wire_samples.h"

#include <string.h>

msgpack_object wire_obj_uint(uint64_t v)
{
    msgpack_object o = {.type = MSGPACK_OBJECT_POSITIVE_INTEGER};

    o.via.u64 = v;
    return o;
}

msgpack_object wire_obj_int(int64_t v)
{
    msgpack_object o = {.type = MSGPACK_OBJECT_NEGATIVE_INTEGER};

    o.via.i64 = v;
    return o;
}

msgpack_object wire_obj_str(const char *s)
{
    msgpack_object o = {.type = MSGPACK_OBJECT_STR};

    o.via.str.ptr = s;
    o.via.str.size = (uint32_t)strlen(s);
    return o;
}

msgpack_object wire_obj_bin(const void *p, size_t n)
{
    msgpack_object o = {.type = MSGPACK_OBJECT_BIN};

    o.via.bin.ptr = p;
    o.via.bin.size = (uint32_t)n;
    return o;
}

msgpack_object wire_obj_nil(void)
{
    msgpack_object o = {.type = MSGPACK_OBJECT_NIL};

    return o;
}

static msgpack_object_kv *find_key(msgpack_object *map, long key)
{
    for (uint32_t k = 0; k < map->via.map.size; k++)
        if (map->via.map.ptr[k].key.via.u64 == (uint64_t)key)
            return &map->via.map.ptr[k];
    return NULL;
}

/* Sets (or removes, or adds) the last step inside container o. */
static void apply(msgpack_zone *z, msgpack_object *o, long step,
                  const msgpack_object *v)
{
    msgpack_object_kv *kv;
    msgpack_object_kv *grown;
    uint32_t n;

    if (o->type == MSGPACK_OBJECT_ARRAY) {
        assert_true(step >= 0 && (uint64_t)step < o->via.array.size);
        assert_non_null(v);
        o->via.array.ptr[step] = *v;
        return;
    }
    assert_int_equal(o->type, MSGPACK_OBJECT_MAP);
    kv = find_key(o, step);
    n = o->via.map.size;
    if (kv && v) {
        kv->val = *v;
    } else if (kv) {
        *kv = o->via.map.ptr[n - 1];
        o->via.map.size = n - 1;
    } else {
        assert_non_null(v);
        grown = msgpack_zone_malloc(z, (n + 1) * sizeof(*grown));
        assert_non_null(grown);
        if (n)
            memcpy(grown, o->via.map.ptr, n * sizeof(*grown));
        grown[n].key = wire_obj_uint((uint64_t)step);
        grown[n].val = *v;
        o->via.map.ptr = grown;
        o->via.map.size = n + 1;
    }
}

strata_err wire_edit_decode(const struct wire_msg *m, const long *path,
                            size_t depth, const msgpack_object *v)
{
    struct wire_buf b;
    msgpack_unpacked up;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_object *o;
    struct wire_msg out;
    size_t off = 0;
    strata_err err;

    wire_buf_init(&b);
    if (wire_msg_pack(m, &b) != STRATA_OK)
        fail_msg("pack: %s", strata_errmsg());
    msgpack_unpacked_init(&up);
    assert_int_equal(
        msgpack_unpack_next(&up, (const char *)b.data + WIRE_FRAME_HEADER_SIZE,
                            b.len - WIRE_FRAME_HEADER_SIZE, &off),
        MSGPACK_UNPACK_SUCCESS);
    o = &up.data;
    for (size_t k = 0; k + 1 < depth; k++) {
        if (o->type == MSGPACK_OBJECT_MAP) {
            msgpack_object_kv *kv = find_key(o, path[k]);

            if (!kv)
                fail_msg("path step %zu: no key %ld", k, path[k]);
            o = &kv->val;
        } else {
            assert_int_equal(o->type, MSGPACK_OBJECT_ARRAY);
            assert_true(path[k] >= 0 && (uint64_t)path[k] < o->via.array.size);
            o = &o->via.array.ptr[path[k]];
        }
    }
    apply(up.zone, o, path[depth - 1], v);
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    assert_int_equal(msgpack_pack_object(&pk, up.data), 0);
    err = wire_msg_unpack(m->type, sb.data, sb.size, &out);
    if (err == STRATA_OK)
        wire_msg_free(&out);
    msgpack_sbuffer_destroy(&sb);
    msgpack_unpacked_destroy(&up);
    wire_buf_fini(&b);
    return err;
}

void wire_expect_edit_at(const struct wire_msg *m, const long *path,
                         size_t depth, const msgpack_object *v,
                         const char *want, const char *file, int line)
{
    strata_err err = wire_edit_decode(m, path, depth, v);

    if (err != STRATA_EPROTO || !strstr(strata_errmsg(), want))
        fail_msg("%s:%d: got %s \"%s\", expected STRATA_EPROTO with \"%s\"",
                 file, line, strata_errname(err), strata_errmsg(), want);
}

void wire_expect_pack_einval_at(const struct wire_msg *m, const char *want,
                                const char *file, int line)
{
    struct wire_buf b;
    strata_err err;

    wire_buf_init(&b);
    err = wire_msg_pack(m, &b);
    if (err != STRATA_EINVAL || !strstr(strata_errmsg(), want))
        fail_msg("%s:%d: pack got %s \"%s\", expected STRATA_EINVAL with "
                 "\"%s\"",
                 file, line, strata_errname(err), strata_errmsg(), want);
    assert_int_equal(b.len, 0);
    wire_buf_fini(&b);
}

struct wire_msg wire_sample_copy(const char *name)
{
    const struct wire_sample *s;
    size_t n = wire_samples(&s);

    for (size_t k = 0; k < n; k++)
        if (strcmp(s[k].name, name) == 0)
            return s[k].msg;
    fail_msg("no sample %s", name);
    return s[0].msg;
}
