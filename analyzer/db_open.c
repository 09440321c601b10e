/* db_open.c - opens one tpaudit database read-only and checks that it is
 * one: SQLite magic, integrity, schema version and the tables we read. */
#include "analyzer.h"

#include <stdio.h>
#include <string.h>

int tpa_db_open(const char *path, sqlite3 **out, char *why, size_t why_len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(why, why_len, "cannot read %s", path); return -1; }
    char magic[16] = {0};
    size_t n = fread(magic, 1, sizeof magic, f);
    fclose(f);
    if (n < 16 || memcmp(magic, "SQLite format 3", 16) != 0) {
        snprintf(why, why_len, "%s is not a SQLite database", path);
        return -1;
    }
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf(why, why_len, "cannot open %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return -1;
    }
    sqlite3_busy_timeout(db, 5000);
    sqlite3_stmt *st = NULL;
    int version = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version < 0) {
        snprintf(why, why_len, "%s is corrupt or truncated: %s", path, sqlite3_errmsg(db));
        sqlite3_close(db);
        return -1;
    }
    const char *ok = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        ok = (const char *)sqlite3_column_text(st, 0);
    int healthy = ok && strcmp(ok, "ok") == 0;
    sqlite3_finalize(st);
    if (!healthy) {
        snprintf(why, why_len, "%s is corrupt or truncated (integrity check failed)", path);
        sqlite3_close(db);
        return -1;
    }
    if (version > TPA_SCHEMA_VERSION) {
        snprintf(why, why_len, "%s has schema version %d, newer than this tpaudit reads (%d)", path,
                 version, TPA_SCHEMA_VERSION);
        sqlite3_close(db);
        return -1;
    }
    int tables = 0;
    if (sqlite3_prepare_v2(db,
                           "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
                           "('run','audit','tensor','ref','event','alloc')",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        tables = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (version != TPA_SCHEMA_VERSION || tables != 6) {
        snprintf(why, why_len, "%s is a SQLite database but not a tpaudit database", path);
        sqlite3_close(db);
        return -1;
    }
    *out = db;
    return 0;
}
