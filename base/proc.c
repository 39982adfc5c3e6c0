/* base/proc.h. */
#include "base/proc.h"

#include <pthread.h>
#include <unistd.h>

static pid_t cached;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void forget(void)
{
    __atomic_store_n(&cached, 0, __ATOMIC_RELAXED);
}

static void install(void)
{
    pthread_atfork(NULL, NULL, forget);
}

pid_t base_pid(void)
{
    pid_t p;

    pthread_once(&once, install);
    p = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (p == 0) {
        p = getpid();
        __atomic_store_n(&cached, p, __ATOMIC_RELAXED);
    }
    return p;
}
