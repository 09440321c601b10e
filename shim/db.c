/* db.c - the database: the schema and the statements' SQL (both made from
 * records.h), the connection and its prepared statements, creating the
 * file (never overwriting, never following a symlink), reopening it after
 * a failed exec, and removing it again.  Only the writer thread (and the
 * first record's caller, under the writer's start lock) uses it. */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirs.h"
#include "host_guard.h"
#include "shim_internal.h"

/* which bind kinds the insert writes (records.h) */
#define WRITTEN_I64   1
#define WRITTEN_OPT   1
#define WRITTEN_KEY   1
#define WRITTEN_BOOL  1
#define WRITTEN_MAYBE 1
#define WRITTEN_TEXT  1
#define WRITTEN_COPY  1
#define WRITTEN_BLOB  1
#define WRITTEN_NONE  0

struct column {
    const char *name, *decl;
    int inserted;
};
struct table {
    const char *name, *verb;
    const struct column *cols;
    int ncols;
    const char *tail, *index;
};

#define COL_INSERTED(c, d, k, e) {#c, d, WRITTEN_##k},
#define COL_LATER(c, d, k, e)    {#c, d, 0},
#define TABLE_COLS(t, verb, ins, later, tail, idx) \
    static const struct column t##_cols[] = {ins(COL_INSERTED) later(COL_LATER)};
TPA_TABLES(TABLE_COLS)
#define TABLE_ENTRY(t, verb, ins, later, tail, idx) \
    {#t, verb, t##_cols, (int)(sizeof t##_cols / sizeof t##_cols[0]), tail, idx},
static const struct table g_tables[] = {TPA_TABLES(TABLE_ENTRY)};
#define N_TABLES ((int)(sizeof g_tables / sizeof g_tables[0]))
static const struct column g_run_state[] = {TPA_RUN_STATE_COLUMNS(COL_LATER)};

static char g_schema[8192];
static char g_sql[TPA_ST_COUNT][768];
static sqlite3 *g_db;
static sqlite3_stmt *g_st[TPA_ST_COUNT];
static char g_path[4200];
static int g_whole; /* the file has its schema and run row: a failure later leaves it, incomplete */
/* Set while SQLite changes its process-wide lists (open, close): a fork
 * child that sees it set never uses SQLite. */
static _Atomic int g_sqlite_global_busy;

static size_t put(char *out, size_t cap, size_t k, const char *s) {
    size_t n = strlen(s);
    if (k + n >= cap) return k;
    memcpy(out + k, s, n + 1);
    return k + n;
}

static void make_insert(char *out, size_t cap, const struct table *t) {
    size_t k = put(out, cap, 0, t->verb);
    k = put(out, cap, k, " INTO ");
    k = put(out, cap, k, t->name);
    int n = 0;
    for (int i = 0; i < t->ncols; i++)
        if (t->cols[i].inserted) {
            k = put(out, cap, k, n++ ? "," : "(");
            k = put(out, cap, k, t->cols[i].name);
        }
    k = put(out, cap, k, ") VALUES(");
    for (int i = 0; i < n; i++) k = put(out, cap, k, i ? ",?" : "?");
    put(out, cap, k, ")");
}

static size_t make_create(char *out, size_t cap, size_t k, const struct table *t) {
    k = put(out, cap, k, "CREATE TABLE ");
    k = put(out, cap, k, t->name);
    for (int i = 0; i < t->ncols; i++) {
        k = put(out, cap, k, i ? ", " : "(");
        k = put(out, cap, k, t->cols[i].name);
        k = put(out, cap, k, " ");
        k = put(out, cap, k, t->cols[i].decl);
    }
    k = put(out, cap, k, t->tail);
    k = put(out, cap, k, ");");
    return put(out, cap, k, t->index);
}

static void make_run_update(char *out, size_t cap) {
    size_t k = put(out, cap, 0, "UPDATE run SET ");
    for (int i = 0; i < (int)(sizeof g_run_state / sizeof g_run_state[0]); i++) {
        k = put(out, cap, k, i ? "," : "");
        k = put(out, cap, k, g_run_state[i].name);
        k = put(out, cap, k, "=?");
    }
    put(out, cap, k, " WHERE id=1");
}

static void make_sql(void) {
    if (g_schema[0]) return;
    size_t k = put(g_schema, sizeof g_schema, 0, "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;BEGIN;");
    for (int i = 0; i < N_TABLES; i++) {
        k = make_create(g_schema, sizeof g_schema, k, &g_tables[i]);
        make_insert(g_sql[i], sizeof g_sql[i], &g_tables[i]);
    }
    char version[64];
    snprintf(version, sizeof version, "PRAGMA user_version=%d;COMMIT;", TPA_SCHEMA_VERSION);
    put(g_schema, sizeof g_schema, k, version);
    make_run_update(g_sql[TPA_ST_RUN_UPDATE], sizeof g_sql[0]);
    snprintf(g_sql[TPA_ST_AUDIT_END], sizeof g_sql[0], "UPDATE audit SET end_ns=? WHERE id=?");
    snprintf(g_sql[TPA_ST_MODULE_UNLOAD], sizeof g_sql[0], "UPDATE module SET unload_ns=? WHERE id=?");
    snprintf(g_sql[TPA_ST_BEGIN], sizeof g_sql[0], "BEGIN");
    snprintf(g_sql[TPA_ST_COMMIT], sizeof g_sql[0], "COMMIT");
}

sqlite3_stmt *tpa_db_stmt(enum tpa_stmt which) { return g_st[which]; }

int tpa_db_fail(const char *what) {
    char why[4800];
    if (tpa_dbfd_lost())
        snprintf(why, sizeof why, "%s: its file descriptor was closed or replaced by the host (%s)", what, g_path);
    else if (tpa_disk_full()) {
        char disk[128];
        tpa_disk_why(disk, sizeof disk);
        snprintf(why, sizeof why, "%s: %s; %s %s", what, disk, g_path,
                 g_whole ? "is kept, marked incomplete" : "is not made");
        tpa_disk_release(); /* the end (rollback, checkpoint, WAL removed) may use the reserve */
    } else
        snprintf(why, sizeof why, "%s: %s (%s)", what, g_db ? sqlite3_errmsg(g_db) : "no database", g_path);
    tpa_disable(why);
    return -1;
}

int tpa_db_step(sqlite3_stmt *st) {
    /* a transaction starts only while every descriptor is still ours: a lost
     * one fails at once instead of in SQLite's lock retries */
    if (st == g_st[TPA_ST_BEGIN] && tpa_dbfd_check() != 0) return -1;
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

void tpa_db_close(void) {
    for (int i = 0; i < TPA_ST_COUNT; i++) {
        if (g_st[i]) sqlite3_finalize(g_st[i]);
        g_st[i] = NULL;
    }
    atomic_store(&g_sqlite_global_busy, 1);
    if (g_db) sqlite3_close(g_db);
    atomic_store(&g_sqlite_global_busy, 0);
    g_db = NULL;
    g_whole = 0;
}

void tpa_db_rollback(void) {
    if (g_db) sqlite3_exec(g_db, "ROLLBACK", NULL, NULL, NULL);
}

/* Removes the database and the files beside it, each only if it is still
 * the very file this process created (never a planted link or a file put
 * there since). */
void tpa_db_remove_files(void) {
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; i < 4 && g_path[0]; i++) {
        char p[4300];
        uint64_t dev, ino;
        snprintf(p, sizeof p, "%s%s", g_path, suffix[i]);
        if (tpa_dbfd_identity(p, &dev, &ino) == 0 && tpa_dbfd_created(dev, ino)) unlink(p);
    }
}

static void sanitize_host(char *h) {
    for (char *p = h; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '-' || *p == '_'))
            *p = '_';
}

static int disable_with(const char *fmt, const char *arg) {
    char why[4400];
    snprintf(why, sizeof why, fmt, arg, strerror(errno));
    tpa_disable(why);
    return -1;
}

/* Creates tpaudit-<host>-<pid>[-N].db with O_EXCL|O_NOFOLLOW and notes its
 * identity; 0 or -1 (disabled). */
static int create_file(const char *out_dir) {
    if (tpa_make_dirs(out_dir) != 0) return disable_with("cannot create output directory %s: %s", out_dir);
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    sanitize_host(host);
    int fd = -1;
    for (int i = 0; i < 1000 && fd < 0; i++) {
        if (i == 0)
            snprintf(g_path, sizeof g_path, "%s/tpaudit-%s-%d.db", out_dir, host, (int)getpid());
        else
            snprintf(g_path, sizeof g_path, "%s/tpaudit-%s-%d-%d.db", out_dir, host, (int)getpid(), i);
        fd = tpa_open_direct(g_path, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        disable_with("cannot create %s: %s", g_path);
        g_path[0] = 0;
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) == 0) tpa_dbfd_note_created((uint64_t)sb.st_dev, (uint64_t)sb.st_ino);
    close(fd);
    return 0;
}

static int connect_db(const char *what) {
    atomic_store(&g_sqlite_global_busy, 1);
    int rc = sqlite3_open_v2(g_path, &g_db, SQLITE_OPEN_READWRITE, NULL);
    atomic_store(&g_sqlite_global_busy, 0);
    if (rc != SQLITE_OK) return tpa_db_fail(what);
    return 0;
}

static int prepare_all(void) {
    for (int i = 0; i < TPA_ST_COUNT; i++)
        if (sqlite3_prepare_v2(g_db, g_sql[i], -1, &g_st[i], NULL) != SQLITE_OK)
            return tpa_db_fail("cannot prepare statement");
    return 0;
}

/* Creates the file and the schema and prepares the statements (the run
 * row and the module table are the writer's); on failure the caller closes
 * and removes what was made. */
int tpa_db_open(void) {
    if (tpa_dbfd_floor() < 0) {
        tpa_disable("RLIMIT_NOFILE is below "
                    "64, too low to keep a database open beside the host's files");
        return -1;
    }
    if (tpa_dbfd_install() != 0 || tpa_disk_guard_install() != 0) {
        tpa_disable("cannot set up the shim's SQLite");
        return -1;
    }
    if (create_file(tpa_config()->out_dir) != 0) return -1;
    if (connect_db("cannot open database") != 0) return -1;
    make_sql();
    char *err = NULL;
    if (sqlite3_exec(g_db, g_schema, NULL, NULL, &err) != SQLITE_OK) {
        sqlite3_free(err);
        return tpa_db_fail("cannot create schema");
    }
    if (prepare_all() != 0) return -1;
    return 0;
}

/* After a failed exec: the same file again, its end undone. */
int tpa_db_reopen(void) {
    uint64_t dev, ino;
    if (tpa_dbfd_identity(g_path, &dev, &ino) != 0 || !tpa_dbfd_created(dev, ino)) {
        tpa_disable("the database is gone after a failed exec");
        return -1;
    }
    if (connect_db("cannot reopen database") != 0 || prepare_all() != 0) return -1;
    return 0;
}

/* The run row and the module table are in (writer.c): from now on a
 * failure keeps the file, marked incomplete. */
void tpa_db_made_whole(int reopened) {
    if (!reopened) tpa_log(TPA_LOG_INFO, "writing %s", g_path);
    g_whole = 1;
}

/* In a fork child: the parent's connection and statements are forgotten,
 * never closed or freed.  Returns 1 when the fork came while SQLite
 * changed its process-wide lists (the child must not use SQLite). */
int tpa_db_forget_in_child(void) {
    int unsafe = atomic_load(&g_sqlite_global_busy);
    g_db = NULL;
    for (int i = 0; i < TPA_ST_COUNT; i++) g_st[i] = NULL;
    g_path[0] = 0;
    g_whole = 0;
    tpa_dbfd_forget_in_child();
    tpa_disk_forget_in_child();
    return unsafe;
}
