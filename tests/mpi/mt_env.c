#include "mt_env.h"

#include "remote_kit.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char seg_dir[] = "/tmp/strata-mpitest-shm-XXXXXX";

int mt_env_setup(void)
{
    /* Open MPI refuses root unless told; this process and its mpirun only. */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    if (!mkdtemp(seg_dir))
        return -1;
    setenv("OMPI_MCA_btl_vader_backing_directory", seg_dir, 1);
    setenv("OMPI_MCA_osc_sm_backing_directory", seg_dir, 1);
    return rk_register();
}

void mt_env_teardown(void)
{
    DIR *d = opendir(seg_dir);
    struct dirent *e;
    char path[sizeof(seg_dir) + 256];

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", seg_dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(seg_dir);
}
