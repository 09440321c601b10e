/* test_utf8.c - the one UTF-8 decoder and encoder (common/utf8.c), which
 * the escapers, the pickle writer, the HTML page and the JSON reader share:
 * valid characters of each length, each way a byte starts no valid
 * character (a stray continuation, an overlong form, a surrogate, above
 * U+10FFFF, a lead byte no character has, a sequence cut short by a NUL or
 * by the bytes given), and the encoding of each length read back. */
#include <string.h>

#include "utf8.h"

#include "../expect.h"

/* The length tpa_utf8_next gives for the C string s, and its code point in *cp. */
static int next(const char *s, int32_t *cp) { return tpa_utf8_next((const unsigned char *)s, strlen(s), cp); }

/* Whether s starts with no valid character: one byte taken, code point -1. */
static int invalid(const char *s, size_t avail) {
    int32_t cp = 0;
    return tpa_utf8_next((const unsigned char *)s, avail, &cp) == 1 && cp == -1;
}

int main(void) {
    int32_t cp;
    EXPECT(next("A", &cp) == 1 && cp == 'A');
    EXPECT(next("\x7f", &cp) == 1 && cp == 0x7f);
    EXPECT(next("\xc2\x80", &cp) == 2 && cp == 0x80);
    EXPECT(next("\xc3\xa9t\xc3\xa9", &cp) == 2 && cp == 0xe9);
    EXPECT(next("\xe2\x80\xae", &cp) == 3 && cp == 0x202e);
    EXPECT(next("\xef\xbf\xbf", &cp) == 3 && cp == 0xffff);
    EXPECT(next("\xf0\x9f\x98\x80", &cp) == 4 && cp == 0x1f600);
    EXPECT(next("\xf4\x8f\xbf\xbf", &cp) == 4 && cp == 0x10ffff);
    EXPECT(invalid("\x80", 1));             /* a continuation byte alone */
    EXPECT(invalid("\xc0\x80", 2));         /* overlong NUL */
    EXPECT(invalid("\xc1\xbf", 2));         /* overlong */
    EXPECT(invalid("\xe0\x9f\xbf", 3));     /* overlong 3-byte */
    EXPECT(invalid("\xf0\x8f\xbf\xbf", 4)); /* overlong 4-byte */
    EXPECT(invalid("\xed\xa0\x80", 3));     /* a surrogate */
    EXPECT(invalid("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
    EXPECT(invalid("\xf5\x80\x80\x80", 4)); /* no character starts so */
    EXPECT(invalid("\xff", 1));
    EXPECT(invalid("\xe2\x80", 2));     /* cut short by the NUL */
    EXPECT(invalid("\xe2\x80\xae", 2)); /* cut short by the bytes given */
    EXPECT(invalid("\xf0\x9f\x98\x80", 3));
    EXPECT(invalid("\xe2"
                   "A"
                   "\xae",
                   3)); /* a lead byte and no continuation */
    static const uint32_t ENCODED[] = {0, 'A', 0x7f, 0x80, 0x7ff, 0x800, 0xfffd, 0xffff, 0x10000, 0x1f600, 0x10ffff};
    for (size_t i = 0; i < sizeof ENCODED / sizeof *ENCODED; i++) {
        char o[4];
        size_t n = tpa_utf8_put(o, ENCODED[i]);
        EXPECT(n == (ENCODED[i] < 0x80 ? 1u : ENCODED[i] < 0x800 ? 2u : ENCODED[i] < 0x10000 ? 3u : 4u));
        EXPECT(tpa_utf8_next((const unsigned char *)o, n, &cp) == (int)n && cp == (int32_t)ENCODED[i]);
    }
    char euro[4];
    EXPECT(tpa_utf8_put(euro, 0x20ac) == 3 && !memcmp(euro, "\xe2\x82\xac", 3));
    return expect_failures != 0;
}
