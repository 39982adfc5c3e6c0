/* Remote nodes: private to worker/. */
#ifndef WORKER_REMOTE_H
#define WORKER_REMOTE_H

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
    /* runtime, on the connection thread */
    strata_worker *w;
    size_t index;
    struct orch_endpoint *ep;
    SSL_CTX *ctx;
    struct wire_conn *conn;
    struct event *notify_ev;
    uint32_t sent;               /* ring frames sent */
    uint64_t req[MBX_RING];      /* request id per ring position */
    bool done[MBX_RING];         /* completed, maybe not yet in order */
    strata_args *args[MBX_RING]; /* decoded args per ring position */
    uint64_t next_req;
    uint64_t hb_seq;
    bool hello_sent; /* nothing else goes out before it */
    bool ready;
    bool lost;
    uint32_t session_pid; /* from HELLO_REPLY (on this host with sim) */
    bool closed;
    char why[STRATA_ERRMSG_MAX];
    uint64_t deadline;
};

struct net {
    pthread_t thread;
    struct event_base *base;
    struct event *timer;
    bool started;
};

#endif
