/* Global domains, the L4 side: what gdomain.c and gdomain_check.c
 * share. */
#ifndef DOMAIN_GDOMAIN_INT_H
#define DOMAIN_GDOMAIN_INT_H

#include "base/hostid.h"
#include "domain/global.h"

#include <strata/domain.h>

/* Every check of spec before a message: members, nodes, chips, buffers,
 * attachments, profiles (STRATA_EINVAL naming what is wrong). */
strata_err gdomain_validate(const strata_worker *w,
                            const strata_global_domain_spec *s);

#endif
