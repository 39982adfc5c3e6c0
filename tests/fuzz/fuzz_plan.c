/* libFuzzer target: strata_plan_from_json, the reader of bundle plans
 * (schema tiga.executable-bundle-plan.v1), which reads untrusted files.
 * The text is copied to a buffer of exactly its length, so a read past it
 * is caught. A refusal must say why; a plan that loads must write out,
 * read back, and write out again to the same text, and its order must be
 * a permutation of its invocations. Seeds are JSON files in the corpus. */
#include <strata/plan.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_plan: %s\n", what);
        abort();
    }
}

static void check_plan(const strata_plan *p)
{
    size_t n = strata_plan_num_invocations(p);
    bool *seen = calloc(n ? n : 1, sizeof(*seen));

    check(seen != NULL, "memory");
    check(n >= 1 && n <= STRATA_PLAN_MAX_INVOCATIONS, "invocation count");
    for (size_t i = 0; i < n; i++) {
        size_t k = strata_plan_order_at(p, i);

        check(k < n && !seen[k], "the order is a permutation");
        seen[k] = true;
    }
    free(seen);
    check(strata_plan_num_terminals(p) >= 1, "at least one terminal");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size ? size : 1);
    char *out = NULL, *again = NULL;
    size_t n = 0, n2 = 0;
    strata_plan *p = NULL, *q = NULL;

    if (!text)
        return 0;
    memcpy(text, data, size);
    if (strata_plan_from_json(text, size, &p) != STRATA_OK) {
        check(strata_errmsg()[0] != '\0', "a refusal says why");
        free(text);
        return 0;
    }
    free(text);
    check_plan(p);
    check(strata_plan_to_json(p, &out, &n) == STRATA_OK, "a plan writes");
    check(strata_plan_from_json(out, n, &q) == STRATA_OK,
          "the written text reads back");
    check(strata_plan_to_json(q, &again, &n2) == STRATA_OK, "the copy writes");
    check(n == n2 && memcmp(out, again, n) == 0,
          "the copy writes the same text");
    strata_plan_json_free(out);
    strata_plan_json_free(again);
    strata_plan_destroy(q);
    strata_plan_destroy(p);
    return 0;
}
