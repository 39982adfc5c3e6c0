/* Helpers shared by the graph tests. */
#define _GNU_SOURCE
#include "graph_helpers.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t gh_rand(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (!p)
        abort();
    return p;
}

void gh_graph_random(struct gh_graph *g, uint64_t n, unsigned max_degree,
                     uint64_t *state)
{
    size_t cap = (size_t)n * max_degree;
    int64_t e = 0;

    g->n = n;
    g->row_ptr = xmalloc((n + 1) * sizeof(int64_t));
    g->col_idx = xmalloc(cap * sizeof(int64_t));
    g->row_ptr[0] = 0;
    for (uint64_t r = 0; r < n; r++) {
        unsigned deg = (unsigned)(gh_rand(state) % (max_degree + 1));

        if (gh_rand(state) % 5 == 0)
            deg = 0; /* isolated row */
        for (unsigned k = 0; k < deg; k++) {
            uint64_t pick = gh_rand(state) % 8;
            int64_t c;

            if (pick == 0)
                c = (int64_t)r; /* self loop */
            else if (pick == 1 && k > 0)
                c = g->col_idx[e - 1]; /* multi-edge */
            else if (pick == 2)
                c = 0; /* hub */
            else
                c = (int64_t)(gh_rand(state) % n);
            g->col_idx[e++] = c;
        }
        g->row_ptr[r + 1] = e;
    }
}

void gh_graph_ring(struct gh_graph *g, uint64_t n)
{
    g->n = n;
    g->row_ptr = xmalloc((n + 1) * sizeof(int64_t));
    g->col_idx = xmalloc(3 * n * sizeof(int64_t));
    for (uint64_t i = 0; i < n; i++) {
        g->row_ptr[i] = (int64_t)(3 * i);
        g->col_idx[3 * i] = (int64_t)((i + n - 1) % n);
        g->col_idx[3 * i + 1] = (int64_t)i;
        g->col_idx[3 * i + 2] = (int64_t)((i + 1) % n);
    }
    g->row_ptr[n] = (int64_t)(3 * n);
}

void gh_graph_free(struct gh_graph *g)
{
    free(g->row_ptr);
    free(g->col_idx);
    g->row_ptr = NULL;
    g->col_idx = NULL;
}

strata_csr_view gh_view(const struct gh_graph *g)
{
    strata_csr_view v = {g->n, g->n, g->row_ptr, g->col_idx};

    return v;
}

int64_t *gh_ref_ghosts(const struct gh_graph *g, uint32_t world, uint32_t rank,
                       size_t *count)
{
    uint64_t begin;
    uint64_t end;
    bool *mark = calloc(g->n ? g->n : 1, sizeof(bool));
    int64_t *out = xmalloc((g->n + 1) * sizeof(int64_t));
    size_t k = 0;

    if (!mark || strata_owned_range(g->n, world, rank, &begin, &end))
        abort();
    for (uint64_t r = begin; r < end; r++)
        for (int64_t e = g->row_ptr[r]; e < g->row_ptr[r + 1]; e++)
            mark[g->col_idx[e]] = true;
    for (uint64_t i = 0; i < g->n; i++)
        if (mark[i] && (i < begin || i >= end))
            out[k++] = (int64_t)i;
    free(mark);
    *count = k;
    return out;
}

char *gh_tmpdir(void)
{
    char *p = strdup("/tmp/strata-graph-test-XXXXXX");

    if (!p || !mkdtemp(p))
        abort();
    return p;
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void gh_rmtree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

size_t gh_count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *ent;
    size_t n = 0;

    if (!d)
        return 0;
    while ((ent = readdir(d)))
        if (strcmp(ent->d_name, ".") && strcmp(ent->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

char *gh_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = xmalloc(n);

    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

void gh_write_file(const char *dir, const char *name, const void *data,
                   size_t n)
{
    char *path = gh_join(dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    if (fd < 0 || (n && write(fd, data, n) != (ssize_t)n))
        abort();
    close(fd);
    free(path);
}

char *gh_read_file(const char *dir, const char *name, size_t *n)
{
    char *path = gh_join(dir, name);
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long len;

    free(path);
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0) {
        buf = xmalloc((size_t)len + 1);
        if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
            free(buf);
            buf = NULL;
        } else {
            buf[len] = '\0';
            *n = (size_t)len;
        }
    }
    fclose(f);
    return buf;
}
