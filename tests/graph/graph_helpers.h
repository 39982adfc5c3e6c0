/* Helpers shared by the graph tests: temporary directories, small files,
 * random irregular graphs and a brute-force ghost reference. */
#ifndef GRAPH_HELPERS_H
#define GRAPH_HELPERS_H

#include <strata/strata.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A CSR graph owned by the test. */
struct gh_graph {
    uint64_t n;
    int64_t *row_ptr; /* n + 1 */
    int64_t *col_idx; /* row_ptr[n] */
};

/* Deterministic xorshift64* generator. */
uint64_t gh_rand(uint64_t *state);
/* A random irregular square graph on n nodes: isolated rows, self loops,
 * multi-edges and hub columns, up to max_degree edges per row. */
void gh_graph_random(struct gh_graph *g, uint64_t n, unsigned max_degree,
                     uint64_t *state);
/* The periodic ring out_i = x_{i-1} + x_i + x_{i+1}. */
void gh_graph_ring(struct gh_graph *g, uint64_t n);
void gh_graph_free(struct gh_graph *g);
strata_csr_view gh_view(const struct gh_graph *g);

/* Ghosts of rank by brute force: sorted unique sources of owned rows
 * outside the owned range. Returns a malloc'd array (count in *count). */
int64_t *gh_ref_ghosts(const struct gh_graph *g, uint32_t world, uint32_t rank,
                       size_t *count);

/* mkdtemp under /tmp; returns a malloc'd path. */
char *gh_tmpdir(void);
/* Removes path and everything under it (no error if missing). */
void gh_rmtree(const char *path);
/* Number of entries in dir other than . and .. */
size_t gh_count_entries(const char *dir);
/* dir/name joined into a malloc'd string. */
char *gh_join(const char *dir, const char *name);
/* Writes n bytes to dir/name (creating or truncating it). */
void gh_write_file(const char *dir, const char *name, const void *data,
                   size_t n);
/* Reads dir/name; returns a malloc'd buffer (NUL-terminated) and its size
 * in *n, or NULL if it cannot be read. */
char *gh_read_file(const char *dir, const char *name, size_t *n);

#endif
