/* Random tokens that tell this run's names from a dead one's. */
#ifndef BASE_TOKEN_H
#define BASE_TOKEN_H

#include <stdint.h>

/* A random nonzero 32-bit token (getrandom; the time and pid mixed when
 * the kernel has no entropy ready). */
uint32_t base_random_token(void);

#endif
