/* Open MPI's session folder, one per launch (mpigroup.h). Every mpirun of
 * a user shares <tmp>/ompi.<host>.<uid> unless told otherwise, and Open
 * MPI 4.1 races on it: one job's cleanup removes the folder another is
 * making its own under (mkdir fails with EEXIST or ENOENT), so two groups
 * started at once, or two L4s, fail now and then. A folder of the
 * launch's own, given to mpirun as orte_tmpdir_base, shares nothing; it
 * goes when the launch ends, and the folder of an L4 that was killed goes
 * at the next launch on the host. A user who sets
 * OMPI_MCA_orte_tmpdir_base keeps theirs.
 *
 * The ranks' shared-memory segments (btl vader's vader_segment.*, 4 MiB
 * each, and osc sm's windows) go to /dev/shm by default, where a job
 * whose mpirun was SIGKILLed leaves them for good. A launch gives them a
 * folder of its own there instead, removed with the session folder (a
 * killed L4's at the next launch, like that one); a user who sets
 * OMPI_MCA_btl_vader_backing_directory or
 * OMPI_MCA_osc_sm_backing_directory keeps that one. */
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
#define SHM "/dev/shm"
static const char *const shm_vars[] = {"OMPI_MCA_btl_vader_backing_directory",
                                       "OMPI_MCA_osc_sm_backing_directory"};
#define NUM_SHM_VARS (sizeof(shm_vars) / sizeof(shm_vars[0]))

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

/* The pid in a folder name of ours in dir: strata-ompi-<pid>-* (a
 * session folder), strata-mpi-<pid>-* (a key folder: an L4 killed before
 * its ranks were in leaves it, key and all) or, in /dev/shm,
 * strata-<uid>-<pid>-ompi-* (a segment folder, named like the tree's
 * other names there); 0 if none. */
static int folder_pid(const char *dir, const char *name)
{
    unsigned uid;
    int pid, end = 0;

    if (strcmp(dir, SHM) == 0)
        return sscanf(name, "strata-%u-%d-ompi-%n", &uid, &pid, &end) == 2 &&
                       end > 0 && uid == (unsigned)getuid()
                   ? pid
                   : 0;
    if (sscanf(name, "strata-ompi-%d-", &pid) == 1 ||
        sscanf(name, "strata-mpi-%d-", &pid) == 1)
        return pid;
    return 0;
}

void worker_mpi_reclaim_stale_dirs(const char *dir)
{
    DIR *d = opendir(tmp_of(dir));
    struct dirent *e;
    char path[PATH_MAX];
    struct stat st;
    int pid;

    while (d && (e = readdir(d)) != NULL) {
        pid = folder_pid(tmp_of(dir), e->d_name);
        if (pid <= 0 || pid == (int)getpid())
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

/* The segment folder, unless the user chose both (a launch works without
 * one: Open MPI then uses its default). */
static void make_shm_dir(struct mpi_group *g)
{
    struct stat st;
    size_t mine = 0;

    g->shm_dir[0] = '\0';
    for (size_t i = 0; i < NUM_SHM_VARS; i++)
        mine += !getenv(shm_vars[i]);
    if (mine == 0 || stat(SHM, &st) != 0 || !S_ISDIR(st.st_mode))
        return;
    snprintf(g->shm_dir, sizeof(g->shm_dir), SHM "/strata-%u-%d-ompi-XXXXXX",
             (unsigned)getuid(), (int)getpid());
    if (!mkdtemp(g->shm_dir)) {
        LOG_WARN("MPI group: cannot make a folder for Open MPI's segments "
                 "in " SHM " (%s); they go to its default",
                 strerror(errno));
        g->shm_dir[0] = '\0';
    }
}

void mpitmp_sweep(const struct mpi_group *g)
{
    worker_mpi_reclaim_stale_dirs(SHM);
    worker_mpi_reclaim_stale_dirs(tmp_of(g->key_dir));
}

strata_err mpitmp_make(struct mpi_group *g)
{
    const char *dir = tmp_of(g->key_dir);

    g->ompi_dir[0] = '\0';
    g->shm_dir[0] = '\0';
    if (g->hostfile || g->hosts)
        return STRATA_OK;
    make_shm_dir(g);
    if (getenv(VAR) || getenv("OMPI_MCA_orte_local_tmpdir_base"))
        return STRATA_OK;
    if (snprintf(g->ompi_dir, sizeof(g->ompi_dir), "%s/strata-ompi-%d-XXXXXX",
                 dir, (int)getpid()) >= (int)sizeof(g->ompi_dir) ||
        !mkdtemp(g->ompi_dir)) {
        int e = errno;

        g->ompi_dir[0] = '\0';
        mpitmp_remove(g);
        return base_fail_errno(e,
                               "MPI group: cannot make a session folder "
                               "for Open MPI in %s",
                               dir);
    }
    return STRATA_OK;
}

/* Appends NAME=value to env at *n; false when out of memory. */
static bool add_var(char **env, size_t *n, const char *name, const char *value)
{
    if (asprintf(&env[*n], "%s=%s", name, value) < 0) {
        env[*n] = NULL;
        return false;
    }
    (*n)++;
    return true;
}

char **mpitmp_env(const struct mpi_group *g, size_t *added)
{
    size_t n = 0, k = 0;
    bool ok = true;
    char **env;

    *added = 0;
    while (environ[n])
        n++;
    /* Ours first, so that they are the ones to free. */
    env = calloc(n + NUM_SHM_VARS + 2, sizeof(*env));
    if (!env)
        return NULL;
    if (g->ompi_dir[0])
        ok = add_var(env, &k, VAR, g->ompi_dir);
    for (size_t i = 0; ok && g->shm_dir[0] && i < NUM_SHM_VARS; i++)
        if (!getenv(shm_vars[i]))
            ok = add_var(env, &k, shm_vars[i], g->shm_dir);
    if (!ok) {
        mpitmp_env_free(env, k);
        return NULL;
    }
    memcpy(env + k, environ, n * sizeof(*env));
    *added = k;
    return env;
}

void mpitmp_env_free(char **env, size_t added)
{
    if (!env)
        return;
    for (size_t i = 0; i < added; i++)
        free(env[i]);
    free(env);
}

void mpitmp_remove(struct mpi_group *g)
{
    if (g->ompi_dir[0])
        remove_tree(g->ompi_dir);
    g->ompi_dir[0] = '\0';
    if (g->shm_dir[0])
        remove_tree(g->shm_dir);
    g->shm_dir[0] = '\0';
}
