/* utf8.h - the one UTF-8 decoder and encoder (utf8.c), strict RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF.  The bottom floor
 * (common/): used by the escapers (escape.c), the pickle writer, the HTML
 * page's escaping and the JSON reader (reports/). */
#ifndef TPA_UTF8_H
#define TPA_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes the character at p, of which `avail` bytes (at least 1) may be
 * read: returns its length and sets *cp to its code point, or returns 1
 * with *cp = -1 where the byte at p starts no valid character (a sequence
 * cut short by `avail` included). */
int tpa_utf8_next(const unsigned char *p, size_t avail, int32_t *cp);

/* Writes the UTF-8 encoding of cp (at most U+10FFFF, no surrogate) at o,
 * which has room for 4 bytes; returns how many it wrote (1 to 4). */
size_t tpa_utf8_put(char *o, uint32_t cp);

#endif
