/* Adding a remote node to an L4: its spec, copied and checked (endpoint,
 * TLS material, chips), its slot among the worker's nodes, and at init
 * its endpoint (eventfds, argument lists). The connection itself is
 * remote.c's. */
#include "base/alloc.h"
#include "base/err.h"
#include "remote.h"
#include "wire/endpoint.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>

void remote_node_free(struct remote_node *r)
{
    if (!r)
        return;
    for (unsigned i = 0; i < MBX_RING; i++)
        strata_args_destroy(r->args[i]);
    wire_conn_free(r->conn);
    wire_tls_ctx_free(r->ctx);
    base_free(r->endpoint);
    base_free(r->secret_file);
    base_free(r->cert_file);
    base_free(r->key_file);
    base_free(r->ca_file);
    base_free(r->platform);
    base_free(r->comm_profile);
    base_free(r->chip_ids);
    base_free(r->ranks);
    base_free(r);
}

static strata_err split_endpoint(struct remote_node *r)
{
    int port = 0;
    strata_err err = wire_endpoint_split("remote endpoint", r->endpoint,
                                         r->host, sizeof(r->host), 1, &port);

    if (!err)
        snprintf(r->port, sizeof(r->port), "%d", port);
    return err;
}

static strata_err copy_spec(struct remote_node *r, const strata_remote_spec *s)
{
    bool fail = false;
    size_t n = s->num_chips ? s->num_chips : 1;

    r->endpoint = base_strdup_opt(s->endpoint, &fail);
    r->secret_file = base_strdup_opt(s->secret_file, &fail);
    r->cert_file = base_strdup_opt(s->cert_file, &fail);
    r->key_file = base_strdup_opt(s->key_file, &fail);
    r->ca_file = base_strdup_opt(s->ca_file, &fail);
    r->platform = base_strdup_opt(s->platform ? s->platform : "sim", &fail);
    r->comm_profile =
        base_strdup_opt(s->comm_profile ? s->comm_profile : "sim", &fail);
    r->chip_ids = base_calloc(n, sizeof(*r->chip_ids));
    r->ranks =
        s->global_device_ranks ? base_calloc(n, sizeof(*r->ranks)) : NULL;
    if (fail || !r->chip_ids || (s->global_device_ranks && !r->ranks))
        return base_fail(STRATA_ENOMEM, "out of memory copying a remote spec");
    for (size_t i = 0; i < s->num_chips; i++) {
        if (s->chip_ids[i] < 0)
            return base_fail(STRATA_EINVAL, "remote chip_ids[%zu] < 0", i);
        for (size_t j = 0; j < i; j++)
            if (s->chip_ids[j] == s->chip_ids[i])
                return base_fail(STRATA_EINVAL,
                                 "remote chip_ids[%zu] repeats chip %d", i,
                                 s->chip_ids[i]);
        r->chip_ids[i] = (uint32_t)s->chip_ids[i];
        if (r->ranks)
            r->ranks[i] = (uint32_t)s->global_device_ranks[i];
    }
    r->num_chips = s->num_chips;
    r->num_subs = s->num_sub_workers;
    r->insecure = s->insecure;
    return STRATA_OK;
}

static strata_err check_spec(struct remote_node *r)
{
    struct wire_tls_cfg tls = {r->secret_file, r->cert_file, r->key_file,
                               r->ca_file, r->insecure};
    strata_err err;

    if (!r->endpoint)
        return base_fail(STRATA_EINVAL, "remote spec: endpoint is NULL");
    err = split_endpoint(r);
    if (err)
        return err;
    if (r->insecure && !wire_addr_is_loopback(r->host))
        return base_fail(STRATA_EINVAL,
                         "remote %s: insecure (plaintext) is allowed on "
                         "loopback only",
                         r->endpoint);
    if (r->num_chips > 0 && !r->chip_ids)
        return base_fail(STRATA_EINVAL, "remote %s: chip_ids is NULL",
                         r->endpoint);
    return wire_tls_ctx_create(&tls, false, &r->ctx);
}

strata_err strata_worker_add_remote_worker(strata_worker *parent,
                                           const strata_remote_spec *spec,
                                           int *worker_id_out)
{
    struct worker_node *slot;
    struct remote_node *r;
    strata_err err;

    if (!parent || !spec || !worker_id_out)
        return base_fail_null("strata_worker_add_remote_worker",
                              !parent ? "parent"
                              : !spec ? "spec"
                                      : "worker_id_out");
    if (parent->level < 4)
        return base_fail(STRATA_EINVAL,
                         "remote nodes belong to a level-4 worker, not "
                         "level %d",
                         parent->level);
    if (parent->state != WORKER_CREATED)
        return base_fail(STRATA_ESTATE, "add remote nodes before init");
    if (spec->num_chips > 0 && !spec->chip_ids)
        return base_fail(STRATA_EINVAL,
                         "remote spec: num_chips is %zu but chip_ids is NULL",
                         spec->num_chips);
    if (spec->num_chips > WIRE_MAX_CHIPS)
        return base_fail(STRATA_EINVAL,
                         "remote spec: num_chips is %zu, more than the %d a "
                         "node may have",
                         spec->num_chips, WIRE_MAX_CHIPS);
    r = base_calloc(1, sizeof(*r));
    if (!r)
        return base_fail(STRATA_ENOMEM, "out of memory for a remote node");
    err = copy_spec(r, spec);
    if (!err)
        err = check_spec(r);
    if (!err)
        err = worker_node_slot(parent, &slot);
    if (err) {
        remote_node_free(r);
        return err;
    }
    slot->remote = r;
    r->w = parent;
    r->index = parent->num_nodes - 1;
    *worker_id_out = (int)r->index;
    return STRATA_OK;
}

strata_err remote_endpoint_init(strata_worker *w, size_t index)
{
    struct orch_endpoint *ep = &w->eps[index];
    struct remote_node *r = w->nodes[index].remote;

    r->ep = ep;
    ep->pid = 0;
    ep->pidfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ep->notify_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ep->kick = remote_kick;
    ep->kick_arg = r;
    if (ep->pidfd < 0 || ep->notify_fd < 0)
        return base_fail_errno(errno, "eventfd for remote node %zu", index);
    for (unsigned i = 0; i < MBX_RING; i++) {
        strata_err err =
            r->args[i] ? STRATA_OK : strata_args_create(&r->args[i]);

        if (err)
            return err;
    }
    return STRATA_OK;
}
