/* What the halo kernels of one chip keep between calls: per plan, rank
 * and kind, one opaque entry that says how to free itself. Least recently
 * used out first, every kind under one cap (halo_cache_cap). A chip runs
 * one task at a time, so an entry found stays valid until that task's
 * next keep. */
#ifndef STRATA_GRAPH_HALO_CACHE_H
#define STRATA_GRAPH_HALO_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum halo_cache_kind {
    HALO_CACHE_EXCHANGE,    /* the exchange kernels' index arrays */
    HALO_CACHE_INPLACE_FWD, /* the in-place forward's row order */
    HALO_CACHE_INPLACE_VJP, /* the in-place VJP's transposed index */
};

struct halo_cache_key {
    uint64_t plan_id;
    uint32_t rank;
    enum halo_cache_kind kind;
};

/* Bytes all entries may hold together: an eighth of the machine's
 * memory, at least 256 MiB. */
size_t halo_cache_cap(void);
/* The entry of key (now the most recently used), or NULL. */
void *halo_cache_find(struct halo_cache_key key);
/* Keeps data (of bytes) as key's entry, replacing (and dropping) any
 * other, dropping the least recently used entries past the cap. false,
 * with nothing kept, when bytes exceed the cap on their own; drop(data)
 * frees an entry when it goes. */
bool halo_cache_keep(struct halo_cache_key key, void *data, size_t bytes,
                     void (*drop)(void *data));

#endif
