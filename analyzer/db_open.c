/* db_open.c - opens one tpaudit database for reading without touching it
 * and checks that it is one: a regular file, SQLite magic, integrity,
 * schema version and the tables we read.
 *
 * The input is never written, locked or given -shm/-wal files:
 * - a database with no pending journal is opened through a file: URI with
 *   mode=ro&immutable=1 (no locks, no side files, so a read-only directory
 *   or another process's lock does not matter);
 * - a database with a non-empty -wal or -journal beside it (a run still
 *   being written, or one that was killed) is copied, with that file, into
 *   a private temporary directory (tpaudit-read-PID-XXXXXX) and read there,
 *   so the committed transactions in its WAL are seen and the copy is one
 *   snapshot.  The directory goes in the first of $TMPDIR, /tmp, /var/tmp,
 *   /dev/shm and the database's own directory that takes the copy (one
 *   that is missing or full is passed over; when none takes it, the error
 *   names each one's cause).  Its files are removed as soon as the read
 *   transaction holds them open; one left by an analyzer killed before that
 *   is removed by the next one (tpa_db_clean_stale: its PID is gone).
 * A database the shim is still creating (a tpaudit-*.db file that is empty,
 * has no tables yet, or no run row yet) is "starting", not an error
 * (tpa_db_open returns 1, load.c reads it as a run that cannot be judged yet).
 * Everything is read inside one read transaction, with query_only set;
 * what the analysis works out once per database goes into the connection's
 * temporary database, kept in memory (rules/findings.c lifts query_only
 * for those statements alone). */
#include "analyzer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Opens `path` only if it is a regular file (never blocks on a FIFO or
 * opens a device); returns the fd, or -1 with why. */
static int open_regular(const char *path, struct stat *sb, char *why, size_t why_len) {
    if (stat(path, sb) != 0) {
        snprintf(why, why_len, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(sb->st_mode)) {
        snprintf(why, why_len, "%s is not a regular file", path);
        return -1;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_len, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode)) {
        snprintf(why, why_len, "%s is not a regular file", path);
        close(fd);
        return -1;
    }
    return fd;
}

/* A side file (-wal, -journal) that holds something to apply. */
static int has_pending(const char *path, const char *suffix) {
    char side[4200];
    struct stat sb;
    snprintf(side, sizeof side, "%s%s", path, suffix);
    return lstat(side, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0;
}

/* Copies a regular file; one that is absent or not a regular file is skipped. */
static int copy_file(const char *from, const char *to) {
    struct stat sb;
    char why[64];
    if (lstat(from, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    int in = open_regular(from, &sb, why, sizeof why);
    if (in < 0) return -1;
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
        close(in);
        return -1;
    }
    char buf[1 << 16];
    ssize_t n;
    int rc = 0;
    while ((n = read(in, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            rc = -1;
            break;
        }
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0) {
                if (errno == EINTR) continue;
                rc = -1;
                break;
            }
            done += w;
        }
        if (rc) break;
    }
    close(in);
    if (close(out) != 0) rc = -1;
    return rc;
}

static void remove_snapshot_files(const char *dir) {
    static const char *NAMES[] = {"db", "db-wal", "db-journal", "db-shm"};
    char p[4200];
    if (strlen(dir) > 4096) return;
    for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, NAMES[i]);
        unlink(p);
    }
}

static void remove_snapshot_dir(const char *dir) {
    remove_snapshot_files(dir);
    rmdir(dir);
}

#define SNAPSHOT_PREFIX "tpaudit-read-"

/* The directories a private copy may go in, in order (the database's own
 * directory last, when db_dir is given); returns how many. */
static size_t copy_dirs(const char *db_dir, const char **dirs) {
    const char *tmp = getenv("TMPDIR");
    size_t n = 0;
    if (tmp && *tmp) dirs[n++] = tmp;
    static const char *FIXED[] = {"/tmp", "/var/tmp", "/dev/shm"};
    for (size_t i = 0; i < sizeof FIXED / sizeof *FIXED; i++)
        if (!(tmp && !strcmp(tmp, FIXED[i]))) dirs[n++] = FIXED[i];
    if (db_dir) dirs[n++] = db_dir;
    return n;
}

#define MAX_COPY_DIRS 5

static void clean_stale_in(const char *base) {
    DIR *d = opendir(base);
    if (!d) return;
    struct dirent *e;
    size_t plen = strlen(SNAPSHOT_PREFIX);
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, SNAPSHOT_PREFIX, plen)) continue;
        char *end;
        long pid = strtol(e->d_name + plen, &end, 10);
        if (end == e->d_name + plen || *end != '-' || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* its analyzer still runs (or is not ours) */
        char dir[4200];
        struct stat sb;
        snprintf(dir, sizeof dir, "%s/%s", base, e->d_name);
        if (lstat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == geteuid()) remove_snapshot_dir(dir);
    }
    closedir(d);
}

void tpa_db_clean_stale(void) {
    const char *dirs[MAX_COPY_DIRS];
    size_t n = copy_dirs(NULL, dirs);
    for (size_t i = 0; i < n; i++) clean_stale_in(dirs[i]);
}

static int same_file_state(const struct stat *a, const struct stat *b) {
    return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Copies the database and its pending side files into a new private
 * directory under `base`; retries while a writer changes them under the
 * copy.  NULL with *err the cause (the errno of the step that failed). */
static char *make_snapshot(const char *path, const char *base, int *err) {
    char dir[4096];
    *err = ENAMETOOLONG;
    if ((size_t)snprintf(dir, sizeof dir, "%s/" SNAPSHOT_PREFIX "%ld-XXXXXX", base, (long)getpid()) >= sizeof dir ||
        strlen(path) > 4096)
        return NULL;
    if (!mkdtemp(dir)) {
        *err = errno;
        return NULL;
    }
    static const char *SIDES[] = {"-wal", "-journal"};
    for (int attempt = 0; attempt < 5; attempt++) {
        remove_snapshot_files(dir);
        struct stat before[3], after[3];
        char from[4200], to[4200];
        int ok = 1;
        for (int i = 0; i < 3; i++) {
            snprintf(from, sizeof from, "%s%s", path, i ? SIDES[i - 1] : "");
            if (stat(from, &before[i]) != 0) memset(&before[i], 0, sizeof before[i]);
        }
        /* The WAL first: a checkpoint running meanwhile only moves pages
         * the copied WAL still holds into the main file. */
        for (int i = 2; i >= 0 && ok; i--) {
            snprintf(from, sizeof from, "%s%s", path, i ? SIDES[i - 1] : "");
            snprintf(to, sizeof to, "%s/db%s", dir, i ? SIDES[i - 1] : "");
            if (copy_file(from, to) != 0) {
                *err = errno; /* before the clean-up below sets its own */
                remove_snapshot_dir(dir);
                return NULL;
            }
        }
        for (int i = 0; i < 3 && ok; i++) {
            snprintf(from, sizeof from, "%s%s", path, i ? SIDES[i - 1] : "");
            if (stat(from, &after[i]) != 0) memset(&after[i], 0, sizeof after[i]);
            if (!same_file_state(&before[i], &after[i]) && attempt < 4) ok = 0;
        }
        if (ok) return tpa_strdup(dir);
    }
    *err = EAGAIN;
    remove_snapshot_dir(dir);
    return NULL;
}

/* A private copy in the first directory that takes it; NULL with why
 * naming each directory tried and its cause. */
static char *snapshot_somewhere(const char *path, char *why, size_t why_len) {
    char db_dir[4200];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(db_dir, sizeof db_dir, ".");
    else
        snprintf(db_dir, sizeof db_dir, "%.*s", (int)(slash == path ? 1 : slash - path), path);
    const char *dirs[MAX_COPY_DIRS];
    size_t n = copy_dirs(db_dir, dirs), used = 0;
    used += (size_t)snprintf(why, why_len, "cannot take a private copy of %s (it has a pending journal):", path);
    for (size_t i = 0; i < n; i++) {
        int err = 0;
        char *snap = make_snapshot(path, dirs[i], &err);
        if (snap) return snap;
        if (used < why_len)
            used += (size_t)snprintf(why + used, why_len - used, "%s %s: %s", i ? ";" : "", dirs[i], strerror(err));
    }
    return NULL;
}

/* "file:" URI of a path, with the characters a URI reserves escaped. */
static void file_uri(const char *path, const char *query, char *uri, size_t len) {
    size_t n = (size_t)snprintf(uri, len, "file:%s", path[0] == '/' ? "//" : "");
    for (const unsigned char *p = (const unsigned char *)path; *p && n + 4 < len; p++) {
        if (*p <= 0x20 || *p >= 0x7f || *p == '%' || *p == '?' || *p == '#')
            n += (size_t)snprintf(uri + n, len - n, "%%%02X", *p);
        else
            uri[n++] = (char)*p;
    }
    snprintf(uri + n, len - n, "?%s", query);
}

void tpa_db_close(sqlite3 *db) {
    if (!db) return;
    tpa_symbolize_forget(db);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
}

static int fail(sqlite3 *db, int code) {
    tpa_db_close(db);
    return code;
}

int tpa_db_named_by_shim(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    return !strncmp(base, "tpaudit-", 8) && len > 11 && !strcmp(base + len - 3, ".db");
}

/* `path`, a database the shim is still creating: 1 with why. */
static int starting(const char *path, const char *what, char *why, size_t why_len) {
    snprintf(why, why_len, "%s is starting: %s", path, what);
    return 1;
}

/* The path is a regular file that starts with SQLite's magic; 0, -1, or 1
 * when it is a database the shim has not written its first page to yet. */
static int check_magic(const char *path, char *why, size_t why_len) {
    struct stat sb;
    int fd = open_regular(path, &sb, why, why_len);
    if (fd < 0) return -1;
    char magic[16] = {0};
    ssize_t n = read(fd, magic, sizeof magic);
    close(fd);
    if (n < 16 && tpa_db_named_by_shim(path) && !has_pending(path, "-wal"))
        return starting(path, "its process is creating it", why, why_len);
    if (n < 16 || memcmp(magic, "SQLite format 3", 16) != 0) {
        snprintf(why, why_len, "%s is not a SQLite database", path);
        return -1;
    }
    return 0;
}

/* Opens `path` read-only and immutable, or a private copy of it when it
 * has a pending journal (its directory in *snap, to remove once the
 * copy is held open); 0, or -1 with why. */
static int open_sqlite(const char *path, sqlite3 **out, char **snap_out, char *why, size_t why_len) {
    char *snap = NULL;
    if (has_pending(path, "-wal") || has_pending(path, "-journal")) {
        snap = snapshot_somewhere(path, why, why_len);
        if (!snap) return -1;
    }
    char uri[8600], file[4300];
    if (snap) snprintf(file, sizeof file, "%s/db", snap);
    file_uri(snap ? file : path, snap ? "mode=rw" : "mode=ro&immutable=1", uri, sizeof uri);
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(
        uri, &db, (snap ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    *snap_out = snap;
    if (rc != SQLITE_OK) {
        snprintf(why, why_len, "cannot open %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        return fail(db, -1);
    }
    sqlite3_busy_timeout(db, 0);
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    sqlite3_exec(db, "PRAGMA temp_store=MEMORY", NULL, NULL, NULL);
    sqlite3_exec(db, "PRAGMA query_only=1", NULL, NULL, NULL);
    *out = db;
    return 0;
}

/* Inside one read transaction: the version reads, the file is healthy,
 * not newer than this tpaudit, and holds the tables the analyzer reads
 * (1 when it holds none yet and the shim names it: starting). */
static int check_contents(sqlite3 *db, const char *path, char *why, size_t why_len) {
    sqlite3_stmt *st = NULL;
    int version = -1, tables = 0;
    int rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
    /* One statement reads the schema (a corrupt one fails here), the tables we read and the version. */
    if (rc == SQLITE_OK &&
        (rc = sqlite3_prepare_v2(db,
                                 "SELECT (SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN "
                                 "('run','audit','tensor','ref','event','alloc')), * FROM pragma_user_version",
                                 -1, &st, NULL)) == SQLITE_OK &&
        (rc = sqlite3_step(st)) == SQLITE_ROW) {
        tables = sqlite3_column_int(st, 0);
        version = sqlite3_column_int(st, 1);
    }
    sqlite3_finalize(st);
    if (version < 0) {
        if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
            snprintf(why, why_len, "%s is locked by another process: %s", path, sqlite3_errmsg(db));
        else
            snprintf(why, why_len, "%s is corrupt or truncated: %s", path, sqlite3_errmsg(db));
        return -1;
    }
    const char *ok = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        ok = (const char *)sqlite3_column_text(st, 0);
    int healthy = ok && strcmp(ok, "ok") == 0;
    sqlite3_finalize(st);
    if (!healthy) {
        snprintf(why, why_len, "%s is corrupt or truncated (integrity check failed)", path);
        return -1;
    }
    if (version > TPA_SCHEMA_VERSION) {
        snprintf(why, why_len, "%s has schema version %d, newer than this tpaudit reads (%d)", path, version,
                 TPA_SCHEMA_VERSION);
        return -1;
    }
    if (version == 0 && tables == 0 && tpa_db_named_by_shim(path))
        return starting(path, "its process is creating its tables", why, why_len);
    if (version < 1 || version > TPA_SCHEMA_VERSION || tables != 6) {
        snprintf(why, why_len, "%s is a SQLite database but not a tpaudit database", path);
        return -1;
    }
    return 0;
}

int tpa_db_open(const char *path, sqlite3 **out, char *why, size_t why_len) {
    *out = NULL;
    sqlite3 *db = NULL;
    char *snap = NULL;
    int rc = check_magic(path, why, why_len);
    if (!rc) rc = open_sqlite(path, &db, &snap, why, why_len);
    if (!rc) rc = check_contents(db, path, why, why_len);
    /* The read transaction holds the copy (and its WAL) open: its names can go. */
    if (snap) remove_snapshot_dir(snap);
    free(snap);
    if (rc) return fail(db, rc);
    *out = db;
    return 0;
}
