/*
 * pickle_write.c - Python's pickle format, protocol 4, unframed (framing
 * is optional), for dict, list, str, int, bool and None: the opcodes that
 * Python's unpickler and PyTorch's memory viewer both read.  The value is
 * written as it is built: EMPTY_DICT / EMPTY_LIST, then MARK ... SETITEMS
 * or APPENDS per batch of 1000 items.
 */
#include "pickle_write.h"

#include <string.h>

#include "utf8.h"

enum {
    OP_PROTO = 0x80,
    OP_STOP = '.',
    OP_MARK = '(',
    OP_EMPTY_DICT = '}',
    OP_EMPTY_LIST = ']',
    OP_SETITEMS = 'u',
    OP_APPENDS = 'e',
    OP_NONE = 'N',
    OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89,
    OP_BININT = 'J',
    OP_BININT1 = 'K',
    OP_BININT2 = 'M',
    OP_LONG1 = 0x8a,
    OP_SHORT_BINUNICODE = 0x8c,
    OP_BINUNICODE = 'X',
    OP_MEMOIZE = 0x94,
    OP_BINGET = 'h',
    OP_LONG_BINGET = 'j',
};

#define BATCH 1000

static void put_u32(FILE *out, uint32_t v) {
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    fwrite(b, 1, 4, out);
}

void tpa_pickle_begin(tpa_pickle_t *pk, FILE *out) {
    memset(pk, 0, sizeof *pk);
    pk->out = out;
    fputc(OP_PROTO, out);
    fputc(4, out);
}

int tpa_pickle_end(tpa_pickle_t *pk) {
    fputc(OP_STOP, pk->out);
    return pk->failed || pk->depth || ferror(pk->out) ? -1 : 0;
}

/* One more item in the innermost open container: a new batch every BATCH. */
static void item(tpa_pickle_t *pk) {
    if (!pk->depth) return;
    int d = pk->depth - 1;
    uint32_t per_batch = pk->open_kind[d] == 'd' ? 2 * BATCH : BATCH;
    if (pk->in_batch[d] == per_batch) {
        fputc(pk->open_kind[d] == 'd' ? OP_SETITEMS : OP_APPENDS, pk->out);
        fputc(OP_MARK, pk->out);
        pk->in_batch[d] = 0;
    }
    pk->in_batch[d]++;
}

static void open_container(tpa_pickle_t *pk, char kind) {
    item(pk);
    if (pk->depth == TPA_PICKLE_DEPTH) {
        pk->failed = 1;
        return;
    }
    fputc(kind == 'd' ? OP_EMPTY_DICT : OP_EMPTY_LIST, pk->out);
    fputc(OP_MARK, pk->out);
    pk->open_kind[pk->depth] = kind;
    pk->in_batch[pk->depth++] = 0;
}

void tpa_pickle_dict(tpa_pickle_t *pk) { open_container(pk, 'd'); }
void tpa_pickle_list(tpa_pickle_t *pk) { open_container(pk, 'l'); }

void tpa_pickle_close(tpa_pickle_t *pk) {
    if (!pk->depth) {
        pk->failed = 1;
        return;
    }
    char kind = pk->open_kind[--pk->depth];
    if (kind == 'd' && pk->in_batch[pk->depth] % 2) pk->failed = 1; /* a key without its value */
    fputc(kind == 'd' ? OP_SETITEMS : OP_APPENDS, pk->out);
}

/* Length of the valid UTF-8 character at p (of a string of `size` bytes
 * from index i), 0 for an invalid byte. */
static size_t utf8_len(const unsigned char *p, size_t i, size_t size) {
    int32_t cp;
    int n = tpa_utf8_next(p + i, size - i, &cp);
    return cp < 0 ? 0 : (size_t)n;
}

void tpa_pickle_str(tpa_pickle_t *pk, const char *s) {
    if (!s) {
        tpa_pickle_none(pk);
        return;
    }
    item(pk);
    const unsigned char *p = (const unsigned char *)s;
    size_t size = strlen(s), len = 0;
    for (size_t i = 0; p[i];) {
        size_t n = utf8_len(p, i, size);
        len += n ? n : 3; /* U+FFFD */
        i += n ? n : 1;
    }
    if (len > UINT32_MAX) len = 0, size = 0, p = (const unsigned char *)"";
    if (len < 256) {
        fputc(OP_SHORT_BINUNICODE, pk->out);
        fputc((int)len, pk->out);
    } else {
        fputc(OP_BINUNICODE, pk->out);
        put_u32(pk->out, (uint32_t)len);
    }
    for (size_t i = 0; p[i];) {
        size_t n = utf8_len(p, i, size);
        if (n)
            fwrite(p + i, 1, n, pk->out);
        else
            fwrite("\xef\xbf\xbd", 1, 3, pk->out);
        i += n ? n : 1;
    }
}

void tpa_pickle_int(tpa_pickle_t *pk, int64_t v) {
    item(pk);
    if (v >= 0 && v < 256) {
        fputc(OP_BININT1, pk->out);
        fputc((int)v, pk->out);
    } else if (v >= 0 && v < 65536) {
        fputc(OP_BININT2, pk->out);
        fputc((int)(v & 0xff), pk->out);
        fputc((int)(v >> 8), pk->out);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        fputc(OP_BININT, pk->out);
        put_u32(pk->out, (uint32_t)(int32_t)v);
    } else {
        /* two's complement, little-endian, in the fewest bytes that keep the sign */
        unsigned char b[8];
        uint64_t u = (uint64_t)v;
        int n = 8;
        for (int i = 0; i < 8; i++) b[i] = (unsigned char)(u >> (8 * i));
        while (n > 1 && ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80)))) n--;
        fputc(OP_LONG1, pk->out);
        fputc(n, pk->out);
        fwrite(b, 1, (size_t)n, pk->out);
    }
}

void tpa_pickle_bool(tpa_pickle_t *pk, int v) {
    item(pk);
    fputc(v ? OP_NEWTRUE : OP_NEWFALSE, pk->out);
}

void tpa_pickle_none(tpa_pickle_t *pk) {
    item(pk);
    fputc(OP_NONE, pk->out);
}

void tpa_pickle_key_str(tpa_pickle_t *pk, const char *key, const char *value) {
    tpa_pickle_str(pk, key);
    tpa_pickle_str(pk, value);
}

void tpa_pickle_key_int(tpa_pickle_t *pk, const char *key, int64_t value) {
    tpa_pickle_str(pk, key);
    tpa_pickle_int(pk, value);
}

uint32_t tpa_pickle_memoize(tpa_pickle_t *pk) {
    fputc(OP_MEMOIZE, pk->out);
    return pk->memo_next++;
}

void tpa_pickle_get(tpa_pickle_t *pk, uint32_t id) {
    item(pk);
    if (id < 256) {
        fputc(OP_BINGET, pk->out);
        fputc((int)id, pk->out);
    } else {
        fputc(OP_LONG_BINGET, pk->out);
        put_u32(pk->out, id);
    }
}
