/* Whether domains exchange descriptors with their members instead of
 * letting them adopt windows lazily: STRATA_DOMAIN_EXCHANGE=1 forces it
 * for local and global domains alike, as for backends without host
 * windows (tests, diagnosis). Read once per process. */
#ifndef DOMAIN_EXCHANGE_H
#define DOMAIN_EXCHANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct chip_backend_ops;

bool domain_exchange_forced(void);

/* The mapping size of each of n ranks' windows of window_size bytes when
 * members can adopt them (domain/adopt.c, domain/global/gnode_lazy.c), else 0:
 * the backend has no host windows, or an ADOPT frame cannot say it (rank
 * and rank count travel in 16 bits each, the mapping size below the
 * creator's pid), or n windows overflow the range arithmetic. */
uint64_t domain_adopt_mapping(const struct chip_backend_ops *ops,
                              size_t window_size, uint32_t n);

#endif
