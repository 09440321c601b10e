/* findings.c - turns one database's recorded facts into findings, one SQL
 * query per kind of the table of finding kinds (rules/finding_kinds.c),
 * judged by identity at one audit; bytes are counted once per storage and
 * never for storage a live param holds. */
#include "findings.h"
#include "finding_details.h"
#include "memory_growth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Storage pointers already counted for this rank (dedup of retained bytes). */
struct counted {
    int64_t *v;
    size_t n, cap;
};
static int counted_add(struct counted *c, int64_t ptr) {
    if (ptr == 0) return 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i] == ptr) return 0;
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        int64_t *v = realloc(c->v, c->cap * sizeof *v);
        if (!v) return 0;
        c->v = v;
    }
    c->v[c->n++] = ptr;
    return 1;
}

/* Column list shared by the finding queries (t = tensor row). */
#define TENSOR_COLS \
    "t.key, t.name, t.shape, t.local_shape, t.dtype, t.device, t.type, t.storage_ptr, t.storage_bytes, t.has_grad"

/* Runs `sql`, statements that write only the connection's temporary
 * database (in memory), with query_only lifted for the call and put back
 * as it was: the CLI reads its databases query_only (the file stays as it
 * is), the shim judges on its writer's own connection.  0, or -1 with
 * SQLite's reason in `why`. */
static int scratch(sqlite3 *db, const char *sql, char *why, size_t why_len) {
    int was = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "PRAGMA query_only", -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW) was = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    int rc = was ? sqlite3_exec(db, "PRAGMA query_only=0", NULL, NULL, NULL) : SQLITE_OK;
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK) snprintf(why, why_len, "%s", sqlite3_errmsg(db)); /* before the next statement resets it */
    if (was && sqlite3_exec(db, "PRAGMA query_only=1", NULL, NULL, NULL) != SQLITE_OK && rc == SQLITE_OK) {
        snprintf(why, why_len, "%s", sqlite3_errmsg(db));
        rc = SQLITE_ERROR;
    }
    return rc == SQLITE_OK ? 0 : -1;
}

/* Generic masters of the database: tensors never registered on a module (a
 * param in no audit), never created or replaced as one, that had a gradient
 * at every closed step audit they were a group param in (the fp32 copies of
 * a wrapper tpaudit does not know).  The rule spans every audit but not the
 * audit judged, so it is found once per database (tpa_findings_prepare), into a table of its
 * temporary database (in memory, scratch(); the file stays as it is),
 * and each audit's stale_param query only looks its candidates up there:
 * judging every audit reads each audit's refs once, not every audit's refs
 * once per audit. */
static const char GENERIC_MASTERS_SQL[] =
    "CREATE TEMP TABLE generic_master(k INTEGER);"
    "INSERT INTO temp.generic_master"
    " WITH GM AS (SELECT q.tensor_key k FROM ref q JOIN audit a ON a.id=q.audit_id AND a.label='step' AND a.end_ns IS NOT NULL"
    "  JOIN tensor u ON u.audit_id=q.audit_id AND u.key=q.tensor_key WHERE q.role='group_param'"
    "  GROUP BY q.tensor_key HAVING min(u.has_grad)=1)"
    " SELECT k FROM GM WHERE k NOT IN (SELECT tensor_key FROM ref WHERE role='param')"
    "  AND k NOT IN (SELECT new_key FROM event WHERE kind='param_created')"
    "  AND k NOT IN (SELECT old_key FROM event WHERE kind='param_replaced');"
    "CREATE INDEX temp.generic_master_by_k ON generic_master(k);";

int tpa_findings_prepare(sqlite3 *db, char *why, size_t why_len) {
    return scratch(db, GENERIC_MASTERS_SQL, why, why_len);
}

/* The generic masters only spare stale_param candidates (group params
 * outside the audit's live params); an audit with none needs none. */
int tpa_findings_prepare_audit(sqlite3 *db, int64_t audit, char *why, size_t why_len) {
    sqlite3_stmt *st;
    int candidates = 1;
    if (sqlite3_prepare_v2(db,
                           "SELECT EXISTS (SELECT 1 FROM ref r WHERE r.audit_id=?1 AND r.role='group_param' AND "
                           "r.tensor_key NOT IN (SELECT tensor_key FROM ref WHERE audit_id=?1 AND role='param'))",
                           -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, audit);
        if (sqlite3_step(st) == SQLITE_ROW) candidates = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
    }
    /* the table of GENERIC_MASTERS_SQL, left empty */
    return candidates ? tpa_findings_prepare(db, why, why_len)
                      : scratch(db, "CREATE TEMP TABLE generic_master(k INTEGER)", why, why_len);
}

/* The query that finds each kind, by the kind's name, with the kind's rule
 * in the comment above it.  Each judges audit ?1, where L is its live
 * params (refs of role 'param'), G the optimizers' group params and M the
 * wrappers' map entries (working tensor -> master). */
static const struct {
    const char *kind;
    const char *sql;
} FINDING_SQL[] = {
    /* stale_param: in G, not in L, not the master of any map entry (masters
     * are judged on their working side, below), and not a generic master
     * (temp.generic_master, above), in an audit that saw the model (an audit
     * that saw none calls nothing stale: TPA_AUDIT_SAW_MODEL). */
    {"stale_param", "WITH L AS (SELECT tensor_key k FROM ref WHERE audit_id=?1 AND role='param'),"
                    " M AS (SELECT tensor_key w, peer_key m FROM ref WHERE audit_id=?1 AND role='map_entry')"
                    " SELECT " TENSOR_COLS ", r.holder_kind, r.holder_class, r.path, r.peer_key, t.nbytes FROM ref r"
                    " JOIN tensor t ON t.audit_id=r.audit_id AND t.key=r.tensor_key"
                    " WHERE r.audit_id=?1 AND r.role='group_param' AND r.tensor_key NOT IN L"
                    " AND r.tensor_key NOT IN (SELECT m FROM M)"
                    " AND r.tensor_key NOT IN (SELECT k FROM temp.generic_master)"
                    " AND " TPA_AUDIT_SAW_MODEL("?1") " GROUP BY t.key ORDER BY t.name, t.key"},
    /* orphan_state: a state ref whose param (peer_key) is not in G */
    {"orphan_state",
     "WITH G AS (SELECT tensor_key k FROM ref WHERE audit_id=?1 AND role='group_param')"
     " SELECT " TENSOR_COLS
     ", r.holder_kind, r.holder_class, r.path, r.peer_key, t.nbytes FROM ref r JOIN tensor t ON t.audit_id=r.audit_id AND t.key=r.tensor_key"
     " WHERE r.audit_id=?1 AND r.role='state' AND r.peer_key NOT IN G ORDER BY r.path, t.key"},
    /* state_shape_mismatch: a state tensor whose shape differs from its
     * param's, 0-d and one-element tensors (AdamW's 'step') aside */
    {"state_shape_mismatch",
     "SELECT " TENSOR_COLS
     ", r.holder_kind, r.holder_class, r.path, r.peer_key, t.nbytes FROM ref r JOIN tensor t ON t.audit_id=r.audit_id AND t.key=r.tensor_key"
     " JOIN tensor p ON p.audit_id=r.audit_id AND p.key=r.peer_key"
     " WHERE r.audit_id=?1 AND r.role='state' AND t.shape NOT IN ('[]','[1]') AND t.shape<>p.shape ORDER BY r.path, t.key"},
    /* stale_map_entry: a map entry whose working tensor is not in L, in an
     * audit that saw the model */
    {"stale_map_entry",
     "WITH L AS (SELECT tensor_key k FROM ref WHERE audit_id=?1 AND role='param')"
     " SELECT " TENSOR_COLS ", r.holder_kind, r.holder_class, r.path, r.peer_key, t.nbytes FROM ref r"
     " JOIN tensor t ON t.audit_id=r.audit_id AND t.key=r.tensor_key"
     " WHERE r.audit_id=?1 AND r.role='map_entry' AND r.tensor_key NOT IN L AND " TPA_AUDIT_SAW_MODEL("?1")
     " GROUP BY t.key ORDER BY r.path, t.key"},
    /* untrained_param: in L, requires_grad, not in G, not the working side
     * of an entry whose master is in G, in an audit that saw at least one
     * optimizer; an error when it is a stale finding's live successor */
    {"untrained_param",
     "WITH G AS (SELECT tensor_key k FROM ref WHERE audit_id=?1 AND role='group_param'),"
     " M AS (SELECT tensor_key w, peer_key m FROM ref WHERE audit_id=?1 AND role='map_entry')"
     " SELECT " TENSOR_COLS
     ", r.holder_kind, r.holder_class, r.path, r.peer_key, t.nbytes FROM ref r JOIN tensor t ON t.audit_id=r.audit_id AND t.key=r.tensor_key"
     " WHERE r.audit_id=?1 AND r.role='param' AND t.requires_grad=1 AND r.tensor_key NOT IN G"
     " AND " TPA_AUDIT_SAW_OPTIMIZER("?1")
     " AND NOT EXISTS (SELECT 1 FROM M WHERE M.w=r.tensor_key AND M.m IN G) GROUP BY t.key ORDER BY t.name, t.key"},
};

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Live storage pointers at the audit, sorted: retained bytes never include them.
 * (SELECT DISTINCT already dedups, so they are appended without a search.) */
static void collect_live_storage(sqlite3 *db, int64_t audit, struct counted *live) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT DISTINCT t.storage_ptr FROM ref r JOIN tensor t ON t.audit_id=r.audit_id AND "
                           "t.key=r.tensor_key WHERE r.audit_id=?1 AND r.role='param' AND t.storage_ptr<>0",
                           -1, &st, NULL) != SQLITE_OK)
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

/* Sum of the storage in the rows (storage_ptr, storage_bytes) of `sql`
 * over audit ?1 and tensor ?2, each storage counted once per rank and never
 * when a live param shares it; *rows says whether any row came. */
static int64_t unshared_bytes(sqlite3 *db, const char *sql, int64_t audit, uint64_t key, const struct counted *live,
                              struct counted *counted, int *rows) {
    sqlite3_stmt *st;
    int64_t sum = 0;
    *rows = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return 0;
    sqlite3_bind_int64(st, 1, audit);
    sqlite3_bind_int64(st, 2, (int64_t)key);
    while (sqlite3_step(st) == SQLITE_ROW) {
        int64_t ptr = sqlite3_column_int64(st, 0);
        *rows = 1;
        if (ptr && !is_live_storage(live, ptr) && counted_add(counted, ptr))
            sum = tpa_add_bytes(sum, tpa_sane_bytes(sqlite3_column_int64(st, 1)));
    }
    sqlite3_finalize(st);
    return sum;
}

/* Storage of the optimizer state kept for a stale param (exp_avg, ...). */
static int64_t state_bytes_of(sqlite3 *db, int64_t audit, uint64_t key, const struct counted *live,
                              struct counted *counted) {
    int rows;
    return unshared_bytes(db,
                          "SELECT t.storage_ptr, t.storage_bytes FROM ref r JOIN tensor t ON t.audit_id=r.audit_id"
                          " AND t.key=r.tensor_key WHERE r.audit_id=?1 AND r.role='state' AND r.peer_key=?2",
                          audit, key, live, counted, &rows);
}

/* Bytes a stale working tensor's master keeps: the master's storage and its
 * optimizer state, when no live working tensor shares that master (a flat
 * partition serving live params too is not counted). */
static int64_t master_bytes_of(sqlite3 *db, int64_t audit, uint64_t master, const struct counted *live,
                               struct counted *counted) {
    int rows;
    if (!master) return 0;
    int64_t sum = unshared_bytes(
        db,
        "SELECT t.storage_ptr, t.storage_bytes FROM tensor t WHERE t.audit_id=?1 AND t.key=?2"
        " AND NOT EXISTS (SELECT 1 FROM ref m WHERE m.audit_id=?1 AND m.role='map_entry' AND m.peer_key=?2"
        " AND m.tensor_key IN (SELECT tensor_key FROM ref WHERE audit_id=?1 AND role='param')) LIMIT 1",
        audit, master, live, counted, &rows);
    return rows ? tpa_add_bytes(sum, state_bytes_of(db, audit, master, live, counted)) : 0;
}

static const char *query_of(const tpa_kind_t *k) {
    for (size_t i = 0; i < sizeof FINDING_SQL / sizeof *FINDING_SQL; i++)
        if (!strcmp(FINDING_SQL[i].kind, k->name)) return FINDING_SQL[i].sql;
    return NULL;
}

typedef struct storage_sets {
    struct counted live, counted;
} storage_sets_t;

/* One result row of a kind's query as a finding (columns: TENSOR_COLS,
 * holder kind, class and path, peer key, nbytes). */
static void read_finding(sqlite3 *db, sqlite3_stmt *st, const tpa_kind_t *k, int64_t audit, storage_sets_t *s,
                         tpa_finding_t *f, int64_t *ptr) {
    f->kind = tpa_strdup(k->name);
    f->is_error = k->severity == TPA_SEVERITY_ERROR;
    f->key = (uint64_t)sqlite3_column_int64(st, 0);
    f->name = tpa_column_text(st, 1);
    f->shape = tpa_column_text(st, 2);
    f->local_shape = tpa_column_text(st, 3);
    f->dtype = tpa_column_text(st, 4);
    f->device = tpa_column_text(st, 5);
    f->type = tpa_column_text(st, 6);
    *ptr = sqlite3_column_int64(st, 7);
    f->storage_bytes = tpa_sane_bytes(sqlite3_column_int64(st, 8));
    f->nbytes = tpa_sane_bytes(sqlite3_column_int64(st, 14));
    f->has_grad = sqlite3_column_int(st, 9);
    f->holder_kind = tpa_column_text(st, 10);
    f->holder_class = tpa_column_text(st, 11);
    f->holder_path = tpa_column_text(st, 12);
    int live = *ptr && is_live_storage(&s->live, *ptr);
    f->retained_bytes = (k->retains && *ptr && !live && counted_add(&s->counted, *ptr)) ? f->storage_bytes : 0;
    /* A stale working tensor that is a view into a buffer live params
     * share (a flat bf16 buffer) keeps its own bytes of it. */
    if (k->view_keeps_own && live) f->retained_bytes = f->nbytes;
    if (k->has_successor) tpa_find_successor(db, audit, f);
    if (k->state == TPA_STATE_OWN) f->state_bytes = state_bytes_of(db, audit, f->key, &s->live, &s->counted);
    if (k->state == TPA_STATE_MASTER)
        f->state_bytes = master_bytes_of(db, audit, (uint64_t)sqlite3_column_int64(st, 13), &s->live, &s->counted);
}

/* A finding of a warning-unless-successor kind that is the live successor
 * of a stale finding (one of a kind with successors) is an error. */
static void raise_successors(tpa_report_t *r, size_t first) {
    for (size_t i = first; i < r->n_findings; i++) {
        tpa_finding_t *u = &r->findings[i];
        const tpa_kind_t *uk = tpa_kind_named(u->kind);
        if (!uk || uk->severity != TPA_SEVERITY_WARNING_UNLESS_SUCCESSOR) continue;
        for (size_t j = first; j < r->n_findings; j++) {
            const tpa_kind_t *sk = tpa_kind_named(r->findings[j].kind);
            if (sk && sk->has_successor && r->findings[j].has_successor && r->findings[j].successor_key == u->key)
                u->is_error = 1;
        }
    }
}

int tpa_findings_for_db(sqlite3 *db, int64_t audit, int64_t audit_begin, int64_t rank, int64_t step, int with_details,
                        tpa_report_t *r) {
    storage_sets_t s = {{0}, {0}};
    collect_live_storage(db, audit, &s.live);
    size_t first = r->n_findings;
    int rc = 0;
    for (size_t k = 0; k < tpa_n_kinds && !rc; k++) {
        if (tpa_kinds[k].oom) continue; /* judged once per process (tpa_oom_findings), not at an audit */
        if (tpa_kinds[k].grows) { /* judged across audits, from the ledger */
            rc = tpa_growth_findings(db, &tpa_kinds[k], audit, rank, step, r);
            continue;
        }
        const char *sql = query_of(&tpa_kinds[k]);
        sqlite3_stmt *st;
        if (!sql || sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
            rc = -1;
            break;
        }
        sqlite3_bind_int64(st, 1, audit);
        while (sqlite3_step(st) == SQLITE_ROW) {
            tpa_finding_t f;
            int64_t ptr;
            memset(&f, 0, sizeof f);
            f.rank = rank;
            f.step = step;
            read_finding(db, st, &tpa_kinds[k], audit, &s, &f, &ptr);
            /* storage 0: no allocation is looked for */
            if (with_details)
                tpa_attach_details(r->symbolize, db, audit, audit_begin, with_details == TPA_DETAILS_ALL ? ptr : 0, &f);
            if (tpa_report_add_finding(r, &f)) tpa_finding_free(&f);
        }
        sqlite3_finalize(st);
    }
    raise_successors(r, first);
    for (size_t i = first; with_details && i < r->n_findings; i++)
        r->findings[i].message = tpa_finding_message(&r->findings[i], tpa_kind_named(r->findings[i].kind));
    free(s.live.v);
    free(s.counted.v);
    return rc;
}
