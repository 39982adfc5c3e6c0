/* A session's shadows of its parent's buffers: made on first use (or at
 * BUFFER_CREATE), kept across tasks, pinned while a task names them,
 * counted against the session's max_buffer_bytes. */
#include "session_int.h"

#include "base/alloc.h"
#include "base/err.h"
#include "worker_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The most buffers one session holds: each is a /dev/shm file and a
 * mapping (the kernel allows about 65530 mappings a process). */
#define MAX_SHADOWS 32768u

/* What a buffer of size bytes costs: whole pages of /dev/shm, at least
 * one, so that a flood of 1-byte buffers is counted as what it takes. */
static uint64_t charge_of(size_t size)
{
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

    if (size == 0)
        return page;
    if (size > UINT64_MAX - page)
        return UINT64_MAX;
    return ((uint64_t)size + page - 1) / page * page;
}

/* Frees the shadows released while a run past its deadline might still
 * use them, once none runs (mu held). */
static void reap_gone(struct session *s)
{
    if (s->w && worker_bounded_late_running(s->w))
        return;
    for (size_t i = 0; i < s->num_shadows;) {
        struct shadow *sh = &s->shadows[i];
        size_t size = strata_buffer_size(sh->buf);

        if (!sh->gone || strata_buffer_release(sh->buf) != STRATA_OK) {
            i++;
            continue;
        }
        s->shadow_bytes -= charge_of(size);
        *sh = s->shadows[--s->num_shadows];
    }
}

/* The parent's buffer id (mu held): gone ones are no longer its. */
static struct shadow *shadow_find(struct session *s, uint64_t id)
{
    for (size_t i = 0; i < s->num_shadows; i++)
        if (s->shadows[i].id == id && !s->shadows[i].gone)
            return &s->shadows[i];
    return NULL;
}

strata_buffer *session_shadow_lookup(struct session *s, uint64_t id)
{
    struct shadow *sh;

    pthread_mutex_lock(&s->mu);
    sh = shadow_find(s, id);
    pthread_mutex_unlock(&s->mu);
    return sh ? sh->buf : NULL;
}

/* The shadow of buffer id, made on first use; create: only make it
 * (BUFFER_CREATE, resident), STRATA_EEXIST if it is there. */
strata_buffer *session_shadow_get(struct session *s, uint64_t id, size_t size,
                                  bool create, bool *resident, strata_err *err)
{
    strata_buffer *b = NULL;
    struct shadow *sh;

    pthread_mutex_lock(&s->mu);
    reap_gone(s);
    sh = shadow_find(s, id);
    if (sh) {
        b = sh->buf;
        *resident = sh->resident;
    }
    if (b && create) {
        *err = base_fail(STRATA_EEXIST, "buffer %llu exists",
                         (unsigned long long)id);
        b = NULL;
    } else if (b && strata_buffer_size(b) != size) {
        *err = base_fail(STRATA_EPROTO, "buffer %llu changed size",
                         (unsigned long long)id);
        b = NULL;
    } else if (!b &&
               charge_of(size) > s->lim.max_buffer_bytes - s->shadow_bytes) {
        char pages[64] = "";

        if (charge_of(size) != size)
            snprintf(pages, sizeof(pages), " (%llu in whole pages)",
                     (unsigned long long)charge_of(size));
        *err = base_fail(STRATA_ENOMEM,
                         "buffer %llu of %zu bytes%s: this session holds "
                         "%llu bytes of buffers, and strata-node allows %llu "
                         "(--max-buffer-bytes)",
                         (unsigned long long)id, size, pages,
                         (unsigned long long)s->shadow_bytes,
                         (unsigned long long)s->lim.max_buffer_bytes);
    } else if (!b && s->num_shadows >= MAX_SHADOWS) {
        *err = base_fail(STRATA_ENOMEM,
                         "buffer %llu: this session holds %zu buffers, the "
                         "most one session may hold (release some first)",
                         (unsigned long long)id, s->num_shadows);
    } else if (!b) {
        if (s->num_shadows == s->cap_shadows) {
            size_t cap = s->cap_shadows ? 2 * s->cap_shadows : 8;
            void *p = base_realloc(s->shadows, cap * sizeof(*s->shadows));

            if (!p) {
                *err = base_fail(STRATA_ENOMEM, "out of memory");
                goto out;
            }
            s->shadows = p;
            s->cap_shadows = cap;
        }
        *err = strata_worker_create_buffer(s->w, size, &b);
        if (!*err) {
            s->shadows[s->num_shadows].id = id;
            s->shadows[s->num_shadows].buf = b;
            s->shadows[s->num_shadows].resident = create;
            s->shadows[s->num_shadows].pins = 0;
            s->shadows[s->num_shadows].gone = false;
            s->num_shadows++;
            s->shadow_bytes += charge_of(size);
            *resident = create;
        }
    }
out:
    pthread_mutex_unlock(&s->mu);
    return b;
}

/* A task in flight names the shadow: BUFFER_RELEASE waits for it. */
void session_shadow_pin(struct session *s, struct stask *t, uint64_t id)
{
    struct shadow *sh;

    pthread_mutex_lock(&s->mu);
    sh = shadow_find(s, id);
    if (sh) {
        sh->pins++;
        t->pinned[t->num_pinned++] = id;
    }
    pthread_mutex_unlock(&s->mu);
}

void session_shadow_unpin_all(struct session *s, struct stask *t)
{
    pthread_mutex_lock(&s->mu);
    for (uint32_t i = 0; i < t->num_pinned; i++) {
        struct shadow *sh = shadow_find(s, t->pinned[i]);

        if (sh && sh->pins > 0)
            sh->pins--;
    }
    t->num_pinned = 0;
    pthread_mutex_unlock(&s->mu);
}

strata_err session_shadow_release(struct session *s, uint64_t id)
{
    strata_err err = STRATA_OK;
    struct shadow *sh;

    pthread_mutex_lock(&s->mu);
    reap_gone(s);
    sh = shadow_find(s, id);
    if (!sh) {
        err = base_fail(STRATA_ENOENT, "no buffer %llu on this node",
                        (unsigned long long)id);
    } else if (sh->pins) {
        err = base_fail(STRATA_ESTATE,
                        "buffer %llu is named by %u task(s) in flight",
                        (unsigned long long)id, sh->pins);
    } else if (s->w && worker_bounded_late_running(s->w)) {
        /* A run past its deadline may still use it: released for the
         * parent now (its id is free, it reads as gone), freed once no
         * such run is left; its bytes count until then. */
        sh->gone = true;
    } else {
        size_t size = strata_buffer_size(sh->buf);

        err = strata_buffer_release(sh->buf);
        if (!err) {
            s->shadow_bytes -= charge_of(size);
            *sh = s->shadows[--s->num_shadows];
        }
    }
    pthread_mutex_unlock(&s->mu);
    return err;
}
