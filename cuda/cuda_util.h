/* The pure parts of the CUDA backend: no CUDA header, no driver. They are
 * built on every machine (tests/cuda checks them without a GPU). */
#ifndef CUDA_UTIL_H
#define CUDA_UTIL_H

#include <strata/strata.h>

#include <stddef.h>

/* The symbolic name of a CUresult for the codes the plug-in meets at
 * start-up and completion ("CUDA_ERROR_STUB_LIBRARY"), or NULL. For when
 * the driver cannot name it itself (a stub's cuGetErrorName fails). */
const char *cuda_result_name(int code);
/* A short reason for those codes, or NULL. */
const char *cuda_result_hint(int code);
/* The strata code a CUresult maps to: out of memory -> STRATA_ENOMEM,
 * invalid value -> STRATA_EINVAL, no driver / device / support ->
 * STRATA_ENOTSUP, anything else -> STRATA_EIO. */
strata_err cuda_result_errcode(int code);

/* The device ordinal for chip_id under map, a STRATA_CUDA_DEVICES value:
 * comma-separated "chip=ordinal" pairs (spaces allowed around items);
 * chips it does not name use their own id. NULL or "" maps every chip to
 * its id. STRATA_EINVAL, with the message in why, for a malformed map
 * (an item without '=', a number that is not a decimal int >= 0, or
 * chip_id named twice). The ordinal is not checked against the device count. */
strata_err cuda_device_map_lookup(const char *map, int chip_id,
                                  int *ordinal_out, char *why, size_t cap);

#endif
