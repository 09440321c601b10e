/*
 * pickle_write.h - a small writer of Python's pickle format, protocol 4
 * without framing, for builtin values only: dict, list, str, int (at most
 * 8 bytes), bool and None, and back-references to values written before
 * (the memo).  What PyTorch's memory viewer (MemoryViz.js) and Python's
 * pickle both read.  Internal to reports/.
 */
#ifndef TPA_PICKLE_WRITE_H
#define TPA_PICKLE_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TPA_PICKLE_DEPTH 16

typedef struct tpa_pickle {
    FILE *out;
    uint32_t memo_next;              /* the id the next tpa_pickle_memoize gives */
    int depth;                       /* open dicts and lists */
    char open_kind[TPA_PICKLE_DEPTH]; /* 'd' or 'l' */
    uint32_t in_batch[TPA_PICKLE_DEPTH]; /* items (dict: keys and values) since the last MARK */
    int failed;                      /* nesting deeper than TPA_PICKLE_DEPTH, or a close without an open */
} tpa_pickle_t;

/* The protocol header; tpa_pickle_end writes STOP. 0, or -1 when the
 * nesting was wrong or the stream has an error. */
void tpa_pickle_begin(tpa_pickle_t *pk, FILE *out);
int tpa_pickle_end(tpa_pickle_t *pk);

/* A dict: key, value, key, value ... then tpa_pickle_close. A list: its
 * items, then tpa_pickle_close.  Items go out in batches of 1000, as
 * Python's own pickler writes them (the viewer spreads a batch into a
 * function call's arguments). */
void tpa_pickle_dict(tpa_pickle_t *pk);
void tpa_pickle_list(tpa_pickle_t *pk);
void tpa_pickle_close(tpa_pickle_t *pk);

/* A str: invalid UTF-8 bytes become U+FFFD (Python's unpickler refuses
 * them); NULL writes None. */
void tpa_pickle_str(tpa_pickle_t *pk, const char *s);
void tpa_pickle_int(tpa_pickle_t *pk, int64_t v);
void tpa_pickle_bool(tpa_pickle_t *pk, int v);
void tpa_pickle_none(tpa_pickle_t *pk);
/* "key": value pairs of a dict. */
void tpa_pickle_key_str(tpa_pickle_t *pk, const char *key, const char *value);
void tpa_pickle_key_int(tpa_pickle_t *pk, const char *key, int64_t value);

/* Memoizes the value just written (a whole dict or list once closed) and
 * gives its id; tpa_pickle_get writes the same object again. */
uint32_t tpa_pickle_memoize(tpa_pickle_t *pk);
void tpa_pickle_get(tpa_pickle_t *pk, uint32_t id);

#endif
