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

/* A page nobody made yet is made, so that a member that maps the windows
 * later finds the domain broken; the caller unlinks it with them. */
static void mark(const char *name, const char *label, uint32_t rank,
                 const char *why)
{
    char msg[CHIP_PEER_WHY_MAX];

    /* A long reason is cut: the page holds what fits. */
    if (snprintf(msg, sizeof(msg), "%s: %s", label, why) < 0)
        msg[0] = '\0';
    if (!chip_domain_ctl_mark_name(name, true, rank, msg))
        LOG_WARN("cannot mark %s: %s", name, strata_errmsg());
}

strata_err orch_mark_on_death(struct orch_sched *s, int ep, const char *name,
                              const char *label, uint32_t rank, uint64_t key)
{
    char why[STRATA_ERRMSG_MAX];
    struct orch_mark *m;
    strata_err err;

    if (strlen(name) >= sizeof(m->name) || strlen(label) >= sizeof(m->label))
        return base_fail(STRATA_EINVAL, "control page '%s' ('%s'): too long",
                         name, label);
    pthread_mutex_lock(&s->mu);
    if (orch_child_dead_locked(s, ep, why, sizeof(why))) {
        mark(name, label, rank, why);
        pthread_mutex_unlock(&s->mu);
        return STRATA_OK;
    }
    err = orch_reserve((void **)&s->marks, &s->cap_marks, s->num_marks + 1,
                       sizeof(*s->marks));
    if (!err) {
        m = &s->marks[s->num_marks++];
        m->ep = ep;
        m->rank = rank;
        m->key = key;
        snprintf(m->name, sizeof(m->name), "%s", name);
        snprintf(m->label, sizeof(m->label), "%s", label);
    }
    pthread_mutex_unlock(&s->mu);
    return err;
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
            mark(s->marks[i].name, s->marks[i].label, s->marks[i].rank, why);
}
