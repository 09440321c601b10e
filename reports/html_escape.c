/*
 * html_escape.c - every string a database holds reaches the HTML page
 * through here: entity escaping, UTF-8 validation (invalid bytes, control
 * characters and noncharacters become U+FFFD), and the run's argv, which is
 * stored as a JSON array, parsed for display. Bidirectional controls are
 * replaced too, so that no stored string can reorder the page's text. Also
 * the two small writers every part uses: a byte count and a run's name.
 */
#include "html_page.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

#define REPLACEMENT "&#xFFFD;"

static int displayable(unsigned cp) {
    if (cp == '\t' || cp == '\n') return 1;
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) return 0;                   /* C0, DEL, C1 */
    if ((cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE) return 0; /* noncharacters */
    if (cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
        (cp >= 0x2066 && cp <= 0x2069))
        return 0; /* bidirectional controls: a stored name must not reorder the text after it */
    return 1;
}

void html_put_n(FILE *out, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    if (!s) return;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t len = (size_t)tpa_utf8_next(p + i, n - i, &cp);
        if (cp < 0 || !displayable((unsigned)cp)) {
            fputs(REPLACEMENT, out);
            i += len;
            continue;
        }
        switch (cp) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default: fwrite(p + i, 1, len, out);
        }
        i += len;
    }
}

void html_put(FILE *out, const char *s) {
    if (s) html_put_n(out, s, strlen(s));
}

/* Parses the JSON string at *pp (after its opening quote) into a new C
 * string; NULL when malformed. \u0000 becomes U+FFFD. */
static char *json_string(const char **pp) {
    const char *p = *pp;
    size_t cap = strlen(p) * 3 + 1, len = 0; /* \uXXXX (6 bytes) never grows past 3 */
    char *buf = malloc(cap);
    if (!buf) return NULL;
    while (*p && *p != '"') {
        if (*p != '\\') {
            buf[len++] = *p++;
            continue;
        }
        p++;
        const char *simple = strchr("\"\\/bfnrt", *p), *to = "\"\\/\b\f\n\r\t";
        if (*p && simple) {
            buf[len++] = to[simple - "\"\\/bfnrt"];
            p++;
            continue;
        }
        if (*p != 'u') {
            free(buf);
            return NULL;
        }
        unsigned cp = 0;
        for (int i = 1; i <= 4; i++) {
            char c = p[i];
            unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                         : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                         : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                                : 16;
            if (d == 16) {
                free(buf);
                return NULL;
            }
            cp = cp << 4 | d;
        }
        p += 5;
        len += tpa_utf8_put(buf + len, !cp || (cp >= 0xD800 && cp <= 0xDFFF) ? 0xFFFD : cp); /* NUL, a lone surrogate */
    }
    if (*p != '"') {
        free(buf);
        return NULL;
    }
    buf[len] = 0;
    *pp = p + 1;
    return buf;
}

static const char *skip_space(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

char **html_argv_parse(const char *json, size_t *n) {
    *n = 0;
    if (!json) return NULL;
    const char *p = skip_space(json);
    if (*p++ != '[') return NULL;
    char **argv = calloc(strlen(p) / 2 + 1, sizeof *argv); /* each item takes at least 2 bytes */
    if (!argv) return NULL;
    p = skip_space(p);
    while (*p == '"') {
        p++;
        if (!(argv[*n] = json_string(&p))) goto bad;
        (*n)++;
        p = skip_space(p);
        if (*p != ',') break;
        p = skip_space(p + 1);
        if (*p != '"') goto bad;
    }
    if (*p != ']' || *skip_space(p + 1)) goto bad;
    return argv;
bad:
    html_argv_free(argv, *n);
    *n = 0;
    return NULL;
}

void html_argv_free(char **argv, size_t n) {
    for (size_t i = 0; argv && i < n; i++) free(argv[i]);
    free(argv);
}

void html_put_argv(FILE *out, const char *json) {
    size_t n;
    char **argv = html_argv_parse(json, &n);
    if (!argv) {
        html_put(out, json);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        int quote = !argv[i][0] || strpbrk(argv[i], " \t\n\"'\\$`") != NULL;
        if (i) fputc(' ', out);
        if (quote) fputs("&#39;", out);
        html_put(out, argv[i]);
        if (quote) fputs("&#39;", out);
    }
    html_argv_free(argv, n);
}

void html_fmt(FILE *out, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    for (const char *p = fmt; *p; p++) {
        if (p[0] == '%' && p[1] == 's') {
            html_put(out, va_arg(ap, const char *));
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            fputc('%', out);
            p++;
        } else
            fputc(*p, out);
    }
    va_end(ap);
}

void html_put_run_name(FILE *out, const tpa_run_t *run) {
    if (run->has_rank)
        fprintf(out, "rank %lld", (long long)run->rank);
    else
        fprintf(out, "pid %lld", (long long)run->pid);
}

void html_put_bytes(FILE *out, int64_t bytes) {
    char b[32];
    tpa_format_bytes(bytes, b, sizeof b);
    fputs(b, out);
}
