/* finding_names.c - the names a finding's tensor goes by.  A tensor can have
 * several (GPT-2's tied transformer.wte.weight and lm_head.weight), and a
 * name recorded before a wrapper (DDP, a DeepSpeed engine) took the model in
 * lacks the wrapper's prefix.  Its name becomes the first of its names in
 * the model's own order (named_parameters order, which is the order the
 * modules were registered in), the others its aliases, and every name gets
 * the prefix its live successor's path shows, or the one every live param
 * path starts with when that prefix makes one of its names a live path. */
#include "finding_names.h"
#include "owned_text.h"

#include <stdlib.h>
#include <string.h>

typedef struct names {
    char **v;
    int64_t *pos; /* position of the path among the judged audit's params, -1 when not one */
    size_t n;
} names_t;

static void names_add(names_t *ns, const char *name) {
    if (!name || !*name) return;
    for (size_t i = 0; i < ns->n; i++)
        if (!strcmp(ns->v[i], name)) return;
    char **v = realloc(ns->v, (ns->n + 1) * sizeof *v);
    if (!v) return;
    ns->v = v;
    int64_t *pos = realloc(ns->pos, (ns->n + 1) * sizeof *pos);
    if (!pos) return;
    ns->pos = pos;
    if ((ns->v[ns->n] = tpa_strdup(name)) != NULL) ns->pos[ns->n++] = -1;
}

static void names_free(names_t *ns) {
    for (size_t i = 0; i < ns->n; i++) free(ns->v[i]);
    free(ns->v);
    free(ns->pos);
}

/* sql prepared with ?1 bound to the audit and ?2, ?3 to keys, as far as it
 * has them; NULL when it does not prepare. */
static sqlite3_stmt *prepare_keys(sqlite3 *db, const char *sql, int64_t audit, uint64_t key, uint64_t other) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return NULL;
    int n = sqlite3_bind_parameter_count(st);
    sqlite3_bind_int64(st, 1, audit);
    if (n >= 2) sqlite3_bind_int64(st, 2, (int64_t)key);
    if (n >= 3) sqlite3_bind_int64(st, 3, (int64_t)other);
    return st;
}

/* Every name of tensor ?2 up to audit ?1, in the order found: its paths in
 * the latest audit that had it as a live param (named_parameters order),
 * the paths it was replaced out of (param_replaced events, in time order),
 * and the name the probe gave it at the audit. */
static const char NAMES_SQL[] =
    "WITH K AS (SELECT max(a.id) id FROM audit a WHERE a.id<=?1 AND EXISTS"
    "  (SELECT 1 FROM ref r WHERE r.audit_id=a.id AND r.role='param' AND r.tensor_key=?2)),"
    " N(name, src, ord) AS ("
    "  SELECT r.path, 0, r.rowid FROM ref r JOIN K ON r.audit_id=K.id WHERE r.role='param' AND r.tensor_key=?2"
    "  UNION ALL SELECT name, 1, id FROM event e WHERE kind='param_replaced' AND old_key=?2 AND " TPA_SINCE_CREATED("?2")
    "  UNION ALL SELECT name, 2, 0 FROM tensor WHERE audit_id=?1 AND key=?2)"
    " SELECT name FROM N WHERE name IS NOT NULL GROUP BY name"
    " ORDER BY min(src), min(CASE WHEN src=0 THEN ord END), min(CASE WHEN src=1 THEN ord END)";

static void collect_names(sqlite3 *db, int64_t audit, const tpa_finding_t *f, names_t *ns) {
    sqlite3_stmt *st = prepare_keys(db, NAMES_SQL, audit, f->key, 0);
    if (!st) return;
    while (sqlite3_step(st) == SQLITE_ROW) names_add(ns, (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

static char *copy_prefix(const char *s, size_t len) {
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, s, len);
        d[len] = 0;
    }
    return d;
}

/* The prefix a wrapper put before the model's paths: the successor took
 * over from a replacement recorded under path e, and lives at the judged
 * audit under P + e.  NULL when there is none (malloc'd otherwise). */
static char *wrapper_prefix(sqlite3 *db, int64_t audit, const tpa_finding_t *f) {
    char *prefix = NULL, *event_name = NULL;
    if (!f->has_successor) return NULL;
    sqlite3_stmt *st = prepare_keys(db,
                                    "SELECT name FROM event e WHERE ?1>0 AND kind='param_replaced' AND old_key=?2"
                                    " AND new_key=?3 AND name IS NOT NULL AND " TPA_SINCE_CREATED("?2")
                                    " ORDER BY id LIMIT 1",
                                    audit, f->key, f->successor_key);
    if (!st) return NULL;
    if (sqlite3_step(st) == SQLITE_ROW) event_name = tpa_column_text(st, 0);
    sqlite3_finalize(st);
    st = event_name ? prepare_keys(db,
                                   "SELECT path FROM ref WHERE audit_id=?1 AND role='param' AND tensor_key=?2"
                                   " AND path IS NOT NULL ORDER BY rowid",
                                   audit, f->successor_key, 0)
                    : NULL;
    size_t elen = event_name ? strlen(event_name) : 0;
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        const char *path = (const char *)sqlite3_column_text(st, 0);
        size_t plen = strlen(path);
        if (!strcmp(path, event_name)) { /* recorded with the prefix it has now */
            free(prefix);
            prefix = NULL;
            break;
        }
        if (!prefix && plen > elen + 1 && path[plen - elen - 1] == '.' && !strcmp(path + plen - elen, event_name))
            prefix = copy_prefix(path, plen - elen);
    }
    if (st) sqlite3_finalize(st);
    free(event_name);
    return prefix;
}

/* A wrapper's prefix found from the model as it is at the judged audit:
 * every live param path starts with the same first part P ("module."), and
 * P + one of the names is a live param path (the name was recorded before
 * the wrapper took the model in: ColossalAI's policies replace layers
 * before its ModelWrapper does).  NULL when there is none. */
static char *live_prefix(sqlite3 *db, int64_t audit, const names_t *ns) {
    char *prefix = NULL;
    sqlite3_stmt *st = prepare_keys(db,
                                    "SELECT substr(path, 1, instr(path, '.')) p FROM ref WHERE audit_id=?1"
                                    " AND role='param' AND path IS NOT NULL GROUP BY p LIMIT 2",
                                    audit, 0, 0);
    if (st && sqlite3_step(st) == SQLITE_ROW) {
        prefix = tpa_column_text(st, 0); /* a copy: the next step frees the row's text */
        if (!prefix || !*prefix || sqlite3_step(st) != SQLITE_DONE) {
            free(prefix);
            prefix = NULL;
        }
    }
    if (st) sqlite3_finalize(st);
    st = prefix ? prepare_keys(db, "SELECT 1 FROM ref WHERE audit_id=?1 AND role='param' AND path=?2", audit, 0, 0)
                : NULL;
    size_t plen = prefix ? strlen(prefix) : 0;
    int found = 0;
    for (size_t i = 0; st && i < ns->n && !found; i++) {
        if (!strncmp(ns->v[i], prefix, plen)) continue;
        char *full = malloc(plen + strlen(ns->v[i]) + 1);
        if (!full) break;
        memcpy(full, prefix, plen);
        strcpy(full + plen, ns->v[i]);
        sqlite3_bind_text(st, 2, full, -1, SQLITE_TRANSIENT);
        found = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_reset(st);
        free(full);
    }
    if (st) sqlite3_finalize(st);
    if (!found) {
        free(prefix);
        prefix = NULL;
    }
    return prefix;
}

/* Puts `prefix` before each name that does not start with it. */
static void apply_prefix(names_t *ns, const char *prefix) {
    size_t plen = strlen(prefix);
    names_t out = {NULL, NULL, 0};
    for (size_t i = 0; i < ns->n; i++) {
        if (!strncmp(ns->v[i], prefix, plen)) {
            names_add(&out, ns->v[i]);
            continue;
        }
        char *full = malloc(plen + strlen(ns->v[i]) + 1);
        if (!full) continue;
        memcpy(full, prefix, plen);
        strcpy(full + plen, ns->v[i]);
        names_add(&out, full);
        free(full);
    }
    names_free(ns);
    *ns = out;
}

/* Where each name stands among the judged audit's live param paths (the
 * model's structure now), then the names in that order, stably: the ones
 * that are no live path keep the order they were found in, after them. */
static void order_by_model(sqlite3 *db, int64_t audit, names_t *ns) {
    sqlite3_stmt *st =
        prepare_keys(db, "SELECT min(rowid) FROM ref WHERE audit_id=?1 AND role='param' AND path=?2", audit, 0, 0);
    if (!st) return;
    for (size_t i = 0; i < ns->n; i++) {
        sqlite3_bind_text(st, 2, ns->v[i], -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
            ns->pos[i] = sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    for (size_t i = 1; i < ns->n; i++) { /* insertion sort: a handful of names, stable */
        char *name = ns->v[i];
        int64_t pos = ns->pos[i];
        size_t j = i;
        while (j > 0 && pos >= 0 && (ns->pos[j - 1] < 0 || ns->pos[j - 1] > pos)) {
            ns->v[j] = ns->v[j - 1];
            ns->pos[j] = ns->pos[j - 1];
            j--;
        }
        ns->v[j] = name;
        ns->pos[j] = pos;
    }
}

void tpa_attach_names(sqlite3 *db, int64_t audit, tpa_finding_t *f) {
    names_t ns = {NULL, NULL, 0};
    collect_names(db, audit, f, &ns);
    /* one naming throughout: every name (and every later replacement's) with
     * the wrapper's prefix, when the model is under a wrapper now */
    char *prefix = wrapper_prefix(db, audit, f);
    if (!prefix) prefix = live_prefix(db, audit, &ns);
    if (prefix) {
        apply_prefix(&ns, prefix);
        for (size_t i = 0; i < f->n_later_replacements; i++) {
            names_t one = {NULL, NULL, 0};
            names_add(&one, f->later_replacements[i].name);
            apply_prefix(&one, prefix);
            if (one.n) {
                free(f->later_replacements[i].name);
                f->later_replacements[i].name = one.v[0];
                one.v[0] = NULL;
            }
            names_free(&one);
        }
    }
    free(prefix);
    if (ns.n > 1) order_by_model(db, audit, &ns);
    if (ns.n) {
        free(f->name);
        f->name = ns.v[0];
        ns.v[0] = NULL;
    }
    if (ns.n > 1) {
        f->aliases = malloc((ns.n - 1) * sizeof *f->aliases);
        for (size_t i = 1; f->aliases && i < ns.n; i++) {
            f->aliases[f->n_aliases++] = ns.v[i];
            ns.v[i] = NULL;
        }
    }
    names_free(&ns);
}
