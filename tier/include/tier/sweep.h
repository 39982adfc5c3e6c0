/* Files owned by one process, in a directory several processes share (nvme
 * instances, spilled buffers): their names carry the owner's pid and start
 * time, "<prefix><pid>-<start>-<rest><suffix>", so that the next process
 * to use the directory can tell a dead owner's files from a live one's
 * (a reused pid starts later) and remove them. */
#ifndef TIER_SWEEP_H
#define TIER_SWEEP_H

#include "strata/strata.h"

#include <stdbool.h>
#include <stddef.h>

/* Whether dir can hold such files: STRATA_EINVAL naming field (the
 * config's "nvme_dir", "spill_dir") for an empty path, no directory, one
 * not writable, or one that takes no files (a file is made and removed
 * there: access() lets root through, and /proc passes it). */
strata_err tier_dir_check(const char *field, const char *dir);

/* Writes "<pid>-<start>" of the calling process into buf (cap bytes);
 * false when it does not fit or /proc cannot say. */
bool tier_owner_tag(char *buf, size_t cap);

/* Removes the files of dir named "<prefix><pid>-<start>-<rest><suffix>"
 * whose owner is no longer alive, and the older "<prefix><pid>-<n>
 * <suffix>" whose pid is not alive. Never a live process's file, nor any
 * other name. Returns how many it removed. */
unsigned tier_sweep_dead(const char *dir, const char *prefix,
                         const char *suffix);

#endif
