/* The input format of the handler fuzz targets (fuzz_session, fuzz_gnode,
 * fuzz_l4_link): a sequence of records, each
 *
 *   op (1 byte) | len (2 bytes, big-endian) | payload (len bytes, fewer
 *                                              where the input ends)
 *
 * op & 0x0f in 1..15: a frame of that message type (WIRE_MSG_TYPE_MIN..
 *                     MAX): the harness writes a valid 12-byte header
 *                     (body_len = the payload's length) and the payload
 *                     as its body, so mutations of a body keep the
 *                     framing;
 * op & 0x0f = 0:      the payload as raw bytes (a broken stream);
 * op & 0x80:          after it, wait for the peer's next reply
 *                     (fuzz_session); before it, wait until the L4 has
 *                     been quiet a while (fuzz_l4_link);
 * op & 0x40:          handled together with the next record, as one
 *                     command of several frames (fuzz_gnode only: the
 *                     L4's whole transaction at once).
 *
 * Seeds are written by the targets themselves (FUZZ_WRITE_SEEDS=DIR, see
 * fuzz_seed_* below), so digests and layouts always match the code. */
#ifndef FUZZ_RECORDS_H
#define FUZZ_RECORDS_H

#include "wire/msg.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FUZZ_OP_WAIT 0x80u
#define FUZZ_OP_BATCH 0x40u

struct fuzz_record {
    unsigned type; /* message type, 0 = raw bytes */
    bool wait;
    bool batch; /* goes with the next record */
    const uint8_t *payload;
    size_t len;
};

/* The next record of [*p, *p + *left); false at the end. */
static inline bool fuzz_record_next(const uint8_t **p, size_t *left,
                                    struct fuzz_record *r)
{
    size_t len;
    unsigned op;

    if (*left < 3)
        return false;
    op = (*p)[0];
    len = (size_t)(*p)[1] << 8 | (*p)[2];
    *p += 3;
    *left -= 3;
    if (len > *left)
        len = *left;
    r->type = op & 0x0fu;
    if (r->type < WIRE_MSG_TYPE_MIN || r->type > WIRE_MSG_TYPE_MAX)
        r->type = 0;
    r->wait = (op & FUZZ_OP_WAIT) != 0;
    r->batch = (op & FUZZ_OP_BATCH) != 0;
    r->payload = *p;
    r->len = len;
    *p += len;
    *left -= len;
    return true;
}

/* ---- seeds ----------------------------------------------------------- */

struct fuzz_seed {
    struct wire_buf b;
};

static inline void fuzz_seed_die(const char *what)
{
    fprintf(stderr, "fuzz seeds: %s: %s\n", what, strata_errmsg());
    exit(1);
}

static inline void fuzz_seed_bytes(struct fuzz_seed *s, unsigned op,
                                   const void *data, size_t len)
{
    uint8_t head[3] = {(uint8_t)op, (uint8_t)(len >> 8), (uint8_t)len};

    if (len > 0xffff)
        fuzz_seed_die("record longer than 64 KiB");
    if (wire_buf_append(&s->b, head, sizeof(head)) != STRATA_OK ||
        wire_buf_append(&s->b, data, len) != STRATA_OK)
        fuzz_seed_die("out of memory");
}

/* Appends m as a framed record (its body); flags: FUZZ_OP_WAIT or 0. */
static inline void fuzz_seed_msg(struct fuzz_seed *s, const struct wire_msg *m,
                                 unsigned flags)
{
    struct wire_buf b;

    wire_buf_init(&b);
    if (wire_msg_pack(m, &b) != STRATA_OK)
        fuzz_seed_die(wire_msg_name(m->type));
    fuzz_seed_bytes(s, m->type | flags, b.data + WIRE_FRAME_HEADER_SIZE,
                    b.len - WIRE_FRAME_HEADER_SIZE);
    wire_buf_fini(&b);
}

/* Writes the seed to DIR/name and empties it. */
static inline void fuzz_seed_write(struct fuzz_seed *s, const char *dir,
                                   const char *name)
{
    char path[1024];
    FILE *f;

    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        perror(dir);
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(s->b.data, 1, s->b.len, f) != s->b.len || fclose(f)) {
        perror(path);
        exit(1);
    }
    wire_buf_reset(&s->b);
}

#endif
