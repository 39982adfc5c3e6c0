/* A host buffer's bytes out to a file and back (LRU spill, membudget.c).
 * Spilling writes the bytes to "<dir>/strata-spill-<pid>-<start>-<id>.buf"
 * and gives the segment's pages back to /dev/shm (MADV_REMOVE), keeping
 * the segment and every process's mapping of it; restoring reserves the
 * pages again, reads the bytes back and removes the file. */
#ifndef WORKER_SPILL_H
#define WORKER_SPILL_H

#include <strata/strata.h>

#define WORKER_SPILL_PREFIX "strata-spill-"
#define WORKER_SPILL_SUFFIX ".buf"

/* Writes b's bytes to a new file in dir and releases b's pages. *path_out
 * gets the file's path (base_malloc'd). STRATA_EIO (the file removed, b
 * untouched) when the file cannot be written: a full disk, an I/O error,
 * or the fault point "worker.spill.write". */
strata_err worker_spill_out(const char *dir, const char *owner_tag,
                            strata_buffer *b, char **path_out);
/* Gives b its pages again (STRATA_ENOMEM when /dev/shm is full) and reads
 * its bytes back from path (STRATA_EIO; fault point "worker.spill.read"),
 * then removes the file. On failure b stays spilled and the file stays. */
strata_err worker_spill_in(const char *path, strata_buffer *b);

#endif
