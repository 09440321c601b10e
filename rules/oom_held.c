/* oom_held.c - the "Held:" list of an out-of-memory finding: who held the
 * device at the oom audit, read from its ledger (table ledger), largest
 * first, so the holder that filled the device leads the line. */
#include "oom_held.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "oom_saved.h"
#include "tpaudit.h"

/* Named holders listed on their own, the largest; the rest are summed. */
#define TPA_OOM_NAMED_LISTED 4
/* Module groups named in the "activations of" entry, the largest. */
#define TPA_OOM_SAVED_MODULES 3
/* Entries of one Held list at most: the named ones and the sums. */
#define TPA_OOM_HELD_ENTRIES (TPA_OOM_NAMED_LISTED + 7)

/* One entry of the list: its words, its bytes, whether it names a holder. */
typedef struct held_entry {
    char words[512];
    int64_t bytes;
    int named;
} held_entry_t;

static int by_bytes(const void *pa, const void *pb) {
    const held_entry_t *a = pa, *b = pb;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return b->named - a->named;
}

/* The named entry of holder `owner` (a held object or its graph), with the
 * growing holder's rate and line. */
static void named_entry(held_entry_t *e, const char *owner, int64_t bytes,
                        const tpa_finding_t *growth, tpa_held_sums_t *s) {
    char b[32], rate[32];
    tpa_oom_text_t t = {{0}, 0};
    tpa_oom_add(&t, "%s %s", owner, tpa_oom_bytes(bytes, b, sizeof b));
    if (growth && growth->holder_path && !strcmp(growth->holder_path, owner)) {
        const tpa_frame_t *at = tpa_first_user_frame(&growth->created_at);
        s->grown = bytes;
        tpa_oom_add(&t, " (+%s/step since step %lld", tpa_oom_bytes(growth->growth_per_step, rate, sizeof rate),
                    (long long)growth->growth_since_step);
        if (at && at->file) tpa_oom_add(&t, ", made at %s:%ld", tpa_base_name(at->file), at->line);
        tpa_oom_add(&t, ")");
    }
    size_t len = t.used < sizeof e->words - 1 ? t.used : sizeof e->words - 1;
    memcpy(e->words, t.v, len);
    e->words[len] = 0;
    e->bytes = bytes;
    e->named = 1;
}

/* Adds `bytes` of owner kind `kind` to its sum; 1 when the row names a
 * holder: a Python object, the autograd graph one keeps, or a library's
 * allocation in PyTorch's allocator (the cuBLAS workspaces). */
static int add_to_sums(tpa_held_sums_t *s, const char *kind, const char *owner, int64_t bytes) {
    struct {
        const char *kind;
        int64_t *sum;
    } sums[] = {{"measured", &s->measured},   {"parameter", &s->parameter}, {"gradient", &s->gradient},
                {"optimizer_state", &s->optimizer_state}, {"stale", &s->stale}, {"autograd", &s->autograd},
                {"allocator_cache", &s->cache}, {"unattributed", &s->unattributed}, {"held", &s->held}};
    for (size_t i = 0; i < sizeof sums / sizeof *sums; i++)
        if (!strcmp(kind, sums[i].kind)) *sums[i].sum = tpa_add_bytes(*sums[i].sum, bytes);
    return owner && (!strcmp(kind, "held") || !strcmp(kind, "autograd") || !strcmp(kind, "library"));
}

/* The step's activations by module into `s` (their bytes, the words of the
 * largest group, for the cause) and into entry `e`, the largest few:
 * "activations of transformer.h.0-11 2.6 GiB (220.0 MiB each; mlp 60%),
 * ..."; 1 when there are any. */
static int activations(tpa_saved_modules_t *by_module, tpa_held_sums_t *s, held_entry_t *e) {
    if (!by_module || !by_module->n) return 0;
    tpa_oom_text_t list = {{0}, 0}, top = {{0}, 0};
    s->by_module = by_module->bytes;
    tpa_saved_text(by_module, TPA_OOM_SAVED_MODULES, &list); /* sorts them, the largest first */
    tpa_saved_group_text(&by_module->g[0], &top);
    snprintf(s->activations, sizeof s->activations, "%.*s", (int)sizeof s->activations - 1, top.v);
    snprintf(e->words, sizeof e->words, "activations of %.*s", (int)sizeof e->words - 16, list.v);
    e->bytes = s->by_module;
    e->named = 0;
    return 1;
}

/* Owner `owner` is the growing holder, or the autograd graph it keeps. */
static int is_grown(const tpa_finding_t *growth, const char *owner) {
    const size_t prefix = strlen(TPAUDIT_GRAPH_OF);
    if (!growth || !growth->holder_path || !owner) return 0;
    if (!strcmp(growth->holder_path, owner)) return 1;
    return !strncmp(owner, TPAUDIT_GRAPH_OF, prefix) && !strcmp(owner + prefix, growth->holder_path);
}

/* `sql` prepared with ?1 bound to audit `audit_id`, ?2 to device `dev`
 * ("" any) and ?3 to the words of a row told by module; NULL on failure. */
static sqlite3_stmt *prepare_at(sqlite3 *db, const char *sql, int64_t audit_id, const char *dev) {
    sqlite3_stmt *st;
    if (audit_id <= 0 || sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return NULL;
    sqlite3_bind_int64(st, 1, audit_id);
    sqlite3_bind_text(st, 2, dev, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, TPAUDIT_SAVED_IN, -1, SQLITE_STATIC);
    return st;
}

/* Into `by_module`, the saved bytes of the graphs holders keep that the
 * ledger tells by module (their rows' path "saved for backward in
 * <module>"), but those of the growing holder's graph, named by it. */
static void held_graphs_by_module(sqlite3 *db, int64_t audit_id, const char *dev, const tpa_finding_t *growth,
                                  tpa_saved_modules_t *by_module) {
    sqlite3_stmt *st = by_module ? prepare_at(db,
                                              "SELECT owner, substr(path, length(?3) + 1), sum(bytes) FROM ledger"
                                              " WHERE audit_id=?1 AND (?2='' OR device=?2) AND owner_kind='autograd'"
                                              " AND substr(path, 1, length(?3))=?3 GROUP BY owner, path"
                                              " ORDER BY sum(bytes) DESC, owner, path",
                                              audit_id, dev)
                                 : NULL;
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        const char *owner = (const char *)sqlite3_column_text(st, 0);
        const char *module = (const char *)sqlite3_column_text(st, 1);
        if (module && !is_grown(growth, owner))
            tpa_saved_add(by_module, module, tpa_sane_bytes(sqlite3_column_int64(st, 2)));
    }
    sqlite3_finalize(st);
}

/* After the n entries of e, the sums of `s` with no holder named: optimizer
 * state, parameters, gradients, stale tensors, and what else the step saved
 * for backward (the autograd bytes no named entry and no module took, with
 * those unattributed); the count of entries then. */
static size_t add_sum_entries(const tpa_held_sums_t *s, int64_t named_autograd, held_entry_t *e, size_t n) {
    char b[32];
    struct {
        const char *words;
        int64_t bytes;
    } parts[] = {{"optimizer state", s->optimizer_state},
                 {"parameters", s->parameter},
                 {"gradients", s->gradient},
                 {"stale tensors", s->stale},
                 {"saved for backward by this step",
                  tpa_add_bytes(s->autograd - named_autograd - s->by_module, s->unattributed)}};
    for (size_t i = 0; i < sizeof parts / sizeof *parts && n < TPA_OOM_HELD_ENTRIES; i++)
        if (parts[i].bytes > 0) {
            snprintf(e[n].words, sizeof e[n].words, "%s %s", parts[i].words, tpa_oom_bytes(parts[i].bytes, b, sizeof b));
            e[n].bytes = parts[i].bytes;
            e[n++].named = 0;
        }
    return n;
}

void tpa_oom_held(sqlite3 *db, int64_t audit_id, const char *dev, int64_t largest_free, const tpa_finding_t *growth,
                  tpa_held_sums_t *s, tpa_oom_text_t *t) {
    char b[32];
    memset(s, 0, sizeof *s);
    s->grown = -1;
    /* each owner's bytes, and those of its rows told by module (a held graph's) */
    sqlite3_stmt *st = prepare_at(db,
                                  "SELECT owner_kind, owner, sum(bytes), sum(CASE WHEN owner_kind='autograd'"
                                  " AND substr(path, 1, length(?3))=?3 THEN bytes ELSE 0 END) FROM ledger"
                                  " WHERE audit_id=?1 AND (?2='' OR device=?2)"
                                  " GROUP BY owner_kind, owner ORDER BY sum(bytes) DESC, owner",
                                  audit_id, dev);
    if (!st) return;
    held_entry_t e[TPA_OOM_HELD_ENTRIES];
    size_t n = 0;
    int64_t named_autograd = 0;
    tpa_saved_modules_t *by_module = calloc(1, sizeof *by_module); /* the step's saved tensors by module */
    const size_t prefix = strlen(TPAUDIT_SAVED_IN);
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *kind = (const char *)sqlite3_column_text(st, 0), *owner = (const char *)sqlite3_column_text(st, 1);
        int64_t bytes = tpa_sane_bytes(sqlite3_column_int64(st, 2)), by_modules = sqlite3_column_int64(st, 3);
        s->has_ledger = 1;
        if (!kind || !add_to_sums(s, kind, owner, bytes)) continue;
        if (!strcmp(kind, "autograd") && !strncmp(owner, TPAUDIT_SAVED_IN, prefix)) {
            if (by_module) tpa_saved_add(by_module, owner + prefix, bytes);
            continue;
        }
        /* a holder's graph told by module is the step's activations, unless it grew */
        if (by_modules > 0 && by_module && !is_grown(growth, owner)) continue;
        if (n >= TPA_OOM_NAMED_LISTED) continue;
        if (!strcmp(kind, "autograd")) named_autograd = tpa_add_bytes(named_autograd, bytes);
        named_entry(&e[n++], owner, bytes, growth, s);
    }
    sqlite3_finalize(st);
    held_graphs_by_module(db, audit_id, dev, growth, by_module);
    n += (size_t)activations(by_module, s, &e[n]);
    free(by_module);
    n = add_sum_entries(s, named_autograd, e, n);
    qsort(e, n, sizeof *e, by_bytes);
    for (size_t i = 0; i < n; i++) tpa_oom_add(t, "%s%s", t->used ? " · " : "", e[i].words);
    if (s->cache > 0 || largest_free >= 0) {
        tpa_oom_add(t, "%sallocator cache %s", t->used ? " · " : "", tpa_oom_bytes(s->cache, b, sizeof b));
        if (largest_free >= 0) tpa_oom_add(t, " (largest free block %s)", tpa_oom_bytes(largest_free, b, sizeof b));
    }
}
