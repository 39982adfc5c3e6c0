/* strata gfg: info, check and convert for .gfg graph stores (the graph
 * module's format, docs/graph.md), through the public strata_gfg_* API. */
#define _GNU_SOURCE
#include "cli.h"
#include "progress.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdlib.h>
#include <strata/strata.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK_ROWS (1u << 20)
#define EDGE_GROW (1u << 20)

void cli_gfg_usage(FILE *f)
{
    fprintf(
        f,
        "usage: strata gfg info STORE\n"
        "       strata gfg check STORE\n"
        "       strata gfg convert SRC DST [--index int32|int64]\n"
        "       strata gfg convert --from-edges FILE DST [--index "
        "int32|int64]\n"
        "                          [--nodes N]\n"
        "\n"
        "info: print manifest.json as stored, the file sizes and the "
        "in-degree\nstatistics (rows, edges, min/mean/max, empty rows).\n"
        "check: open the store and read every index, checking that offsets "
        "never\ndecrease and stay within [0, num_edges] and that every column "
        "lies in\n[0, num_src). Exit 0 when sound, 1 with the first fault.\n"
        "convert: write a new store DST (it must not exist) from the store "
        "SRC with\nindices of --index [int64], or from an edge list: one "
        "edge per line,\n\"SRC DST\" (whitespace separated, ids from 0; "
        "further columns are ignored;\nlines starting with # or %% are "
        "comments; FILE - reads stdin). An edge\nSRC DST makes SRC a source "
        "of row DST. The graph has N rows (--nodes, or\nthe largest id + 1). "
        "The whole graph is held in memory while it is written.\n"
        "On a terminal, long steps show a progress line (bytes, rate, ETA); "
        "otherwise\nthey print a plain line at every tenth.\n");
}

static int gfail(strata_err err, const char *what)
{
    return cli_fail(err == STRATA_EEXIST ? CLI_EXISTS : CLI_FAIL, "gfg",
                    "%s: %s: %s", what, strata_errname(err), strata_errmsg());
}

/* The same, naming the store the failure is in. */
static int gfail_in(strata_err err, const char *path, const char *what)
{
    return cli_fail(CLI_FAIL, "gfg", "%s: %s: %s: %s", path, what,
                    strata_errname(err), strata_errmsg());
}

static size_t index_size(strata_dtype t)
{
    return t == STRATA_I32 ? 4 : 8;
}

static const char *dtype_name(strata_dtype t)
{
    return t == STRATA_I32 ? "int32" : "int64";
}

static uint64_t file_size(const char *store, const char *name)
{
    char path[8192];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s", store, name);
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* ---- info --------------------------------------------------------------- */

static int print_manifest(const char *store)
{
    char path[8192], buf[4096];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "%s/manifest.json", store);
    f = fopen(path, "r");
    if (!f)
        return cli_fail(CLI_FAIL, "gfg", "%s: %s", path, strerror(errno));
    printf("manifest.json:\n");
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, stdout);
    fclose(f);
    return CLI_OK;
}

struct degree_stats {
    uint64_t min, max, empty;
};

/* Walks row_ptr in chunks (reading their columns too: the public reader
 * checks both). */
static int walk_rows(strata_gfg *g, const char *path, const char *what,
                     bool lines, struct degree_stats *ds)
{
    uint64_t rows = strata_gfg_num_rows(g);
    size_t w = index_size(strata_gfg_index_dtype(g));
    int64_t *rp = malloc((CHUNK_ROWS + 1) * sizeof(*rp));
    int64_t *cols = NULL;
    size_t cap = 0;
    struct progress p;
    uint64_t bytes = 0;

    if (!rp)
        return cli_fail(CLI_FAIL, "gfg", "out of memory");
    progress_init(&p, stdout, lines ? PROGRESS_LINES : PROGRESS_TTY_ONLY, what,
                  (rows + 1 + strata_gfg_num_edges(g)) * w);
    ds->min = rows ? UINT64_MAX : 0;
    ds->max = ds->empty = 0;
    for (uint64_t b = 0; b < rows; b += CHUNK_ROWS) {
        uint64_t e = rows - b < CHUNK_ROWS ? rows : b + CHUNK_ROWS, count;
        strata_err err = strata_gfg_row_edges(g, b, e, &count);

        if (!err && count > cap) {
            int64_t *c = realloc(cols, count * sizeof(*c));

            if (!c)
                err = STRATA_ENOMEM;
            else
                cols = c, cap = count;
        }
        if (!err)
            err = strata_gfg_read_rows(g, b, e, rp, cols, cap);
        if (err) {
            progress_abandon(&p);
            free(rp);
            free(cols);
            return gfail_in(err, path, "reading rows");
        }
        for (uint64_t i = 0; i < e - b; i++) {
            uint64_t d = (uint64_t)(rp[i + 1] - rp[i]);

            ds->min = d < ds->min ? d : ds->min;
            ds->max = d > ds->max ? d : ds->max;
            ds->empty += d == 0;
        }
        bytes += (e - b + count) * w;
        progress_update(&p, bytes);
    }
    p.done = (rows + 1 + strata_gfg_num_edges(g)) * w;
    progress_done(&p);
    free(rp);
    free(cols);
    return CLI_OK;
}

static int open_store(const char *path, strata_gfg **g)
{
    strata_err err = strata_gfg_open(path, g);

    return err ? gfail(err, path) : CLI_OK;
}

static int info(const char *store)
{
    strata_gfg *g;
    struct degree_stats ds;
    char a[32], b[32];
    uint64_t rows, edges;
    int rc = open_store(store, &g);

    if (rc || (rc = print_manifest(store)) != CLI_OK) {
        strata_gfg_close(g);
        return rc;
    }
    rows = strata_gfg_num_rows(g);
    edges = strata_gfg_num_edges(g);
    printf("files:\n  row_ptr.bin  %s\n  col_idx.bin  %s\n",
           progress_bytes(file_size(store, "row_ptr.bin"), a, sizeof(a)),
           progress_bytes(file_size(store, "col_idx.bin"), b, sizeof(b)));
    rc = walk_rows(g, store, "reading", false, &ds);
    if (rc == CLI_OK) {
        printf("graph:\n  rows (num_dst)       %" PRIu64 "\n"
               "  entities (num_src)   %" PRIu64 "\n"
               "  edges                %" PRIu64 "\n"
               "  index dtype          %s\n",
               rows, strata_gfg_num_entities(g), edges,
               dtype_name(strata_gfg_index_dtype(g)));
        printf("  in-degree            min %" PRIu64 ", mean %.2f, max %" PRIu64
               "\n  empty rows           %" PRIu64 "\n",
               ds.min, rows ? (double)edges / (double)rows : 0.0, ds.max,
               ds.empty);
    }
    strata_gfg_close(g);
    return rc;
}

static int check(const char *store)
{
    strata_gfg *g;
    struct degree_stats ds;
    int rc = open_store(store, &g);

    if (rc)
        return rc;
    rc = walk_rows(g, store, "checking", true, &ds);
    if (rc == CLI_OK)
        printf("%s: ok: %" PRIu64 " rows, %" PRIu64 " edges, %s indices, all "
               "within bounds\n",
               store, strata_gfg_num_rows(g), strata_gfg_num_edges(g),
               dtype_name(strata_gfg_index_dtype(g)));
    strata_gfg_close(g);
    return rc;
}

/* ---- convert ------------------------------------------------------------ */

struct csr {
    uint64_t rows, entities, edges;
    int64_t *row_ptr, *col;
};

static void csr_free(struct csr *c)
{
    free(c->row_ptr);
    free(c->col);
}

/* The whole store in memory. */
static int load_store(const char *path, struct csr *c)
{
    strata_gfg *g;
    struct progress p;
    size_t w;
    int rc = open_store(path, &g);

    if (rc)
        return rc;
    c->rows = strata_gfg_num_rows(g);
    c->entities = strata_gfg_num_entities(g);
    c->edges = strata_gfg_num_edges(g);
    w = index_size(strata_gfg_index_dtype(g));
    c->row_ptr = malloc((c->rows + 1) * sizeof(int64_t));
    c->col = malloc((c->edges ? c->edges : 1) * sizeof(int64_t));
    if (!c->row_ptr || !c->col) {
        strata_gfg_close(g);
        return cli_fail(CLI_FAIL, "gfg",
                        "out of memory for %" PRIu64 " rows and %" PRIu64
                        " edges",
                        c->rows, c->edges);
    }
    c->row_ptr[0] = 0;
    progress_init(&p, stdout, PROGRESS_LINES, "reading",
                  (c->rows + 1 + c->edges) * w);
    for (uint64_t b = 0; b < c->rows; b += CHUNK_ROWS) {
        uint64_t e = c->rows - b < CHUNK_ROWS ? c->rows : b + CHUNK_ROWS;
        int64_t base = c->row_ptr[b];
        strata_err err = strata_gfg_read_rows(
            g, b, e, c->row_ptr + b, c->col + base, c->edges - (uint64_t)base);

        if (err) {
            progress_abandon(&p);
            strata_gfg_close(g);
            return gfail_in(err, path, "reading rows");
        }
        for (uint64_t i = b; i <= e; i++)
            c->row_ptr[i] += base;
        progress_update(&p, (e + (uint64_t)c->row_ptr[e]) * w);
    }
    p.done = (c->rows + 1 + c->edges) * w;
    progress_done(&p);
    strata_gfg_close(g);
    return CLI_OK;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;

    if (!s[0] || s[0] == '-' || s[0] == '+')
        return -1;
    errno = 0;
    *out = strtoull(s, &end, 10);
    return errno || *end ? -1 : 0;
}

struct edges {
    int64_t *pairs; /* src, dst */
    uint64_t n, cap;
    uint64_t max_id;
};

static int edge_add(struct edges *e, int64_t src, int64_t dst)
{
    if (e->n == e->cap) {
        uint64_t cap = e->cap ? e->cap * 2 : EDGE_GROW;
        int64_t *p = realloc(e->pairs, cap * 2 * sizeof(*p));

        if (!p)
            return -1;
        e->pairs = p;
        e->cap = cap;
    }
    e->pairs[2 * e->n] = src;
    e->pairs[2 * e->n + 1] = dst;
    e->n++;
    if ((uint64_t)src > e->max_id)
        e->max_id = (uint64_t)src;
    if ((uint64_t)dst > e->max_id)
        e->max_id = (uint64_t)dst;
    return 0;
}

/* One line: 1 for an edge in *src and *dst, 0 for a comment or blank line,
 * -1 with why filled. */
static int parse_line(char *line, int64_t *src, int64_t *dst, char *why,
                      size_t cap)
{
    char *s = line, *end;
    long long v[2];

    /* The line's end is no part of what a message quotes. */
    line[strcspn(line, "\r\n")] = '\0';
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s || *s == '\n' || *s == '\r' || *s == '#' || *s == '%')
        return 0;
    for (int k = 0; k < 2; k++) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s) {
            snprintf(why, cap,
                     "want two non-negative ids, found one in "
                     "'%.40s'",
                     line);
            return -1;
        }
        if (*s < '0' || *s > '9') {
            snprintf(why, cap, "want two non-negative ids, found '%.40s'", s);
            return -1;
        }
        errno = 0;
        v[k] = strtoll(s, &end, 10);
        if (errno || (*end && *end != ' ' && *end != '\t' && *end != '\n' &&
                      *end != '\r')) {
            snprintf(why, cap, "id '%.40s' is not a whole number below 2^63",
                     s);
            return -1;
        }
        s = end;
    }
    *src = v[0];
    *dst = v[1];
    return 1;
}

static int read_edges(const char *path, struct edges *e)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    struct progress p;
    struct stat st;
    char *line = NULL, why[128];
    size_t cap = 0;
    ssize_t len;
    uint64_t lineno = 0, bytes = 0;
    int rc = CLI_OK;

    if (!f)
        return cli_fail(CLI_FAIL, "gfg", "%s: %s", path, strerror(errno));
    progress_init(&p, stdout, PROGRESS_LINES, "parsing",
                  fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)
                      ? (uint64_t)st.st_size
                      : 0);
    while ((len = getline(&line, &cap, f)) > 0) {
        int64_t s, d;
        int k = parse_line(line, &s, &d, why, sizeof(why));

        lineno++;
        bytes += (uint64_t)len;
        if (k < 0) {
            rc = cli_fail(CLI_FAIL, "gfg", "%s:%" PRIu64 ": %s", path, lineno,
                          why);
            break;
        }
        if (k > 0 && edge_add(e, s, d) != 0) {
            rc = cli_fail(CLI_FAIL, "gfg", "out of memory at %" PRIu64 " edges",
                          e->n);
            break;
        }
        if ((lineno & 0xffff) == 0)
            progress_update(&p, bytes);
    }
    if (rc == CLI_OK && ferror(f))
        rc = cli_fail(CLI_FAIL, "gfg", "%s: %s", path, strerror(errno));
    if (rc == CLI_OK) {
        p.done = bytes;
        progress_done(&p);
    } else {
        progress_abandon(&p);
    }
    free(line);
    if (f != stdin)
        fclose(f);
    return rc;
}

/* CSR by destination from the edge pairs: a counting sort, stable, so
 * each row keeps its sources in file order. */
static int edges_to_csr(struct edges *e, uint64_t nodes, struct csr *c)
{
    uint64_t *fill;

    c->rows = c->entities = nodes;
    c->edges = e->n;
    c->row_ptr = calloc(nodes + 1, sizeof(int64_t));
    c->col = malloc((e->n ? e->n : 1) * sizeof(int64_t));
    fill = calloc(nodes + 1, sizeof(*fill));
    if (!c->row_ptr || !c->col || !fill) {
        free(fill);
        return cli_fail(CLI_FAIL, "gfg", "out of memory for the CSR");
    }
    for (uint64_t k = 0; k < e->n; k++)
        c->row_ptr[e->pairs[2 * k + 1] + 1]++;
    for (uint64_t i = 0; i < nodes; i++)
        c->row_ptr[i + 1] += c->row_ptr[i];
    for (uint64_t k = 0; k < e->n; k++) {
        uint64_t d = (uint64_t)e->pairs[2 * k + 1];

        c->col[(uint64_t)c->row_ptr[d] + fill[d]++] = e->pairs[2 * k];
    }
    free(fill);
    return CLI_OK;
}

/* strata_gfg_save with a progress line, measured on its temporary
 * directory beside dst. */
static int save(const char *dst, const struct csr *c, strata_dtype t)
{
    strata_csr_view v = {c->rows, c->entities, c->row_ptr, c->col};
    char *a = strdup(dst), *b = strdup(dst), prefix[300];
    uint64_t total = (c->rows + 1 + c->edges) * index_size(t);
    struct progress p;
    strata_err err;
    size_t n;

    if (!a || !b) {
        free(a);
        free(b);
        return cli_fail(CLI_FAIL, "gfg", "out of memory");
    }
    for (n = strlen(b); n > 1 && b[n - 1] == '/'; n--)
        b[n - 1] = '\0';
    snprintf(prefix, sizeof(prefix), ".%.250s.", basename(b));
    progress_init(&p, stdout, PROGRESS_LINES, "writing", total);
    progress_watch(&p, dirname(a), prefix);
    err = strata_gfg_save(dst, &v, t);
    free(a);
    free(b);
    if (err) {
        progress_abandon(&p);
        return gfail(err, dst);
    }
    p.done = total;
    progress_done(&p);
    printf("%s: %" PRIu64 " rows, %" PRIu64 " edges, %s indices\n", dst,
           c->rows, c->edges, dtype_name(t));
    return CLI_OK;
}

static int convert(int argc, char **argv)
{
    static const struct option opts[] = {
        {"index", required_argument, NULL, 'i'},
        {"from-edges", required_argument, NULL, 'e'},
        {"nodes", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *edges_file = NULL, *src = NULL, *dst;
    strata_dtype t = STRATA_I64;
    uint64_t nodes = 0;
    bool have_nodes = false;
    struct csr c = {0};
    static char prog[] = "strata gfg convert";
    int ch, rc;

    optind = 1;
    argv[0] = prog; /* getopt's messages name the command */
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (ch == 'i' && strcmp(optarg, "int32") == 0) {
            t = STRATA_I32;
        } else if (ch == 'i' && strcmp(optarg, "int64") == 0) {
            t = STRATA_I64;
        } else if (ch == 'i') {
            return cli_fail(CLI_USAGE, "gfg convert",
                            "--index %s: must be int32 or int64", optarg);
        } else if (ch == 'e') {
            edges_file = optarg;
        } else if (ch == 'n') {
            if (parse_u64(optarg, &nodes) != 0 || nodes > (1ull << 62))
                return cli_fail(CLI_USAGE, "gfg convert",
                                "--nodes %s: must be a whole number below "
                                "2^62",
                                optarg);
            have_nodes = true;
        } else if (ch == 'h') {
            cli_gfg_usage(stdout);
            return CLI_OK;
        } else {
            cli_gfg_usage(stderr);
            return CLI_USAGE;
        }
    }
    if (argc - optind != (edges_file ? 1 : 2))
        return cli_fail(CLI_USAGE, "gfg convert",
                        edges_file ? "give --from-edges FILE and DST"
                                   : "give SRC and DST");
    if (!edges_file)
        src = argv[optind++];
    else if (have_nodes == false)
        nodes = 0;
    dst = argv[optind];
    if (access(dst, F_OK) == 0)
        return cli_fail(CLI_EXISTS, "gfg convert", "%s exists; not replaced",
                        dst);
    if (src) {
        if (have_nodes)
            return cli_fail(CLI_USAGE, "gfg convert",
                            "--nodes goes with --from-edges");
        rc = load_store(src, &c);
    } else {
        struct edges e = {0};

        rc = read_edges(edges_file, &e);
        if (rc == CLI_OK && e.n && have_nodes && e.max_id >= nodes)
            rc = cli_fail(CLI_FAIL, "gfg convert",
                          "%s: id %" PRIu64 " is not below --nodes %" PRIu64,
                          edges_file, e.max_id, nodes);
        if (rc == CLI_OK)
            rc = edges_to_csr(&e,
                              have_nodes ? nodes
                              : e.n      ? e.max_id + 1
                                         : 0,
                              &c);
        free(e.pairs);
    }
    if (rc == CLI_OK)
        rc = save(dst, &c, t);
    csr_free(&c);
    return rc;
}

int cli_gfg(int argc, char **argv)
{
    if (argc < 2 || cli_is_help(argv[1])) {
        cli_gfg_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    if (strcmp(argv[1], "convert") == 0)
        return convert(argc - 1, argv + 1);
    if (strcmp(argv[1], "info") == 0 || strcmp(argv[1], "check") == 0) {
        if (argc == 3 && cli_is_help(argv[2])) {
            cli_gfg_usage(stdout);
            return CLI_OK;
        }
        if (argc != 3)
            return cli_fail(CLI_USAGE, "gfg", "%s takes one STORE", argv[1]);
        return argv[1][0] == 'i' ? info(argv[2]) : check(argv[2]);
    }
    fprintf(stderr, "strata gfg: unknown command '%s'\n", argv[1]);
    cli_gfg_usage(stderr);
    return CLI_USAGE;
}
