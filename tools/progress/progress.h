/* Progress lines for long work a person waits for (strata gfg, the
 * billion-edge benchmark's store writing): bytes done, rate and ETA. On a
 * terminal one line is redrawn in place; otherwise plain lines are printed
 * at every tenth of the work (or not at all, in PROGRESS_TTY_ONLY mode). */
#ifndef STRATA_PROGRESS_H
#define STRATA_PROGRESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum progress_mode {
    PROGRESS_LINES,    /* redraw on a terminal, plain lines otherwise */
    PROGRESS_TTY_ONLY, /* redraw on a terminal, silent otherwise */
};

struct progress {
    FILE *f;
    const char *what; /* "writing graph.gfg" */
    uint64_t total;   /* bytes expected; 0 = unknown (no ETA) */
    uint64_t done;
    bool tty;
    bool silent;
    bool drawn;     /* a terminal line is showing */
    int next_tenth; /* plain mode: the next tenth to print */
    double t0, last;
    /* progress_watch: a thread sums the sizes of files in a directory. */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool watching, stop;
    char dir[4096];
    char prefix[256];
};

/* Starts reporting on f: total bytes (0 when unknown). */
void progress_init(struct progress *p, FILE *f, enum progress_mode mode,
                   const char *what, uint64_t total);
/* done bytes so far; prints when due (at most 5 redraws a second). */
void progress_update(struct progress *p, uint64_t done);
/* The work finished: a last line with the total time and mean rate. */
void progress_done(struct progress *p);
/* The work failed or stopped: clears a terminal line, prints nothing. */
void progress_abandon(struct progress *p);

/* Watches a write it cannot see into (strata_gfg_save): every 200 ms, the
 * bytes of the regular files inside entries of dir whose names start with
 * prefix (the save's temporary ".<name>.XXXXXX" directory) are summed and
 * reported. 0, or -1 when the thread cannot start (then nothing is
 * shown). progress_watch_stop ends it. */
int progress_watch(struct progress *p, const char *dir, const char *prefix);
void progress_watch_stop(struct progress *p);

/* "1.5 GiB" into buf. */
const char *progress_bytes(uint64_t n, char *buf, size_t cap);

#endif
