/* Mapping worker buffers in a child, once per buffer id. */
#include "chip/bufmap.h"
#include "base/alloc.h"
#include "base/err.h"
#include "chip/chip.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

void chip_buffer_name(char *out, size_t cap, pid_t creator, uint64_t id)
{
    snprintf(out, cap, "/strata-%u-%d-b%llu", (unsigned)getuid(), (int)creator,
             (unsigned long long)id);
}

void bufmap_init(struct bufmap *m)
{
    m->entries = NULL;
    m->count = 0;
    m->cap = 0;
}

static strata_err map_new(struct bufmap *m, pid_t creator, uint64_t id,
                          size_t size, void **base_out)
{
    char name[64];
    void *base;
    int fd;

    if (m->count == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        void *p = base_realloc(m->entries, cap * sizeof(*m->entries));

        if (!p)
            return base_fail(STRATA_ENOMEM, "buffer map: out of memory");
        m->entries = p;
        m->cap = cap;
    }
    chip_buffer_name(name, sizeof(name), creator, id);
    fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return base_fail_errno(errno, "cannot open buffer %s", name);
    base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED)
        return base_fail_errno(errno, "cannot map buffer %s", name);
    m->entries[m->count].id = id;
    m->entries[m->count].creator = creator;
    m->entries[m->count].size = size;
    m->entries[m->count].base = base;
    m->count++;
    *base_out = base;
    return STRATA_OK;
}

strata_err bufmap_get(struct bufmap *m, pid_t creator, uint64_t id, size_t size,
                      void **base_out)
{
    for (size_t i = 0; i < m->count; i++) {
        if (m->entries[i].id == id && m->entries[i].creator == creator) {
            if (m->entries[i].size != size)
                return base_fail(
                    STRATA_EPROTO, "buffer %llu: size %zu, mapped as %zu",
                    (unsigned long long)id, size, m->entries[i].size);
            *base_out = m->entries[i].base;
            return STRATA_OK;
        }
    }
    return map_new(m, creator, id, size, base_out);
}

void bufmap_drop(struct bufmap *m, pid_t creator, uint64_t id)
{
    for (size_t i = 0; i < m->count; i++) {
        if (m->entries[i].id == id && m->entries[i].creator == creator) {
            munmap(m->entries[i].base, m->entries[i].size);
            m->entries[i] = m->entries[--m->count];
            return;
        }
    }
}

void bufmap_fini(struct bufmap *m)
{
    for (size_t i = 0; i < m->count; i++)
        munmap(m->entries[i].base, m->entries[i].size);
    base_free(m->entries);
    bufmap_init(m);
}
