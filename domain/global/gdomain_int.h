/* Global domains, the L4 side: what gdomain.c and gdomain_check.c
 * share. */
#ifndef WORKER_GDOMAIN_INT_H
#define WORKER_GDOMAIN_INT_H

#include "base/hostid.h"
#include "worker_int.h"

#include <strata/domain.h>

/* What the L4 knows of node id. */
struct node_info {
    const int *chips;
    size_t num_chips;
    const char *profile;
    bool remote;
    const char *host;
    const struct base_host_id *host_id; /* remote: what the node reported */
};

void gdomain_node_info(const strata_worker *w, int id, struct node_info *ni);
/* The pid of the process that runs node id's members' windows on this
 * host: a forked node's, or a remote (loopback) node's session; 0 when
 * unknown. */
int gdomain_node_pid(const strata_worker *w, int id);
/* Every check of spec before a message: members, nodes, chips, buffers,
 * attachments, profiles (STRATA_EINVAL naming what is wrong). */
strata_err gdomain_validate(const strata_worker *w,
                            const strata_global_domain_spec *s);

#endif
