/* utf8.c - the one UTF-8 decoder and encoder (utf8.h). */
#include "utf8.h"

int tpa_utf8_next(const unsigned char *p, size_t avail, int32_t *cp) {
    int n = p[0] < 0x80 ? 1 : p[0] < 0xc2 ? 0 : p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : p[0] < 0xf5 ? 4 : 0;
    if (n == 1) {
        *cp = p[0];
        return 1;
    }
    *cp = -1;
    if (n == 0 || avail < (size_t)n) return 1;
    int32_t v = p[0] & (0x3f >> (n - 1));
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 1;
        v = (v << 6) | (p[i] & 0x3f);
    }
    static const int32_t MIN[] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < MIN[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 1;
    *cp = v;
    return n;
}

size_t tpa_utf8_put(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    size_t n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    static const unsigned char LEAD[] = {0, 0, 0xc0, 0xe0, 0xf0};
    for (size_t i = n - 1; i > 0; i--, cp >>= 6) o[i] = (char)(0x80 | (cp & 0x3f));
    o[0] = (char)(LEAD[n] | cp);
    return n;
}
