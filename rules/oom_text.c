/* oom_text.c - the bounded text buffer of the out-of-memory rule's lines
 * (oom_text.h). */
#include "oom_text.h"

#include <stdarg.h>
#include <stdio.h>

#include "tpa_model.h"

void tpa_oom_add(tpa_oom_text_t *t, const char *fmt, ...) {
    if (t->used + 1 >= sizeof t->v) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->v + t->used, sizeof t->v - t->used, fmt, ap);
    va_end(ap);
    if (n > 0) t->used += (size_t)n < sizeof t->v - t->used ? (size_t)n : sizeof t->v - 1 - t->used;
}

const char *tpa_oom_bytes(int64_t b, char *buf, size_t len) {
    tpa_format_bytes(b, buf, len);
    return buf;
}

