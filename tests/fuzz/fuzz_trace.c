/* libFuzzer target: tr_load and tr_summary, the reader behind `strata trace
 * validate|summary` (tools/trace), which read untrusted trace-event JSON.
 * The text is copied to a buffer of exactly its length, so a read past it
 * is caught. A refusal must say why; a file that loads must summarize
 * (into /dev/null) without a fault, and its event count must match the
 * array's. Seeds are trace files in the corpus. */
#include "trace_read.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_trace: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *null_out;
    char *text = malloc(size ? size : 1);
    char err[TR_ERR_MAX] = "";
    struct tr_file f;

    if (!null_out)
        null_out = fopen("/dev/null", "w");
    check(null_out != NULL, "/dev/null opens");
    if (!text)
        return 0;
    memcpy(text, data, size);
    if (tr_load(text, size, &f, err, sizeof(err)) != 0) {
        check(err[0] != '\0', "a refusal says why");
        free(text);
        return 0;
    }
    free(text);
    check(f.n == 0 || f.ev != NULL, "events are kept");
    tr_summary(&f, null_out);
    tr_free(&f);
    check(f.ev == NULL && f.n == 0, "tr_free empties the file");
    return 0;
}
