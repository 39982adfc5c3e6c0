/* tier/: private structures of the tiered memory runtime. One mutex per
 * runtime guards every field below that is not marked otherwise; the I/O
 * pool's threads take it only between chunks. */
#ifndef TIER_TIER_INT_H
#define TIER_TIER_INT_H

#include "tier/budgets.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <strata/tier.h>
#include <sys/types.h>

/* Bytes one pool job moves at most. */
#define TIER_CHUNK (1u << 20)
/* Alignment of nvme file sizes and staging buffers (O_DIRECT). */
#define TIER_ALIGN 4096u
#define TIER_NAME_MAX 255
/* nvme files: TIER_NVME_PREFIX "<pid>-<start>-<n>" TIER_NVME_SUFFIX (see
 * tier/sweep.h). */
#define TIER_NVME_PREFIX "strata-tier-"
#define TIER_NVME_SUFFIX ".nvme"

struct strata_instance {
    strata_tier_runtime *rt;
    char *name;
    uint64_t version;
    uint64_t capacity;
    strata_tier tier;
    uint64_t seq; /* allocation order, for latest() */
    bool closed;
    bool invalid; /* a transfer into it failed: no valid bytes */
    void *data;   /* ram: mapping of map_len bytes; host-pinned: CUDA's */
    void *dev;    /* device: the CUdeviceptr */
    size_t map_len;
    int fd;      /* nvme: the file, or -1 */
    bool direct; /* fd was opened with O_DIRECT */
    char *path;  /* nvme: the file's path */
    /* Unfinished transfers naming this instance: the one writing it last
     * (NULL when none) and those reading it. */
    struct strata_transfer_handle *writer;
    struct strata_transfer_handle **readers;
    size_t num_readers, cap_readers;
    struct strata_instance *next; /* the runtime's list, newest first */
};

enum tier_xfer_state {
    TIER_XFER_WAITING = 0, /* predecessors unfinished */
    TIER_XFER_QUEUED = 1,  /* on the pool's queue */
    TIER_XFER_DONE = 2,
};

struct strata_transfer_handle {
    strata_tier_runtime *rt; /* NULL once rt is destroyed */
    pid_t pid;               /* the process that made it */
    strata_instance *src, *dst;
    uint64_t nbytes;
    enum tier_xfer_state state;
    unsigned refs;     /* the user's handle + the runtime's until done */
    unsigned preds;    /* unfinished predecessors */
    bool src_poisoned; /* the writer of src failed */
    /* Chunks: handed out (next), finished (done) of total. */
    uint64_t next_chunk, done_chunks, num_chunks;
    strata_err result;
    char msg[STRATA_ERRMSG_MAX];
    struct strata_transfer_handle **succs; /* run after this one */
    size_t num_succs, cap_succs;
    struct strata_transfer_handle *qnext; /* the pool's queue */
    /* The runtime's list of handles the user has not freed. */
    struct strata_transfer_handle *hprev, *hnext;
    pthread_cond_t cond; /* signalled when done */
};

struct tier_account {
    uint64_t live, peak, budget, instances;
};

struct strata_tier_runtime {
    pid_t pid; /* the creating process: a fork's copy is refused */
    pthread_mutex_t lock;
    pthread_cond_t idle; /* signalled whenever a transfer finishes */
    char *nvme_dir;
    char owner_tag[48]; /* "<pid>-<start>" of the creating process */
    struct tier_account acct[STRATA_TIER_COUNT];
    uint64_t moved[STRATA_TIER_COUNT][STRATA_TIER_COUNT];
    uint64_t xfers_done, xfers_failed, unfinished;
    uint64_t next_seq;
    strata_instance *instances; /* every instance, closed ones too */
    struct strata_transfer_handle *handles; /* not yet freed by the user */
    /* The pool. */
    pthread_t *threads;
    unsigned num_threads;
    pthread_cond_t work;
    struct strata_transfer_handle *qhead, *qtail;
    bool stopping;
};

/* runtime.c: STRATA_ESTATE naming fn unless this is process pid (the
 * one that made the runtime or handle, not a fork of it). */
strata_err tier_check_process(pid_t pid, const char *fn);

/* transfer.c */
strata_err tier_pool_start(strata_tier_runtime *rt, unsigned threads);
void tier_pool_stop(strata_tier_runtime *rt);
/* Waits (rt->lock held) until no unfinished transfer names inst (only its
 * writer when writers_only). */
void tier_wait_quiet(strata_instance *inst, bool writers_only);
/* Waits (rt->lock held) until no transfer is unfinished. */
void tier_wait_all(strata_tier_runtime *rt);
/* Detaches every handle from rt (rt->lock held, nothing unfinished). */
void tier_detach_handles(strata_tier_runtime *rt);

/* io.c */
/* Copies chunk [off, off+len) of src into dst; returns an errno-style
 * failure with msg filled. No lock held. */
strata_err tier_io_chunk(strata_instance *src, strata_instance *dst,
                         uint64_t off, uint64_t len, void *staging, char *msg,
                         size_t msg_cap);
strata_err tier_nvme_open(strata_tier_runtime *rt, strata_instance *inst);
void tier_nvme_close(strata_instance *inst);
/* Returns the file's blocks to the file system, keeping its size. */
void tier_nvme_discard(strata_instance *inst);
strata_err tier_file_rw(strata_instance *inst, uint64_t off, void *buf,
                        size_t n, bool write);

#endif
