/* The committed fuzz seed corpus still decodes: every seed under
 * tests/fuzz/corpus/fuzz_<msg>/ is a valid body of that message, and every
 * seed under fuzz_frame/ a valid whole frame. A format change that makes
 * the seeds stale fails here; regenerate them with wire_gen_corpus. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "wire/msg.h"
#include "wire_samples.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t read_file(const char *path, uint8_t **out)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 1 << 16;
    size_t len = 0;
    uint8_t *p = malloc(cap);

    assert_non_null(f);
    assert_non_null(p);
    for (;;) {
        size_t n = fread(p + len, 1, cap - len, f);

        len += n;
        if (len < cap)
            break;
        cap *= 2;
        p = realloc(p, cap);
        assert_non_null(p);
    }
    fclose(f);
    *out = p;
    return len;
}

/* Decodes every seed of dir with type (0 = whole frames); returns count. */
static size_t check_dir(const char *target, unsigned type)
{
    char dir[512];
    char path[1024];
    struct dirent *e;
    size_t seeds = 0;
    DIR *d;

    snprintf(dir, sizeof(dir), "%s/%s", STRATA_CORPUS_DIR, target);
    d = opendir(dir);
    if (!d)
        fail_msg("corpus directory %s missing", dir);
    while ((e = readdir(d)) != NULL) {
        struct wire_msg m;
        uint8_t *data;
        size_t len;
        strata_err err;

        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        len = read_file(path, &data);
        err = type ? wire_msg_unpack(type, data, len, &m)
                   : wire_frame_unpack(data, len, &m);
        if (err != STRATA_OK)
            fail_msg("seed %s no longer decodes: %s", path, strata_errmsg());
        wire_msg_free(&m);
        free(data);
        seeds++;
    }
    closedir(d);
    return seeds;
}

static void test_corpus_seeds_decode_ok(void **state)
{
    (void)state;
    for (unsigned t = WIRE_MSG_TYPE_MIN; t <= WIRE_MSG_TYPE_MAX; t++)
        assert_true(check_dir(wire_sample_target(t), t) > 0);
    assert_true(check_dir("fuzz_frame", 0) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_seeds_decode_ok),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
