/* strata trace: validate (the checks a timeline must pass to open in
 * Perfetto's UI and chrome://tracing) and summary of a trace-event JSON
 * file, such as STRATA_TRACE writes (docs/tracing.md). */
#include "cli.h"
#include "trace_read.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CMD_VALIDATE "trace validate"
#define CMD_SUMMARY "trace summary"
/* Files above this are refused rather than read whole into memory. */
#define TRACE_FILE_MAX ((size_t)1 << 32)

void cli_trace_usage(FILE *f)
{
    fprintf(f,
            "usage: strata trace validate FILE\n"
            "       strata trace summary FILE\n"
            "\n"
            "validate: check that FILE is trace-event JSON that opens as one "
            "timeline:\nevery event has a known phase, integer pid and tid, "
            "a finite ts (and dur\nfor complete slices); complete slices of "
            "one thread nest; per id, in\ntime order, every flow start has "
            "its end and every async begin its end, and\nno id is open twice "
            "at once. Exit 0 when sound, 1 with the first problem\n"
            "otherwise.\n"
            "\n"
            "summary: per-callable counts, total, median and p99 run time "
            "and median\nqueue wait; the critical path through the "
            "dependency flows; the idle\nshare of each chip and sub worker "
            "over the span of the tasks.\n");
}

/* FILE read whole; NULL with the reason on stderr. */
static char *slurp(const char *cmd, const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);

    if (!f || !buf) {
        cli_fail(CLI_FAIL, cmd, "%s: %s", path,
                 f ? "out of memory" : strerror(errno));
        free(buf);
        if (f)
            fclose(f);
        return NULL;
    }
    for (;;) {
        size_t got;

        errno = 0;
        got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (len < cap)
            break;
        if (cap >= TRACE_FILE_MAX) {
            cli_fail(CLI_FAIL, cmd, "%s: larger than %zu bytes", path,
                     TRACE_FILE_MAX);
            goto fail;
        }
        char *more = realloc(buf, cap * 2);
        if (!more) {
            cli_fail(CLI_FAIL, cmd, "%s: out of memory", path);
            goto fail;
        }
        buf = more;
        cap *= 2;
    }
    if (ferror(f)) { /* a directory: "Is a directory" */
        cli_fail(CLI_FAIL, cmd, "%s: %s", path,
                 errno ? strerror(errno) : "read error");
        goto fail;
    }
    fclose(f);
    *len_out = len;
    return buf;
fail:
    fclose(f);
    free(buf);
    return NULL;
}

static int load(const char *cmd, int argc, char **argv, struct tr_file *out)
{
    char err[TR_ERR_MAX];
    size_t len;
    char *data;
    int rc;

    if (argc != 2) {
        fprintf(stderr, "strata %s: %s\n", cmd,
                argc < 2 ? "which trace file?" : "one trace file only");
        cli_trace_usage(stderr);
        return CLI_USAGE;
    }
    data = slurp(cmd, argv[1], &len);
    if (!data)
        return CLI_FAIL;
    rc = tr_load(data, len, out, err, sizeof(err));
    free(data);
    if (rc)
        return cli_fail(CLI_FAIL, cmd, "%s: %s", argv[1], err);
    return CLI_OK;
}

int cli_trace(int argc, char **argv)
{
    struct tr_file f;
    int rc;

    if (argc < 2 || cli_is_help(argv[1])) {
        cli_trace_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    if (argc > 2 && cli_is_help(argv[2])) {
        cli_trace_usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "validate") == 0) {
        rc = load(CMD_VALIDATE, argc - 1, argv + 1, &f);
        if (rc == CLI_OK) {
            printf("%s: sound (%zu event%s)\n", argv[2], f.n,
                   f.n == 1 ? "" : "s");
            tr_free(&f);
        }
        return rc;
    }
    if (strcmp(argv[1], "summary") == 0) {
        rc = load(CMD_SUMMARY, argc - 1, argv + 1, &f);
        if (rc == CLI_OK) {
            tr_summary(&f, stdout);
            tr_free(&f);
        }
        return rc;
    }
    fprintf(stderr, "strata trace: unknown command '%s'\n", argv[1]);
    cli_trace_usage(stderr);
    return CLI_USAGE;
}
