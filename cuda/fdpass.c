/* SCM_RIGHTS fd passing with deadlines (fdpass.h). */
#define _GNU_SOURCE /* MSG_CMSG_CLOEXEC */
#include "fdpass.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FDPASS_MAGIC 0x73666470u /* "pdfs" */

/* What travels beside the fds: says how many there should be. */
struct fdpass_hdr {
    uint32_t magic;
    uint32_t nfds;
    uint64_t tag;
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t cuda_fdpass_deadline(double seconds)
{
    return now_ns() + (uint64_t)(seconds * 1e9);
}

static strata_err fail(strata_err err, char *why, size_t cap, const char *what,
                       int errnum)
{
    if (errnum)
        snprintf(why, cap, "%s: %s", what, strerror(errnum));
    else
        snprintf(why, cap, "%s", what);
    return err;
}

/* Waits for events on sock until the deadline: 1 ready, 0 timed out,
 * -1 with errno. */
static int wait_for(int sock, short events, uint64_t deadline_ns)
{
    for (;;) {
        uint64_t now = now_ns();
        struct pollfd p = {.fd = sock, .events = events};
        int ms, rc;

        if (now >= deadline_ns)
            return 0;
        ms = (int)((deadline_ns - now + 999999) / 1000000);
        rc = poll(&p, 1, ms);
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

strata_err cuda_fd_send(int sock, uint64_t tag, const int *fds, size_t n,
                        uint64_t deadline_ns, char *why, size_t cap)
{
    struct fdpass_hdr hdr = {FDPASS_MAGIC, (uint32_t)n, tag};
    union {
        char buf[CMSG_SPACE(sizeof(int) * CUDA_FDPASS_MAX)];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = &hdr, .iov_len = sizeof(hdr)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *c;

    if (sock < 0 || !fds || n == 0 || n > CUDA_FDPASS_MAX)
        return fail(STRATA_EINVAL, why, cap,
                    "fd passing: bad socket, or not 1..64 fds", 0);
    memset(&ctl, 0, sizeof(ctl));
    m.msg_control = ctl.buf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * n);
    c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * n);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    for (;;) {
        ssize_t sent = sendmsg(sock, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        int ready;

        if (sent == (ssize_t)sizeof(hdr))
            return STRATA_OK;
        if (sent >= 0)
            return fail(STRATA_EPROTO, why, cap,
                        "fd passing: message sent in part (use a "
                        "SOCK_SEQPACKET socket)",
                        0);
        if (errno == EPIPE || errno == ECONNRESET)
            return fail(STRATA_EPEER, why, cap,
                        "fd passing: the peer closed its end", errno);
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return fail(STRATA_ESYS, why, cap, "fd passing: sendmsg", errno);
        ready = errno == EINTR ? 1 : wait_for(sock, POLLOUT, deadline_ns);
        if (ready == 0)
            return fail(STRATA_ETIMEDOUT, why, cap,
                        "fd passing: the peer took no message before the "
                        "deadline",
                        0);
        if (ready < 0)
            return fail(STRATA_ESYS, why, cap, "fd passing: poll", errno);
    }
}

static void close_all(const int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
}

/* Takes the fds out of m's control data into fds (at most max); returns
 * how many there were in all, or -1 if anything but SCM_RIGHTS came. */
static long take_fds(struct msghdr *m, int *fds, size_t max, size_t *kept)
{
    long total = 0;

    *kept = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        size_t k;

        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            return -1;
        k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;

            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*kept < max)
                fds[(*kept)++] = fd;
            else
                close(fd); /* more than the caller takes: refused below */
            total++;
        }
    }
    return total;
}

static strata_err recv_once(int sock, uint64_t *tag_out, int *fds_out,
                            size_t max_fds, size_t *n_out, char *why,
                            size_t cap)
{
    struct fdpass_hdr hdr;
    union {
        char buf[CMSG_SPACE(sizeof(int) * CUDA_FDPASS_MAX)];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = &hdr, .iov_len = sizeof(hdr)};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = ctl.buf,
                       .msg_controllen = sizeof(ctl.buf)};
    ssize_t got = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    size_t kept;
    long total;

    if (got == 0)
        return fail(STRATA_EPEER, why, cap,
                    "fd passing: the peer closed its end", 0);
    if (got < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
                   ? STRATA_EBUSY /* nothing yet: wait again */
                   : fail(STRATA_ESYS, why, cap, "fd passing: recvmsg", errno);
    total = take_fds(&m, fds_out, max_fds, &kept);
    if (total < 0 || (m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) ||
        got != (ssize_t)sizeof(hdr) || hdr.magic != FDPASS_MAGIC ||
        hdr.nfds != (uint64_t)total || (size_t)total > max_fds) {
        close_all(fds_out, kept);
        snprintf(why, cap,
                 "fd passing: refused a message of %zd bytes with %ld fds "
                 "(header says %u; at most %zu wanted)%s",
                 got, total, got == (ssize_t)sizeof(hdr) ? hdr.nfds : 0u,
                 max_fds,
                 m.msg_flags & MSG_CTRUNC ? ", control data truncated" : "");
        return STRATA_EPROTO;
    }
    *tag_out = hdr.tag;
    *n_out = kept;
    return STRATA_OK;
}

strata_err cuda_fd_recv(int sock, uint64_t *tag_out, int *fds_out,
                        size_t max_fds, size_t *n_out, uint64_t deadline_ns,
                        char *why, size_t cap)
{
    if (sock < 0 || !tag_out || !fds_out || !n_out || max_fds == 0 ||
        max_fds > CUDA_FDPASS_MAX)
        return fail(STRATA_EINVAL, why, cap,
                    "fd passing: bad socket, output, or not 1..64 fds", 0);
    for (;;) {
        strata_err err =
            recv_once(sock, tag_out, fds_out, max_fds, n_out, why, cap);
        int ready;

        if (err != STRATA_EBUSY)
            return err;
        ready = wait_for(sock, POLLIN, deadline_ns);
        if (ready == 0)
            return fail(STRATA_ETIMEDOUT, why, cap,
                        "fd passing: no message before the deadline", 0);
        if (ready < 0)
            return fail(STRATA_ESYS, why, cap, "fd passing: poll", errno);
    }
}
