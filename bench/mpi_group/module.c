/* The module every rank of bench_mpi_group loads: an orch callable that
 * submits nothing, and one that sleeps for its scalar 0 (milliseconds).
 * Built without libstrata (strata_* come from strata-rank). */
#include <strata/strata.h>

#include <time.h>

static strata_err noop_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)o;
    (void)args;
    (void)user;
    return STRATA_OK;
}

static strata_err sleep_orch(strata_orch *o, const strata_args *args,
                             void *user)
{
    uint64_t ms =
        strata_args_num_scalars(args) ? strata_args_scalar(args, 0) : 0;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};

    (void)o;
    (void)user;
    while (nanosleep(&ts, &ts) != 0)
        ;
    return STRATA_OK;
}

STRATA_API strata_err strata_module_init(void);
strata_err strata_module_init(void)
{
    strata_callable c;
    strata_err err = strata_register_orch("bench.mpi_noop", noop_orch, &c);

    return err ? err : strata_register_orch("bench.mpi_sleep", sleep_orch, &c);
}
