/* The module bench_remote_dispatch's strata-node loads: one orch callable
 * that submits nothing. Built without libstrata (strata_* come from the
 * daemon). */
#include <strata/strata.h>

static strata_err noop_orch(strata_orch *o, const strata_args *args, void *user)
{
    (void)o;
    (void)args;
    (void)user;
    return STRATA_OK;
}

STRATA_API strata_err strata_module_init(void);
strata_err strata_module_init(void)
{
    strata_callable c;

    return strata_register_orch("bench.remote_noop", noop_orch, &c);
}
