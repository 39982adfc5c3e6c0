/* A child's mappings of its worker's buffers, by buffer id: each buffer is
 * mapped once, on first use, and unmapped when the worker releases it. */
#ifndef CHIP_BUFMAP_H
#define CHIP_BUFMAP_H

#include <strata/strata.h>
#include <sys/types.h>

struct bufmap_entry {
    uint64_t id;
    pid_t creator;
    size_t size;
    void *base;
};

struct bufmap {
    struct bufmap_entry *entries;
    size_t count;
    size_t cap;
};

void bufmap_init(struct bufmap *m);
/* Base address of buffer id of process creator (size bytes), mapping it
 * if needed. */
strata_err bufmap_get(struct bufmap *m, pid_t creator, uint64_t id, size_t size,
                      void **base_out);
void bufmap_drop(struct bufmap *m, pid_t creator, uint64_t id);
void bufmap_fini(struct bufmap *m);

#endif
