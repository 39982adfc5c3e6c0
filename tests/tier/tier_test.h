/* Helpers the tier tests share. Include after <cmocka.h>. */
#ifndef TIER_TEST_H
#define TIER_TEST_H

#include <dirent.h>
#include <string.h>

#include <strata/strata.h>

/* Fails the test unless the thread's last error message holds needle. */
static inline void assert_msg_has(const char *needle)
{
    if (!strstr(strata_errmsg(), needle))
        fail_msg("message '%s' lacks '%s'", strata_errmsg(), needle);
}

/* Entries of dir other than dot files; -1 when it cannot be read. */
static inline int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

#endif
