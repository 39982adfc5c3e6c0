/* libFuzzer target: graph_manifest_parse, the reader of a .gfg store's
 * manifest.json (strict JSON, docs/graph.md). The text is copied to a
 * buffer of exactly its length, so a read past it is caught. What parses
 * must be in range, and its v1 text (graph_manifest_format) must parse
 * back to the same manifest. Seeds are plain JSON files in the corpus. */
#include "base/err.h"
#include "graph_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_manifest: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    struct graph_manifest m, back;
    char out[512];
    size_t n;

    if (!text)
        return 0;
    memcpy(text, data, size);
    if (graph_manifest_parse(text, size, &m) != STRATA_OK) {
        check(strata_errmsg()[0] != '\0', "a refusal says why");
        free(text);
        return 0;
    }
    free(text);
    check(m.version == 1 || m.version == 2, "version 1 or 2");
    check(m.index_dtype == STRATA_I32 || m.index_dtype == STRATA_I64,
          "index dtype int32 or int64");
    check(m.num_src <= (uint64_t)INT64_MAX &&
              m.num_dst <= (uint64_t)INT64_MAX &&
              m.num_edges <= (uint64_t)INT64_MAX,
          "counts below 2^63");
    n = graph_manifest_format(&m, out, sizeof(out));
    check(n > 0, "a parsed manifest formats");
    check(graph_manifest_parse(out, n, &back) == STRATA_OK,
          "the formatted text parses");
    check(back.version == 1 && back.index_dtype == m.index_dtype &&
              back.num_src == m.num_src && back.num_dst == m.num_dst &&
              back.num_edges == m.num_edges &&
              back.sorted_by_dst == m.sorted_by_dst,
          "the formatted text parses to the same manifest");
    return 0;
}
