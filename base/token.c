/* Random tokens that tell this run's names from a dead one's. */
#include "base/token.h"

#include <sys/random.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

uint32_t base_random_token(void)
{
    uint32_t t = 0;

    if (getrandom(&t, sizeof(t), GRND_NONBLOCK) != (ssize_t)sizeof(t))
        t = (uint32_t)time(NULL) * 2654435761u ^ (uint32_t)getpid();
    return t ? t : 1;
}
