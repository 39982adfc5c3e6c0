/* The handler targets' side of a socket (fuzz_session plays a parent,
 * fuzz_l4_link a node): what the other side sent, read into a buffer. */
#ifndef FUZZ_PEER_H
#define FUZZ_PEER_H

#include "wire/frame.h"
#include "wire/msg.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

/* Appends to in whatever fd has, waiting up to ms for the first byte;
 * *eof once the other side closed or the socket failed. 1 when it
 * looked (something may have come), 0 when nothing came, -1 when in
 * cannot grow. */
static inline int fuzz_peer_recv(int fd, struct wire_buf *in, bool *eof, int ms)
{
    struct pollfd q = {fd, POLLIN, 0};

    if (*eof || poll(&q, 1, ms) <= 0)
        return 0;
    for (;;) {
        ssize_t r;

        if (wire_buf_reserve(in, 65536) != STRATA_OK)
            return -1;
        r = recv(fd, in->data + in->len, 65536, MSG_DONTWAIT);
        if (r > 0) {
            in->len += (size_t)r;
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR))
            *eof = true;
        return 1;
    }
}

/* Takes the whole frames out of in, in order: each is decoded and given
 * to each(m, arg), which must not keep m. NULL when every frame decoded;
 * else what was wrong (strata_errmsg() says more), the rest left in in. */
static inline const char *
fuzz_peer_frames(struct wire_buf *in,
                 void (*each)(struct wire_msg *m, void *arg), void *arg)
{
    const char *bad = NULL;
    size_t at = 0;

    while (in->len - at >= WIRE_FRAME_HEADER_SIZE) {
        struct wire_frame_header h;
        struct wire_msg m;
        size_t n;

        if (wire_frame_header_unpack(in->data + at, WIRE_FRAME_HEADER_SIZE,
                                     &h) != STRATA_OK) {
            bad = "a bad frame header";
            break;
        }
        n = WIRE_FRAME_HEADER_SIZE + h.body_len;
        if (in->len - at < n)
            break;
        if (wire_frame_unpack(in->data + at, n, &m) != STRATA_OK) {
            bad = "a malformed frame";
            break;
        }
        each(&m, arg);
        wire_msg_free(&m);
        at += n;
    }
    if (at) {
        memmove(in->data, in->data + at, in->len - at);
        in->len -= at;
    }
    return bad;
}

#endif
