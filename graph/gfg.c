/* Reading a .gfg store: open validates the manifest, file sizes and the
 * row_ptr endpoints; everything else is read on demand with pread. */
#define _GNU_SOURCE
#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "graph_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct strata_gfg {
    int row_fd;  /* row_ptr.bin */
    int col_fd;  /* col_idx.bin */
    size_t item; /* bytes per index: 4 or 8 */
    struct graph_manifest m;
};

/* Maps errno for a file operation: ENOENT and ENOMEM keep their meaning,
 * EIO-like errors are STRATA_EIO, the rest STRATA_ESYS. */
static strata_err fail_file(int errnum, const char *what, const char *path)
{
    strata_err code = STRATA_ESYS;

    if (errnum == ENOENT || errnum == ENOTDIR)
        code = STRATA_ENOENT;
    else if (errnum == ENOMEM)
        code = STRATA_ENOMEM;
    else if (errnum == EIO)
        code = STRATA_EIO;
    return base_fail(code, ".gfg: %s %s: %s", what, path, strerror(errnum));
}

/* Reads exactly n bytes at offset; STRATA_EIO at end of file. */
static strata_err pread_full(int fd, void *buf, size_t n, uint64_t offset,
                             const char *file)
{
    char *p = buf;

    while (n > 0) {
        size_t want = n < ((size_t)1 << 30) ? n : (size_t)1 << 30;
        ssize_t got;

        if (BASE_FAULT("graph.gfg.pread"))
            return base_fail(STRATA_EIO, ".gfg: read of %s failed (injected)",
                             file);
        got = pread(fd, p, want, (off_t)offset);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return fail_file(errno, "reading", file);
        if (got == 0)
            return base_fail(STRATA_EIO,
                             ".gfg: %s ends before byte %llu "
                             "(truncated after open?)",
                             file, (unsigned long long)(offset + n));
        p += got;
        n -= (size_t)got;
        offset += (uint64_t)got;
    }
    return STRATA_OK;
}

/* Decodes count little-endian indices of item bytes, held at the start of
 * out, into out as int64. Runs backwards so the wider results never
 * overwrite bytes not yet decoded. */
static void decode(int64_t *out, size_t count, size_t item)
{
    const unsigned char *b = (const unsigned char *)out;

    for (size_t i = count; i-- > 0;) {
        const unsigned char *q = b + i * item;
        uint64_t v = 0;

        for (size_t k = item; k-- > 0;)
            v = v << 8 | q[k];
        if (item == 4)
            out[i] = (int64_t)(int32_t)(uint32_t)v;
        else
            out[i] = (int64_t)v;
    }
}

static strata_err read_index(const strata_gfg *g, int fd, const char *file,
                             uint64_t first, size_t count, int64_t *out)
{
    strata_err err;

    if (count == 0)
        return STRATA_OK;
    err = pread_full(fd, out, count * g->item, first * g->item, file);
    if (err == STRATA_OK)
        decode(out, count, g->item);
    return err;
}

strata_err graph_gfg_read_row_ptr(const strata_gfg *g, uint64_t first,
                                  size_t count, int64_t *out)
{
    return read_index(g, g->row_fd, "row_ptr.bin", first, count, out);
}

strata_err graph_gfg_read_cols(const strata_gfg *g, uint64_t first,
                               size_t count, int64_t *out)
{
    return read_index(g, g->col_fd, "col_idx.bin", first, count, out);
}

static strata_err read_manifest(int dirfd, const char *path,
                                struct graph_manifest *m)
{
    struct stat st;
    char *text = NULL;
    strata_err err;
    int fd;

    /* O_NONBLOCK: a FIFO there opens at once (and is refused below)
     * instead of waiting for a writer forever; reads of a regular file
     * ignore it. */
    fd = openat(dirfd, "manifest.json", O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT
                   ? base_fail(STRATA_ENOENT,
                               ".gfg: %s is not a .gfg store "
                               "(no manifest.json)",
                               path)
                   : fail_file(errno, "opening manifest.json in", path);
    if (fstat(fd, &st) != 0) {
        err = fail_file(errno, "stat of manifest.json in", path);
        goto out;
    }
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > GRAPH_MANIFEST_MAX) {
        err = base_fail(STRATA_EINVAL,
                        ".gfg: manifest.json in %s is not a "
                        "regular file of at most %zu bytes",
                        path, GRAPH_MANIFEST_MAX);
        goto out;
    }
    text = base_malloc((size_t)st.st_size + 1);
    if (!text) {
        err = base_fail(STRATA_ENOMEM, ".gfg: no memory for the manifest");
        goto out;
    }
    err = pread_full(fd, text, (size_t)st.st_size, 0, "manifest.json");
    if (err == STRATA_OK)
        err = graph_manifest_parse(text, (size_t)st.st_size, m);
    if (err != STRATA_OK)
        base_errmsg_prefix("%s", path);
out:
    base_free(text);
    close(fd);
    return err;
}

/* Opens one index file and checks it holds exactly count indices. */
static strata_err open_index(int dirfd, const char *path, const char *file,
                             uint64_t count, size_t item, int *fd_out)
{
    struct stat st;
    uint64_t want;
    int fd;

    fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO */
    if (fd < 0)
        return fail_file(errno, "opening", file);
    if (fstat(fd, &st) != 0) {
        close(fd);
        return fail_file(errno, "stat of", file);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return base_fail(STRATA_EINVAL, ".gfg: %s/%s is not a regular file",
                         path, file);
    }
    if (__builtin_mul_overflow(count, (uint64_t)item, &want) ||
        (uint64_t)st.st_size != want) {
        close(fd);
        return base_fail(STRATA_EINVAL,
                         ".gfg: %s/%s has %llu bytes; the "
                         "manifest implies %llu indices of %zu bytes",
                         path, file, (unsigned long long)st.st_size,
                         (unsigned long long)count, item);
    }
    *fd_out = fd;
    return STRATA_OK;
}

static strata_err check_endpoints(const strata_gfg *g, const char *path)
{
    int64_t first;
    int64_t last;
    strata_err err;

    err = graph_gfg_read_row_ptr(g, 0, 1, &first);
    if (err == STRATA_OK)
        err = graph_gfg_read_row_ptr(g, g->m.num_dst, 1, &last);
    if (err != STRATA_OK)
        return err;
    if (first != 0 || last != (int64_t)g->m.num_edges)
        return base_fail(STRATA_EINVAL,
                         ".gfg: %s: CSR endpoints wrong: "
                         "row_ptr[0] = %lld and row_ptr[%llu] = %lld, want 0 "
                         "and num_edges = %llu",
                         path, (long long)first,
                         (unsigned long long)g->m.num_dst, (long long)last,
                         (unsigned long long)g->m.num_edges);
    return STRATA_OK;
}

strata_err strata_gfg_open(const char *path, strata_gfg **out)
{
    strata_gfg *g;
    strata_err err;
    int dirfd;

    if (!path || !out)
        return base_fail_null("strata_gfg_open", !path ? "path" : "out");
    if (!*path)
        return base_fail(STRATA_EINVAL, "strata_gfg_open: path is empty");
    g = base_calloc(1, sizeof(*g));
    if (!g)
        return base_fail(STRATA_ENOMEM, "strata_gfg_open: no memory");
    g->row_fd = -1;
    g->col_fd = -1;
    dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        err = fail_file(errno, "opening store", path);
        goto err_free;
    }
    err = read_manifest(dirfd, path, &g->m);
    if (err != STRATA_OK)
        goto err_close;
    g->item = g->m.index_dtype == STRATA_I32 ? 4 : 8;
    err = open_index(dirfd, path, "row_ptr.bin", g->m.num_dst + 1, g->item,
                     &g->row_fd);
    if (err == STRATA_OK)
        err = open_index(dirfd, path, "col_idx.bin", g->m.num_edges, g->item,
                         &g->col_fd);
    if (err == STRATA_OK)
        err = check_endpoints(g, path);
    if (err != STRATA_OK)
        goto err_close;
    close(dirfd);
    *out = g;
    return STRATA_OK;

err_close:
    close(dirfd);
err_free:
    strata_gfg_close(g);
    return err;
}

static void stamp_put(const struct stat *st, uint64_t *w)
{
    w[0] = (uint64_t)st->st_dev;
    w[1] = (uint64_t)st->st_ino;
    w[2] = (uint64_t)st->st_size;
    w[3] = (uint64_t)st->st_mtim.tv_sec * 1000000000ull +
           (uint64_t)st->st_mtim.tv_nsec;
}

strata_err graph_gfg_stamp_of(const strata_gfg *g, struct graph_gfg_stamp *out)
{
    struct stat st;

    if (fstat(g->row_fd, &st) != 0)
        return fail_file(errno, "stat of", "row_ptr.bin");
    stamp_put(&st, &out->w[0]);
    if (fstat(g->col_fd, &st) != 0)
        return fail_file(errno, "stat of", "col_idx.bin");
    stamp_put(&st, &out->w[4]);
    return STRATA_OK;
}

strata_err graph_gfg_stamp_at(const char *path, struct graph_gfg_stamp *out)
{
    static const char *const names[2] = {"row_ptr.bin", "col_idx.bin"};
    int dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    strata_err err = STRATA_OK;

    if (dirfd < 0)
        return fail_file(errno, "opening store", path);
    for (int i = 0; i < 2 && !err; i++) {
        struct stat st;

        if (fstatat(dirfd, names[i], &st, 0) != 0)
            err = fail_file(errno, "stat of", names[i]);
        else
            stamp_put(&st, &out->w[4 * i]);
    }
    close(dirfd);
    return err;
}

void strata_gfg_close(strata_gfg *g)
{
    if (!g)
        return;
    if (g->row_fd >= 0)
        close(g->row_fd);
    if (g->col_fd >= 0)
        close(g->col_fd);
    base_free(g);
}

uint64_t strata_gfg_num_rows(const strata_gfg *g)
{
    return g ? g->m.num_dst : 0;
}

uint64_t strata_gfg_num_entities(const strata_gfg *g)
{
    return g ? g->m.num_src : 0;
}

uint64_t strata_gfg_num_edges(const strata_gfg *g)
{
    return g ? g->m.num_edges : 0;
}

strata_dtype strata_gfg_index_dtype(const strata_gfg *g)
{
    return g ? g->m.index_dtype : (strata_dtype)0;
}

static strata_err check_rows(const strata_gfg *g, uint64_t begin, uint64_t end,
                             const char *who)
{
    if (!g)
        return base_fail_null(who, "g");
    if (begin > end)
        return base_fail(STRATA_EINVAL, "%s: begin %llu > end %llu", who,
                         (unsigned long long)begin, (unsigned long long)end);
    if (end > g->m.num_dst)
        return base_fail(STRATA_EINVAL, "%s: end %llu > num_rows %llu", who,
                         (unsigned long long)end,
                         (unsigned long long)g->m.num_dst);
    return STRATA_OK;
}

strata_err strata_gfg_row_edges(const strata_gfg *g, uint64_t begin,
                                uint64_t end, uint64_t *count_out)
{
    const char *who = "strata_gfg_row_edges";
    int64_t first;
    int64_t last;
    strata_err err;

    err = check_rows(g, begin, end, who);
    if (err == STRATA_OK && !count_out)
        err = base_fail_null(who, "count_out");
    if (err == STRATA_OK)
        err = graph_gfg_read_row_ptr(g, begin, 1, &first);
    if (err == STRATA_OK)
        err = graph_gfg_read_row_ptr(g, end, 1, &last);
    if (err != STRATA_OK)
        return err;
    if (first < 0 || first > last || last > (int64_t)g->m.num_edges)
        return base_fail(STRATA_EINVAL,
                         "%s: corrupt store: row_ptr[%llu] = "
                         "%lld, row_ptr[%llu] = %lld, num_edges %llu",
                         who, (unsigned long long)begin, (long long)first,
                         (unsigned long long)end, (long long)last,
                         (unsigned long long)g->m.num_edges);
    *count_out = (uint64_t)(last - first);
    return STRATA_OK;
}

strata_err strata_gfg_read_rows(const strata_gfg *g, uint64_t begin,
                                uint64_t end, int64_t *row_ptr_out,
                                int64_t *col_out, size_t col_capacity)
{
    const char *who = "strata_gfg_read_rows";
    size_t rows = (size_t)(end - begin);
    int64_t first;
    uint64_t edges;
    strata_err err;

    err = check_rows(g, begin, end, who);
    if (err == STRATA_OK && !row_ptr_out)
        err = base_fail_null(who, "row_ptr_out");
    if (err == STRATA_OK)
        err = graph_gfg_read_row_ptr(g, begin, rows + 1, row_ptr_out);
    if (err != STRATA_OK)
        return err;
    first = row_ptr_out[0];
    for (size_t i = 0; i <= rows; i++) {
        if (row_ptr_out[i] < (i ? row_ptr_out[i - 1] : 0) ||
            row_ptr_out[i] > (int64_t)g->m.num_edges)
            return base_fail(STRATA_EINVAL,
                             "%s: corrupt store: row_ptr[%llu]"
                             " = %lld is not monotonic within [0, %llu]",
                             who, (unsigned long long)(begin + i),
                             (long long)row_ptr_out[i],
                             (unsigned long long)g->m.num_edges);
    }
    for (size_t i = 0; i <= rows; i++)
        row_ptr_out[i] -= first;
    edges = (uint64_t)row_ptr_out[rows];
    if (edges > 0 && !col_out)
        return base_fail(STRATA_EINVAL,
                         "%s: col_out is NULL, and rows [%llu, %llu) have "
                         "%llu edges",
                         who, (unsigned long long)begin,
                         (unsigned long long)end, (unsigned long long)edges);
    if (edges > col_capacity)
        return base_fail(STRATA_EINVAL,
                         "%s: rows [%llu, %llu) have %llu "
                         "edges; col_out holds %zu (col_capacity)",
                         who, (unsigned long long)begin,
                         (unsigned long long)end, (unsigned long long)edges,
                         col_capacity);
    err = graph_gfg_read_cols(g, (uint64_t)first, (size_t)edges, col_out);
    if (err != STRATA_OK)
        return err;
    for (size_t e = 0; e < edges; e++)
        if (col_out[e] < 0 || (uint64_t)col_out[e] >= g->m.num_src)
            return base_fail(STRATA_EINVAL,
                             "%s: corrupt store: col_idx[%llu]"
                             " = %lld is not in [0, %llu)",
                             who, (unsigned long long)first + e,
                             (long long)col_out[e],
                             (unsigned long long)g->m.num_src);
    return STRATA_OK;
}
