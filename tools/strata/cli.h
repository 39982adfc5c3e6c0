/* strata, the command-line tool: shared parts of its subcommands. */
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

#include <stdio.h>

/* Exit codes (strata(1), EXIT STATUS). */
enum {
    CLI_OK = 0,     /* done; check, validate: sound; ping: it answered */
    CLI_FAIL = 1,   /* the work failed: I/O, a damaged store, no answer */
    CLI_USAGE = 2,  /* a wrong command line */
    CLI_AUTH = 3,   /* ping: the node refused our key (or we its) */
    CLI_EXISTS = 4, /* the output exists (keygen without --force, convert) */
};

/* "strata gfg: " + message + "\n" on stderr; returns code. */
int cli_fail(int code, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True when arg is -h or --help. */
int cli_is_help(const char *arg);

int cli_gfg(int argc, char **argv);
int cli_node(int argc, char **argv);
int cli_trace(int argc, char **argv);

void cli_gfg_usage(FILE *f);
void cli_node_usage(FILE *f);
void cli_trace_usage(FILE *f);

#endif
