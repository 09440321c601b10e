/* owned_text.h - owned copies of text (strings.c): of `s` (NULL stays
 * NULL) and of column `i`'s text, for the model's strings. */
#ifndef TPA_OWNED_TEXT_H
#define TPA_OWNED_TEXT_H

#include <sqlite3.h>

char *tpa_strdup(const char *s);
char *tpa_column_text(sqlite3_stmt *st, int i);

#endif
