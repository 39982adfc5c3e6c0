/* The halo kernels' cache of one chip (halo_cache.h). */
#include "halo_cache.h"

#include <string.h>
#include <unistd.h>

/* Enough for a chip that serves a few handles in turn (a forward and a
 * VJP, two graphs, two chip counts) without rebuilding on every call. */
#define CACHE_SLOTS 8

struct slot {
    bool used;
    struct halo_cache_key key;
    uint64_t stamp; /* last use */
    size_t bytes;
    void *data;
    void (*drop)(void *data);
};

static struct slot slots[CACHE_SLOTS];
static uint64_t clock_now;

size_t halo_cache_cap(void)
{
    static size_t cap;

    if (!cap) {
        long pages = sysconf(_SC_PHYS_PAGES);
        long page = sysconf(_SC_PAGESIZE);
        size_t c = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 8
                                         : (size_t)1 << 30;

        cap = c < ((size_t)256 << 20) ? (size_t)256 << 20 : c;
    }
    return cap;
}

static bool same(struct halo_cache_key a, struct halo_cache_key b)
{
    return a.plan_id == b.plan_id && a.rank == b.rank && a.kind == b.kind;
}

static struct slot *slot_of(struct halo_cache_key key)
{
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (slots[i].used && same(slots[i].key, key))
            return &slots[i];
    return NULL;
}

static void slot_drop(struct slot *s)
{
    s->drop(s->data);
    memset(s, 0, sizeof(*s));
}

void *halo_cache_find(struct halo_cache_key key)
{
    struct slot *s = slot_of(key);

    if (!s)
        return NULL;
    s->stamp = ++clock_now;
    return s->data;
}

bool halo_cache_keep(struct halo_cache_key key, void *data, size_t bytes,
                     void (*drop)(void *data))
{
    struct slot *s = slot_of(key);

    if (s && s->data == data) {
        s->stamp = ++clock_now;
        return true;
    }
    if (s)
        slot_drop(s);
    if (bytes > halo_cache_cap())
        return false;
    for (;;) {
        struct slot *free_slot = NULL, *oldest = NULL;
        size_t total = 0;

        for (int i = 0; i < CACHE_SLOTS; i++) {
            if (!slots[i].used) {
                free_slot = free_slot ? free_slot : &slots[i];
                continue;
            }
            total += slots[i].bytes;
            if (!oldest || slots[i].stamp < oldest->stamp)
                oldest = &slots[i];
        }
        if (free_slot && total + bytes <= halo_cache_cap()) {
            *free_slot =
                (struct slot){true, key, ++clock_now, bytes, data, drop};
            return true;
        }
        slot_drop(oldest);
    }
}
