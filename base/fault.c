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
/* Held threads: one record per point they wait at. */
static struct held {
    char point[48];
    int waiting;
    unsigned long generation; /* bumped by a release */
} holds[MAX_ARMED];
static pthread_cond_t released = PTHREAD_COND_INITIALIZER;
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
    for (int i = 0; i < MAX_ARMED; i++)
        holds[i].generation++;
    pthread_cond_broadcast(&released);
    pthread_mutex_unlock(&lock);
}

/* The hold record of point, made when missing (lock held); NULL when the
 * table is full. */
static struct held *hold_of(const char *point, bool make)
{
    struct held *free_slot = NULL;

    for (int i = 0; i < MAX_ARMED; i++) {
        if (strcmp(holds[i].point, point) == 0)
            return &holds[i];
        if (!free_slot && !holds[i].point[0])
            free_slot = &holds[i];
    }
    if (make && free_slot)
        snprintf(free_slot->point, sizeof(free_slot->point), "%s", point);
    return make ? free_slot : NULL;
}

int base_fault_held(const char *point)
{
    struct held *h;
    int n;

    pthread_mutex_lock(&lock);
    h = hold_of(point, false);
    n = h ? h->waiting : 0;
    pthread_mutex_unlock(&lock);
    return n;
}

void base_fault_release(const char *point)
{
    struct held *h;

    pthread_mutex_lock(&lock);
    h = hold_of(point, false);
    if (h)
        h->generation++;
    pthread_cond_broadcast(&released);
    pthread_mutex_unlock(&lock);
}

/* Waits at point until a release (lock held). */
static void hold_here(const char *point)
{
    struct held *h = hold_of(point, true);
    unsigned long gen;

    if (!h)
        return;
    gen = h->generation;
    h->waiting++;
    while (h->generation == gen)
        pthread_cond_wait(&released, &lock);
    h->waiting--;
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
    if (fire && action == BASE_FAULT_HOLD) {
        hold_here(point);
        fire = false;
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

int base_fault_held(const char *point)
{
    (void)point;
    return 0;
}

void base_fault_release(const char *point)
{
    (void)point;
}

void base_fault_after_fork(void)
{
}
#endif
