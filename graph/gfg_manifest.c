/* manifest.json of a .gfg store: a small strict JSON reader (RFC 8259
 * grammar, one top-level object) that keeps the keys the format defines
 * and skips any other value, and the writer of the exact v1 text. */
#include "base/err.h"
#include "graph_int.h"

#include <stdio.h>
#include <string.h>

/* Nesting allowed inside skipped values (v2 "fields" needs 3). */
#define MAX_DEPTH 32
/* Longest key or known string value kept; longer ones are unknown. */
#define TEXT_MAX 64

struct reader {
    const char *start;
    const char *p;
    const char *end;
};

enum known_key {
    KEY_FORMAT,
    KEY_INDEX_DTYPE,
    KEY_NUM_SRC,
    KEY_NUM_DST,
    KEY_NUM_EDGES,
    KEY_SORTED_BY_DST,
    KEY_COUNT,
};

static const char *const key_names[KEY_COUNT] = {
    "format", "index_dtype", "num_src", "num_dst", "num_edges", "sorted_by_dst",
};

static strata_err bad(const struct reader *r, const char *what)
{
    return base_fail(STRATA_EINVAL, "manifest.json: %s at byte %zu", what,
                     (size_t)(r->p - r->start));
}

static void skip_ws(struct reader *r)
{
    while (r->p < r->end &&
           (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static strata_err read_hex4(struct reader *r, unsigned *out)
{
    unsigned v = 0;

    if (r->end - r->p < 4)
        return bad(r, "truncated \\u escape");
    for (int i = 0; i < 4; i++) {
        int d = hex_digit(r->p[i]);

        if (d < 0)
            return bad(r, "bad \\u escape");
        v = v * 16 + (unsigned)d;
    }
    r->p += 4;
    *out = v;
    return STRATA_OK;
}

/* Appends code point cp as UTF-8 to buf[*len] if it fits (else marks the
 * text as too long by pushing *len past cap). */
static void put_utf8(char *buf, size_t cap, size_t *len, unsigned cp)
{
    char tmp[4];
    size_t n;

    if (cp < 0x80) {
        tmp[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        tmp[0] = (char)(0xC0 | (cp >> 6));
        tmp[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        tmp[0] = (char)(0xE0 | (cp >> 12));
        tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        tmp[0] = (char)(0xF0 | (cp >> 18));
        tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    if (buf && *len + n <= cap)
        memcpy(buf + *len, tmp, n);
    *len += n;
}

static strata_err read_escape(struct reader *r, char *buf, size_t cap,
                              size_t *len)
{
    static const char from[] = "\"\\/bfnrt";
    static const char to[] = "\"\\/\b\f\n\r\t";
    const char *hit;
    unsigned cp;
    unsigned lo;
    strata_err err;

    if (r->p == r->end)
        return bad(r, "unterminated string");
    hit = *r->p != 'u' ? strchr(from, *r->p) : NULL;
    if (*r->p != 'u') {
        if (!hit || !*r->p)
            return bad(r, "bad escape in a string");
        r->p++;
        put_utf8(buf, cap, len, (unsigned char)to[hit - from]);
        return STRATA_OK;
    }
    r->p++;
    err = read_hex4(r, &cp);
    if (err != STRATA_OK)
        return err;
    /* A high surrogate followed by a low one is one code point; a lone
     * surrogate is kept as is, as Python's json module does. */
    if (cp >= 0xD800 && cp < 0xDC00 && r->end - r->p >= 6 && r->p[0] == '\\' &&
        r->p[1] == 'u') {
        struct reader peek = *r;

        peek.p += 2;
        if (read_hex4(&peek, &lo) == STRATA_OK && lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            r->p = peek.p;
        }
    }
    put_utf8(buf, cap, len, cp);
    return STRATA_OK;
}

/* Reads a string at r->p (the opening quote). The decoded text goes to
 * buf (NUL-terminated) when it fits in cap - 1 bytes; *len_out gets the
 * decoded length either way. buf may be NULL to skip. */
static strata_err read_string(struct reader *r, char *buf, size_t cap,
                              size_t *len_out)
{
    size_t len = 0;
    strata_err err;

    if (r->p == r->end || *r->p != '"')
        return bad(r, "expected a string");
    r->p++;
    for (;;) {
        unsigned char c;

        if (r->p == r->end)
            return bad(r, "unterminated string");
        c = (unsigned char)*r->p;
        if (c == '"')
            break;
        if (c < 0x20)
            return bad(r, "control character in a string");
        r->p++;
        if (c == '\\') {
            err = read_escape(r, buf, cap ? cap - 1 : 0, &len);
            if (err != STRATA_OK)
                return err;
            continue;
        }
        if (buf && len + 1 < cap)
            buf[len] = (char)c;
        len++;
    }
    r->p++;
    if (buf && cap)
        buf[len < cap ? len : cap - 1] = '\0';
    *len_out = len;
    return STRATA_OK;
}

static bool is_digit(const struct reader *r)
{
    return r->p < r->end && *r->p >= '0' && *r->p <= '9';
}

/* Reads a number; *uint_out is true (and *value_out set) only for a
 * non-negative integer without fraction or exponent that fits uint64. */
static strata_err read_number(struct reader *r, bool *uint_out,
                              uint64_t *value_out)
{
    bool uint_ok = true;
    uint64_t v = 0;

    if (r->p < r->end && *r->p == '-') {
        uint_ok = false;
        r->p++;
    }
    if (!is_digit(r))
        return bad(r, "bad number");
    if (*r->p == '0' && r->p + 1 < r->end && r->p[1] >= '0' && r->p[1] <= '9')
        return bad(r, "number with a leading zero");
    while (is_digit(r)) {
        unsigned d = (unsigned)(*r->p++ - '0');

        if (v > (UINT64_MAX - d) / 10)
            uint_ok = false;
        else
            v = v * 10 + d;
    }
    if (r->p < r->end && *r->p == '.') {
        uint_ok = false;
        r->p++;
        if (!is_digit(r))
            return bad(r, "bad fraction");
        while (is_digit(r))
            r->p++;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        uint_ok = false;
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        if (!is_digit(r))
            return bad(r, "bad exponent");
        while (is_digit(r))
            r->p++;
    }
    *uint_out = uint_ok;
    *value_out = v;
    return STRATA_OK;
}

static strata_err read_literal(struct reader *r, const char *word)
{
    size_t n = strlen(word);

    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0)
        return bad(r, "unexpected character");
    r->p += n;
    return STRATA_OK;
}

static strata_err skip_value(struct reader *r, int depth);

/* Skips an array or object body after its opening bracket. */
static strata_err skip_container(struct reader *r, int depth, char close)
{
    size_t len;
    strata_err err;

    skip_ws(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return STRATA_OK;
    }
    for (;;) {
        if (close == '}') {
            err = read_string(r, NULL, 0, &len);
            skip_ws(r);
            if (err == STRATA_OK && (r->p == r->end || *r->p++ != ':'))
                err = bad(r, "expected ':'");
            if (err != STRATA_OK)
                return err;
        }
        err = skip_value(r, depth + 1);
        if (err != STRATA_OK)
            return err;
        skip_ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            skip_ws(r);
            continue;
        }
        if (r->p < r->end && *r->p == close) {
            r->p++;
            return STRATA_OK;
        }
        return bad(r, close == '}' ? "expected ',' or '}'"
                                   : "expected ',' or ']'");
    }
}

static strata_err skip_value(struct reader *r, int depth)
{
    size_t len;
    bool u;
    uint64_t v;

    if (depth > MAX_DEPTH)
        return bad(r, "nesting too deep");
    skip_ws(r);
    if (r->p == r->end)
        return bad(r, "expected a value");
    switch (*r->p) {
    case '{':
    case '[':
        return skip_container(r, depth, *r->p++ == '{' ? '}' : ']');
    case '"':
        return read_string(r, NULL, 0, &len);
    case 't':
        return read_literal(r, "true");
    case 'f':
        return read_literal(r, "false");
    case 'n':
        return read_literal(r, "null");
    default:
        if (*r->p != '-' && (*r->p < '0' || *r->p > '9'))
            return bad(r, "expected a value");
        return read_number(r, &u, &v);
    }
}

/* True when the decoded text (len bytes, kept only if len < TEXT_MAX) is
 * exactly want; an escaped NUL inside does not compare equal. */
static bool text_is(const char *text, size_t len, const char *want)
{
    return len < TEXT_MAX && len == strlen(want) && !memcmp(text, want, len);
}

/* Reads the value of a known key into m. */
static strata_err read_known(struct reader *r, enum known_key key,
                             struct graph_manifest *m)
{
    char text[TEXT_MAX];
    size_t len;
    bool is_uint;
    uint64_t v;
    strata_err err;

    switch (key) {
    case KEY_FORMAT:
    case KEY_INDEX_DTYPE:
        if (r->p == r->end || *r->p != '"')
            return base_fail(STRATA_EINVAL,
                             "manifest.json: \"%s\" must be a "
                             "string",
                             key_names[key]);
        err = read_string(r, text, sizeof(text), &len);
        if (err != STRATA_OK)
            return err;
        if (key == KEY_INDEX_DTYPE) {
            if (!text_is(text, len, "int32") && !text_is(text, len, "int64"))
                return base_fail(STRATA_EINVAL,
                                 "manifest.json: index_dtype "
                                 "\"%s\" is not int32 or int64",
                                 text);
            m->index_dtype = text[3] == '3' ? STRATA_I32 : STRATA_I64;
        } else if (text_is(text, len, GRAPH_FORMAT_V1)) {
            m->version = 1;
        } else if (text_is(text, len, GRAPH_FORMAT_V2)) {
            m->version = 2;
        } else {
            return base_fail(STRATA_ENOTSUP,
                             "manifest.json: unsupported "
                             "format \"%s\" (want %s or %s)",
                             text, GRAPH_FORMAT_V1, GRAPH_FORMAT_V2);
        }
        return STRATA_OK;
    case KEY_SORTED_BY_DST:
        m->sorted_by_dst = r->p < r->end && *r->p == 't';
        err = read_literal(r, m->sorted_by_dst ? "true" : "false");
        if (err != STRATA_OK)
            return base_fail(STRATA_EINVAL, "manifest.json: \"sorted_by_dst\""
                                            " must be true or false");
        return STRATA_OK;
    default:
        if (r->p == r->end || !(*r->p == '-' || (*r->p >= '0' && *r->p <= '9')))
            return base_fail(STRATA_EINVAL,
                             "manifest.json: \"%s\" must be a "
                             "number",
                             key_names[key]);
        err = read_number(r, &is_uint, &v);
        if (err != STRATA_OK)
            return err;
        if (!is_uint || v > (uint64_t)INT64_MAX)
            return base_fail(STRATA_EINVAL,
                             "manifest.json: \"%s\" must be a "
                             "non-negative integer below 2^63",
                             key_names[key]);
        if (key == KEY_NUM_SRC)
            m->num_src = v;
        else if (key == KEY_NUM_DST)
            m->num_dst = v;
        else
            m->num_edges = v;
        return STRATA_OK;
    }
}

static int find_key(const char *name, size_t len)
{
    for (int k = 0; k < KEY_COUNT; k++)
        if (text_is(name, len, key_names[k]))
            return k;
    return -1;
}

/* One "key": value member of the top-level object. */
static strata_err read_member(struct reader *r, struct graph_manifest *m,
                              bool *seen, char *unknown)
{
    char name[TEXT_MAX];
    size_t len;
    int key;
    strata_err err;

    err = read_string(r, name, sizeof(name), &len);
    if (err != STRATA_OK)
        return err;
    skip_ws(r);
    if (r->p == r->end || *r->p++ != ':')
        return bad(r, "expected ':'");
    skip_ws(r);
    key = find_key(name, len);
    if (key < 0) {
        if (!unknown[0])
            snprintf(unknown, TEXT_MAX, "%s", len ? name : "(empty)");
        return skip_value(r, 1);
    }
    if (seen[key])
        return base_fail(STRATA_EINVAL, "manifest.json: duplicate key \"%s\"",
                         key_names[key]);
    seen[key] = true;
    return read_known(r, (enum known_key)key, m);
}

static strata_err read_object(struct reader *r, struct graph_manifest *m,
                              bool *seen, char *unknown)
{
    strata_err err;

    skip_ws(r);
    if (r->p == r->end || *r->p++ != '{')
        return bad(r, "expected '{'");
    skip_ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        return STRATA_OK;
    }
    for (;;) {
        err = read_member(r, m, seen, unknown);
        if (err != STRATA_OK)
            return err;
        skip_ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            skip_ws(r);
            continue;
        }
        if (r->p < r->end && *r->p == '}') {
            r->p++;
            return STRATA_OK;
        }
        return bad(r, "expected ',' or '}'");
    }
}

strata_err graph_manifest_parse(const char *text, size_t len,
                                struct graph_manifest *out)
{
    struct reader r = {text, text, text + len};
    struct graph_manifest m = {.sorted_by_dst = true};
    bool seen[KEY_COUNT] = {false};
    char unknown[TEXT_MAX] = "";
    strata_err err;

    err = read_object(&r, &m, seen, unknown);
    if (err != STRATA_OK)
        return err;
    skip_ws(&r);
    if (r.p != r.end)
        return bad(&r, "trailing data after the object");
    if (!seen[KEY_FORMAT])
        return base_fail(STRATA_EINVAL, "manifest.json: no \"format\" key");
    for (int k = KEY_INDEX_DTYPE; k < KEY_SORTED_BY_DST; k++)
        if (!seen[k])
            return base_fail(STRATA_EINVAL,
                             "manifest.json: missing key "
                             "\"%s\"",
                             key_names[k]);
    if (m.version == 1 && unknown[0])
        return base_fail(STRATA_EINVAL,
                         "manifest.json: unknown key \"%s\" in "
                         "a " GRAPH_FORMAT_V1 " manifest",
                         unknown);
    *out = m;
    return STRATA_OK;
}

size_t graph_manifest_format(const struct graph_manifest *m, char *buf,
                             size_t size)
{
    int n = snprintf(
        buf, size,
        "{\n"
        "  \"format\": \"" GRAPH_FORMAT_V1 "\",\n"
        "  \"index_dtype\": \"%s\",\n"
        "  \"num_dst\": %llu,\n"
        "  \"num_edges\": %llu,\n"
        "  \"num_src\": %llu,\n"
        "  \"sorted_by_dst\": %s\n"
        "}\n",
        m->index_dtype == STRATA_I32 ? "int32" : "int64",
        (unsigned long long)m->num_dst, (unsigned long long)m->num_edges,
        (unsigned long long)m->num_src, m->sorted_by_dst ? "true" : "false");

    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}
