/* The billion-edge bench's two fields, x and out: whole buffers, or
 * pages of page_rows rows each (strata_halo_forward_pages), which a
 * worker under a ram budget spills and restores. */
#ifndef BENCH_HALO_BILLION_FIELDS_H
#define BENCH_HALO_BILLION_FIELDS_H

#include <strata/strata.h>

#include <stdbool.h>
#include <stdint.h>

struct fields {
    uint64_t rows, page_rows; /* page_rows 0: whole */
    size_t rb;                /* bytes per row */
    strata_buffer *x, *out;   /* whole */
    strata_buffer **xpg, **opg;
    strata_halo_pages xp, op;
};

/* Creates the buffers on w: two whole fields (page_rows 0), or the pages
 * of both, x's first. */
strata_err fields_create(strata_worker *w, uint64_t rows, size_t rb,
                         uint64_t page_rows, struct fields *f);
/* Releases what fields_create made (a release failure is printed). */
void fields_release(struct fields *f);
/* Row i of x (write) or of out (read), and in *end the row after the
 * last one that follows it in the same buffer. Valid until something may
 * spill the page: walk rows in ascending order, one call per span. */
void *fields_span(struct fields *f, bool out, uint64_t i, uint64_t *end);
/* The forward over the fields, inside an orch fn. */
strata_err fields_forward(strata_orch *o, strata_halo *h, struct fields *f,
                          size_t prefetch);

#endif
