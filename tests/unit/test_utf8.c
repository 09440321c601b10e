/* test_utf8.c - the one UTF-8 decoder (common/utf8.c), which the escapers,
 * the pickle writer and the HTML page share: valid characters of each
 * length, and each way a byte starts no valid character (a stray
 * continuation, an overlong form, a surrogate, above U+10FFFF, a lead byte
 * no character has, a sequence cut short by a NUL or by the bytes given). */
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
    return expect_failures != 0;
}
