/* Representative messages of every wire type, for the round-trip and
 * rejection tests and for the fuzz seed corpus generator. */
#ifndef WIRE_SAMPLES_H
#define WIRE_SAMPLES_H

#include "wire/msg.h"

#include <stdbool.h>
#include <stddef.h>

struct wire_sample {
    const char *name; /* file-name safe: "task_chip" */
    struct wire_msg msg;
};

/* The samples (static storage, built on first call). Every type has at
 * least one; the first sample of a type uses every optional field. */
size_t wire_samples(const struct wire_sample **out);

/* The fuzz target name of a type ("fuzz_task"); NULL when unknown. */
const char *wire_sample_target(unsigned type);

/* Field-by-field comparison of two messages; on a difference, false and
 * the first differing field in why. */
bool wire_sample_equal(const struct wire_msg *a, const struct wire_msg *b,
                       char *why, size_t why_size);

#endif
