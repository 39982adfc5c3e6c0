/* The process-wide callable registry. Appends only; lookups take no lock,
 * so a forked child can read it whatever the parent's threads were doing. */
#ifndef CHIP_REGISTRY_H
#define CHIP_REGISTRY_H

#include <strata/strata.h>

#define CHIP_REGISTRY_MAX 1024
#define CHIP_NAME_MAX 128

struct chip_callable {
    uint32_t kind; /* strata_callable_kind */
    uint32_t seq;  /* registration order, from 0 */
    void (*fn)(void);
    uint8_t digest[32];
    char name[CHIP_NAME_MAX];
};

/* The entry with this digest, or NULL. Any thread, any process. */
const struct chip_callable *chip_registry_find(const uint8_t digest[32]);
/* Entries registered so far (a worker records it when it forks). */
uint32_t chip_registry_count(void);
/* "kernel", "orch", "sub". */
const char *chip_callable_kind_name(uint32_t kind);

#endif
