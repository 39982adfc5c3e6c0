/* libFuzzer target: the timeline merge of records a remote node sent in
 * TRACE frames (docs/wire.md: the parent's merge treats every field as
 * untrusted). Input: records of WIRE_TRACE_REC_SIZE bytes, as they come
 * off the wire; the first half is a node's session process (pid 2, its
 * parent this L4, pid 1), the second half a chip of it (pid 3, parent 2),
 * so that records drawn in a parent's lane (kinds 7 and 8) have one. They
 * are converted as trace_remote_add converts them, then written as JSON
 * (to /dev/null) by trace_json_write: no fault, no error but ENOMEM. */
#include "trace_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct trace_hdr *buf_of(int32_t pid, int32_t ppid, const uint8_t *recs,
                                size_t n)
{
    static const struct trace_hdr ns_clock = {.clock = TRACE_CLOCK_NS};
    struct trace_hdr *h =
        calloc(1, sizeof(*h) + (n ? n : 1) * sizeof(struct trace_rec));

    if (!h)
        return NULL;
    h->pid = pid;
    h->ppid = ppid;
    h->cap = (uint32_t)n;
    h->head = n;
    snprintf(h->role, sizeof(h->role), "%s", pid == 2 ? "L3" : "chip 0");
    memcpy(h->recs, recs, n * sizeof(struct trace_rec));
    for (size_t i = 0; i < n; i++) {
        struct trace_rec *r = &h->recs[i];
        uint32_t kind = r->kind;

        r->kind = kind & 0xffu;
        if (r->kind)
            trace_rec_to_ns(&ns_clock, r, kind, 1.0, 1000);
    }
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *null_out;
    size_t n = size / sizeof(struct trace_rec), first = n / 2;
    struct trace_buf bufs[3] = {{0}};
    strata_err err;

    if (!null_out)
        null_out = fopen("/dev/null", "w");
    if (!null_out)
        abort();
    bufs[0].h = buf_of(1, 0, data, 0);
    bufs[1].h = buf_of(2, 1, data, first);
    bufs[2].h =
        buf_of(3, 2, data + first * sizeof(struct trace_rec), n - first);
    if (bufs[0].h && bufs[1].h && bufs[2].h) {
        bufs[1].n = (uint32_t)first;
        bufs[2].n = (uint32_t)(n - first);
        err = trace_json_write(null_out, bufs, 3);
        if (err != STRATA_OK && err != STRATA_ENOMEM) {
            fprintf(stderr, "fuzz_trace_merge: %s\n", strata_errmsg());
            abort();
        }
    }
    for (int i = 0; i < 3; i++)
        free(bufs[i].h);
    return 0;
}
