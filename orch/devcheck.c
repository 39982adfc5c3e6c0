/* Submit-time checks of device tensors: a device buffer lives on one chip
 * and only a task on that chip may name it. */
#include "base/err.h"
#include "orch_int.h"

strata_err orch_device_tensor_check(const struct orch_sched *s,
                                    const strata_buffer *b, uint32_t i, int ep)
{
    if (!b->device)
        return STRATA_OK;
    if (ep < 0)
        return base_fail(STRATA_EINVAL,
                         "tensor %u: device buffer %llu lives on chip %d; a "
                         "sub task cannot name it",
                         i, (unsigned long long)b->id, b->chip);
    if (s->eps[ep].kind != ORCH_EP_CHIP || s->eps[ep].id != b->chip)
        return base_fail(STRATA_EINVAL,
                         "tensor %u: device buffer %llu lives on chip %d; a "
                         "task for %s %d cannot name it (copy it there with "
                         "strata_orch_buffer_copy)",
                         i, (unsigned long long)b->id, b->chip,
                         orch_ep_kind_name(s->eps[ep].kind), s->eps[ep].id);
    return STRATA_OK;
}
