/* escape.h - the escapers every stored string goes out through (escape.c):
 * JSON (valid UTF-8, invalid bytes become U+FFFD), XML/HTML (the same, plus
 * characters XML cannot carry), and the terminal (control bytes, ESC, DEL,
 * C1 controls, bidirectional overrides and invalid UTF-8 shown as \xNN;
 * the result is a buffer reused after 16 calls, so use it at once).  The
 * bottom floor (common/): used by reports/, analyzer/, launcher/ and cli/. */
#ifndef TPA_ESCAPE_H
#define TPA_ESCAPE_H

#include <stdio.h>

void tpa_put_json_string(FILE *out, const char *s);
/* s as a JSON string, or null when s is NULL. */
void tpa_put_json_string_or_null(FILE *out, const char *s);
void tpa_put_xml_escaped(FILE *out, const char *s);
const char *tpa_term(const char *s);

#endif
