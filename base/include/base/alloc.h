/* strata's heap: every allocation goes through these so users can hook
 * them and tests can fail the N-th one. */
#ifndef BASE_ALLOC_H
#define BASE_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

void *base_malloc(size_t size);
void *base_calloc(size_t n, size_t size);
void *base_realloc(void *ptr, size_t size);
void base_free(void *ptr);
char *base_strdup(const char *s);
/* A copy of an optional string: NULL stays NULL; a failed copy sets *fail
 * (so a caller copies every field, then checks once). */
char *base_strdup_opt(const char *s, bool *fail);
/* Marks that a strata object exists, so hooks can no longer change. */
void base_alloc_lock_hooks(void);

#endif
