/* dd as a disk reference: the same bytes in 1 MiB blocks with direct I/O,
 * written from /dev/zero (oflag=direct) or read to /dev/null
 * (iflag=direct). Each returns the seconds dd took, or -1 when it failed
 * or is not there. */
#ifndef BENCH_DD_REF_H
#define BENCH_DD_REF_H

double dd_ref_write(const char *path, unsigned mib);
double dd_ref_read(const char *path, unsigned mib);

#endif
