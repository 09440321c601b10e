/* verdict.c - a verdict before the run ends.  After an audit's rows are
 * committed, the writer thread judges it with the analyzer's own finding
 * queries (verdict_judge.c): it prints one `tpaudit:` line on stderr at the
 * first audit with an error finding, and hands the findings to a caller
 * waiting in tpaudit_v1_audit_verdict (api.c).  Audits are judged unasked
 * until one has an error; after that only when a caller asks.
 * TPAUDIT_FAIL_FAST (set by `tpaudit run --fail-fast`) makes the verdict of
 * an audit with an error ask its caller to stop; the shim never ends its
 * host itself. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim_internal.h"
#include "verdict.h"

#define TPA_VERDICT_WAIT_MS 30000

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Atomic int64_t g_closed;   /* the latest audit whose end is queued */
static _Atomic uint64_t g_end_pos; /* the ring's head once that end was queued */
static _Atomic int64_t g_wanted;   /* the latest audit a caller waits for */
static _Atomic int64_t g_judged;   /* the latest audit judged (or given up on) */
static _Atomic int g_said;         /* the line was printed */
static _Atomic int g_fail_fast;
static struct tpa_verdict_result g_result; /* the latest judged, under g_mu */
static int g_result_rc;
static struct tpa_verdict_result g_scratch; /* the writer's */

/* A fork or clone child judges its own audits in its own database. */
void tpa_verdict_reset_in_child(void) {
    pthread_mutex_init(&g_mu, NULL);
    pthread_cond_init(&g_cv, NULL);
    atomic_store(&g_closed, 0);
    atomic_store(&g_end_pos, 0);
    atomic_store(&g_wanted, 0);
    atomic_store(&g_judged, 0);
    atomic_store(&g_said, 0);
}

static void init_once(void) {
    const char *v = getenv("TPAUDIT_FAIL_FAST");
    atomic_store(&g_fail_fast, v && *v && strcmp(v, "0") != 0);
}

static void raise_to(_Atomic int64_t *slot, int64_t v) {
    int64_t cur = atomic_load(slot);
    while (cur < v && !atomic_compare_exchange_weak(slot, &cur, v)) {}
}

void tpa_verdict_note_end(int64_t audit_id) {
    pthread_once(&g_once, init_once);
    atomic_store(&g_end_pos, tpa_ring_head());
    raise_to(&g_closed, audit_id);
}

/* 1 when the audit's end is committed, 0 when not yet, -1 when it never
 * will be (the ring went past its end record without it). */
static int end_committed(sqlite3 *db, int64_t audit) {
    sqlite3_stmt *st;
    int done = 0;
    if (sqlite3_prepare_v2(db, "SELECT end_ns IS NOT NULL FROM audit WHERE id=?1", -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int64(st, 1, audit);
    if (sqlite3_step(st) == SQLITE_ROW) done = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (done) return 1;
    return tpa_ring_tail() >= atomic_load(&g_end_pos) ? -1 : 0;
}

/* The one line (through tpa_log, the shim's one way to stderr). */
static void say(const char *line) {
    tpa_log(TPA_LOG_WARN, "%s%s", line,
            atomic_load(&g_fail_fast) ? "; stopping the run (fail-fast, exit status 4)" : "");
}

void tpa_verdict_writer_turn(void) {
    int64_t judged = atomic_load(&g_judged), wanted = atomic_load(&g_wanted), closed = atomic_load(&g_closed);
    int64_t target = wanted > judged ? wanted : (!atomic_load(&g_said) && closed > judged) ? closed : 0;
    if (!target || atomic_load(&tpa_state) != TPA_RUNNING) return;
    sqlite3_stmt *begin = tpa_db_stmt(TPA_ST_BEGIN);
    sqlite3 *db = begin ? sqlite3_db_handle(begin) : NULL;
    int ready = db ? end_committed(db, target) : -1;
    if (ready == 0) return;
    int64_t t0 = tpa_now_ns();
    int rc = ready > 0 ? tpa_verdict_judge(db, target, &g_scratch) : -1;
    tpa_log(TPA_LOG_DEBUG, "verdict: audit %lld judged in %.2f ms (%s)", (long long)target,
            (double)(tpa_now_ns() - t0) / 1e6, rc ? "failed" : "done");
    if (rc == 0 && g_scratch.line[0] && !atomic_exchange(&g_said, 1)) say(g_scratch.line);
    pthread_mutex_lock(&g_mu);
    g_result.n_findings = g_scratch.n_findings;
    g_result.n_errors = g_scratch.n_errors;
    g_result.blind = g_scratch.blind;
    g_result.retained_bytes = g_scratch.retained_bytes;
    g_result.text_len = rc == 0 ? g_scratch.text_len : 0;
    memcpy(g_result.text, g_scratch.text, g_result.text_len);
    g_result.text[g_result.text_len] = 0;
    g_result.audit_id = target;
    g_result_rc = rc;
    raise_to(&g_judged, target);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

/* Waits until audit `audit` is judged or `ms` pass; 0 when judged. */
static int wait_judged(int64_t audit, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (int64_t)(ms % 1000) * 1000000;
    ts.tv_sec += ms / 1000 + (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    int rc = 0;
    while (atomic_load(&g_judged) < audit && atomic_load(&tpa_state) == TPA_RUNNING && rc == 0)
        rc = pthread_cond_timedwait(&g_cv, &g_mu, &ts);
    if (atomic_load(&g_judged) >= audit) return 0;
    return atomic_load(&tpa_state) == TPA_RUNNING ? TPAUDIT_ETIMEOUT : TPAUDIT_EDISABLED;
}

/* The whole lines of the findings text that fit in cap - 1 bytes. */
static void copy_lines(char *dst, size_t cap, const char *text, size_t len) {
    if (!dst || !cap) return;
    size_t n = len < cap - 1 ? len : cap - 1;
    while (n > 0 && n < len && text[n - 1] != '\n') n--;
    memcpy(dst, text, n);
    dst[n] = 0;
}

int tpa_verdict_ask(const struct tpaudit_verdict *v) {
    int64_t audit = v->audit_id;
    if (audit <= 0 || audit > atomic_load(&g_closed)) return TPAUDIT_EINVAL;
    raise_to(&g_wanted, audit);
    return v->timeout_ms > 0 ? v->timeout_ms : TPA_VERDICT_WAIT_MS;
}

int tpa_verdict_wait(struct tpaudit_verdict *v, int ms) {
    int64_t audit = v->audit_id;
    pthread_mutex_lock(&g_mu);
    int rc = wait_judged(audit, ms);
    if (rc == 0 && (g_result.audit_id != audit || g_result_rc != 0)) rc = TPAUDIT_EINVAL; /* a later one, or failed */
    if (rc == 0) {
        v->n_findings = g_result.n_findings;
        v->n_errors = g_result.n_errors;
        v->blind = g_result.blind;
        v->retained_bytes = g_result.retained_bytes;
        v->stop = atomic_load(&g_fail_fast) && g_result.n_errors > 0;
        v->exit_status = TPAUDIT_FAIL_FAST_STATUS;
        copy_lines(v->findings, v->findings_cap, g_result.text, g_result.text_len);
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}
