/* Progress lines: see progress.h. */
#define _GNU_SOURCE
#include "progress.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REDRAW_S 0.2
#define WATCH_NS 200000000L

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *progress_bytes(uint64_t n, char *buf, size_t cap)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;

    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

static void eta_text(double s, char *buf, size_t cap)
{
    if (s < 0 || s > 1e7)
        snprintf(buf, cap, "?");
    else if (s >= 3600)
        snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)s % 3600 / 60);
    else if (s >= 60)
        snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, cap, "%ds", (int)(s + 0.5));
}

void progress_init(struct progress *p, FILE *f, enum progress_mode mode,
                   const char *what, uint64_t total)
{
    memset(p, 0, sizeof(*p));
    p->f = f;
    p->what = what;
    p->total = total;
    p->tty = isatty(fileno(f)) == 1;
    p->silent = !p->tty && mode == PROGRESS_TTY_ONLY;
    p->next_tenth = 1;
    p->t0 = now_s();
    p->last = p->t0;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
}

/* "what: 1.2 GiB of 4.0 GiB (30%), 450.0 MiB/s, ETA 7s" */
static void line(const struct progress *p, double t, char *buf, size_t cap)
{
    char done[32], total[32], rate[32], eta[32];
    double el = t - p->t0;
    double r = el > 0 ? (double)p->done / el : 0;

    progress_bytes(p->done, done, sizeof(done));
    progress_bytes((uint64_t)r, rate, sizeof(rate));
    if (p->total) {
        eta_text(r > 0 ? (double)(p->total -
                                  (p->done < p->total ? p->done : p->total)) /
                             r
                       : -1,
                 eta, sizeof(eta));
        snprintf(buf, cap, "%s: %s of %s (%d%%), %s/s, ETA %s", p->what, done,
                 progress_bytes(p->total, total, sizeof(total)),
                 (int)(100.0 * (double)p->done / (double)p->total), rate, eta);
    } else {
        snprintf(buf, cap, "%s: %s, %s/s", p->what, done, rate);
    }
}

void progress_update(struct progress *p, uint64_t done)
{
    char buf[256];
    double t;

    pthread_mutex_lock(&p->mu);
    p->done = done;
    if (p->silent)
        goto out;
    t = now_s();
    if (p->tty) {
        if (t - p->last >= REDRAW_S) {
            line(p, t, buf, sizeof(buf));
            fprintf(p->f, "\r\033[K%s", buf);
            fflush(p->f);
            p->drawn = true;
            p->last = t;
        }
    } else if (p->total && p->next_tenth < 10 &&
               done * 10 >= p->total * (uint64_t)p->next_tenth) {
        while (p->next_tenth < 10 &&
               done * 10 >= p->total * (uint64_t)p->next_tenth)
            p->next_tenth++;
        line(p, t, buf, sizeof(buf));
        fprintf(p->f, "%s\n", buf);
        fflush(p->f);
    }
out:
    pthread_mutex_unlock(&p->mu);
}

void progress_done(struct progress *p)
{
    char done[32], rate[32];
    double el = now_s() - p->t0;

    progress_watch_stop(p);
    if (p->silent)
        return;
    progress_bytes(p->done, done, sizeof(done));
    progress_bytes(el > 0 ? (uint64_t)((double)p->done / el) : 0, rate,
                   sizeof(rate));
    fprintf(p->f, "%s%s: %s in %.1f s (%s/s)\n", p->tty ? "\r\033[K" : "",
            p->what, done, el, rate);
    fflush(p->f);
}

void progress_abandon(struct progress *p)
{
    progress_watch_stop(p);
    if (p->tty && p->drawn) {
        fprintf(p->f, "\r\033[K");
        fflush(p->f);
    }
}

static uint64_t dir_bytes(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    uint64_t sum = 0;

    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL) {
        struct stat st;

        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISREG(st.st_mode))
            sum += (uint64_t)st.st_size;
    }
    closedir(d);
    return sum;
}

static uint64_t scan(const struct progress *p)
{
    DIR *d = opendir(p->dir);
    struct dirent *e;
    size_t len = strlen(p->prefix);
    uint64_t sum = 0;

    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL) {
        char path[8192];

        if (strncmp(e->d_name, p->prefix, len) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", p->dir, e->d_name);
        sum += dir_bytes(path);
    }
    closedir(d);
    return sum;
}

static void *watch_main(void *arg)
{
    struct progress *p = arg;
    struct timespec until;

    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        uint64_t n;

        pthread_mutex_unlock(&p->mu);
        n = scan(p);
        if (n > p->done)
            progress_update(p, n);
        pthread_mutex_lock(&p->mu);
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += WATCH_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        /* A timed wait, so that progress_watch_stop ends it at once. */
        while (!p->stop &&
               pthread_cond_timedwait(&p->cv, &p->mu, &until) != ETIMEDOUT)
            ;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int progress_watch(struct progress *p, const char *dir, const char *prefix)
{
    snprintf(p->dir, sizeof(p->dir), "%s", dir);
    snprintf(p->prefix, sizeof(p->prefix), "%s", prefix);
    p->stop = false;
    if (p->silent || pthread_create(&p->thread, NULL, watch_main, p) != 0)
        return -1;
    p->watching = true;
    return 0;
}

void progress_watch_stop(struct progress *p)
{
    if (!p->watching)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    p->watching = false;
}
