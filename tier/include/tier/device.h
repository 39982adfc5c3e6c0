/* tier/: the CUDA tiers (device.c). Private to tier/. */
#ifndef TIER_DEVICE_H
#define TIER_DEVICE_H

#include <stddef.h>
#include <strata/tier.h>

/* The plug-in's memory is usable in this process (loaded on first call);
 * else STRATA_ENOTSUP naming tier t and why. Any thread. */
strata_err tier_cuda_ready(strata_tier t);
/* inst's storage on its tier (tier_cuda_ready passed). */
strata_err tier_cuda_alloc(strata_instance *inst);
void tier_cuda_free(strata_instance *inst);
/* n bytes between any host, pinned or device pointers, waited for; on
 * failure the message also goes into msg when it is not NULL. */
strata_err tier_cuda_copy(void *dst, const void *src, size_t n, char *msg,
                          size_t msg_cap);

#endif
