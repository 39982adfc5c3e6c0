/* Which machine this process runs on, as global domains judge "one host":
 * the kernel's boot id (/proc/sys/kernel/random/boot_id, new at every
 * boot, different on every machine) and the host name. Addresses do not
 * tell: one host has many, and a loopback address means "here" only to
 * the one who dials it. */
#ifndef BASE_HOSTID_H
#define BASE_HOSTID_H

#include <stdbool.h>

#define BASE_BOOT_ID_MAX 64 /* a boot id is 36 bytes; room for the NUL */
#define BASE_HOST_NAME_MAX 256

struct base_host_id {
    char name[BASE_HOST_NAME_MAX]; /* gethostname, "" when unknown */
    char boot[BASE_BOOT_ID_MAX];   /* the boot id, "" when unknown */
};

/* This process's host. In testing builds, STRATA_TEST_HOST_ID="NAME/BOOT"
 * in the environment replaces both (a test's "other host"). */
void base_host_id(struct base_host_id *out);
/* True when both are known and equal (boot id and name). */
bool base_host_id_same(const struct base_host_id *a,
                       const struct base_host_id *b);
/* True when s is a usable boot id: 1..63 bytes of [0-9a-zA-Z-]. */
bool base_boot_id_valid(const char *s);

#endif
