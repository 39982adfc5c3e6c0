/* Writes the fuzz seed corpus from the wire test samples:
 *   wire_gen_corpus DIR
 * puts each sample's body in DIR/fuzz_<msg>/<sample> and its whole frame
 * in DIR/fuzz_frame/<sample>. Existing files of the same name are
 * replaced; nothing else is touched. */
#include "wire/msg.h"
#include "wire_samples.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int write_seed(const char *dir, const char *target, const char *name,
                      const void *data, size_t len)
{
    char path[1024];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, target);
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "wire_gen_corpus: mkdir %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/%s/%s", dir, target, name);
    f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "wire_gen_corpus: write %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const struct wire_sample *s;
    size_t n = wire_samples(&s);
    int rc = 0;

    if (argc != 2) {
        fprintf(stderr, "usage: wire_gen_corpus DIR\n");
        return 2;
    }
    if (mkdir(argv[1], 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "wire_gen_corpus: mkdir %s: %s\n", argv[1],
                strerror(errno));
        return 1;
    }
    for (size_t k = 0; k < n; k++) {
        struct wire_buf b;

        wire_buf_init(&b);
        if (wire_msg_pack(&s[k].msg, &b) != STRATA_OK) {
            fprintf(stderr, "wire_gen_corpus: %s: %s\n", s[k].name,
                    strata_errmsg());
            return 1;
        }
        rc |= write_seed(argv[1], wire_sample_target(s[k].msg.type), s[k].name,
                         b.data + WIRE_FRAME_HEADER_SIZE,
                         b.len - WIRE_FRAME_HEADER_SIZE);
        rc |= write_seed(argv[1], "fuzz_frame", s[k].name, b.data, b.len);
        wire_buf_fini(&b);
    }
    printf("wire_gen_corpus: %zu samples written to %s\n", n, argv[1]);
    return rc ? 1 : 0;
}
