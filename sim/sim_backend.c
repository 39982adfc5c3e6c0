/* Sim backend ops. Windows arrive with communication domains. */
#include "base/alloc.h"
#include "base/err.h"
#include "sim/sim.h"
#include "sim_window.h"

#include <string.h>

static strata_err sim_init(strata_chip *chip, void **state_out)
{
    struct sim_state *s = base_calloc(1, sizeof(*s));

    (void)chip;
    if (!s)
        return base_fail(STRATA_ENOMEM, "sim backend: out of memory");
    *state_out = s;
    return STRATA_OK;
}

static void sim_fini(strata_chip *chip, void *state)
{
    (void)chip;
    sim_windows_release_all(state);
    base_free(state);
}

static strata_err sim_comm_init(void *state, uint32_t rank, uint32_t size)
{
    struct sim_state *s = state;

    /* The sim base communicator is the shared memory itself: nothing to
     * connect, only the identity to remember. */
    s->comm_rank = rank;
    s->comm_size = size;
    s->comm_ready = true;
    return STRATA_OK;
}

static strata_err sim_malloc(void *state, size_t nbytes, void **dev_out)
{
    void *p = base_calloc(1, nbytes);

    (void)state;
    if (!p)
        return base_fail(STRATA_ENOMEM, "sim: %zu-byte device allocation",
                         nbytes);
    *dev_out = p;
    return STRATA_OK;
}

static strata_err sim_free(void *state, void *dev)
{
    (void)state;
    base_free(dev);
    return STRATA_OK;
}

static strata_err sim_copy(void *state, void *dst, const void *src, size_t n)
{
    (void)state;
    memcpy(dst, src, n);
    return STRATA_OK;
}

static strata_err sim_launch(void *state, strata_chip *chip,
                             strata_kernel_fn fn, const strata_args *args)
{
    struct sim_state *s = state;

    s->launches++;
    return fn(chip, args);
}

static strata_err sim_sync(void *state)
{
    (void)state;
    return STRATA_OK;
}

const struct chip_backend_ops sim_backend_ops = {
    .name = "sim",
    .abi = CHIP_BACKEND_ABI,
    .init = sim_init,
    .fini = sim_fini,
    .malloc = sim_malloc,
    .free = sim_free,
    .copy_h2d = sim_copy,
    .copy_d2h = sim_copy,
    .copy_d2d = sim_copy,
    .comm_init = sim_comm_init,
    .window_prepare = sim_window_prepare,
    .window_import = sim_window_import,
    .window_release = sim_window_release,
    .window_local = sim_window_local,
    .host_window_create = sim_host_window_create,
    .host_window_unlink = sim_host_window_unlink,
    .host_window_name = sim_host_window_name,
    .window_adopt = sim_window_adopt,
    .window_mapping_size = sim_window_mapping_size,
    .comm_context = sim_comm_context,
    .launch = sim_launch,
    .sync = sim_sync,
};
