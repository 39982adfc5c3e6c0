/* strata: the command-line tool. One binary, subcommands:
 *   strata gfg info|check|convert   .gfg graph stores
 *   strata node ping|keygen         strata-node health checks and keys
 *   strata trace validate|summary   timeline traces (STRATA_TRACE)
 * The exit codes are in cli.h and strata(1). */
#include "cli.h"

#include <stdarg.h>
#include <strata/strata.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: strata [--version] [--help] COMMAND [ARGS]\n"
            "\n"
            "Commands:\n"
            "  gfg info STORE          a .gfg store's manifest and degree "
            "statistics\n"
            "  gfg check STORE         read and verify every index of a "
            "store\n"
            "  gfg convert SRC DST     rewrite a store with other indices, "
            "or make one\n"
            "                          from a whitespace edge list "
            "(--from-edges)\n"
            "  node ping ENDPOINT      authenticated health check of a "
            "strata-node\n"
            "  node keygen FILE        write a new cluster secret (mode 600)\n"
            "  trace validate FILE     check a trace-event JSON file opens as "
            "one timeline\n"
            "  trace summary FILE      per-callable times, critical path, idle "
            "share per chip\n"
            "\n"
            "strata COMMAND --help shows a command's options.\n"
            "Exit status: 0 done, 1 the work failed, 2 usage error, 3 "
            "authentication\nfailed (node ping), 4 the output exists.\n"
            "See strata(1).\n");
}

int cli_is_help(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int cli_fail(int code, const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "strata %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (cli_is_help(argv[1])) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("strata %d.%d.%d\n", STRATA_VERSION_MAJOR, STRATA_VERSION_MINOR,
               STRATA_VERSION_PATCH);
        return CLI_OK;
    }
    if (strcmp(argv[1], "gfg") == 0)
        return cli_gfg(argc - 1, argv + 1);
    if (strcmp(argv[1], "node") == 0)
        return cli_node(argc - 1, argv + 1);
    if (strcmp(argv[1], "trace") == 0)
        return cli_trace(argc - 1, argv + 1);
    fprintf(stderr, "strata: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
