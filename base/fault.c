/* Named fault points (test builds only). */
#include "base/fault.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef STRATA_TESTING
#define MAX_ARMED 8

struct armed {
    char point[48];
    long nth;
    long hits;
    int action;
};

static struct armed table[MAX_ARMED];
static int num_armed;
static bool env_read;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void arm_locked(const char *point, long nth, int action)
{
    if (num_armed == MAX_ARMED || nth <= 0)
        return;
    snprintf(table[num_armed].point, sizeof(table[0].point), "%s", point);
    table[num_armed].nth = nth;
    table[num_armed].hits = 0;
    table[num_armed].action = action;
    num_armed++;
}

/* STRATA_FAULT="point:nth[:kill|:stop]". */
static void read_env_locked(void)
{
    const char *env = getenv("STRATA_FAULT");
    char point[48];
    long nth = 1;
    char action[8] = "";

    env_read = true;
    if (!env || sscanf(env, "%47[^:]:%ld:%7s", point, &nth, action) < 1)
        return;
    arm_locked(point, nth,
               strcmp(action, "kill") == 0   ? BASE_FAULT_KILL
               : strcmp(action, "stop") == 0 ? BASE_FAULT_STOP
                                             : BASE_FAULT_FAIL);
}

void base_fault_arm(const char *point, long nth, int action)
{
    pthread_mutex_lock(&lock);
    env_read = true;
    arm_locked(point, nth, action);
    pthread_mutex_unlock(&lock);
}

void base_fault_disarm_all(void)
{
    pthread_mutex_lock(&lock);
    num_armed = 0;
    env_read = false;
    pthread_mutex_unlock(&lock);
}

void base_fault_after_fork(void)
{
    base_alloc_fail_after(0);
}

bool base_fault_hit(const char *point)
{
    bool fire = false;
    int action = BASE_FAULT_FAIL;

    pthread_mutex_lock(&lock);
    if (!env_read)
        read_env_locked();
    for (int i = 0; i < num_armed; i++) {
        if (strcmp(table[i].point, point) == 0 &&
            ++table[i].hits == table[i].nth) {
            fire = true;
            action = table[i].action;
        }
    }
    pthread_mutex_unlock(&lock);
    if (fire && action == BASE_FAULT_KILL)
        raise(SIGKILL);
    if (fire && action == BASE_FAULT_STOP) {
        raise(SIGSTOP); /* the point passes once resumed */
        fire = false;
    }
    return fire;
}
#else
void base_fault_arm(const char *point, long nth, int action)
{
    (void)point;
    (void)nth;
    (void)action;
}

void base_fault_disarm_all(void)
{
}

void base_fault_after_fork(void)
{
}
#endif
