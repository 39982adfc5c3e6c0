/* strata-node's command line: every limit checked here, with a message
 * naming the option, what was given and what is allowed. */
#include "daemon.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: strata-node --listen ADDR:PORT [--module LIB.so ...]\n"
        "                   (--secret-file FILE | --cert C --key K --ca A |"
        " --insecure)\n"
        "                   [--port-file FILE] [limits]\n"
        "\n"
        "Runs strata L3 sessions for authenticated parents. Each "
        "authenticated\nconnection gets a fresh process hosting the chips and "
        "sub workers its\nparent asks for. Only callables registered by the "
        "--module libraries (and\nstrata's own) can run.\n"
        "\n"
        "  --listen ADDR:PORT  IPv4, [IPv6] or host name; port 0..65535, 0 "
        "picks one\n"
        "  --secret-file FILE  cluster pre-shared key (TLS 1.3 PSK); mode "
        "600\n"
        "  --cert/--key/--ca   mutual TLS with a cluster CA\n"
        "  --insecure          plaintext, refused unless ADDR is loopback\n"
        "  --port-file FILE    write the bound port to FILE once listening\n"
        "  --module LIB.so     load callables (strata_module_init)\n"
        "\n"
        "Limits (defaults in brackets; docs/deployment.md, \"Limits\"):\n"
        "  --max-sessions N            sessions at once [64]\n"
        "  --max-procs-total N         chips + sub workers of all sessions "
        "[2048]\n"
        "  --max-unauth START:RATE:FULL  connections not yet authenticated:"
        "\n"
        "                              from START on drop RATE%% of new ones,"
        "\n"
        "                              rising to all at FULL [32:30:128]\n"
        "  --max-unauth-per-source N   of those, from one address [8]\n"
        "  --handshake-timeout SECONDS accept to authenticated peer [10]\n"
        "  --max-tasks N               per session: tasks in flight [256]\n"
        "  --max-threads N             per session: job threads [64]\n"
        "  --max-buffer-bytes SIZE     per session: shadow buffers [16GiB]\n"
        "  --max-window-bytes SIZE     per session: global domain windows "
        "[16GiB]\n"
        "  --max-procs N               per session: chips + sub workers "
        "[512]\n"
        "  --reply-high-water SIZE     per session: replies queued before it "
        "stops\n"
        "                              reading its parent [64MiB]\n"
        "SIZE: bytes, or with KiB, MiB, GiB, TiB, PiB (K, M, G, T, P: the "
        "same).\n"
        "Logs go to stderr (STRATA_LOG=error|warn|info|debug). SIGTERM, "
        "SIGINT or\nSIGHUP stops it.\n");
}

static int bad(const char *opt, const char *text, const char *rule)
{
    fprintf(stderr, "strata-node: %s %s: %s\n", opt, text, rule);
    return 2;
}

/* A whole decimal number in [min, max]. */
static int parse_u64(const char *opt, const char *text, uint64_t min,
                     uint64_t max, uint64_t *out)
{
    char rule[128];
    char *end;
    unsigned long long v;

    snprintf(rule, sizeof(rule),
             "must be a whole number from %" PRIu64 " to %" PRIu64, min, max);
    errno = 0;
    if (!text[0] || text[0] == '-' || text[0] == '+')
        return bad(opt, text, rule);
    v = strtoull(text, &end, 10);
    if (errno || *end || v < min || v > max)
        return bad(opt, text, rule);
    *out = v;
    return 0;
}

static int parse_u32(const char *opt, const char *text, uint32_t min,
                     uint32_t max, uint32_t *out)
{
    uint64_t v;
    int rc = parse_u64(opt, text, min, max, &v);

    if (!rc)
        *out = (uint32_t)v;
    return rc;
}

static const struct {
    const char *name;
    unsigned shift;
} suffixes[] = {
    {"", 0},     {"K", 10}, {"KiB", 10}, {"M", 20}, {"MiB", 20}, {"G", 30},
    {"GiB", 30}, {"T", 40}, {"TiB", 40}, {"P", 50}, {"PiB", 50},
};

/* Bytes, with an IEC suffix or none, in [min, max]. */
static int parse_size(const char *opt, const char *text, uint64_t min,
                      uint64_t max, uint64_t *out)
{
    char rule[160];
    char *end;
    unsigned long long v;

    snprintf(rule, sizeof(rule),
             "must be a size from %" PRIu64 " to %" PRIu64
             " bytes, as a whole number with an optional KiB, MiB, GiB, "
             "TiB or PiB",
             min, max);
    errno = 0;
    if (!text[0] || text[0] < '0' || text[0] > '9')
        return bad(opt, text, rule);
    v = strtoull(text, &end, 10);
    if (errno)
        return bad(opt, text, rule);
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        unsigned s = suffixes[i].shift;

        if (strcmp(end, suffixes[i].name) != 0)
            continue;
        if (v > (max >> s) || (v << s) < min)
            return bad(opt, text, rule);
        *out = (uint64_t)v << s;
        return 0;
    }
    return bad(opt, text, rule);
}

static int parse_seconds(const char *opt, const char *text, double min,
                         double max, double *out)
{
    char rule[96];
    char *end;
    double v;

    snprintf(rule, sizeof(rule), "must be a number of seconds from %g to %g",
             min, max);
    errno = 0;
    v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < min || v > max)
        return bad(opt, text, rule);
    *out = v;
    return 0;
}

/* START:RATE:FULL as sshd's MaxStartups, or one number N (= N:100:N). */
static int parse_startups(const char *opt, const char *text,
                          struct daemon_limits *l)
{
    static const char rule[] =
        "must be START:RATE:FULL (1 <= START <= FULL <= 65536, RATE a "
        "percentage 1..100) or one number N (START = FULL = N)";
    unsigned start, rate, full;
    int used = 0;
    char *end;

    if (text[0] < '0' || text[0] > '9')
        return bad(opt, text, rule);
    if (strchr(text, ':')) {
        if (sscanf(text, "%5u:%3u:%5u%n", &start, &rate, &full, &used) != 3 ||
            text[used] != '\0' || start < 1 || start > full || full > 65536 ||
            rate < 1 || rate > 100)
            return bad(opt, text, rule);
    } else {
        unsigned long v;

        errno = 0;
        v = strtoul(text, &end, 10);
        if (errno || *end || v < 1 || v > 65536)
            return bad(opt, text, rule);
        start = full = (unsigned)v;
        rate = 100;
    }
    l->unauth_start = start;
    l->unauth_rate = rate;
    l->unauth_full = full;
    return 0;
}

enum {
    OPT_MAX_SESSIONS = 256,
    OPT_MAX_UNAUTH,
    OPT_PER_SOURCE,
    OPT_HANDSHAKE,
    OPT_MAX_TASKS,
    OPT_MAX_THREADS,
    OPT_MAX_BUFFER,
    OPT_MAX_WINDOW,
    OPT_MAX_PROCS,
    OPT_HIGH_WATER,
    OPT_MAX_PROCS_TOTAL,
};

static const struct option longs[] = {
    {"listen", required_argument, NULL, 'l'},
    {"secret-file", required_argument, NULL, 's'},
    {"cert", required_argument, NULL, 'c'},
    {"key", required_argument, NULL, 'k'},
    {"ca", required_argument, NULL, 'a'},
    {"module", required_argument, NULL, 'm'},
    {"port-file", required_argument, NULL, 'p'},
    {"insecure", no_argument, NULL, 'i'},
    {"help", no_argument, NULL, 'h'},
    {"max-sessions", required_argument, NULL, OPT_MAX_SESSIONS},
    {"max-unauth", required_argument, NULL, OPT_MAX_UNAUTH},
    {"max-unauth-per-source", required_argument, NULL, OPT_PER_SOURCE},
    {"handshake-timeout", required_argument, NULL, OPT_HANDSHAKE},
    {"max-tasks", required_argument, NULL, OPT_MAX_TASKS},
    {"max-threads", required_argument, NULL, OPT_MAX_THREADS},
    {"max-buffer-bytes", required_argument, NULL, OPT_MAX_BUFFER},
    {"max-window-bytes", required_argument, NULL, OPT_MAX_WINDOW},
    {"max-procs", required_argument, NULL, OPT_MAX_PROCS},
    {"reply-high-water", required_argument, NULL, OPT_HIGH_WATER},
    {"max-procs-total", required_argument, NULL, OPT_MAX_PROCS_TOTAL},
    {NULL, 0, NULL, 0},
};

/* The option's name as given, for messages. */
static const char *name_of(int ch)
{
    static char buf[64];

    for (size_t i = 0; longs[i].name; i++) {
        if (longs[i].val == ch) {
            snprintf(buf, sizeof(buf), "--%s", longs[i].name);
            return buf;
        }
    }
    return "option";
}

static int parse_limit(int ch, const char *arg, struct daemon_options *o)
{
    struct worker_session_limits *s = &o->session;
    const char *opt = name_of(ch);
    uint64_t v;
    int rc;

    switch (ch) {
    case OPT_MAX_SESSIONS:
        return parse_u32(opt, arg, 1, 65536, &o->lim.max_sessions);
    case OPT_MAX_PROCS_TOTAL:
        return parse_u32(opt, arg, 1, 1u << 20, &o->lim.max_procs_total);
    case OPT_MAX_UNAUTH:
        return parse_startups(opt, arg, &o->lim);
    case OPT_PER_SOURCE:
        return parse_u32(opt, arg, 1, 65536, &o->lim.unauth_per_source);
    case OPT_HANDSHAKE:
        return parse_seconds(opt, arg, 0.1, 3600, &o->lim.handshake_timeout_s);
    case OPT_MAX_TASKS:
        return parse_u32(opt, arg, 1, 1u << 20, &s->max_tasks);
    case OPT_MAX_THREADS:
        return parse_u32(opt, arg, 1, 4096, &s->max_threads);
    case OPT_MAX_BUFFER:
        return parse_size(opt, arg, 4096, (uint64_t)1 << 50,
                          &s->max_buffer_bytes);
    case OPT_MAX_WINDOW:
        return parse_size(opt, arg, 4096, (uint64_t)1 << 50,
                          &s->max_window_bytes);
    case OPT_MAX_PROCS:
        return parse_u32(opt, arg, 1, 65536, &s->max_procs);
    case OPT_HIGH_WATER:
        rc = parse_size(opt, arg, 65536, (uint64_t)1 << 40, &v);
        if (!rc)
            s->reply_high_water = (size_t)v;
        return rc;
    }
    usage(stderr);
    return 2;
}

static void defaults(struct daemon_options *o)
{
    memset(o, 0, sizeof(*o));
    o->lim.max_sessions = 64;
    o->lim.max_procs_total = 2048;
    o->lim.unauth_start = 32;
    o->lim.unauth_rate = 30;
    o->lim.unauth_full = 128;
    o->lim.unauth_per_source = 8;
    o->lim.handshake_timeout_s = 10.0;
    o->lim.log_interval_s = 10.0;
    worker_session_limits_default(&o->session);
}

static int parse_one(int ch, struct daemon_options *o)
{
    switch (ch) {
    case 'l':
        o->listen = optarg;
        return 0;
    case 's':
        o->tls.secret_file = optarg;
        return 0;
    case 'c':
        o->tls.cert_file = optarg;
        return 0;
    case 'k':
        o->tls.key_file = optarg;
        return 0;
    case 'a':
        o->tls.ca_file = optarg;
        return 0;
    case 'p':
        o->port_file = optarg;
        return 0;
    case 'i':
        o->tls.insecure = true;
        return 0;
    case 'h':
        usage(stdout);
        exit(0);
    case 'm':
        if (o->num_modules == DAEMON_MAX_MODULES) {
            fprintf(stderr, "strata-node: more than %d --module\n",
                    DAEMON_MAX_MODULES);
            return 2;
        }
        o->modules[o->num_modules++] = optarg;
        return 0;
    case '?':
        usage(stderr);
        return 2;
    }
    return parse_limit(ch, optarg, o);
}

int daemon_options_parse(int argc, char **argv, struct daemon_options *o)
{
    static char prog[] = "strata-node";
    int ch, rc;

    defaults(o);
    argv[0] = prog; /* getopt's messages name the command */
    while ((ch = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        rc = parse_one(ch, o);
        if (rc)
            return rc;
    }
    if (!o->listen || optind != argc) {
        usage(stderr);
        return 2;
    }
    return 0;
}
