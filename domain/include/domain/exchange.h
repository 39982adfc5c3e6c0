/* Whether domains exchange descriptors with their members instead of
 * letting them adopt windows lazily: STRATA_DOMAIN_EXCHANGE=1 forces it
 * for local and global domains alike, as for backends without host
 * windows (tests, diagnosis). Read once per process. */
#ifndef DOMAIN_EXCHANGE_H
#define DOMAIN_EXCHANGE_H

#include <stdbool.h>

bool domain_exchange_forced(void);

#endif
