/* Checking a domain spec completely before anything is allocated, and the
 * registry of live domains that names are checked against. */
#include "base/err.h"
#include "domain/buffers.h"
#include "domain_int.h"

#include <pthread.h>
#include <string.h>

static struct strata_domain *live;
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;

void domain_live_add(struct strata_domain *d)
{
    pthread_mutex_lock(&live_mu);
    d->next_live = live;
    live = d;
    pthread_mutex_unlock(&live_mu);
}

void domain_live_remove(struct strata_domain *d)
{
    pthread_mutex_lock(&live_mu);
    for (struct strata_domain **pp = &live; *pp; pp = &(*pp)->next_live) {
        if (*pp == d) {
            *pp = d->next_live;
            break;
        }
    }
    pthread_mutex_unlock(&live_mu);
}

void domain_live_each(void (*fn)(struct strata_domain *d, void *arg), void *arg)
{
    pthread_mutex_lock(&live_mu);
    for (struct strata_domain *d = live; d; d = d->next_live)
        fn(d, arg);
    pthread_mutex_unlock(&live_mu);
}

bool domain_name_live(strata_run *run, const char *name)
{
    bool found = false;

    pthread_mutex_lock(&live_mu);
    for (struct strata_domain *d = live; d && !found; d = d->next_live)
        found = d->run == run &&
                !__atomic_load_n(&d->released, __ATOMIC_ACQUIRE) &&
                strcmp(d->name, name) == 0;
    pthread_mutex_unlock(&live_mu);
    return found;
}

static strata_err check_workers(struct orch_sched *s,
                                const strata_domain_spec *spec)
{
    if (!spec->workers || spec->num_workers == 0)
        return base_fail(STRATA_EINVAL, "domain '%s': no workers", spec->name);
    /* Members are distinct chips of this worker: a count past that is
     * refused before the array is read, so it cannot overrun it. */
    if (spec->num_workers > orch_num_chips(s))
        return base_fail(STRATA_EINVAL,
                         "domain '%s': num_workers %zu is more than the "
                         "worker's %zu chips",
                         spec->name, spec->num_workers, orch_num_chips(s));
    for (size_t i = 0; i < spec->num_workers; i++) {
        if (orch_chip_index(s, spec->workers[i]) < 0)
            return base_fail(STRATA_EINVAL,
                             "domain '%s': workers[%zu] = %d is not a chip "
                             "of this worker",
                             spec->name, i, spec->workers[i]);
        for (size_t j = 0; j < i; j++)
            if (spec->workers[j] == spec->workers[i])
                return base_fail(STRATA_EINVAL,
                                 "domain '%s': chip %d appears twice in "
                                 "workers",
                                 spec->name, spec->workers[i]);
    }
    return STRATA_OK;
}

static strata_err check_buffer(const char *kind, const char *name,
                               const strata_comm_buffer_spec *buffers, size_t i)
{
    const strata_comm_buffer_spec *b = &buffers[i];
    size_t esize = strata_dtype_size(b->dtype);

    if (!b->name || !b->name[0] || strlen(b->name) >= STRATA_DOMAIN_NAME_MAX)
        return base_fail(STRATA_EINVAL,
                         "%s '%s': buffers[%zu] needs a name of 1..%d bytes",
                         kind, name, i, STRATA_DOMAIN_NAME_MAX - 1);
    for (size_t j = 0; j < i; j++)
        if (strcmp(buffers[j].name, b->name) == 0)
            return base_fail(STRATA_EINVAL, "%s '%s': buffer name '%s' twice",
                             kind, name, b->name);
    if (!esize)
        return base_fail(STRATA_EINVAL,
                         "%s '%s': buffer '%s' has an unknown dtype", kind,
                         name, b->name);
    if (b->count > SIZE_MAX / esize || b->count * esize != b->nbytes)
        return base_fail(STRATA_EINVAL,
                         "%s '%s': buffer '%s': count %zu x %zu-byte dtype "
                         "!= nbytes %zu",
                         kind, name, b->name, b->count, esize, b->nbytes);
    if (b->nbytes == 0)
        return base_fail(STRATA_EINVAL, "%s '%s': buffer '%s' is empty", kind,
                         name, b->name);
    return STRATA_OK;
}

strata_err domain_check_buffers(const char *kind, const char *name,
                                const strata_comm_buffer_spec *buffers,
                                size_t n, size_t window_size)
{
    size_t total = 0;
    strata_err err;

    if (n && !buffers)
        return base_fail(STRATA_EINVAL,
                         "%s '%s': num_buffers is %zu but buffers is NULL",
                         kind, name, n);
    /* Each buffer takes at least a byte of the window: a count past that
     * is refused before the array is read, so it cannot overrun it. */
    if (n > window_size)
        return base_fail(STRATA_EINVAL,
                         "%s '%s': num_buffers %zu is more than a window of "
                         "%zu bytes can hold",
                         kind, name, n, window_size);
    for (size_t i = 0; i < n; i++) {
        err = check_buffer(kind, name, buffers, i);
        if (err)
            return err;
        if (buffers[i].nbytes > SIZE_MAX - total)
            return base_fail(STRATA_EINVAL, "%s '%s': buffers overflow", kind,
                             name);
        total += buffers[i].nbytes;
    }
    if (total > window_size)
        return base_fail(STRATA_EINVAL,
                         "%s '%s': buffers need %zu bytes, more than "
                         "window_size %zu",
                         kind, name, total, window_size);
    return STRATA_OK;
}

strata_err domain_check_window(const char *kind, const char *name,
                               size_t window_size, size_t ranks)
{
    if (window_size == 0)
        return base_fail(STRATA_EINVAL, "%s '%s': window_size is 0", kind,
                         name);
    if (window_size > DOMAIN_MAP_MAX / ranks)
        return base_fail(STRATA_EINVAL,
                         "%s '%s': window_size %zu x %zu ranks is more than "
                         "the %llu TiB a member can map",
                         kind, name, window_size, ranks, DOMAIN_MAP_MAX >> 40);
    return STRATA_OK;
}

strata_err domain_validate(struct orch_sched *s, strata_run *run,
                           const strata_domain_spec *spec)
{
    strata_err err;

    if (!spec->name || !spec->name[0] ||
        strlen(spec->name) >= STRATA_DOMAIN_NAME_MAX)
        return base_fail(STRATA_EINVAL, "a domain needs a name of 1..%d bytes",
                         STRATA_DOMAIN_NAME_MAX - 1);
    err = check_workers(s, spec);
    if (!err)
        err = domain_check_window("domain", spec->name, spec->window_size,
                                  spec->num_workers);
    if (!err)
        err = domain_check_buffers("domain", spec->name, spec->buffers,
                                   spec->num_buffers, spec->window_size);
    if (!err && domain_name_live(run, spec->name))
        err = base_fail(STRATA_EINVAL,
                        "domain '%s': a live domain of this run already has "
                        "that name",
                        spec->name);
    return err;
}
