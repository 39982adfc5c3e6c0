/* Control pages (chip/peer.h) to mark when a child dies: the layers above
 * register, for a child, the page of each domain it is a member of (or,
 * on an L4, has members on); the scheduler marks them by name once it
 * knows the child is dead, under its lock, so that those who register
 * need no lock of their own there. */
#include "base/err.h"
#include "base/log.h"
#include "chip/peer.h"
#include "orch_int.h"

#include <stdio.h>
#include <string.h>

/* By name, a page nobody made yet is made with create, so that a member
 * that maps the windows later finds the domain broken; the caller
 * unlinks it with them. */
static void mark(const struct orch_mark *m, const char *why)
{
    char msg[CHIP_PEER_WHY_MAX];
    strata_err err = STRATA_OK;

    /* A long reason is cut: the page holds what fits. */
    if (snprintf(msg, sizeof(msg), "%s: %s", m->label, why) < 0)
        msg[0] = '\0';
    if (m->page)
        chip_domain_ctl_mark(m->page, m->rank, msg);
    else
        err = chip_domain_ctl_mark_name(m->name, m->create, m->rank, msg);
    if (err && err != STRATA_ENOENT) /* ENOENT: gone with its domain */
        LOG_WARN("cannot mark %s: %s", m->name, strata_errmsg());
}

static strata_err add(struct orch_sched *s, const struct orch_mark *m)
{
    char why[STRATA_ERRMSG_MAX];
    strata_err err;

    pthread_mutex_lock(&s->mu);
    if (orch_child_dead_locked(s, m->ep, why, sizeof(why))) {
        mark(m, why);
        pthread_mutex_unlock(&s->mu);
        return STRATA_OK;
    }
    err = orch_reserve((void **)&s->marks, &s->cap_marks, s->num_marks + 1,
                       sizeof(*s->marks));
    if (!err)
        s->marks[s->num_marks++] = *m;
    pthread_mutex_unlock(&s->mu);
    return err;
}

static strata_err fill(struct orch_mark *m, int ep, const char *name,
                       const char *label, uint32_t rank, uint64_t key)
{
    if (strlen(name) >= sizeof(m->name) || strlen(label) >= sizeof(m->label))
        return base_fail(STRATA_EINVAL, "control page '%s' ('%s'): too long",
                         name, label);
    memset(m, 0, sizeof(*m));
    m->ep = ep;
    m->rank = rank;
    m->key = key;
    snprintf(m->name, sizeof(m->name), "%s", name);
    snprintf(m->label, sizeof(m->label), "%s", label);
    return STRATA_OK;
}

strata_err orch_mark_on_death(struct orch_sched *s, int ep, const char *name,
                              bool create, const char *label, uint32_t rank,
                              uint64_t key)
{
    struct orch_mark m;
    strata_err err = fill(&m, ep, name, label, rank, key);

    m.create = create;
    return err ? err : add(s, &m);
}

strata_err orch_mark_page_on_death(struct orch_sched *s, int ep,
                                   struct chip_domain_ctl *page,
                                   const char *label, uint32_t rank,
                                   uint64_t key)
{
    struct orch_mark m;
    strata_err err = fill(&m, ep, "", label, rank, key);

    m.page = page;
    return err ? err : add(s, &m);
}

void orch_mark_forget_locked(struct orch_sched *s, uint64_t key)
{
    uint32_t k = 0;

    for (uint32_t i = 0; i < s->num_marks; i++)
        if (s->marks[i].key != key)
            s->marks[k++] = s->marks[i];
    s->num_marks = k;
}

void orch_mark_forget(struct orch_sched *s, uint64_t key)
{
    pthread_mutex_lock(&s->mu);
    orch_mark_forget_locked(s, key);
    pthread_mutex_unlock(&s->mu);
}

void orch_marks_died_locked(struct orch_sched *s, int ep, const char *why)
{
    for (uint32_t i = 0; i < s->num_marks; i++)
        if (s->marks[i].ep == ep)
            mark(&s->marks[i], why);
}
