/* writer.c - the one writer thread: drains the ring into the database in
 * batched transactions (commit after TPA_BATCH records, TPA_BATCH_NS, an
 * empty ring or a flush request), turns the shim off on any failure, ends
 * a database within a bounded time (exit, _exit, exec), and starts over in
 * a fork child.  The database and the thread start on the process's first
 * record.  SQL lives in db.c, the record -> row mapping in rows.c. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <time.h>

#include "shim_internal.h"
#include "verdict.h"

#define TPA_BATCH        8192
#define TPA_BATCH_NS     5000000LL
#define TPA_WRITER_STACK (256u * 1024u)

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* flush waiters */
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t g_start_mu = PTHREAD_MUTEX_INITIALIZER; /* starting the writer */
static _Atomic uint64_t g_flush_req, g_committed;
static _Atomic int g_stop, g_thread_live, g_ready;
static _Atomic int64_t g_drain_deadline;
static _Atomic int g_discard_if_empty, g_removed, g_reopen;
static struct tpa_run_end g_end; /* set before g_stop */
static unsigned char g_buf[TPA_REC_MAX] __attribute__((aligned(16)));

/* the writer thread's loop state */
struct batch {
    int in_txn, n, ok;
    int64_t start;
};

int tpa_writer_has_db(void) { return atomic_load(&g_ready); }

static int step(enum tpa_stmt which) { return tpa_db_step(tpa_db_stmt(which)); }

static void wake_waiters(void) {
    pthread_mutex_lock(&g_mu);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

static void drain_discarding(void) {
    struct tpa_rec_view v;
    while (tpa_ring_pop(g_buf, &v)) {}
}

/* At the end's deadline: what is left is dropped and counted. */
static void drop_rest_counting(void) {
    struct tpa_rec_view v;
    while (tpa_ring_pop(g_buf, &v)) tpa_run_count_dropped();
    if (tpa_ring_tail() < tpa_ring_head()) tpa_run_count_dropped(); /* reserved, never published */
}

static int stopping_and_empty(void) { return atomic_load(&g_stop) && tpa_ring_tail() >= tpa_ring_head(); }

static int past_deadline(void) { return atomic_load(&g_stop) && tpa_now_ns() >= atomic_load(&g_drain_deadline); }

static int flush_wanted(uint64_t tail) {
    return atomic_load(&g_flush_req) > atomic_load(&g_committed) && atomic_load(&g_flush_req) <= tail;
}

/* Writes one popped record, opening a transaction first; -1 on failure. */
static int write_record(struct batch *b, const struct tpa_rec_view *v) {
    if (!b->in_txn) {
        if (step(TPA_ST_BEGIN) != 0) return tpa_db_fail("cannot begin transaction");
        b->in_txn = 1;
        b->n = 0;
        b->start = tpa_now_ns();
    }
    if (tpa_rows_write(v) != 0) return tpa_db_fail("cannot insert record");
    b->n++;
    return 0;
}

/* Commits when the batch is full, old, the ring empty or a flush asked. */
static int maybe_commit(struct batch *b, int got, uint64_t tail) {
    if (!b->in_txn) return 0;
    if (got && b->n < TPA_BATCH && !flush_wanted(tail) &&
        !((b->n & 255) == 0 && tpa_now_ns() - b->start >= TPA_BATCH_NS))
        return 0;
    if (tpa_rows_write_run(NULL) != 0 || step(TPA_ST_COMMIT) != 0) return tpa_db_fail("cannot commit (disk full?)");
    b->in_txn = 0;
    tpa_verdict_writer_turn(); /* an audit just committed is judged before its flush waiters wake */
    atomic_store(&g_committed, tail);
    wake_waiters();
    return 0;
}

/* The ring is empty and nothing is open: the run row if it changed, the
 * flush waiters, then a short wait for more. */
static int idle(uint64_t tail) {
    tpa_verdict_writer_turn();
    if (tpa_run_generation() != tpa_rows_run_generation_written()) {
        if (step(TPA_ST_BEGIN) || tpa_rows_write_run(NULL) || step(TPA_ST_COMMIT))
            return tpa_db_fail("cannot update run row");
        wake_waiters();
    }
    if (flush_wanted(tail)) {
        atomic_store(&g_committed, tail);
        wake_waiters();
    }
    if (atomic_load(&g_stop)) {
        sched_yield();
        return 0;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&g_mu);
    if (!atomic_load(&g_stop)) pthread_cond_timedwait(&g_cv, &g_mu, &ts);
    pthread_mutex_unlock(&g_mu);
    return 0;
}

static void drain(struct batch *b) {
    struct tpa_rec_view v;
    for (;;) {
        if (atomic_load(&tpa_state) == TPA_DISABLED) {
            b->ok = 0;
            return;
        }
        if (past_deadline()) return;
        if (!b->in_txn && stopping_and_empty()) return;
        if (!b->in_txn &&
            tpa_modules_refresh(tpa_db_stmt(TPA_ST_INSERT_module), tpa_db_stmt(TPA_ST_MODULE_UNLOAD), 0) != 0) {
            b->ok = tpa_db_fail("cannot update module table") == 0;
            return;
        }
        int got = tpa_ring_pop(g_buf, &v);
        if (got && write_record(b, &v) != 0) {
            b->ok = 0;
            return;
        }
        uint64_t tail = tpa_ring_tail();
        if (maybe_commit(b, got, tail) != 0 || (!got && !b->in_txn && idle(tail) != 0)) {
            b->ok = 0;
            return;
        }
    }
}

/* The end: what could not be written in time is counted, then the final
 * run row, then close (which checkpoints the WAL); an empty database of a
 * discard_if_empty end is removed. */
static void end_database(struct batch *b) {
    int discard = 0;
    if (b->ok && atomic_load(&g_stop)) {
        if (past_deadline()) drop_rest_counting();
        discard = atomic_load(&g_discard_if_empty) && !tpa_ring_used();
        g_end.ts = tpa_now_ns();
        if (!discard && ((!b->in_txn && step(TPA_ST_BEGIN)) || tpa_rows_write_run(&g_end) || step(TPA_ST_COMMIT)))
            tpa_db_fail("cannot write final run row");
        b->in_txn = 0;
    }
    if (atomic_load(&tpa_state) == TPA_DISABLED) {
        if (b->in_txn) tpa_db_rollback();
        drain_discarding();
    }
    tpa_db_close();
    if (discard) {
        tpa_db_remove_files();
        atomic_store(&g_removed, 1);
    }
}

static void *writer_main(void *arg) {
    (void)arg;
    struct batch b = {0, 0, 1, 0};
    drain(&b);
    end_database(&b);
    atomic_store(&g_committed, tpa_ring_tail());
    pthread_mutex_lock(&g_mu);
    atomic_store(&g_thread_live, 0);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

/* The thread blocks every signal: the host's handlers never run on it. */
static int start_thread(void) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, TPA_WRITER_STACK);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_store(&g_stop, 0);
    atomic_store(&g_thread_live, 1);
    pthread_t th;
    int rc = pthread_create(&th, &attr, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) atomic_store(&g_thread_live, 0);
    return rc;
}

static int start_locked(void) {
    if (atomic_load(&g_ready)) return 0;
    if (atomic_load(&tpa_state) != TPA_RUNNING) return TPAUDIT_EDISABLED;
    int rc = atomic_load(&g_reopen) ? tpa_db_reopen() : tpa_db_open();
    atomic_store(&g_reopen, 0);
    if (rc == 0 && start_thread() != 0) {
        tpa_disable("cannot start the writer thread (memory limit?)");
        rc = -1;
    }
    if (rc != 0) {
        tpa_db_close();
        tpa_db_remove_files();
        return -1;
    }
    atomic_store(&g_ready, 1);
    return 0;
}

int tpa_writer_ensure(void) {
    if (atomic_load_explicit(&g_ready, memory_order_acquire)) return 0;
    if (atomic_load(&tpa_state) != TPA_RUNNING) return TPAUDIT_EDISABLED;
    pthread_mutex_lock(&g_start_mu);
    int rc = start_locked();
    pthread_mutex_unlock(&g_start_mu);
    return rc;
}

static void request_flush(uint64_t target) {
    uint64_t cur = atomic_load(&g_flush_req);
    while (cur < target && !atomic_compare_exchange_weak(&g_flush_req, &cur, target)) {}
}

int tpa_writer_flush(int timeout_ms) {
    if (atomic_load(&tpa_state) != TPA_RUNNING) return TPAUDIT_EDISABLED;
    if (!atomic_load(&g_ready)) return 0; /* a fork child that recorded nothing */
    uint64_t target = tpa_ring_head();
    unsigned gen = tpa_run_generation();
    request_flush(target);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&g_mu);
    pthread_cond_broadcast(&g_cv);
    int rc = 0;
    while ((atomic_load(&g_committed) < target || (int)(tpa_rows_run_generation_written() - gen) < 0) &&
           atomic_load(&tpa_state) == TPA_RUNNING && atomic_load(&g_thread_live) && rc == 0)
        rc = pthread_cond_timedwait(&g_cv, &g_mu, &ts);
    pthread_mutex_unlock(&g_mu);
    if (atomic_load(&tpa_state) != TPA_RUNNING) return TPAUDIT_EDISABLED;
    return atomic_load(&g_committed) >= target ? 0 : TPAUDIT_EDISABLED;
}

static void nap_100us(void) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
}

/* From a signal handler: only atomics and nanosleep; the writer polls. */
int tpa_writer_flush_signal_safe(int timeout_ms) {
    if (atomic_load(&tpa_state) != TPA_RUNNING || !atomic_load(&g_thread_live)) return TPAUDIT_EDISABLED;
    uint64_t target = tpa_ring_flush_target();
    request_flush(target);
    int64_t end = tpa_now_ns() + (int64_t)timeout_ms * 1000000LL;
    while (tpa_now_ns() < end) {
        if (atomic_load(&g_committed) >= target) return 0;
        nap_100us();
    }
    return TPAUDIT_EDISABLED;
}

void tpa_writer_finish(int has_status, int exit_status, const char *ended_by, int discard_if_empty) {
    int expect = TPA_RUNNING;
    atomic_compare_exchange_strong(&tpa_state, &expect, TPA_CLOSED); /* producers stop here */
    if (!atomic_load(&g_ready) || !atomic_load(&g_thread_live)) return;
    g_end.has_status = has_status;
    g_end.status = exit_status;
    g_end.ended_by = ended_by;
    atomic_store(&g_discard_if_empty, discard_if_empty);
    int64_t now = tpa_now_ns();
    atomic_store(&g_drain_deadline, now + TPA_END_DRAIN_MS * 1000000LL);
    atomic_store(&g_stop, 1);
    int64_t end = now + (TPA_END_DRAIN_MS + TPA_END_CLOSE_MS) * 1000000LL;
    while (atomic_load(&g_thread_live) && tpa_now_ns() < end) nap_100us();
}

void tpa_writer_resume_after_exec(void) {
    if (atomic_load(&g_thread_live)) return; /* never stopped (timed out): it still runs */
    int expect = TPA_CLOSED;
    if (!atomic_compare_exchange_strong(&tpa_state, &expect, TPA_RUNNING)) return;
    atomic_store(&g_ready, 0);
    atomic_store(&g_stop, 0);
    atomic_store(&g_discard_if_empty, 0);
    if (atomic_load(&g_removed)) {
        atomic_store(&g_removed, 0); /* nothing was recorded: the next record starts a new file */
        return;
    }
    atomic_store(&g_reopen, 1);
    tpa_writer_ensure();
}

/* In the child: the parent's connection, statements and tables are
 * forgotten, never closed or freed (that would run SQLite's cleanup on the
 * parent's file, and touch pages the child shares with the parent); the
 * child's own database starts on its first record. */
void tpa_writer_reset_in_child(void) {
    pthread_mutex_init(&g_mu, NULL);
    pthread_cond_init(&g_cv, NULL);
    pthread_mutex_init(&g_start_mu, NULL);
    int sqlite_unsafe = tpa_db_forget_in_child();
    atomic_store(&g_stop, 0);
    atomic_store(&g_thread_live, 0);
    atomic_store(&g_ready, 0);
    atomic_store(&g_flush_req, 0);
    atomic_store(&g_committed, 0);
    atomic_store(&g_discard_if_empty, 0);
    atomic_store(&g_removed, 0);
    atomic_store(&g_reopen, 0);
    tpa_rows_reset();
    tpa_ring_reset_in_child();
    tpa_stack_reset();
    tpa_modules_reset();
    if (sqlite_unsafe && atomic_load(&tpa_state) == TPA_RUNNING) {
        atomic_store(&tpa_state, TPA_DISABLED); /* forked while SQLite changed its lists */
        tpa_log(TPA_LOG_INFO, "fork child: not recording (forked while the database was being opened)");
    }
}
