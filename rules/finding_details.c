/* finding_details.c - what a finding carries beside its kind and bytes: its
 * live successor and how it relates to it, its offset into its storage (a
 * view's), the stacks that created and replaced the tensor, and the device
 * allocation holding its storage. */
#include "finding_details.h"
#include "finding_names.h"
#include "owned_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shape "[a,b,...]" -> dims; returns the count. */
static int parse_shape(const char *s, int64_t *dims, int max) {
    int n = 0;
    if (!s) return 0;
    for (const char *p = s; *p && n < max;) {
        if ((*p >= '0' && *p <= '9') || *p == '-') {
            char *end;
            dims[n++] = strtoll(p, &end, 10);
            p = end;
        } else {
            p++;
        }
    }
    return n;
}

/* Describes how a live successor relates to the stale tensor. */
static char *describe_relation(const char *old_shape, const char *new_shape, const char *new_local) {
    int64_t a[8], b[8], l[8];
    int na = parse_shape(old_shape, a, 8), nb = parse_shape(new_shape, b, 8), nl = parse_shape(new_local, l, 8);
    char buf[256] = "";
    size_t used = 0;
    if (na != nb) return tpa_strdup("different rank");
    for (int d = 0; d < nb && d < nl; d++) {
        if (l[d] != b[d] && l[d] > 0 && b[d] % l[d] == 0) {
            used += snprintf(buf + used, sizeof buf - used, "%lld-way shard of dim %d", (long long)(b[d] / l[d]), d);
            break;
        }
    }
    for (int d = 0; d < na; d++) {
        if (a[d] != b[d]) {
            if (b[d] > a[d] && d == 0)
                used += snprintf(buf + used, sizeof buf - used, "%svocab padded %lld -> %lld", used ? ", " : "",
                                 (long long)a[d], (long long)b[d]);
            else
                used += snprintf(buf + used, sizeof buf - used, "%s%s dim %d %lld -> %lld", used ? ", " : "",
                                 b[d] > a[d] ? "padded" : "shrunk", d, (long long)a[d], (long long)b[d]);
            if (used >= sizeof buf) break;
        }
    }
    if (!used) snprintf(buf, sizeof buf, "same shape (recreated)");
    return tpa_strdup(buf);
}

/* Parses "file:line:function" lines into frames (finding_details.h). */
void tpa_parse_py_stack(const char *text, tpa_frames_t *out) {
    out->v = NULL;
    out->n = 0;
    if (!text) return;
    size_t cap = 0;
    for (const char *line = text; *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        char tmp[1024];
        if (len >= sizeof tmp) len = sizeof tmp - 1;
        memcpy(tmp, line, len);
        tmp[len] = 0;
        char *fn = strrchr(tmp, ':');
        if (fn && fn != tmp) {
            *fn++ = 0;
            char *ln = strrchr(tmp, ':');
            long lineno = 0;
            if (ln) {
                *ln++ = 0;
                lineno = strtol(ln, NULL, 10);
            }
            if (out->n == cap) {
                cap = cap ? cap * 2 : 8;
                tpa_frame_t *v = realloc(out->v, cap * sizeof *v);
                if (!v) return;
                out->v = v;
            }
            tpa_frame_t *f = &out->v[out->n++];
            memset(f, 0, sizeof *f);
            f->file = tpa_strdup(tmp);
            f->line = lineno;
            f->function = tpa_strdup(fn);
        }
        if (!eol) break;
        line = eol + 1;
    }
}

/* A stack from an event row: its Python stack (column `col`) when it has
 * one, else its native stack (column col + 1), named by `symbolize` (none
 * when it is NULL). */
static void row_stack(tpa_symbolize_fn symbolize, sqlite3 *db, sqlite3_stmt *st, int col, tpa_frames_t *out) {
    if (sqlite3_column_type(st, col) != SQLITE_NULL)
        tpa_parse_py_stack((const char *)sqlite3_column_text(st, col), out);
    else if (symbolize)
        symbolize(db, sqlite3_column_int64(st, col + 1), out);
}

/* Events of `kind` about `key` (or, for a master, about the working tensor
 * a map entry pairs it with) with a stack, that meet `where`, in `order`;
 * columns: name, py_stack, stack_id, the key the event is about. */
static sqlite3_stmt *key_events(sqlite3 *db, int64_t audit, const char *kind, const char *key_col, uint64_t key,
                                const char *where, const char *order) {
    char q[768];
    snprintf(q, sizeof q,
             "SELECT name, py_stack, stack_id, %s FROM event e WHERE kind=?1 AND (py_stack IS NOT NULL OR stack_id IS NOT NULL)"
             " AND (%s=?2 OR %s IN (SELECT tensor_key FROM ref WHERE audit_id=?3 AND role='map_entry' AND peer_key=?2))"
             " AND %s ORDER BY (%s=?2) DESC, %s",
             key_col, key_col, key_col, where, key_col, order);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK) return NULL;
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (int64_t)key);
    sqlite3_bind_int64(st, 3, audit);
    return st;
}

static void add_later(tpa_symbolize_fn symbolize, tpa_finding_t *f, sqlite3 *db, sqlite3_stmt *st) {
    tpa_replacement_t *v = realloc(f->later_replacements, (f->n_later_replacements + 1) * sizeof *v);
    if (!v) return;
    f->later_replacements = v;
    tpa_replacement_t *at = &v[f->n_later_replacements++];
    at->name = tpa_column_text(st, 0);
    at->at.v = NULL;
    at->at.n = 0;
    row_stack(symbolize, db, st, 1, &at->at);
}

/* Where the tensor was made (its param_created event) and replaced: the
 * first replacement is replaced_at, the later ones of the same tensor are
 * listed after it.  With no param_replaced event, the module_replaced event
 * of a module whose path starts the tensor's name. */
static void attach_events(tpa_symbolize_fn symbolize, sqlite3 *db, int64_t audit, tpa_finding_t *f) {
    sqlite3_stmt *st = key_events(db, audit, "param_created", "new_key", f->key, "1", "id DESC");
    if (st && sqlite3_step(st) == SQLITE_ROW) row_stack(symbolize, db, st, 1, &f->created_at);
    if (st) sqlite3_finalize(st);
    st = key_events(db, audit, "param_replaced", "old_key", f->key, TPA_SINCE_CREATED("e.old_key"), "id");
    int64_t about = 0; /* the key of the first replacement's event */
    for (int first = 1; st && sqlite3_step(st) == SQLITE_ROW; first = 0) {
        if (first) {
            row_stack(symbolize, db, st, 1, &f->replaced_at);
            about = sqlite3_column_int64(st, 3);
        } else if (sqlite3_column_int64(st, 3) == about) {
            add_later(symbolize, f, db, st);
        }
    }
    if (st) sqlite3_finalize(st);
    if (!f->replaced_at.n &&
        sqlite3_prepare_v2(
            db,
            "SELECT py_stack FROM event WHERE kind='module_replaced' AND py_stack IS NOT NULL AND ?1 LIKE name || '.%' "
            "ORDER BY id DESC LIMIT 1",
            -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, f->name ? f->name : "", -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) tpa_parse_py_stack((const char *)sqlite3_column_text(st, 0), &f->replaced_at);
        sqlite3_finalize(st);
    }
}

/* sql prepared on db with ?1 and ?2 bound to first and second; NULL when
 * it does not prepare. */
static sqlite3_stmt *prepare_bound(sqlite3 *db, const char *sql, int64_t first, int64_t second) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return NULL;
    sqlite3_bind_int64(st, 1, first);
    sqlite3_bind_int64(st, 2, second);
    return st;
}

/* The device allocation containing the tensor's storage at the audit. */
static void attach_allocation(tpa_symbolize_fn symbolize, sqlite3 *db, int64_t audit_begin, int64_t ptr,
                              tpa_finding_t *f) {
    if (!ptr) return;
    sqlite3_stmt *st = prepare_bound(
        db,
        "SELECT a.address, a.bytes, coalesce(a.stack_id, (SELECT c.stack_id FROM api_call c WHERE c.correlation=a.correlation)) "
        "FROM alloc a WHERE a.op='alloc' AND a.address<=?1 AND ?1<a.address+a.bytes "
        "AND a.ts_ns<=?2 AND NOT EXISTS (SELECT 1 FROM alloc b WHERE b.op='free' AND b.address=a.address "
        "AND b.ts_ns>=a.ts_ns AND b.ts_ns<=?2) ORDER BY a.ts_ns DESC LIMIT 1",
        ptr, audit_begin);
    if (!st) return;
    if (sqlite3_step(st) == SQLITE_ROW) {
        f->has_allocation = 1;
        f->alloc_address = (uint64_t)sqlite3_column_int64(st, 0);
        f->alloc_bytes = sqlite3_column_int64(st, 1);
        if (symbolize && sqlite3_column_type(st, 2) != SQLITE_NULL)
            symbolize(db, sqlite3_column_int64(st, 2), &f->alloc_stack);
    }
    sqlite3_finalize(st);
}

void tpa_find_successor(sqlite3 *db, int64_t audit, tpa_finding_t *f) {
    sqlite3_stmt *st = prepare_bound(
        db,
        "SELECT t.key, t.name, t.shape, t.local_shape FROM ref r JOIN tensor t ON t.audit_id=r.audit_id AND t.key=r.tensor_key"
        " WHERE r.audit_id=?1 AND r.role='param' AND t.key<>?2 AND (t.name=?3 OR t.key IN"
        " (SELECT new_key FROM event WHERE kind='param_replaced' AND old_key=?2)) LIMIT 1",
        audit, (int64_t)f->key);
    if (!st) return;
    sqlite3_bind_text(st, 3, f->name ? f->name : "", -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        f->has_successor = 1;
        f->successor_key = (uint64_t)sqlite3_column_int64(st, 0);
        f->succ_name = tpa_column_text(st, 1);
        f->succ_shape = tpa_column_text(st, 2);
        f->succ_local_shape = tpa_column_text(st, 3);
        f->relation = describe_relation(f->shape, f->succ_shape, f->succ_local_shape);
    }
    sqlite3_finalize(st);
}

/* The tensor's offset into its storage (a view's); 0 for a file from before
 * tensor.storage_offset, which has no such column, and for a negative one. */
static void attach_storage_offset(sqlite3 *db, int64_t audit, tpa_finding_t *f) {
    sqlite3_stmt *st =
        prepare_bound(db, "SELECT storage_offset FROM tensor WHERE audit_id=?1 AND key=?2", audit, (int64_t)f->key);
    if (!st) return;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > 0)
        f->storage_offset = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
}

void tpa_attach_details(tpa_symbolize_fn symbolize, sqlite3 *db, int64_t audit, int64_t audit_begin, int64_t ptr,
                        tpa_finding_t *f) {
    attach_storage_offset(db, audit, f);
    attach_events(symbolize, db, audit, f);
    tpa_attach_names(db, audit, f);
    attach_allocation(symbolize, db, audit_begin, ptr, f);
}
