/* strata_halo_forward_pages's private parts (graph/): which pages of x
 * each rank's rows in each page of out read (halo_pages_needs.c). */
#ifndef GRAPH_HALO_PAGES_H
#define GRAPH_HALO_PAGES_H

#include "halo_exec_int.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Per rank r, one slot per page of out its rows touch (pages first[r] ..
 * first[r] + count[r] - 1, slots from slot0[r]), each a bitmap of the
 * pages of x those rows read. */
struct halo_page_needs {
    uint64_t x_rows, out_rows; /* page sizes they were found for */
    size_t words;              /* 64-bit words per bitmap */
    uint64_t *first, *count, *slot0;
    uint64_t *bits;
    /* Calls alternate the order of each rank's pages: under LRU the
     * pages a call used last are the ones still resident, so the next
     * call starts with them. */
    bool down;
};

/* ceil(rows / page_rows), without overflow for any page_rows > 0. */
uint64_t halo_pages_for(uint64_t rows, uint64_t page_rows);
/* The end of the page of page_rows rows that starts at row b, within
 * limit rows (no overflow). */
uint64_t halo_page_end(uint64_t b, uint64_t page_rows, uint64_t limit);
/* The bitmap of rank r's rows in page `page` of out. */
uint64_t *halo_needs_bits(const struct halo_page_needs *n, uint32_t r,
                          uint64_t page);
/* The first page of x at or after k (of n) that bits names, or n. */
size_t halo_next_page(const uint64_t *bits, size_t k, size_t n);
/* h->needs for these page sizes, found now (reading the plan's CSR or
 * the store) unless they already are. */
strata_err halo_needs_get(strata_halo *h, uint64_t x_rows, uint64_t out_rows);

#endif
