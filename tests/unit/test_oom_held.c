/* test_oom_held.c - the OOM Held list read from a ledger (rules/oom_held.c)
 * where a holder keeps the step's graph: the holder's rows told by module
 * (path "saved for backward in <module>") are the step's activations, beside
 * those no holder keeps, its bytes of no known module with what else the
 * step saved, and no entry names the holder; the same rows of the growing
 * holder's graph stay its own entry, whole, with its rate; a ledger made
 * before rows were told by module (no path) names the holder as it did. */
#include <sqlite3.h>
#include <string.h>

#include "oom_held.h"
#include "tpaudit.h"

#include "../expect.h"

#define MIB (1024 * 1024)

static void row(sqlite3 *db, const char *kind, const char *owner, const char *path, long long bytes) {
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db,
                       "INSERT INTO ledger(audit_id, device, owner_kind, owner, path, bytes)"
                       " VALUES (1, 'cuda:0', ?1, ?2, ?3, ?4)",
                       -1, &st, NULL);
    sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, owner, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, bytes);
    sqlite3_step(st);
    sqlite3_finalize(st);
}

/* A ledger of one audit: the graph `owner` keeps, told by module when `told`. */
static sqlite3 *ledger(const char *owner, int told) {
    sqlite3 *db;
    sqlite3_open(":memory:", &db);
    sqlite3_exec(db, "CREATE TABLE ledger(audit_id INTEGER, device TEXT, owner_kind TEXT, owner TEXT, path TEXT,"
                     " bytes INTEGER)", NULL, NULL, NULL);
    row(db, "measured", "torch.cuda.memory_reserved", NULL, 100 * MIB);
    row(db, "parameter", "transformer.h.0", NULL, 2 * MIB);
    row(db, "autograd", TPAUDIT_SAVED_IN "transformer.h.1.mlp", NULL, 30 * MIB); /* no holder keeps it */
    row(db, "autograd", owner, told ? TPAUDIT_SAVED_IN "transformer.h.0.mlp" : NULL, 30 * MIB);
    row(db, "autograd", owner, told ? TPAUDIT_SAVED_IN "transformer.h.0.attn" : NULL, 10 * MIB);
    row(db, "autograd", owner, told ? TPAUDIT_SAVED_IN "transformer.h.1.attn" : NULL, 10 * MIB);
    row(db, "autograd", owner, NULL, 4 * MIB); /* of no known module */
    return db;
}

static const char *held(sqlite3 *db, const tpa_finding_t *growth, tpa_held_sums_t *s, tpa_oom_text_t *t) {
    memset(t, 0, sizeof *t);
    tpa_oom_held(db, 1, "cuda:0", -1, growth, s, t);
    return t->v;
}

int main(void) {
    tpa_held_sums_t s;
    tpa_oom_text_t t;
    sqlite3 *db = ledger("autograd graph of out", 1);
    EXPECT(!strcmp(held(db, NULL, &s, &t),
                   "activations of transformer.h.0-1 80.0 MiB (40.0 MiB each; mlp 75%) · "
                   "saved for backward by this step 4.0 MiB · parameters 2.0 MiB"));
    EXPECT(s.by_module == 80 * MIB && s.autograd == 84 * MIB);
    EXPECT(!strcmp(s.activations, "transformer.h.0-1 80.0 MiB (40.0 MiB each; mlp 75%)"));
    sqlite3_close(db);

    tpa_finding_t growth;
    memset(&growth, 0, sizeof growth);
    growth.holder_path = "autograd graph of losses";
    growth.growth_per_step = MIB;
    growth.growth_since_step = 5;
    db = ledger("autograd graph of losses", 1);
    EXPECT(!strcmp(held(db, &growth, &s, &t),
                   "autograd graph of losses 54.0 MiB (+1.0 MiB/step since step 5) · "
                   "activations of transformer.h.1 30.0 MiB (mlp 100%) · parameters 2.0 MiB"));
    EXPECT(s.grown == 54 * MIB && s.by_module == 30 * MIB);
    growth.holder_path = "losses"; /* the list that grew: the graph it keeps is named by it too */
    EXPECT(!strncmp(held(db, &growth, &s, &t), "autograd graph of losses 54.0 MiB · activations of transformer.h.1 ",
                    strlen("autograd graph of losses 54.0 MiB · activations of transformer.h.1 ")));
    sqlite3_close(db);

    db = ledger("autograd graph of out", 0); /* made before the rows were told by module */
    EXPECT(!strcmp(held(db, NULL, &s, &t),
                   "autograd graph of out 54.0 MiB · activations of transformer.h.1 30.0 MiB (mlp 100%) · "
                   "parameters 2.0 MiB"));
    sqlite3_close(db);
    return expect_failures != 0;
}
