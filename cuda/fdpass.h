/* Passing file descriptors between processes over an AF_UNIX socket with
 * SCM_RIGHTS: how a chip hands the fd of an exported device allocation
 * (cuMemExportToShareableHandle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
 * to a peer, which imports it. The socket is made before the fork (a
 * SOCK_SEQPACKET socketpair, so one call is one message). Every wait is
 * bounded by a deadline, in CLOCK_MONOTONIC nanoseconds. No CUDA here.
 *
 * Errors come back as codes with the detail written into why: EINVAL
 * (bad arguments), ETIMEDOUT (the deadline passed), EPEER (the peer
 * closed its end), EPROTO (a message that is not ours, truncated, or with
 * more fds than the caller takes), ESYS (the system call failed). */
#ifndef CUDA_FDPASS_H
#define CUDA_FDPASS_H

#include <strata/strata.h>

#include <stddef.h>
#include <stdint.h>

#define CUDA_FDPASS_MAX 64 /* fds per message (the kernel allows 253) */

/* CLOCK_MONOTONIC now plus seconds, in ns (a deadline for the calls). */
uint64_t cuda_fdpass_deadline(double seconds);

/* Sends n (1..CUDA_FDPASS_MAX) fds and a 64-bit tag (what they are, e.g.
 * an allocation id) as one message. The fds stay open here: the peer gets
 * its own copies. */
strata_err cuda_fd_send(int sock, uint64_t tag, const int *fds, size_t n,
                        uint64_t deadline_ns, char *why, size_t cap);

/* Receives one message: its tag and its fds (at most max_fds; they come
 * close-on-exec, and the caller owns them). On any error no received fd
 * stays open. */
strata_err cuda_fd_recv(int sock, uint64_t *tag_out, int *fds_out,
                        size_t max_fds, size_t *n_out, uint64_t deadline_ns,
                        char *why, size_t cap);

#endif
