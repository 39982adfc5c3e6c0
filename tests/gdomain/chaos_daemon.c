/*
 * The chaos test's strata-node daemon (see chaos.h): started on
 * 127.0.0.1 port 0 with the chaos module and a fresh PSK in a
 * /tmp/strata-chaos-* directory, started again after a kill.
 */
#define _GNU_SOURCE
#include "chaos.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <setjmp.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "node_launch.h"
#include "testutil.h"

#ifndef CHAOS_NODE_PATH
#error "CHAOS_NODE_PATH (the strata-node binary) must be defined"
#endif
#ifndef CHAOS_MODULE_PATH
#error "CHAOS_MODULE_PATH (the chaos module) must be defined"
#endif

void chaos_daemon_log_tail(const struct chaos_daemon *d)
{
    char buf[4096];
    FILE *f = fopen(d->log, "re");
    long size;
    size_t n;

    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0,
          SEEK_SET);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr,
            "---- the strata-node log (its end) ----\n%s\n---- end "
            "----\n",
            buf);
}

void chaos_daemon_files_remove(struct chaos_daemon *d)
{
    char p[160];

    if (!d->dir[0])
        return;
    unlink(d->secret);
    unlink(d->log);
    snprintf(p, sizeof(p), "%s/port", d->dir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/port.tmp", d->dir);
    unlink(p);
    rmdir(d->dir);
    d->dir[0] = '\0';
}

int chaos_daemon_start(struct chaos_daemon *d)
{
    char port_file[160];
    const char *argv[] = {
        CHAOS_NODE_PATH,   "--listen",    "127.0.0.1:0", "--module",
        CHAOS_MODULE_PATH, "--port-file", port_file,     "--secret-file",
        d->secret,         NULL};
    struct testutil_node_launch l = {.argv = argv,
                                     .port_file = port_file,
                                     .log_level = "warn",
                                     .wait_s = 20.0};
    int port;

    memset(d, 0, sizeof(*d));
    snprintf(d->dir, sizeof(d->dir), "/tmp/" CHAOS_TMP "XXXXXX");
    if (!mkdtemp(d->dir)) {
        print_error("mkdtemp: %s\n", strerror(errno));
        d->dir[0] = '\0';
        return -1;
    }
    snprintf(d->secret, sizeof(d->secret), "%s/secret", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/node.log", d->dir);
    snprintf(port_file, sizeof(port_file), "%s/port", d->dir);
    l.dir = d->dir;
    l.log = d->log;
    if (devkit_write_secret(d->secret) != 0) {
        print_error("cannot write %s\n", d->secret);
        chaos_daemon_files_remove(d);
        return -1;
    }
    port = testutil_node_launch(&l, &d->pid);
    if (port <= 0) {
        chaos_daemon_log_tail(d);
        if (d->pid > 0) {
            kill(d->pid, SIGKILL);
            waitpid(d->pid, NULL, 0);
            d->pid = 0;
        }
        chaos_daemon_files_remove(d);
        return -1;
    }
    snprintf(d->endpoint, sizeof(d->endpoint), "127.0.0.1:%d", port);
    return 0;
}

/* SIGTERM, reaped; 0 when it exited with status 0. */
int chaos_daemon_stop(struct chaos_daemon *d)
{
    int status = 0, rc = 0;

    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        if (!testutil_wait_child(d->pid, 10.0, &status)) {
            kill(d->pid, SIGKILL);
            waitpid(d->pid, &status, 0);
            print_error("strata-node ignored SIGTERM for 10 s\n");
            rc = -1;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            print_error("strata-node ended with status 0x%x\n", status);
            rc = -1;
        }
        if (rc != 0)
            chaos_daemon_log_tail(d);
        d->pid = 0;
    }
    chaos_daemon_files_remove(d);
    return rc;
}
