/* Switches read from the environment. */
#ifndef BASE_ENV_H
#define BASE_ENV_H

#include <stdbool.h>

/* True when the variable name is set, not empty and not "0". */
bool base_env_flag(const char *name);

#endif
