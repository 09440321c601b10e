/* run_status.c - the live status line of `tpaudit run` on a terminal: once a
 * second a thread counts the databases in the output directory (one per
 * process), their closed audits, and the findings at each process's latest
 * closed audit (judged again only when that audit changes), and redraws
 * one line on stderr when the counts change. Nothing at all when stderr is
 * not a terminal. The thread blocks every signal (run_signals.c handles
 * them in the main thread) and is stopped, its line cleared, before the
 * verdict is printed. */
#define _GNU_SOURCE
#include "analyzer.h"
#include "run_parts.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* What is known of one database: its latest closed audit and the findings there. */
typedef struct db_seen {
    char *name;
    int64_t audit, audits;
    size_t findings, errors;
} db_seen_t;

struct tpa_run_status {
    char *dir;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;
    db_seen_t *dbs;
    size_t n_dbs;
    char shown[160]; /* the line on the terminal, "" when none */
};

static int is_db_name(const char *name) {
    size_t n = strlen(name);
    return n > 3 && !strcmp(name + n - 3, ".db");
}

static db_seen_t *seen_of(tpa_run_status_t *s, const char *name) {
    for (size_t i = 0; i < s->n_dbs; i++)
        if (!strcmp(s->dbs[i].name, name)) return &s->dbs[i];
    db_seen_t *grown = realloc(s->dbs, (s->n_dbs + 1) * sizeof *grown);
    if (!grown) return NULL;
    s->dbs = grown;
    db_seen_t *d = &s->dbs[s->n_dbs];
    memset(d, 0, sizeof *d);
    if (!(d->name = strdup(name))) return NULL;
    s->n_dbs++;
    return d;
}

/* The findings of audit `id` (one read transaction), into d. */
static void count_findings(sqlite3 *db, sqlite3_stmt *latest, db_seen_t *d) {
    int64_t id = sqlite3_column_int64(latest, 1), begin = sqlite3_column_int64(latest, 2);
    int64_t rank = sqlite3_column_type(latest, 3) == SQLITE_NULL ? -1 : sqlite3_column_int64(latest, 3);
    tpa_report_t r;
    char why[256];
    memset(&r, 0, sizeof r);
    if (tpa_findings_prepare(db, why, sizeof why) == 0 &&
        tpa_findings_for_db(db, id, begin, rank, sqlite3_column_int64(latest, 4), TPA_DETAILS_NONE, &r) == 0) {
        d->audit = id;
        d->findings = r.n_findings;
        d->errors = 0;
        for (size_t i = 0; i < r.n_findings; i++) d->errors += r.findings[i].is_error != 0;
    }
    tpa_report_free(&r);
}

/* Reads one database's closed audits, and its findings when its latest closed audit is new. */
static void look_at(const char *path, db_seen_t *d) {
    static const char SQL[] = "SELECT (SELECT count(*) FROM audit WHERE end_ns IS NOT NULL), id, begin_ns, rank, step"
                              " FROM audit WHERE end_ns IS NOT NULL ORDER BY id DESC LIMIT 1";
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) goto done;
    sqlite3_busy_timeout(db, 50);
    if (sqlite3_exec(db, "PRAGMA query_only=1; BEGIN", NULL, NULL, NULL) != SQLITE_OK) goto done;
    if (sqlite3_prepare_v2(db, SQL, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        d->audits = sqlite3_column_int64(st, 0);
        if (d->audits > 0 && sqlite3_column_int64(st, 1) != d->audit) count_findings(db, st, d);
    }
    sqlite3_finalize(st);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
done:
    sqlite3_close(db);
}

/* One look at the output directory; writes the status line into line. */
static void survey(tpa_run_status_t *s, char *line, size_t len) {
    DIR *dir = opendir(s->dir);
    struct dirent *e;
    size_t processes = 0, findings = 0, errors = 0;
    int64_t audits = 0;
    while (dir && (e = readdir(dir))) {
        if (!is_db_name(e->d_name)) continue;
        db_seen_t *d = seen_of(s, e->d_name);
        char path[4096];
        if (!d || (size_t)snprintf(path, sizeof path, "%s/%s", s->dir, e->d_name) >= sizeof path) continue;
        look_at(path, d);
        processes++, audits += d->audits, findings += d->findings, errors += d->errors;
    }
    if (dir) closedir(dir);
    snprintf(line, len, "tpaudit: running: %zu process%s, %lld audit%s, %zu finding%s so far (%zu error%s)",
             processes, processes == 1 ? "" : "es", (long long)audits, audits == 1 ? "" : "s", findings,
             findings == 1 ? "" : "s", errors, errors == 1 ? "" : "s");
}

/* Redraws the line when it changed: erase the line, write it, back to
 * column 0 (the program's own output then writes over it). */
static void draw(tpa_run_status_t *s, const char *line) {
    if (!strcmp(s->shown, line)) return;
    snprintf(s->shown, sizeof s->shown, "%s", line);
    fprintf(stderr, "\r\033[K%s\r", line);
    fflush(stderr);
}

static void *status_main(void *arg) {
    tpa_run_status_t *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        pthread_mutex_unlock(&s->lock);
        char line[sizeof s->shown];
        survey(s, line, sizeof line);
        pthread_mutex_lock(&s->lock);
        if (s->stop) break;
        draw(s, line);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        while (!s->stop && pthread_cond_timedwait(&s->wake, &s->lock, &until) != ETIMEDOUT) {}
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

tpa_run_status_t *tpa_run_status_start(const char *dir) {
    if (!isatty(STDERR_FILENO)) return NULL;
    tpa_run_status_t *s = calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(dir))) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the thread starts with every signal blocked */
    int rc = pthread_create(&s->thread, NULL, status_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        free(s->dir);
        free(s);
        return NULL;
    }
    return s;
}

void tpa_run_status_stop(tpa_run_status_t *s) {
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    if (s->shown[0]) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    for (size_t i = 0; i < s->n_dbs; i++) free(s->dbs[i].name);
    free(s->dbs);
    free(s->dir);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->wake);
    free(s);
}
