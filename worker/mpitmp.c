/* Open MPI's session folder, one per launch (mpigroup.h). Every mpirun of
 * a user shares <tmp>/ompi.<host>.<uid> unless told otherwise, and Open
 * MPI 4.1 races on it: one job's cleanup removes the folder another is
 * making its own under (mkdir fails with EEXIST or ENOENT), so two groups
 * started at once, or two L4s, fail now and then. A folder of the
 * launch's own, given to mpirun as orte_tmpdir_base, shares nothing; it
 * goes when the launch ends, and the folder of an L4 that was killed goes
 * at the next launch on the host. A user who sets
 * OMPI_MCA_orte_tmpdir_base keeps theirs. */
#define _GNU_SOURCE
#include "base/err.h"
#include "base/log.h"
#include "base/proc.h"
#include "mpigroup.h"
#include "worker/reclaim.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* Open MPI refuses orte_local_tmpdir_base in its ranks (they inherit it
 * beside the orte_tmpdir_base mpirun gives them), so the launch sets the
 * base of every host; it does so only for launches on this host alone
 * (no hostfile or hosts), since other hosts would keep an empty folder of
 * ours. */
#define VAR "OMPI_MCA_orte_tmpdir_base"

static int remove_one(const char *path, const struct stat *st, int type,
                      struct FTW *f)
{
    (void)st;
    (void)f;
    if ((type == FTW_DP ? rmdir(path) : unlink(path)) != 0 && errno != ENOENT)
        LOG_WARN("MPI group: cannot remove %s: %s", path, strerror(errno));
    return 0;
}

/* Depth first, never following a link out of the folder. */
static void remove_tree(const char *dir)
{
    if (nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
        LOG_WARN("MPI group: cannot remove %s: %s", dir, strerror(errno));
}

static const char *tmp_of(const char *dir)
{
    if (!dir)
        dir = getenv("TMPDIR");
    return dir && dir[0] ? dir : "/tmp";
}

void worker_mpi_reclaim_stale_dirs(const char *dir)
{
    DIR *d = opendir(tmp_of(dir));
    struct dirent *e;
    char path[PATH_MAX];
    struct stat st;
    int pid;

    while (d && (e = readdir(d)) != NULL) {
        if (sscanf(e->d_name, "strata-ompi-%d-", &pid) != 1 || pid <= 0 ||
            pid == (int)getpid())
            continue;
        if (!base_proc_gone(pid))
            continue;
        if (snprintf(path, sizeof(path), "%s/%s", tmp_of(dir), e->d_name) >=
                (int)sizeof(path) ||
            lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != getuid())
            continue;
        LOG_INFO("MPI group: removing %s of dead process %d", path, pid);
        remove_tree(path);
    }
    if (d)
        closedir(d);
}

strata_err mpitmp_make(struct mpi_group *g)
{
    const char *dir = tmp_of(g->key_dir);

    g->ompi_dir[0] = '\0';
    if (getenv(VAR) || getenv("OMPI_MCA_orte_local_tmpdir_base") ||
        g->hostfile || g->hosts)
        return STRATA_OK;
    worker_mpi_reclaim_stale_dirs(dir);
    if (snprintf(g->ompi_dir, sizeof(g->ompi_dir), "%s/strata-ompi-%d-XXXXXX",
                 dir, (int)getpid()) >= (int)sizeof(g->ompi_dir) ||
        !mkdtemp(g->ompi_dir)) {
        g->ompi_dir[0] = '\0';
        return base_fail_errno(errno,
                               "MPI group: cannot make a session folder "
                               "for Open MPI in %s",
                               dir);
    }
    return STRATA_OK;
}

char **mpitmp_env(const struct mpi_group *g)
{
    size_t n = 0;
    char **env;

    while (environ[n])
        n++;
    env = calloc(n + 2, sizeof(*env));
    if (!env)
        return NULL;
    memcpy(env, environ, n * sizeof(*env));
    if (g->ompi_dir[0] && asprintf(&env[n], "%s=%s", VAR, g->ompi_dir) < 0) {
        free(env);
        return NULL;
    }
    return env;
}

void mpitmp_env_free(const struct mpi_group *g, char **env)
{
    size_t n = 0;

    if (!env)
        return;
    while (env[n])
        n++;
    if (g->ompi_dir[0] && n > 0)
        free(env[n - 1]);
    free(env);
}

void mpitmp_remove(struct mpi_group *g)
{
    if (!g->ompi_dir[0])
        return;
    remove_tree(g->ompi_dir);
    g->ompi_dir[0] = '\0';
}
