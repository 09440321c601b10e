/* binds.h - the bind kinds of records.h: one helper per kind and the
 * BIND(column, declaration, kind, expression) macro that a row function
 * expands over a table's columns, in order, after `int col = 0;` with its
 * statement in `st`.  Included by the files that write rows (rows.c,
 * stack.c, modules.c), never by a header. */
#ifndef TPAUDIT_SHIM_BINDS_H
#define TPAUDIT_SHIM_BINDS_H

#include <sqlite3.h>

#include "shim_internal.h"

struct tpa_text {
    const char *p;
    int n;
};
struct tpa_blob {
    const void *p;
    int n;
};
struct tpa_maybe {
    int has;
    int64_t x;
};

static inline struct tpa_text text_of(const char *s) { return (struct tpa_text){s, -1}; }
static inline struct tpa_maybe maybe(int has, int64_t x) { return (struct tpa_maybe){has, x}; }
static inline struct tpa_blob blob_of(const void *p, int n) { return (struct tpa_blob){p, n}; }

static inline void tpa_bind_i64(sqlite3_stmt *st, int i, int64_t x) { sqlite3_bind_int64(st, i, x); }
static inline void tpa_bind_opt(sqlite3_stmt *st, int i, int64_t x) {
    if (x >= 0)
        sqlite3_bind_int64(st, i, x);
    else
        sqlite3_bind_null(st, i);
}
static inline void tpa_bind_key(sqlite3_stmt *st, int i, uint64_t k) {
    if (k)
        sqlite3_bind_int64(st, i, (int64_t)k);
    else
        sqlite3_bind_null(st, i);
}
static inline void tpa_bind_bool(sqlite3_stmt *st, int i, int b) { sqlite3_bind_int(st, i, b != 0); }
static inline void tpa_bind_maybe(sqlite3_stmt *st, int i, struct tpa_maybe m) {
    if (m.has)
        sqlite3_bind_int64(st, i, m.x);
    else
        sqlite3_bind_null(st, i);
}
static inline void tpa_bind_text(sqlite3_stmt *st, int i, struct tpa_text t) {
    if (t.p)
        sqlite3_bind_text(st, i, t.p, t.n, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}
static inline void tpa_bind_copy(sqlite3_stmt *st, int i, const char *s) {
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}
static inline void tpa_bind_blob(sqlite3_stmt *st, int i, struct tpa_blob b) {
    sqlite3_bind_blob(st, i, b.p, b.n, SQLITE_STATIC);
}

#define TPA_BIND_I64(e)   tpa_bind_i64(st, ++col, (e));
#define TPA_BIND_OPT(e)   tpa_bind_opt(st, ++col, (e));
#define TPA_BIND_KEY(e)   tpa_bind_key(st, ++col, (e));
#define TPA_BIND_BOOL(e)  tpa_bind_bool(st, ++col, (e));
#define TPA_BIND_MAYBE(e) tpa_bind_maybe(st, ++col, (e));
#define TPA_BIND_TEXT(e)  tpa_bind_text(st, ++col, (e));
#define TPA_BIND_COPY(e)  tpa_bind_copy(st, ++col, (e));
#define TPA_BIND_BLOB(e)  tpa_bind_blob(st, ++col, (e));
#define TPA_BIND_NONE(e)
#define BIND(c, decl, kind, e) TPA_BIND_##kind(e)

#endif
