/* findings.c - turns one database's recorded facts into findings: stale
 * params, orphan state, state shape mismatches, stale map entries and
 * untrained params, judged by identity at the run's latest complete audit. */
#include "analyzer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *tpa_strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static char *col_text(sqlite3_stmt *st, int i) { return tpa_strdup((const char *)sqlite3_column_text(st, i)); }

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

/* Parses "file:line:function" lines into frames. */
static void parse_py_stack(const char *text, tpa_frames_t *out) {
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
            if (ln) { *ln++ = 0; lineno = strtol(ln, NULL, 10); }
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

static int push_finding(tpa_report_t *r, const tpa_finding_t *f) {
    tpa_finding_t *v = realloc(r->findings, (r->n_findings + 1) * sizeof *v);
    if (!v) return -1;
    r->findings = v;
    r->findings[r->n_findings++] = *f;
    return 0;
}

/* Storage pointers already counted for this rank (dedup of retained bytes). */
struct counted { int64_t *v; size_t n, cap; };
static int counted_add(struct counted *c, int64_t ptr) {
    if (ptr == 0) return 0;
    for (size_t i = 0; i < c->n; i++) if (c->v[i] == ptr) return 0;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        int64_t *v = realloc(c->v, c->cap * sizeof *v);
        if (!v) return 0;
        c->v = v;
    }
    c->v[c->n++] = ptr;
    return 1;
}

/* Stack of the latest event of `kind` about `key` (or, for a master, about
 * the working tensor a map entry pairs it with): the Python stack when the
 * event has one, else its native stack, symbolized. */
static void event_stack(sqlite3 *db, int64_t audit, const char *kind, const char *key_col, uint64_t key,
                        tpa_frames_t *out) {
    char q[512];
    snprintf(q, sizeof q,
             "SELECT py_stack, stack_id FROM event WHERE kind=?1 AND (py_stack IS NOT NULL OR stack_id IS NOT NULL)"
             " AND (%s=?2 OR %s IN (SELECT tensor_key FROM ref WHERE audit_id=?3 AND role='map_entry' AND peer_key=?2))"
             " ORDER BY (%s=?2) DESC, id DESC LIMIT 1", key_col, key_col, key_col);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK) return;
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (int64_t)key);
    sqlite3_bind_int64(st, 3, audit);
    if (sqlite3_step(st) == SQLITE_ROW) {
        if (sqlite3_column_type(st, 0) != SQLITE_NULL) parse_py_stack((const char *)sqlite3_column_text(st, 0), out);
        else tpa_symbolize_stack(db, sqlite3_column_int64(st, 1), out);
    }
    sqlite3_finalize(st);
}

static void attach_events(sqlite3 *db, int64_t audit, tpa_finding_t *f) {
    event_stack(db, audit, "param_created", "new_key", f->key, &f->created_at);
    event_stack(db, audit, "param_replaced", "old_key", f->key, &f->replaced_at);
    sqlite3_stmt *st;
    if (!f->replaced_at.n && sqlite3_prepare_v2(db,
            "SELECT py_stack FROM event WHERE kind='module_replaced' AND py_stack IS NOT NULL AND ?1 LIKE name || '.%' "
            "ORDER BY id DESC LIMIT 1", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, f->name ? f->name : "", -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) parse_py_stack((const char *)sqlite3_column_text(st, 0), &f->replaced_at);
        sqlite3_finalize(st);
    }
}

/* The device allocation containing the tensor's storage at the audit. */
static void attach_allocation(sqlite3 *db, int64_t audit_begin, int64_t ptr, tpa_finding_t *f) {
    if (!ptr) return;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
            "SELECT a.address, a.bytes, coalesce(a.stack_id, (SELECT c.stack_id FROM api_call c WHERE c.correlation=a.correlation)) "
            "FROM alloc a WHERE a.op='alloc' AND a.address<=?1 AND ?1<a.address+a.bytes "
            "AND a.ts_ns<=?2 AND NOT EXISTS (SELECT 1 FROM alloc b WHERE b.op='free' AND b.address=a.address "
            "AND b.ts_ns>=a.ts_ns AND b.ts_ns<=?2) ORDER BY a.ts_ns DESC LIMIT 1", -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, ptr);
    sqlite3_bind_int64(st, 2, audit_begin);
    if (sqlite3_step(st) == SQLITE_ROW) {
        f->has_allocation = 1;
        f->alloc_address = (uint64_t)sqlite3_column_int64(st, 0);
        f->alloc_bytes = sqlite3_column_int64(st, 1);
        if (sqlite3_column_type(st, 2) != SQLITE_NULL) tpa_symbolize_stack(db, sqlite3_column_int64(st, 2), &f->alloc_stack);
    }
    sqlite3_finalize(st);
}

/* Column list shared by the finding queries (t = tensor row). */
#define TENSOR_COLS "t.key, t.name, t.shape, t.local_shape, t.dtype, t.device, t.type, t.storage_ptr, t.storage_bytes, t.has_grad"

static const char *FINDING_SQL[] = {
    /* stale_param: held by an optimizer's groups, not live, not the master of
     * any map entry (masters are judged on their working side, below), and
     * not a generic master: a tensor never registered on a module, never
     * replaced out of one, that had a gradient at every audited step. */
    "WITH L AS (SELECT tensor_key k FROM ref WHERE audit_id=?1 AND role='param'),"
    " M AS (SELECT tensor_key w, peer_key m FROM ref WHERE audit_id=?1 AND role='map_entry'),"
    " GM AS (SELECT q.tensor_key k FROM ref q JOIN audit a ON a.id=q.audit_id AND a.label='step' AND a.end_ns IS NOT NULL"
    "  JOIN tensor u ON u.audit_id=q.audit_id AND u.key=q.tensor_key WHERE q.role='group_param'"
    "  GROUP BY q.tensor_key HAVING min(u.has_grad)=1)"
    " SELECT " TENSOR_COLS ", r.holder_kind, r.holder_class, r.path, r.peer_key, t.nbytes FROM ref r"
    " JOIN tensor t ON t.audit_id=r.audit_id AND t.key=r.tensor_key"
    " WHERE r.audit_id=?1 AND r.role='group_param' AND r.tensor_key NOT IN L"
    " AND r.tensor_key NOT IN (SELECT m FROM M)"
    " AND r.tensor_key NOT IN (SELECT k FROM GM WHERE k NOT IN (SELECT tensor_key FROM ref WHERE role='param')"
    "  AND k NOT IN (SELECT new_key FROM event WHERE kind='param_created')"
    "  AND k NOT IN (SELECT old_key FROM event WHERE kind='param_replaced'))"
    " GROUP BY t.key ORDER BY t.name, t.key",
    /* orphan_state: state keyed by a tensor in no param group */
    "WITH G AS (SELECT tensor_key k FROM ref WHERE audit_id=?1 AND role='group_param')"
    " SELECT " TENSOR_COLS ", r.holder_kind, r.holder_class, r.path, r.peer_key, t.nbytes FROM ref r JOIN tensor t ON t.audit_id=r.audit_id AND t.key=r.tensor_key"
    " WHERE r.audit_id=?1 AND r.role='state' AND r.peer_key NOT IN G ORDER BY r.path, t.key",
    /* state_shape_mismatch: state shape differs from its param's (scalars such as 'step' aside) */
    "SELECT " TENSOR_COLS ", r.holder_kind, r.holder_class, r.path, r.peer_key, t.nbytes FROM ref r JOIN tensor t ON t.audit_id=r.audit_id AND t.key=r.tensor_key"
    " JOIN tensor p ON p.audit_id=r.audit_id AND p.key=r.peer_key"
    " WHERE r.audit_id=?1 AND r.role='state' AND t.shape NOT IN ('[]','[1]') AND t.shape<>p.shape ORDER BY r.path, t.key",
    /* stale_map_entry: a wrapper map entry whose working tensor left the model */
    "WITH L AS (SELECT tensor_key k FROM ref WHERE audit_id=?1 AND role='param')"
    " SELECT " TENSOR_COLS ", r.holder_kind, r.holder_class, r.path, r.peer_key, t.nbytes FROM ref r"
    " JOIN tensor t ON t.audit_id=r.audit_id AND t.key=r.tensor_key"
    " WHERE r.audit_id=?1 AND r.role='map_entry' AND r.tensor_key NOT IN L GROUP BY t.key ORDER BY r.path, t.key",
    /* untrained_param: live trainable param no optimizer holds, judged only
     * in an audit that saw at least one optimizer */
    "WITH G AS (SELECT tensor_key k FROM ref WHERE audit_id=?1 AND role='group_param'),"
    " M AS (SELECT tensor_key w, peer_key m FROM ref WHERE audit_id=?1 AND role='map_entry')"
    " SELECT " TENSOR_COLS ", r.holder_kind, r.holder_class, r.path, r.peer_key, t.nbytes FROM ref r JOIN tensor t ON t.audit_id=r.audit_id AND t.key=r.tensor_key"
    " WHERE r.audit_id=?1 AND r.role='param' AND t.requires_grad=1 AND r.tensor_key NOT IN G"
    " AND EXISTS (SELECT 1 FROM ref o WHERE o.audit_id=?1 AND o.holder_kind='optimizer')"
    " AND NOT EXISTS (SELECT 1 FROM M WHERE M.w=r.tensor_key AND M.m IN G) GROUP BY t.key ORDER BY t.name, t.key",
};
static const char *FINDING_KIND[] = {"stale_param", "orphan_state", "state_shape_mismatch", "stale_map_entry", "untrained_param"};

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Live storage pointers at the audit, sorted: retained bytes never include them.
 * (SELECT DISTINCT already dedups, so they are appended without a search.) */
static void collect_live_storage(sqlite3 *db, int64_t audit, struct counted *live) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT DISTINCT t.storage_ptr FROM ref r JOIN tensor t ON t.audit_id=r.audit_id AND "
                               "t.key=r.tensor_key WHERE r.audit_id=?1 AND r.role='param' AND t.storage_ptr<>0", -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, audit);
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (live->n == live->cap) {
            size_t cap = live->cap ? live->cap * 2 : 64;
            int64_t *v = realloc(live->v, cap * sizeof *v);
            if (!v) break;
            live->v = v;
            live->cap = cap;
        }
        live->v[live->n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (live->n) qsort(live->v, live->n, sizeof *live->v, cmp_i64);
}

static int is_live_storage(const struct counted *live, int64_t ptr) {
    return live->n && bsearch(&ptr, live->v, live->n, sizeof *live->v, cmp_i64) != NULL;
}

static void find_successor(sqlite3 *db, int64_t audit, tpa_finding_t *f) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
            "SELECT t.key, t.name, t.shape, t.local_shape FROM ref r JOIN tensor t ON t.audit_id=r.audit_id AND t.key=r.tensor_key"
            " WHERE r.audit_id=?1 AND r.role='param' AND t.key<>?2 AND (t.name=?3 OR t.key IN"
            " (SELECT new_key FROM event WHERE kind='param_replaced' AND old_key=?2)) LIMIT 1", -1, &st, NULL) != SQLITE_OK)
        return;
    sqlite3_bind_int64(st, 1, audit);
    sqlite3_bind_int64(st, 2, (int64_t)f->key);
    sqlite3_bind_text(st, 3, f->name ? f->name : "", -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        f->has_successor = 1;
        f->successor_key = (uint64_t)sqlite3_column_int64(st, 0);
        f->succ_name = col_text(st, 1);
        f->succ_shape = col_text(st, 2);
        f->succ_local_shape = col_text(st, 3);
        f->relation = describe_relation(f->shape, f->succ_shape, f->succ_local_shape);
    }
    sqlite3_finalize(st);
}

/* Storage of the optimizer state kept for a stale param (exp_avg, ...), each
 * storage counted once per rank and never when a live param shares it. */
static int64_t state_bytes_of(sqlite3 *db, int64_t audit, uint64_t key, const struct counted *live, struct counted *counted) {
    sqlite3_stmt *st;
    int64_t sum = 0;
    if (sqlite3_prepare_v2(db, "SELECT t.storage_ptr, t.storage_bytes FROM ref r JOIN tensor t ON t.audit_id=r.audit_id"
                           " AND t.key=r.tensor_key WHERE r.audit_id=?1 AND r.role='state' AND r.peer_key=?2", -1, &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_int64(st, 1, audit);
    sqlite3_bind_int64(st, 2, (int64_t)key);
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t ptr = sqlite3_column_int64(st, 0);
        if (ptr && !is_live_storage(live, ptr) && counted_add(counted, ptr)) sum = tpa_add_bytes(sum, tpa_sane_bytes(sqlite3_column_int64(st, 1)));
    }
    sqlite3_finalize(st);
    return sum;
}

/* Bytes a stale working tensor's master keeps: the master's storage and its
 * optimizer state, when no live working tensor shares that master (a flat
 * partition serving live params too is not counted). */
static int64_t master_bytes_of(sqlite3 *db, int64_t audit, uint64_t master, const struct counted *live,
                               struct counted *counted) {
    sqlite3_stmt *st;
    int64_t sum = 0;
    if (!master || sqlite3_prepare_v2(db, "SELECT t.storage_ptr, t.storage_bytes FROM tensor t WHERE t.audit_id=?1 AND t.key=?2"
                           " AND NOT EXISTS (SELECT 1 FROM ref m WHERE m.audit_id=?1 AND m.role='map_entry' AND m.peer_key=?2"
                           " AND m.tensor_key IN (SELECT tensor_key FROM ref WHERE audit_id=?1 AND role='param'))",
                           -1, &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_int64(st, 1, audit);
    sqlite3_bind_int64(st, 2, (int64_t)master);
    if (sqlite3_step(st) == SQLITE_ROW) {
        int64_t ptr = sqlite3_column_int64(st, 0);
        if (ptr && !is_live_storage(live, ptr) && counted_add(counted, ptr)) sum = tpa_add_bytes(sum, tpa_sane_bytes(sqlite3_column_int64(st, 1)));
        sum = tpa_add_bytes(sum, state_bytes_of(db, audit, master, live, counted));
    }
    sqlite3_finalize(st);
    return sum;
}

static char *make_message(const tpa_finding_t *f) {
    char buf[1024], bytes[32];
    tpa_format_bytes(f->retained_bytes, bytes, sizeof bytes);
    const char *name = f->name ? f->name : "(unnamed)";
    char state[96] = "";
    if (f->state_bytes > 0) {
        char sb[32];
        tpa_format_bytes(f->state_bytes, sb, sizeof sb);
        snprintf(state, sizeof state, ", plus %s of its %s", sb,
                 !strcmp(f->kind, "stale_map_entry") ? "master and optimizer state" : "optimizer state");
    }
    if (!strcmp(f->kind, "stale_param"))
        snprintf(buf, sizeof buf, "%s %s holds %s %s, which is no longer a model parameter (%s retained%s%s%s%s)",
                 f->holder_class ? f->holder_class : "optimizer", f->holder_path ? f->holder_path : "", name,
                 f->shape, bytes, state, f->has_successor ? "; live successor " : "; no live successor",
                 f->has_successor ? f->succ_name : "", f->has_successor ? " is never trained" : "");
    else if (!strcmp(f->kind, "orphan_state"))
        snprintf(buf, sizeof buf, "%s %s keys state by a tensor in no param group (%s retained)",
                 f->holder_class ? f->holder_class : "optimizer", f->holder_path ? f->holder_path : "", bytes);
    else if (!strcmp(f->kind, "state_shape_mismatch"))
        snprintf(buf, sizeof buf, "%s %s has shape %s, different from its parameter's",
                 f->holder_class ? f->holder_class : "optimizer", f->holder_path ? f->holder_path : "", f->shape);
    else if (!strcmp(f->kind, "stale_map_entry"))
        snprintf(buf, sizeof buf, "%s %s keeps %s %s, which is no longer a model parameter (%s retained%s%s%s%s)",
                 f->holder_class ? f->holder_class : "wrapper", f->holder_path ? f->holder_path : "", name, f->shape, bytes,
                 f->state_bytes > 0 ? state : "", f->has_successor ? "; live successor " : "; no live successor",
                 f->has_successor ? f->succ_name : "", f->has_successor ? " is never trained" : "");
    else
        snprintf(buf, sizeof buf, "%s %s requires grad but no optimizer holds it: it is never trained%s", name,
                 f->shape, f->is_error ? " (it replaced a tensor the optimizer still holds)" : "");
    return tpa_strdup(buf);
}

/* Adds the findings of one database to the report. */
int tpa_findings_for_db(sqlite3 *db, int64_t audit, int64_t audit_begin, int64_t rank, int64_t step, int with_details,
                        tpa_report_t *r) {
    struct counted live = {0}, counted = {0};
    collect_live_storage(db, audit, &live);
    size_t first = r->n_findings;
    for (size_t k = 0; k < sizeof FINDING_KIND / sizeof *FINDING_KIND; k++) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, FINDING_SQL[k], -1, &st, NULL) != SQLITE_OK) { free(live.v); free(counted.v); return -1; }
        sqlite3_bind_int64(st, 1, audit);
        while (sqlite3_step(st) == SQLITE_ROW) {
            tpa_finding_t f;
            memset(&f, 0, sizeof f);
            f.kind = tpa_strdup(FINDING_KIND[k]);
            f.is_error = k != 4;
            f.rank = rank;
            f.step = step;
            f.key = (uint64_t)sqlite3_column_int64(st, 0);
            f.name = col_text(st, 1);
            f.shape = col_text(st, 2);
            f.local_shape = col_text(st, 3);
            f.dtype = col_text(st, 4);
            f.device = col_text(st, 5);
            f.type = col_text(st, 6);
            int64_t ptr = sqlite3_column_int64(st, 7), bytes = sqlite3_column_int64(st, 8);
            f.has_grad = sqlite3_column_int(st, 9);
            f.holder_kind = col_text(st, 10);
            f.holder_class = col_text(st, 11);
            f.holder_path = col_text(st, 12);
            int counts = k != 4 && k != 2;
            f.retained_bytes = (counts && ptr && !is_live_storage(&live, ptr) && counted_add(&counted, ptr)) ? bytes : 0;
            /* A stale working tensor that is a view into a buffer live params
             * share (a flat bf16 buffer) keeps its own bytes of it. */
            if (k == 3 && ptr && is_live_storage(&live, ptr)) f.retained_bytes = sqlite3_column_int64(st, 14);
            if (k == 0 || k == 3) find_successor(db, audit, &f);
            if (k == 0) f.state_bytes = state_bytes_of(db, audit, f.key, &live, &counted);
            if (k == 3) f.state_bytes = master_bytes_of(db, audit, (uint64_t)sqlite3_column_int64(st, 13), &live, &counted);
            if (with_details) {
                attach_events(db, audit, &f);
                attach_allocation(db, audit_begin, ptr, &f);
            }
            push_finding(r, &f);
        }
        sqlite3_finalize(st);
    }
    /* An untrained param that succeeds a stale one is an error. */
    for (size_t i = first; i < r->n_findings; i++) {
        tpa_finding_t *u = &r->findings[i];
        if (strcmp(u->kind, "untrained_param")) continue;
        for (size_t j = first; j < r->n_findings; j++)
            if ((!strcmp(r->findings[j].kind, "stale_param") || !strcmp(r->findings[j].kind, "stale_map_entry")) &&
                r->findings[j].has_successor &&
                r->findings[j].successor_key == u->key)
                u->is_error = 1;
    }
    for (size_t i = first; with_details && i < r->n_findings; i++) r->findings[i].message = make_message(&r->findings[i]);
    free(live.v);
    free(counted.v);
    return 0;
}
