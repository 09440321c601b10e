/* escape.c - every stored string goes out through one of these escapers
 * (escape.h): JSON, XML/HTML and the terminal, shared by the renderers, the
 * analyzer, the launcher and the CLI. */
#include "escape.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

/* What to write for character `cp` (-1: an invalid byte), or NULL to
 * write its bytes as they are; `buf` holds a numeric escape. */
typedef const char *(*escape_fn)(int32_t cp, char buf[8]);

static void put_escaped(FILE *out, const char *s, escape_fn escape) {
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    for (const unsigned char *end = p + strlen((const char *)p); *p;) {
        int32_t cp;
        char buf[8];
        int n = tpa_utf8_next(p, (size_t)(end - p), &cp);
        const char *e = escape(cp, buf);
        if (e)
            fputs(e, out);
        else
            fwrite(p, 1, (size_t)n, out);
        p += n;
    }
}

static const char *json_escape(int32_t cp, char buf[8]) {
    switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '<': return "\\u003c";
    case '>': return "\\u003e";
    case '&': return "\\u0026";
    case -1: return "\\ufffd";
    }
    if (cp < 0x20 || cp == 0x7f || cp == 0x2028 || cp == 0x2029) {
        snprintf(buf, 8, "\\u%04x", (unsigned)cp & 0xffffu); /* cp < 0x10000 here */
        return buf;
    }
    return NULL;
}

/* XML 1.0 cannot carry C0 controls other than tab and newline, U+FFFE or
 * U+FFFF; C1 controls and DEL are legal but unsafe to show. */
static const char *xml_escape(int32_t cp, char buf[8]) {
    (void)buf;
    switch (cp) {
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '&': return "&amp;";
    case '"': return "&quot;";
    case '\'': return "&#39;";
    case '\n': return "&#10;";
    case '\t': return "&#9;";
    }
    if (cp < 0 || cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0xfffe || cp == 0xffff) return "\xef\xbf\xbd";
    return NULL;
}

void tpa_put_json_string(FILE *out, const char *s) {
    fputc('"', out);
    put_escaped(out, s, json_escape);
    fputc('"', out);
}

void tpa_put_json_string_or_null(FILE *out, const char *s) {
    if (s)
        tpa_put_json_string(out, s);
    else
        fputs("null", out);
}

void tpa_put_xml_escaped(FILE *out, const char *s) { put_escaped(out, s, xml_escape); }

const char *tpa_term(const char *s) {
    static char *ring[16];
    static size_t cap[16];
    static unsigned next;
    if (!s) return NULL;
    unsigned slot = next++ % 16;
    size_t len = strlen(s), need = len * 4 + 1;
    if (cap[slot] < need) {
        char *v = realloc(ring[slot], need);
        if (!v) return "(out of memory)";
        ring[slot] = v;
        cap[slot] = need;
    }
    char *o = ring[slot];
    for (const unsigned char *p = (const unsigned char *)s, *end = p + len; *p;) {
        int32_t cp;
        int n = tpa_utf8_next(p, (size_t)(end - p), &cp);
        if (cp < 0 || cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0x2028 || cp == 0x2029 ||
            (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) {
            /* controls and bidirectional overrides: shown, never obeyed */
            for (int i = 0; i < n; i++) o += sprintf(o, "\\x%02x", p[i]);
        } else {
            memcpy(o, p, (size_t)n);
            o += n;
        }
        p += n;
    }
    *o = 0;
    return ring[slot];
}
