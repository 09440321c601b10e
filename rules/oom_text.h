/* oom_text.h - the bounded text buffer the out-of-memory rule writes its
 * lines in (rules/oom_text.c). */
#ifndef TPA_RULES_OOM_TEXT_H
#define TPA_RULES_OOM_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* A line being written; what does not fit is cut. */
typedef struct tpa_oom_text {
    char v[2048];
    size_t used;
} tpa_oom_text_t;

void tpa_oom_add(tpa_oom_text_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* tpa_format_bytes into buf, returned. */
const char *tpa_oom_bytes(int64_t b, char *buf, size_t len);

#endif
