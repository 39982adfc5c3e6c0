/* Writing a .gfg store: everything goes into a temporary directory beside
 * the destination, is fsynced, and is published by one rename that never
 * replaces an existing path. The saver holds an flock on that directory
 * while it writes: a save killed midway (Ctrl-C on gfg convert) leaves it
 * unlocked, and the next save to the same destination removes it. */
#define _GNU_SOURCE
#include "base/alloc.h"
#include "base/err.h"
#include "base/fault.h"
#include "graph_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Indices encoded per write (512 KiB of int64). */
#define SAVE_CHUNK ((size_t)1 << 16)

static const char *const files[] = {"row_ptr.bin", "col_idx.bin",
                                    "manifest.json"};

struct save {
    char *parent; /* directory that receives the store */
    char *tmp;    /* parent/.name.XXXXXX while it exists, else NULL */
    int dirfd;    /* tmp, open */
};

static strata_err fail_sys(int errnum, const char *what, const char *path)
{
    strata_err code = STRATA_ESYS;

    if (errnum == ENOENT || errnum == ENOTDIR)
        code = STRATA_ENOENT;
    else if (errnum == EEXIST)
        code = STRATA_EEXIST;
    else if (errnum == ENOMEM)
        code = STRATA_ENOMEM;
    else if (errnum == EIO || errnum == ENOSPC || errnum == EDQUOT)
        code = STRATA_EIO;
    return base_fail(code, "strata_gfg_save: %s %s: %s", what, path,
                     strerror(errnum));
}

/* Splits path into its parent directory and last component. */
static strata_err split_path(const char *path, char **parent_out,
                             char **name_out)
{
    size_t len = strlen(path);
    char *slash;
    char *copy;

    while (len > 1 && path[len - 1] == '/')
        len--;
    copy = base_malloc(len + 3);
    if (!copy)
        return base_fail(STRATA_ENOMEM, "strata_gfg_save: no memory");
    memcpy(copy, path, len);
    copy[len] = '\0';
    slash = strrchr(copy, '/');
    *name_out = slash ? slash + 1 : copy;
    if (!**name_out || !strcmp(*name_out, ".") || !strcmp(*name_out, "..")) {
        base_free(copy);
        return base_fail(STRATA_EINVAL,
                         "strata_gfg_save: path \"%s\" does "
                         "not name a new directory",
                         path);
    }
    if (!slash) {
        /* "name" becomes ".\0name": parent "." and the name after it. */
        memmove(copy + 2, copy, len + 1);
        copy[0] = '.';
        copy[1] = '\0';
        *name_out = copy + 2;
    } else if (slash == copy) {
        /* "/name" becomes "/\0name" by shifting the name one byte. */
        memmove(copy + 2, copy + 1, len);
        copy[1] = '\0';
        *name_out = copy + 2;
    } else {
        *slash = '\0';
    }
    *parent_out = copy;
    return STRATA_OK;
}

static void put_le(unsigned char *p, uint64_t v, size_t item)
{
    for (size_t k = 0; k < item; k++, v >>= 8)
        p[k] = (unsigned char)v;
}

static strata_err write_all(int fd, const void *buf, size_t n, const char *file)
{
    const char *p = buf;

    while (n > 0) {
        ssize_t put;

        if (BASE_FAULT("graph.gfg_save.write"))
            return base_fail(STRATA_EIO,
                             "strata_gfg_save: writing %s "
                             "failed (injected)",
                             file);
        put = write(fd, p, n);
        if (put < 0 && errno == EINTR)
            continue;
        if (put < 0)
            return fail_sys(errno, "writing", file);
        p += put;
        n -= (size_t)put;
    }
    return STRATA_OK;
}

static strata_err sync_fd(int fd, const char *what)
{
    if (BASE_FAULT("graph.gfg_save.fsync"))
        return base_fail(STRATA_EIO,
                         "strata_gfg_save: fsync of %s failed "
                         "(injected)",
                         what);
    if (fsync(fd) != 0)
        return fail_sys(errno, "fsync of", what);
    return STRATA_OK;
}

/* Creates file in the temporary directory with n bytes (or, when values
 * is set, count indices encoded to item bytes) and fsyncs it. */
static strata_err write_file(struct save *s, const char *file,
                             const int64_t *values, size_t count, size_t item,
                             const char *text, size_t n)
{
    unsigned char *buf = NULL;
    strata_err err = STRATA_OK;
    int fd;

    fd = openat(s->dirfd, file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return fail_sys(errno, "creating", file);
    if (values && count) {
        buf = base_malloc(SAVE_CHUNK * item);
        if (!buf)
            err = base_fail(STRATA_ENOMEM, "strata_gfg_save: no memory");
    }
    for (size_t done = 0; err == STRATA_OK && values && done < count;) {
        size_t k = count - done < SAVE_CHUNK ? count - done : SAVE_CHUNK;

        for (size_t i = 0; i < k; i++)
            put_le(buf + i * item, (uint64_t)values[done + i], item);
        err = write_all(fd, buf, k * item, file);
        done += k;
    }
    if (err == STRATA_OK && !values)
        err = write_all(fd, text, n, file);
    if (err == STRATA_OK)
        err = sync_fd(fd, file);
    base_free(buf);
    if (close(fd) != 0 && err == STRATA_OK)
        err = fail_sys(errno, "closing", file);
    return err;
}

/* Publishes tmp as path without ever replacing what is there. */
static strata_err publish(const struct save *s, const char *path)
{
    struct stat st;

    if (BASE_FAULT("graph.gfg_save.rename"))
        return base_fail(STRATA_EIO, "strata_gfg_save: rename failed "
                                     "(injected)");
    if (renameat2(AT_FDCWD, s->tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
        return STRATA_OK;
    if (errno != EINVAL && errno != ENOSYS)
        return fail_sys(errno, "renaming the store to", path);
    /* The file system lacks RENAME_NOREPLACE: check, then rename. */
    if (lstat(path, &st) == 0)
        return fail_sys(EEXIST, "publishing", path);
    if (rename(s->tmp, path) != 0)
        return fail_sys(errno, "renaming the store to", path);
    return STRATA_OK;
}

/* Syncs the parent so the rename itself is durable. */
static strata_err sync_parent(const char *parent)
{
    strata_err err;
    int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0)
        return fail_sys(errno, "opening", parent);
    if (BASE_FAULT("graph.gfg_save.sync_parent"))
        err = base_fail(STRATA_EIO,
                        "strata_gfg_save: fsync of %s failed "
                        "(injected)",
                        parent);
    else if (fsync(fd) != 0)
        err = fail_sys(errno, "fsync of", parent);
    else
        err = STRATA_OK;
    close(fd);
    return err;
}

static strata_err check_fits(const strata_csr_view *csr, strata_dtype dtype)
{
    int64_t entries = csr->row_ptr[csr->num_rows];

    if (dtype != STRATA_I32 && dtype != STRATA_I64)
        return base_fail(STRATA_EINVAL,
                         "strata_gfg_save: index_dtype %d is "
                         "not STRATA_I32 or STRATA_I64",
                         (int)dtype);
    if (dtype == STRATA_I64)
        return STRATA_OK;
    if (entries > INT32_MAX)
        return base_fail(STRATA_EINVAL,
                         "strata_gfg_save: %lld edges do not "
                         "fit int32 offsets",
                         (long long)entries);
    for (int64_t e = 0; e < entries; e++)
        if (csr->col_idx[e] > INT32_MAX)
            return base_fail(STRATA_EINVAL,
                             "strata_gfg_save: col_idx[%lld] "
                             "= %lld does not fit int32",
                             (long long)e, (long long)csr->col_idx[e]);
    return STRATA_OK;
}

/* Writes the three files into the fresh temporary directory. */
static strata_err write_store(struct save *s, const strata_csr_view *csr,
                              strata_dtype dtype)
{
    struct graph_manifest m = {
        .version = 1,
        .index_dtype = dtype,
        .num_src = csr->num_entities,
        .num_dst = csr->num_rows,
        .num_edges = (uint64_t)csr->row_ptr[csr->num_rows],
        .sorted_by_dst = true,
    };
    size_t item = dtype == STRATA_I32 ? 4 : 8;
    char text[512];
    size_t n = graph_manifest_format(&m, text, sizeof(text));
    strata_err err;

    err = write_file(s, files[0], csr->row_ptr, (size_t)csr->num_rows + 1, item,
                     NULL, 0);
    if (err == STRATA_OK)
        err = write_file(s, files[1], csr->col_idx, (size_t)m.num_edges, item,
                         NULL, 0);
    if (err == STRATA_OK)
        err = write_file(s, files[2], NULL, 0, 0, text, n);
    if (err == STRATA_OK)
        err = sync_fd(s->dirfd, s->tmp);
    return err;
}

/* Removes the temporary directory and whatever was written into it. */
static void discard(struct save *s)
{
    if (s->dirfd >= 0) {
        for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
            (void)unlinkat(s->dirfd, files[i], 0);
        close(s->dirfd);
        s->dirfd = -1;
    }
    if (s->tmp) {
        (void)rmdir(s->tmp);
        base_free(s->tmp);
        s->tmp = NULL;
    }
}

/* Whether entry is one of our temporary directories for name:
 * ".<name>." and mkdtemp's six characters. */
static bool tmp_of_name(const char *entry, const char *name)
{
    size_t n = strlen(name);

    return entry[0] == '.' && strncmp(entry + 1, name, n) == 0 &&
           entry[1 + n] == '.' && strlen(entry + 2 + n) == 6;
}

/* Removes the temporary directories of earlier saves to name that no
 * live saver holds (flock) and that are older than a second (a saver
 * locks its directory right after making it). Only our files go; a
 * directory holding anything else stays. */
static void sweep_stale(const char *parent, const char *name)
{
    DIR *d = opendir(parent);
    struct dirent *e;

    while (d && (e = readdir(d)) != NULL) {
        struct stat st;
        int fd;

        if (!tmp_of_name(e->d_name, name))
            continue;
        fd = openat(dirfd(d), e->d_name,
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (fstat(fd, &st) == 0 && st.st_mtime < time(NULL) - 1 &&
            st.st_uid == getuid() && flock(fd, LOCK_EX | LOCK_NB) == 0) {
            for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
                (void)unlinkat(fd, files[i], 0);
            (void)unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
        }
        close(fd);
    }
    if (d)
        closedir(d);
}

static strata_err make_tmp(struct save *s, const char *name)
{
    size_t n = strlen(s->parent) + strlen(name) + 10;

    s->tmp = base_malloc(n);
    if (!s->tmp)
        return base_fail(STRATA_ENOMEM, "strata_gfg_save: no memory");
    snprintf(s->tmp, n, "%s/.%s.XXXXXX", s->parent, name);
    if (!mkdtemp(s->tmp)) {
        strata_err err = fail_sys(errno, "creating a directory in", s->parent);

        base_free(s->tmp);
        s->tmp = NULL;
        return err;
    }
    s->dirfd = open(s->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dirfd < 0)
        return fail_sys(errno, "opening", s->tmp);
    /* Held until the directory is published or discarded. */
    if (flock(s->dirfd, LOCK_EX | LOCK_NB) != 0)
        return fail_sys(errno, "locking", s->tmp);
    return STRATA_OK;
}

strata_err strata_gfg_save(const char *path, const strata_csr_view *csr,
                           strata_dtype index_dtype)
{
    struct save s = {.parent = NULL, .tmp = NULL, .dirfd = -1};
    struct stat st;
    char *name = NULL;
    strata_err err;

    if (!path || !csr)
        return base_fail_null("strata_gfg_save", !path ? "path" : "csr");
    if (!*path)
        return base_fail(STRATA_EINVAL, "strata_gfg_save: path is empty");
    err = graph_csr_check(csr, "strata_gfg_save");
    if (err == STRATA_OK)
        err = check_fits(csr, index_dtype);
    if (err != STRATA_OK)
        return err;
    if (lstat(path, &st) == 0)
        return base_fail(STRATA_EEXIST, "strata_gfg_save: %s already exists",
                         path);
    if (errno != ENOENT)
        return fail_sys(errno, "checking", path);
    err = split_path(path, &s.parent, &name);
    if (err != STRATA_OK)
        return err;
    sweep_stale(s.parent, name);
    err = make_tmp(&s, name);
    if (err == STRATA_OK)
        err = write_store(&s, csr, index_dtype);
    if (err == STRATA_OK)
        err = publish(&s, path);
    if (err != STRATA_OK)
        goto err_discard;
    close(s.dirfd);
    base_free(s.tmp);
    err = sync_parent(s.parent);
    base_free(s.parent);
    return err;

err_discard:
    discard(&s);
    base_free(s.parent);
    return err;
}
