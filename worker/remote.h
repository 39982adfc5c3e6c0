/* Remote nodes: private to worker/. */
#ifndef WORKER_REMOTE_H
#define WORKER_REMOTE_H

#include "base/hostid.h"
#include "wire/conn.h"
#include "wire/msg.h"
#include "wire/tls.h"
#include "worker_int.h"

struct remote_node {
    /* the spec, copied */
    char *endpoint;
    char host[256];
    char port[16];
    char *secret_file, *cert_file, *key_file, *ca_file;
    bool insecure;
    char *platform;
    char *comm_profile;
    uint32_t *chip_ids;
    size_t num_chips;
    size_t num_subs;
    uint32_t *ranks; /* NULL or num_chips */
    /* runtime, under the connection's lock (its thread, or a kick) */
    strata_worker *w;
    size_t index;
    struct orch_endpoint *ep;
    SSL_CTX *ctx;
    struct wire_conn *conn;
    struct event *notify_ev;
    uint32_t sent;               /* ring frames sent */
    uint64_t req[MBX_RING];      /* request id per ring position */
    bool done[MBX_RING];         /* completed, maybe not yet in order */
    uint32_t replies[MBX_RING];  /* a batch of node commands: replies in */
    strata_args *args[MBX_RING]; /* decoded args per ring position */
    /* A task's results as they arrive, per ring position: the tensor
     * being received (RX_NONE: none), its next offset, the tensors whose
     * last chunk came (a COMPLETION may name only those). */
    uint32_t rx_tensor[MBX_RING];
    uint64_t rx_off[MBX_RING];
    uint8_t rx_done[MBX_RING][STRATA_MAX_TENSORS / 8];
    uint64_t next_req;
    uint64_t hb_seq;
    bool hello_sent; /* nothing else goes out before it */
    bool ready;
    bool lost;
    uint32_t session_pid; /* from HELLO_REPLY (on this host with sim) */
    /* the node's host (HELLO_REPLY, or an MPI rank's identity record);
     * boot "" when the node did not say (an older strata-node) */
    struct base_host_id host_id;
    uint64_t tasks_sent; /* TASK frames (atomic; tests and benchmarks) */
    uint64_t kicked;     /* frames a posting thread sent itself (atomic) */
    bool closed;
    char why[STRATA_ERRMSG_MAX];
    uint64_t deadline;
    /* an MPI rank (mpigroup.c): its connection is accepted, not dialed */
    struct mpi_group *group; /* NULL for a strata-node */
    uint32_t rank;
    /* timeline trace (remote_trace.c), on the connection thread */
    bool traced;          /* the node records and was granted TRACE */
    bool ordered_cmds;    /* granted ORDERED_DOMAIN_CMDS (atomic) */
    bool trace_waiting;   /* its answer to the TRACE request is due */
    uint64_t hello_tx_ns; /* when HELLO went out (this host's clock) */
    int64_t clock_offset; /* the node's clock minus this host's, ns */
    bool clock_same_host; /* the node runs here: offset 0, exactly */
};

struct net {
    pthread_t thread;
    struct event_base *base;
    struct event *timer;
    bool started;
    unsigned closing; /* (loop) GOODBYEs sent whose peer has not closed */
    /* the TRACE answers still due (remote_trace_fetch) */
    pthread_mutex_t trace_mu;
    pthread_cond_t trace_cv;
    unsigned trace_waiting;
};

/* remote_trace.c: a traced L4's side of its nodes' traces
 * (docs/tracing.md). All on the connection thread but the fetch. */
/* Offers TRACE in h when this process traces; notes when HELLO leaves. */
void remote_trace_hello(struct remote_node *r, struct wire_hello *h);
/* The clock offset from HELLO_REPLY's times, when it granted TRACE. */
void remote_trace_reply(struct remote_node *r,
                        const struct wire_hello_reply *h);
/* A node's heartbeat bounds the offset from below: raises it to that. */
void remote_trace_heartbeat(struct remote_node *r,
                            const struct wire_heartbeat *hb);
/* A TRACE frame from the node; false when none was asked for. */
bool remote_trace_data(struct remote_node *r, const struct wire_trace *t);
/* The node is lost: its answer is no longer awaited. */
void remote_trace_lost(struct remote_node *r);
/* Asks every traced node still connected for its records and waits for
 * their answers (at most 10 s); before the GOODBYEs. Any thread but the
 * connection thread. */
void remote_trace_fetch(strata_worker *w);

/* remote.c, for MPI ranks: serves the accepted, authenticated connection
 * (fd, its TLS) of r on the connection thread's loop and sends HELLO.
 * fd and ssl belong to r on STRATA_OK. On the connection thread. */
strata_err remote_attach(struct remote_node *r, struct event_base *base,
                         SSL *ssl, int fd, const char *peer);
/* Reports r lost (or failed to start) with why. On the connection thread. */
void remote_lose(struct remote_node *r, strata_err err, const char *why);
/* The endpoint's kick (orch_endpoint.kick): sends what was posted to r. */
void remote_kick(void *arg);

/* mpigroup.c: the groups of w (found through their ranks' nodes). */
/* Draws the key, opens the listener and starts mpirun for every group,
 * with the listener and mpirun watched on base. Before the loop runs. */
strata_err mpigroup_start(strata_worker *w, struct event_base *base,
                          uint64_t deadline);
/* After the loop ended: frees the groups' events, waits for mpirun (then
 * ends its process group), removes the key. Idempotent. */
void mpigroup_stop(strata_worker *w);
/* Why the group last turned a connection away ("" when it never did). */
const char *mpigroup_refused(const struct mpi_group *g);

#endif
