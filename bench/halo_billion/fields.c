/* The two fields of bench_halo_billion, whole or paged (fields.h). */
#include "fields.h"

#include <stdio.h>
#include <stdlib.h>

static strata_err make_pages(strata_worker *w, struct fields *f,
                             strata_buffer ***pg, strata_halo_pages *p)
{
    size_t n = (size_t)((f->rows + f->page_rows - 1) / f->page_rows);
    strata_err err = STRATA_OK;

    *pg = calloc(n, sizeof(**pg));
    if (!*pg)
        return STRATA_ENOMEM;
    p->pages = *pg;
    p->page_rows = f->page_rows;
    for (size_t k = 0; k < n && !err; k++) {
        uint64_t b = k * f->page_rows;
        uint64_t r = f->rows - b < f->page_rows ? f->rows - b : f->page_rows;

        err = strata_worker_create_buffer(w, (size_t)r * f->rb, &(*pg)[k]);
        if (!err)
            p->num_pages++;
    }
    return err;
}

strata_err fields_create(strata_worker *w, uint64_t rows, size_t rb,
                         uint64_t page_rows, struct fields *f)
{
    strata_err err;

    *f = (struct fields){.rows = rows, .page_rows = page_rows, .rb = rb};
    if (page_rows == 0) {
        err = strata_worker_create_buffer(w, rows * rb, &f->x);
        return err ? err : strata_worker_create_buffer(w, rows * rb, &f->out);
    }
    err = make_pages(w, f, &f->xpg, &f->xp);
    return err ? err : make_pages(w, f, &f->opg, &f->op);
}

static void release_one(strata_buffer *b)
{
    if (b && strata_buffer_release(b) != STRATA_OK)
        fprintf(stderr, "bench_halo_billion: a buffer kept: %s\n",
                strata_errmsg());
}

void fields_release(struct fields *f)
{
    release_one(f->x);
    release_one(f->out);
    for (size_t k = 0; k < f->xp.num_pages; k++)
        release_one(f->xpg[k]);
    for (size_t k = 0; k < f->op.num_pages; k++)
        release_one(f->opg[k]);
    free(f->xpg);
    free(f->opg);
    *f = (struct fields){0};
}

void *fields_span(struct fields *f, bool out, uint64_t i, uint64_t *end)
{
    uint64_t k = f->page_rows ? i / f->page_rows : 0;
    char *base;

    if (f->page_rows == 0) {
        base = strata_buffer_data(out ? f->out : f->x);
        *end = f->rows;
        return base ? base + i * f->rb : NULL;
    }
    /* Restores the page when it was spilled. */
    base = strata_buffer_data((out ? f->opg : f->xpg)[k]);
    *end = (k + 1) * f->page_rows < f->rows ? (k + 1) * f->page_rows : f->rows;
    return base ? base + (i - k * f->page_rows) * f->rb : NULL;
}

strata_err fields_forward(strata_orch *o, strata_halo *h, struct fields *f,
                          size_t prefetch)
{
    if (f->page_rows == 0)
        return strata_halo_forward(o, h, f->x, f->out);
    return strata_halo_forward_pages(o, h, &f->xp, &f->op, prefetch);
}
