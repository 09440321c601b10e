/* strings.c - owned copies of strings for the model: of a C string and
 * of a result column's text. */
#include "owned_text.h"

#include <stdlib.h>
#include <string.h>

char *tpa_strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

char *tpa_column_text(sqlite3_stmt *st, int i) { return tpa_strdup((const char *)sqlite3_column_text(st, i)); }
