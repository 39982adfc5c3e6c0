/*
 * Open MPI's shared-memory segments of a group launched on this host
 * (btl vader's vader_segment.*, 4 MiB a rank) live in a /dev/shm folder
 * of the launch's own, not loose in /dev/shm: when mpirun is SIGKILLed
 * (and so cannot remove them), the group's work fails with STRATA_EPEER
 * and the destroy takes the folder and every segment in it; the folder
 * of an L4 that was killed goes at the next launch. This test
 * runs without the segment folder the other MPI tests set up
 * (mt_env.h), so that the library's own is the one used.
 */
#include "mt_env.h"
#include "mt_procs.h"
#include "remote_kit.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const int chip0[1] = {0};
static const char *over[1] = {"--oversubscribe"};
static const char *const seg_vars[2] = {"OMPI_MCA_btl_vader_backing_directory",
                                        "OMPI_MCA_osc_sm_backing_directory"};

/* Files in dir whose name starts with prefix (-1: no such folder). */
static int count_prefixed(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* The launch's segment folder of this process, into path; false if none. */
static bool seg_dir_of_mine(char *path, size_t cap)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    char prefix[48];
    bool found = false;

    snprintf(prefix, sizeof(prefix), "strata-%u-%d-ompi-", (unsigned)getuid(),
             (int)getpid());
    while (d && !found && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(path, cap, "/dev/shm/%s", e->d_name);
            found = true;
        }
    if (d)
        closedir(d);
    return found;
}

/* This process's child that is mpirun (by any of its names), 0 if none. */
static pid_t mpirun_child(void)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;

    while (d && !found && (e = readdir(d)) != NULL) {
        char path[64], comm[64];
        int pid = atoi(e->d_name), ppid = 0;
        FILE *f;

        if (pid <= 0)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        f = fopen(path, "r");
        if (!f)
            continue;
        /* pid (comm) state ppid: names without spaces here. */
        if (fscanf(f, "%*d (%63[^)]) %*c %d", comm, &ppid) == 2 &&
            ppid == (int)getpid() &&
            (strcmp(comm, "mpirun") == 0 || strcmp(comm, "mpiexec") == 0 ||
             strcmp(comm, "orterun") == 0))
            found = pid;
        fclose(f);
    }
    if (d)
        closedir(d);
    return found;
}

/* The pid of a process that has ended (forked, reaped). */
static pid_t dead_pid(void)
{
    pid_t dead = fork();

    assert_true(dead >= 0);
    if (dead == 0)
        _exit(0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    return dead;
}

/* A folder as a killed L4 leaves it, with one file in it: fmt formats
 * the folder's path from the dead pid; the path goes to path. */
static void plant_dead_l4_dir(char *path, size_t cap, const char *file,
                              const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void plant_dead_l4_dir(char *path, size_t cap, const char *file,
                              const char *fmt, ...)
{
    char full[400];
    va_list ap;
    FILE *f;

    va_start(ap, fmt);
    vsnprintf(path, cap, fmt, ap);
    va_end(ap);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(full, sizeof(full), "%s/%s", path, file);
    f = fopen(full, "w");
    assert_non_null(f);
    fclose(f);
}

static void test_mpi_shm_killed_mpirun_leaves_no_segments(void **state)
{
    testutil_snapshot before;
    strata_mpi_group_spec s;
    strata_worker_config c4;
    strata_worker *w = NULL;
    static const char *modules[1] = {RT_MODULE_PATH};
    int ids[MT_MAX_RANKS];
    pid_t pids[MT_MAX_RANKS], mpirun;
    char dir[300], stale[300], key[300];
    struct stat st;
    int loose = count_prefixed("/dev/shm", "vader_segment.");
    double t0;

    (void)state;
    /* A killed L4's segment folder, with a segment; its key folder (one
     * killed before its ranks were in), key and all. */
    plant_dead_l4_dir(stale, sizeof(stale), "vader_segment.test.0",
                      "/dev/shm/strata-%u-%d-ompi-test", (unsigned)getuid(),
                      (int)dead_pid());
    plant_dead_l4_dir(key, sizeof(key), "key", "%s/strata-mpi-%d-test",
                      getenv("TMPDIR") && getenv("TMPDIR")[0] ? getenv("TMPDIR")
                                                              : "/tmp",
                      (int)dead_pid());
    testutil_snapshot_take(&before);
    memset(&s, 0, sizeof(s));
    s.ranks = 2;
    s.chip_ids = chip0;
    s.num_chips = 1;
    s.mpirun_path = MT_MPIRUN;
    s.mpirun_args = over;
    s.num_mpirun_args = 1;
    s.rank_program = MT_RANK_PATH;
    s.modules = modules;
    s.num_modules = 1;
    strata_worker_config_init(&c4, 4);
    c4.startup_timeout_s = 60;
    it_ok(strata_worker_create(&c4, &w));
    it_ok(strata_worker_add_mpirun_worker_group(w, &s, ids, MT_MAX_RANKS));
    it_ok(strata_worker_init(w));
    assert_int_equal(mt_rank_pids(pids), 2);
    /* The launch removed what a killed L4 left. */
    assert_int_not_equal(stat(stale, &st), 0);
    assert_int_not_equal(stat(key, &st), 0);
    it_ok(rk_add_run(w, ids, 2, 4, 1));
    /* The ranks' segments are in the launch's folder, none loose. */
    assert_true(seg_dir_of_mine(dir, sizeof(dir)));
    assert_true(count_prefixed(dir, "vader_segment.") > 0);
    assert_int_equal(count_prefixed("/dev/shm", "vader_segment."), loose);
    mpirun = mpirun_child();
    assert_true(mpirun > 0);
    assert_int_equal(kill(mpirun, SIGKILL), 0);
    /* The ranks lose their mpirun and go: work fails, never hangs. */
    t0 = testutil_now();
    while (rk_add_run(w, ids, 2, 4, 1) == STRATA_OK) {
        assert_true(testutil_now() - t0 < 40.0);
        testutil_sleep(0.05);
    }
    rk_destroy(w, STRATA_EPEER);
    assert_false(seg_dir_of_mine(dir, sizeof(dir)));
    assert_int_equal(count_prefixed("/dev/shm", "vader_segment."), loose);
    t0 = testutil_now();
    while (mt_launch_procs(getpid()) > 0) {
        assert_true(testutil_now() - t0 < 40.0);
        testutil_sleep(0.05);
    }
    for (size_t i = 0; i < 2; i++)
        assert_false(mt_shm_of(pids[i]));
    testutil_assert_clean(&before);
}

static int setup(void **state)
{
    (void)state;
    if (mt_env_setup() != 0)
        return -1;
    for (size_t i = 0; i < 2; i++)
        unsetenv(seg_vars[i]);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mt_env_teardown();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mpi_shm_killed_mpirun_leaves_no_segments),
    };

    rk_filter_from_env();
    return cmocka_run_group_tests(tests, setup, teardown);
}
