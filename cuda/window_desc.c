/* The cuda-ipc window descriptor codec (window_desc.h). */
#include "window_desc.h"

#include <stdio.h>
#include <string.h>

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;

    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static bool why_false(char *why, size_t cap, uint32_t rank, const char *what)
{
    snprintf(why, cap, "rank %u's window descriptor: %s", rank, what);
    return false;
}

static bool granularity_ok(uint64_t g)
{
    return g >= 512 && g <= (1ull << 30) && (g & (g - 1)) == 0;
}

/* The handle's own fields; what is NULL when they are fine. */
static const char *handle_fault(const struct cuda_window_handle *h)
{
    if (h->kind == CUDA_WINDOW_KIND_FABRIC)
        return "a fabric handle: the cuda-fabric profile is not supported";
    if (h->kind != CUDA_WINDOW_KIND_FD)
        return "unknown handle kind";
    if (h->pid <= 0)
        return "exporter pid is not > 0";
    if (h->fd < 0)
        return "fd is negative";
    if (h->ordinal < 0)
        return "device ordinal is negative";
    if (!granularity_ok(h->granularity))
        return "granularity is not a power of two of 512 B to 1 GiB";
    if (h->alloc_size == 0 || h->alloc_size % h->granularity)
        return "allocation size is not a nonzero multiple of the granularity";
    return NULL;
}

bool cuda_window_desc_encode(const struct cuda_window_handle *h, uint32_t rank,
                             uint32_t rank_count, struct chip_window_desc *desc,
                             char *why, size_t cap)
{
    const char *fault = handle_fault(h);
    uint8_t *p = (uint8_t *)desc->handle;

    if (fault)
        return why_false(why, cap, rank, fault);
    if (rank_count == 0 || rank >= rank_count)
        return why_false(why, cap, rank, "rank outside the rank count");
    memset(desc, 0, sizeof(*desc));
    desc->version = CHIP_WINDOW_DESC_VERSION;
    desc->rank = rank;
    desc->rank_count = rank_count;
    desc->mapping_size = h->alloc_size;
    snprintf(desc->profile, sizeof(desc->profile), "%s", CUDA_WINDOW_PROFILE);
    put32(p, CUDA_WINDOW_MAGIC);
    p[4] = h->kind;
    put32(p + 8, (uint32_t)h->pid);
    put32(p + 12, (uint32_t)h->fd);
    put32(p + 16, (uint32_t)h->ordinal);
    put64(p + 24, h->granularity);
    put64(p + 32, h->alloc_size);
    return true;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

bool cuda_window_desc_decode(const struct chip_window_desc *desc, uint32_t rank,
                             uint32_t rank_count,
                             struct cuda_window_handle *out, char *why,
                             size_t cap)
{
    const uint8_t *p = (const uint8_t *)desc->handle;
    struct cuda_window_handle h;
    const char *fault;

    if (desc->version != CHIP_WINDOW_DESC_VERSION)
        return why_false(why, cap, rank, "unknown version");
    if (desc->rank != rank || desc->rank_count != rank_count ||
        rank >= rank_count)
        return why_false(why, cap, rank, "rank or rank count out of place");
    if (desc->reserved)
        return why_false(why, cap, rank, "reserved field not zero");
    if (memchr(desc->profile, '\0', sizeof(desc->profile)) == NULL ||
        strcmp(desc->profile, CUDA_WINDOW_PROFILE) != 0) {
        if (memchr(desc->profile, '\0', sizeof(desc->profile)) &&
            strcmp(desc->profile, "cuda-fabric") == 0)
            return why_false(why, cap, rank,
                             "profile cuda-fabric is not supported");
        return why_false(why, cap, rank, "profile is not cuda-ipc");
    }
    if (!all_zero((const uint8_t *)desc->profile + strlen(CUDA_WINDOW_PROFILE),
                  sizeof(desc->profile) - strlen(CUDA_WINDOW_PROFILE)))
        return why_false(why, cap, rank, "profile padding not zero");
    if (get32(p) != CUDA_WINDOW_MAGIC)
        return why_false(why, cap, rank, "bad magic");
    if (!all_zero(p + 5, 3) || !all_zero(p + 20, 4) ||
        !all_zero(p + CUDA_WINDOW_HANDLE_LEN,
                  CHIP_WINDOW_HANDLE_MAX - CUDA_WINDOW_HANDLE_LEN))
        return why_false(why, cap, rank, "handle padding not zero");
    memset(&h, 0, sizeof(h));
    h.kind = p[4];
    h.pid = (int32_t)get32(p + 8);
    h.fd = (int32_t)get32(p + 12);
    h.ordinal = (int32_t)get32(p + 16);
    h.granularity = get64(p + 24);
    h.alloc_size = get64(p + 32);
    fault = handle_fault(&h);
    if (fault)
        return why_false(why, cap, rank, fault);
    if (desc->mapping_size != h.alloc_size)
        return why_false(why, cap, rank,
                         "mapping size differs from the allocation size");
    *out = h;
    return true;
}

uint64_t cuda_window_round(uint64_t window_size, uint64_t granularity)
{
    if (!window_size || !granularity ||
        window_size > UINT64_MAX - (granularity - 1))
        return 0;
    return (window_size + granularity - 1) / granularity * granularity;
}
