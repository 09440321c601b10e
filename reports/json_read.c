/*
 * json_read.c - a small strict JSON reader (RFC 8259) for what tpaudit
 * reads back: stored argv and shapes, which are validated before they are
 * emitted, and JSON reports given as a baseline.  Depth and size are
 * bounded; strings are decoded (\uXXXX included) into UTF-8.
 */
#include "reports.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

#define MAX_DEPTH 64

struct tpa_json {
    int type;
    char *str;  /* TPA_JSON_STRING */
    double num; /* TPA_JSON_NUMBER */
    int is_int; /* the number is an integer that fits int64 */
    int64_t i64;
    int truth;   /* TPA_JSON_BOOL */
    char **keys; /* TPA_JSON_OBJECT: keys[i] names items[i] */
    struct tpa_json **items;
    size_t n, cap;
};

typedef struct parser {
    const char *p, *end;
    int depth;
} parser_t;

static void skip_ws(parser_t *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int hex4(const char *p, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (unsigned)d;
    }
    return 0;
}


/* A string after its opening quote; NULL when malformed. NUL escapes (\u0000)
 * are refused: nothing tpaudit reads may hold one. */
static char *parse_string(parser_t *ps) {
    const char *p = ps->p, *q = p;
    while (q < ps->end && *q != '"') q += *q == '\\' ? 2 : 1; /* decoded text is never longer */
    char *out = malloc((size_t)(q - p) + 1), *o = out;
    if (!out) return NULL;
    while (p < ps->end && *p != '"') {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20) goto bad;
        if (c != '\\') {
            *o++ = (char)c;
            p++;
            continue;
        }
        if (++p >= ps->end) goto bad;
        switch (*p++) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (ps->end - p < 4 || hex4(p, &cp)) goto bad;
            p += 4;
            if (cp >= 0xd800 && cp < 0xdc00) {
                if (ps->end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    cp = 0xfffd;
                else {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    p += 6;
                }
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                cp = 0xfffd;
            }
            if (cp == 0) goto bad;
            o += tpa_utf8_put(o, cp);
            break;
        }
        default: goto bad;
        }
    }
    if (p >= ps->end) goto bad;
    ps->p = p + 1;
    *o = 0;
    return out;
bad:
    free(out);
    return NULL;
}

static int push(tpa_json_t *v, char *key, tpa_json_t *item) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        tpa_json_t **items = realloc(v->items, cap * sizeof *items);
        if (!items) return -1;
        v->items = items;
        if (v->type == TPA_JSON_OBJECT) {
            char **keys = realloc(v->keys, cap * sizeof *keys);
            if (!keys) return -1;
            v->keys = keys;
        }
        v->cap = cap;
    }
    if (v->type == TPA_JSON_OBJECT) v->keys[v->n] = key;
    v->items[v->n++] = item;
    return 0;
}

static tpa_json_t *parse_value(parser_t *ps);

static int parse_number(parser_t *ps, tpa_json_t *v) {
    const char *s = ps->p, *p = s;
    int integral = 1;
    if (p < ps->end && *p == '-') p++;
    if (p >= ps->end || *p < '0' || *p > '9') return -1;
    if (*p == '0')
        p++;
    else
        while (p < ps->end && *p >= '0' && *p <= '9') p++;
    if (p < ps->end && *p == '.') {
        integral = 0;
        if (++p >= ps->end || *p < '0' || *p > '9') return -1;
        while (p < ps->end && *p >= '0' && *p <= '9') p++;
    }
    if (p < ps->end && (*p == 'e' || *p == 'E')) {
        integral = 0;
        p++;
        if (p < ps->end && (*p == '+' || *p == '-')) p++;
        if (p >= ps->end || *p < '0' || *p > '9') return -1;
        while (p < ps->end && *p >= '0' && *p <= '9') p++;
    }
    char buf[64];
    size_t n = (size_t)(p - s);
    if (n >= sizeof buf) {
        integral = 0;
        n = sizeof buf - 1;
    }
    memcpy(buf, s, n);
    buf[n] = 0;
    v->type = TPA_JSON_NUMBER;
    v->num = strtod(buf, NULL);
    if (integral) {
        errno = 0;
        v->i64 = strtoll(buf, NULL, 10);
        v->is_int = errno == 0;
    }
    ps->p = p;
    return 0;
}

static int literal(parser_t *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n)) return -1;
    ps->p += n;
    return 0;
}

static tpa_json_t *parse_value(parser_t *ps);

/* The members of an object or the items of an array (c is '{' or '[', at
 * ps->p) into v: 0, or -1 when the text is not one. */
static int parse_container(parser_t *ps, tpa_json_t *v, char c) {
    v->type = c == '{' ? TPA_JSON_OBJECT : TPA_JSON_ARRAY;
    char close = c == '{' ? '}' : ']';
    ps->p++;
    ps->depth++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        if (v->type == TPA_JSON_OBJECT) {
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != '"') return -1;
            ps->p++;
            if (!(key = parse_string(ps))) return -1;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                return -1;
            }
            ps->p++;
        }
        tpa_json_t *item = parse_value(ps);
        if (!item || push(v, key, item)) {
            free(key);
            tpa_json_free(item);
            return -1;
        }
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            return 0;
        }
        return -1;
    }
}

/* A string, true, false, null or a number (c its first character) into v:
 * 0, or -1 when the text is none of them. */
static int parse_scalar(parser_t *ps, tpa_json_t *v, char c) {
    if (c == '"') {
        ps->p++;
        v->type = TPA_JSON_STRING;
        return (v->str = parse_string(ps)) ? 0 : -1;
    }
    if (c == 't' || c == 'f') {
        v->type = TPA_JSON_BOOL;
        v->truth = c == 't';
        return literal(ps, c == 't' ? "true" : "false");
    }
    if (c == 'n') {
        v->type = TPA_JSON_NULL;
        return literal(ps, "null");
    }
    return parse_number(ps, v);
}

static tpa_json_t *parse_value(parser_t *ps) {
    skip_ws(ps);
    if (ps->p >= ps->end || ps->depth > MAX_DEPTH) return NULL;
    tpa_json_t *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    char c = *ps->p;
    int rc = c == '{' || c == '[' ? parse_container(ps, v, c) : parse_scalar(ps, v, c);
    if (rc == 0) return v;
    tpa_json_free(v);
    return NULL;
}

tpa_json_t *tpa_json_parse(const char *text, size_t len) {
    if (!text) return NULL;
    parser_t ps = {text, text + len, 0};
    tpa_json_t *v = parse_value(&ps);
    skip_ws(&ps);
    if (v && ps.p != ps.end) {
        tpa_json_free(v);
        return NULL;
    }
    return v;
}

void tpa_json_free(tpa_json_t *v) {
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) {
        if (v->keys) free(v->keys[i]);
        tpa_json_free(v->items[i]);
    }
    free(v->keys);
    free(v->items);
    free(v->str);
    free(v);
}

int tpa_json_type(const tpa_json_t *v) { return v ? v->type : TPA_JSON_MISSING; }
size_t tpa_json_len(const tpa_json_t *v) {
    return v && (v->type == TPA_JSON_ARRAY || v->type == TPA_JSON_OBJECT) ? v->n : 0;
}
const tpa_json_t *tpa_json_at(const tpa_json_t *v, size_t i) { return i < tpa_json_len(v) ? v->items[i] : NULL; }
const char *tpa_json_str(const tpa_json_t *v) { return v && v->type == TPA_JSON_STRING ? v->str : NULL; }

const tpa_json_t *tpa_json_get(const tpa_json_t *v, const char *key) {
    if (!v || v->type != TPA_JSON_OBJECT) return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (!strcmp(v->keys[i], key)) return v->items[i];
    return NULL;
}

int tpa_json_int(const tpa_json_t *v, int64_t *out) {
    if (!v || v->type != TPA_JSON_NUMBER || !v->is_int) return -1;
    *out = v->i64;
    return 0;
}
