/*
 * Helpers of the limit tests (see limits_kit.h).
 */
#define _GNU_SOURCE
#include "limits_kit.h"
#include "node_launch.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int lk_node_start(struct rk_node *n, enum rk_auth auth,
                  const char *const *extra)
{
    char port_file[RK_PATH_MAX];
    const char *argv[40];
    size_t k = 0;
    struct testutil_node_launch l = {.argv = argv,
                                     .port_file = port_file,
                                     .log_level = "info",
                                     .wait_s = RK_WAIT_S};

    memset(n, 0, sizeof(*n));
    n->auth = auth;
    snprintf(n->dir, sizeof(n->dir), "/tmp/strata-rt-node-XXXXXX");
    if (!mkdtemp(n->dir)) {
        print_error("mkdtemp: %s\n", strerror(errno));
        n->dir[0] = '\0';
        return -1;
    }
    snprintf(n->secret, sizeof(n->secret), "%s/secret", n->dir);
    snprintf(n->log, sizeof(n->log), "%s/node.log", n->dir);
    snprintf(port_file, sizeof(port_file), "%s/port", n->dir);
    if (auth == RK_PSK && rk_write_secret(n->secret) != 0) {
        print_error("cannot write %s\n", n->secret);
        rk_node_stop(n);
        return -1;
    }
    argv[k++] = RT_NODE_PATH;
    argv[k++] = "--listen";
    argv[k++] = "127.0.0.1:0";
    argv[k++] = "--module";
    argv[k++] = RT_MODULE_PATH;
    argv[k++] = "--port-file";
    argv[k++] = port_file;
    if (auth == RK_PSK) {
        argv[k++] = "--secret-file";
        argv[k++] = n->secret;
    } else {
        argv[k++] = "--insecure";
    }
    for (size_t i = 0; extra && extra[i] && k < 38; i++)
        argv[k++] = extra[i];
    argv[k] = NULL;
    l.dir = n->dir;
    l.log = n->log;
    n->port = testutil_node_launch(&l, &n->pid);
    if (n->port <= 0) {
        if (rk_node_alive(n))
            rk_node_print_log(n);
        rk_node_stop(n);
        return -1;
    }
    snprintf(n->endpoint, sizeof(n->endpoint), "127.0.0.1:%d", n->port);
    return 0;
}

size_t lk_log_count(const struct rk_node *n, const char *needle, bool show)
{
    FILE *f = fopen(n->log, "r");
    char line[4096];
    size_t count = 0;

    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        if (!strstr(line, needle))
            continue;
        if (show && count == 0)
            print_message("  %s", line);
        count++;
    }
    fclose(f);
    return count;
}

size_t lk_shm_of(pid_t pid)
{
    char prefix[64];
    size_t n = 0;
    struct dirent *e;
    DIR *d = opendir("/dev/shm");

    if (!d)
        return 0;
    snprintf(prefix, sizeof(prefix), "strata-%u-%d-", (unsigned)getuid(),
             (int)pid);
    while ((e = readdir(d)) != NULL)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}
