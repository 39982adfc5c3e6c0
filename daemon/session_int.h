/* A session's state, shared by its files: session.c (the connection,
 * tasks, domain commands, the end), session_shadow.c (the parent's
 * buffers kept here) and session_hello.c (HELLO and the worker's start). */
#ifndef DAEMON_SESSION_INT_H
#define DAEMON_SESSION_INT_H

#include "spool.h"
#include "wire/conn.h"
#include "wire/msg.h"
#include "worker/session.h"

#include <event2/event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <strata/strata.h>

#define HELLO_TIMEOUT_S 10.0
#define HEARTBEAT_S 1
#define PEER_SILENT_S 10.0

struct shadow {
    uint64_t id;
    strata_buffer *buf;
    bool resident; /* a remote buffer of the parent: its bytes stay here */
    uint32_t pins; /* tasks in flight that name it: release refused */
    bool gone;     /* released while a run past its deadline may use it:
                      no longer the parent's, freed once no such run is */
};

struct stask {
    struct spool_job job; /* first: the pool hands it back */
    struct wire_task task;
    strata_args *args; /* decoded tensors, for shapes and tags */
    /* The input in flight: task.data_tensors[cur] receives its chunk at
     * next_off. A refused task's chunks are read and dropped. */
    uint32_t cur;
    uint64_t next_off;
    bool refused;
    bool resident[STRATA_MAX_TENSORS];   /* tensor i's bytes stay here */
    uint64_t pinned[STRATA_MAX_TENSORS]; /* peer ids of the pinned shadows */
    uint32_t num_pinned;
    struct session *s;
    struct stask *next;
};

enum session_state {
    S_WAIT_HELLO, /* only HELLO may come */
    S_STARTING,   /* the worker starts off the loop: heartbeats only */
    S_READY,
};

struct session {
    struct event_base *base;
    struct wire_conn *conn;
    strata_worker *w;
    enum session_state state; /* (loop) */
    bool ended;               /* (loop) stop() or SIGTERM: read no more */
    bool startup_heartbeats;  /* (loop) the parent takes them */
    struct event *started;    /* the start job is done (event_active) */
    struct sstart *start;     /* that job, until the loop takes its result */
    uint64_t start_ns; /* accepted: the HELLO deadline counts from here */
    uint16_t proto;    /* the protocol version HELLO chose */
    bool traced;       /* the parent traces: so does this session */
    uint64_t hello_ns; /* when HELLO came (the clock offset's t2) */
    uint32_t peer_pid;
    pthread_mutex_t mu; /* shadows */
    struct spool pool;  /* tasks and domain commands, off the loop */
    struct spool_loop loop;
    uint32_t work;     /* tasks and commands started, not finished (atomic) */
    size_t held_bytes; /* of domain commands started or queued (atomic) */
    uint32_t tasks;    /* tasks received, not yet completed (atomic) */
    uint64_t shadow_bytes; /* under mu */
    struct shadow *shadows;
    size_t num_shadows;
    size_t cap_shadows;
    struct stask *waiting; /* tasks still receiving input */
    /* Domain commands run one at a time, in the order they came (the
     * L4 may send a whole transaction at once): the one running drains
     * the rest (session.c, under s->mu). */
    struct scmd *cmd_head, *cmd_tail;
    bool cmd_running;
    struct event *timer;
    uint64_t hb_seq;
    int status;
    bool abandon; /* the parent is gone or we are told to stop: kill work */
    bool closed_noted; /* a reply found the connection closed (atomic) */
    struct worker_session_limits lim;
};

/* The worker HELLO asked for, started on a pool thread: forking and
 * starting 1024 chips takes seconds, and the loop answers heartbeats
 * meanwhile. The loop takes the result in session_on_started. */
struct sstart {
    struct spool_job job; /* first: the pool hands it back */
    struct session *s;
    struct wire_msg m; /* the HELLO, owned */
    uint16_t version;
    strata_err err;
    char msg[STRATA_ERRMSG_MAX];
    strata_worker *w;
};

/* session.c */
/* Packs and sends m; a failure is logged once the connection is gone. */
void session_send_msg(struct session *s, const struct wire_msg *m);
/* When nobody will take running work's results: kills the chips and subs
 * so that it fails at once. */
void session_abandon_work(struct session *s);

/* session_shadow.c: the parent's buffers (under s->mu). get: the shadow
 * of buffer id, made on first use (create: only make it, STRATA_EEXIST
 * if there; NULL with *err on failure); pin/unpin_all: a task's hold on
 * the shadows it names; release: BUFFER_RELEASE. */
strata_buffer *session_shadow_get(struct session *s, uint64_t id, size_t size,
                                  bool create, bool *resident, strata_err *err);
void session_shadow_pin(struct session *s, struct stask *t, uint64_t id);
void session_shadow_unpin_all(struct session *s, struct stask *t);
strata_err session_shadow_release(struct session *s, uint64_t id);
/* The parent's buffer id, or NULL (takes s->mu). */
strata_buffer *session_shadow_lookup(struct session *s, uint64_t id);

/* session_hello.c: HELLO (takes the message's memory), and the loop's
 * callback once the worker it asked for started (or failed to). */
void session_on_hello(struct session *s, struct wire_msg *m);
void session_on_started(evutil_socket_t fd, short what, void *arg);

#endif
