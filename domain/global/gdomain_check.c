/* Global domains, the L4 side: the checks a spec passes, against what
 * the L4 knows of its nodes, before any message goes out (gdomain.c
 * sends). */
#include "base/err.h"
#include "domain/buffers.h"
#include "gdomain_int.h"
#include "wire/tls.h"

#include <string.h>

static bool has_chip(const struct gdhost_node *ni, int chip)
{
    for (size_t i = 0; i < ni->num_chips; i++)
        if (ni->chips[i] == chip)
            return true;
    return false;
}

/* A sim domain maps every window into every member's process and the
 * L4's: a remote member must be on the L4's host. Judged by the boot id
 * and host name the node reported; a node that reported none (an older
 * strata-node) by the address the L4 reaches it at. */
static strata_err check_host(const strata_global_domain_spec *s, int id,
                             const struct gdhost_node *ni)
{
    struct base_host_id me;

    if (!ni->host_id || !ni->host_id->boot[0]) {
        if (wire_addr_is_loopback(ni->host))
            return STRATA_OK;
        return base_fail(STRATA_EINVAL,
                         "global domain '%s': the sim profile needs every "
                         "node on one host, and node %d is at %s",
                         s->name, id, ni->host);
    }
    base_host_id(&me);
    if (base_host_id_same(ni->host_id, &me))
        return STRATA_OK;
    return base_fail(STRATA_EINVAL,
                     "global domain '%s': the sim profile needs every node "
                     "on one host, and node %d is on host %s (boot id %s), "
                     "this L4 on host %s (boot id %s)",
                     s->name, id, ni->host_id->name, ni->host_id->boot, me.name,
                     me.boot[0] ? me.boot : "unknown");
}

static strata_err check_member(const strata_worker *w,
                               const strata_global_domain_spec *s, size_t i)
{
    const strata_global_member *m = &s->members[i];
    struct gdhost_node ni;

    if (m->node_worker_id < 0 ||
        (size_t)m->node_worker_id >= gdhost_num_nodes(w))
        return base_fail(STRATA_EINVAL,
                         "global domain '%s': members[%zu] names node %d, "
                         "which does not exist",
                         s->name, i, m->node_worker_id);
    gdhost_node_info(w, m->node_worker_id, &ni);
    if (!has_chip(&ni, m->local_chip))
        return base_fail(STRATA_EINVAL,
                         "global domain '%s': members[%zu]: node %d has no "
                         "chip %d",
                         s->name, i, m->node_worker_id, m->local_chip);
    for (size_t j = 0; j < i; j++)
        if (s->members[j].node_worker_id == m->node_worker_id &&
            s->members[j].local_chip == m->local_chip)
            return base_fail(STRATA_EINVAL,
                             "global domain '%s': members %zu and %zu are "
                             "both chip %d of node %d",
                             s->name, j, i, m->local_chip, m->node_worker_id);
    if (strcmp(ni.profile, "sim") != 0)
        return base_fail(STRATA_EINVAL,
                         "global domain '%s': node %d uses comm profile "
                         "'%s'; only 'sim' is supported",
                         s->name, m->node_worker_id, ni.profile);
    return ni.remote ? check_host(s, m->node_worker_id, &ni) : STRATA_OK;
}

static strata_err check_attachments(const strata_worker *w,
                                    const strata_global_domain_spec *s)
{
    if (s->num_attachments && !s->attachments)
        return base_fail(STRATA_EINVAL,
                         "global domain '%s': num_attachments is %zu but "
                         "attachments is NULL",
                         s->name, s->num_attachments);
    for (size_t i = 0; i < s->num_attachments; i++) {
        const strata_attachment *a = &s->attachments[i];
        bool owner = false;

        for (size_t m = 0; m < s->num_members; m++)
            owner |= s->members[m].node_worker_id == a->receiving_node;
        if (a->receiving_node < 0 ||
            (size_t)a->receiving_node >= gdhost_num_nodes(w) || !owner)
            return base_fail(STRATA_EINVAL,
                             "attachments[%zu]: receiving_node %d owns no "
                             "member",
                             i, a->receiving_node);
        if (a->member_rank >= s->num_members)
            return base_fail(STRATA_EINVAL,
                             "attachments[%zu]: member_rank %u >= %zu", i,
                             a->member_rank, s->num_members);
        if (a->address_space < STRATA_SPACE_HOST ||
            a->address_space > STRATA_SPACE_DEVICE)
            return base_fail(STRATA_EINVAL,
                             "attachments[%zu]: unknown address_space %u", i,
                             a->address_space);
        if (a->role < STRATA_ROLE_PROVIDER || a->role > STRATA_ROLE_CONSUMER)
            return base_fail(STRATA_EINVAL, "attachments[%zu]: unknown role %u",
                             i, a->role);
        if (a->adapter > STRATA_ADAPTER_COLLECTIVE)
            return base_fail(STRATA_EINVAL,
                             "attachments[%zu]: unknown adapter %u", i,
                             a->adapter);
        if ((a->adapter == STRATA_ADAPTER_NONE) !=
            (!a->adapter_profile || !a->adapter_profile[0]))
            return base_fail(STRATA_EINVAL,
                             "attachments[%zu]: an adapter needs a profile "
                             "and NONE takes none",
                             i);
        for (size_t j = 0; j < i; j++)
            if (s->attachments[j].receiving_node == a->receiving_node &&
                s->attachments[j].member_rank == a->member_rank)
                return base_fail(STRATA_EINVAL,
                                 "attachments[%zu] and [%zu] both describe "
                                 "member %u on node %d",
                                 j, i, a->member_rank, a->receiving_node);
    }
    return STRATA_OK;
}

/* Members are distinct chips, and attachments distinct (node, member)
 * pairs of member nodes: a count past what the L4's nodes can hold is
 * refused before any entry is read (errors.md), so a wrong count is an
 * error, not a read past the caller's array. */
static strata_err check_counts(const strata_worker *w,
                               const strata_global_domain_spec *s)
{
    size_t chips = 0, nodes = gdhost_num_nodes(w);
    struct gdhost_node ni;

    for (size_t id = 0; id < nodes; id++) {
        gdhost_node_info(w, (int)id, &ni);
        chips += ni.num_chips;
    }
    if (s->num_members > chips)
        return base_fail(STRATA_EINVAL,
                         "global domain '%s': num_members %zu is more than "
                         "the %zu chips of this L4's nodes",
                         s->name, s->num_members, chips);
    if (s->num_attachments > nodes * s->num_members)
        return base_fail(STRATA_EINVAL,
                         "global domain '%s': num_attachments %zu is more "
                         "than the %zu (node, member) pairs there can be",
                         s->name, s->num_attachments, nodes * s->num_members);
    return STRATA_OK;
}

strata_err gdomain_validate(const strata_worker *w,
                            const strata_global_domain_spec *s)
{
    strata_err err = STRATA_OK;

    if (!s->name || !s->name[0] || strlen(s->name) >= STRATA_DOMAIN_NAME_MAX)
        return base_fail(STRATA_EINVAL,
                         "a global domain needs a name of 1..%d bytes",
                         STRATA_DOMAIN_NAME_MAX - 1);
    if (!s->members || s->num_members == 0)
        return base_fail(STRATA_EINVAL, "global domain '%s': no members",
                         s->name);
    err = check_counts(w, s);
    for (size_t i = 0; !err && i < s->num_members; i++)
        err = check_member(w, s, i);
    if (!err)
        err = domain_check_window("global domain", s->name, s->window_size,
                                  s->num_members);
    if (!err)
        err = domain_check_buffers("global domain", s->name, s->buffers,
                                   s->num_buffers, s->window_size);
    if (!err)
        err = check_attachments(w, s);
    return err;
}
