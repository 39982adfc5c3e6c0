/* Switches read from the environment. */
#include "base/env.h"

#include <stdlib.h>
#include <string.h>

bool base_env_flag(const char *name)
{
    const char *v = getenv(name);

    return v && v[0] && strcmp(v, "0") != 0;
}
