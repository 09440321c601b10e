/* writer.c - what the writer thread does; process_life.c starts the thread
 * and decides when it ends.  It drains the ring into the database in
 * batched transactions (commit after TPA_BATCH records, TPA_BATCH_NS, an
 * empty ring or a flush request), turns the shim off on any failure, and
 * ends the database when asked: the drain bounded in time (what is left is
 * dropped and counted), then always the final run row, then close.  Idle,
 * and once told that the main thread left, it watches for the last host
 * thread to be gone.  It opens the database on the first record's thread
 * (tpa_writer_open) and forgets the parent's in a child.  SQL lives in
 * db.c, the record -> row mapping in rows.c. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <time.h>

#include "shim_internal.h"
#include "verdict.h"

#define TPA_BATCH    8192
#define TPA_BATCH_NS 5000000LL

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* flush waiters */
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static _Atomic uint64_t g_flush_req, g_committed;
static _Atomic uint64_t g_beat; /* advances while the writer makes progress */
static _Atomic int g_stop, g_thread_live, g_has_db, g_final_done, g_watch_alone;
static _Atomic int64_t g_drain_deadline;
static _Atomic int g_discard_if_empty, g_removed, g_reopen;
static struct tpa_run_end g_end; /* set before g_stop */
static unsigned char g_buf[TPA_REC_MAX] __attribute__((aligned(16)));

/* the writer thread's loop state */
static struct batch {
    int in_txn, n, ok;
    int64_t start;
} g_batch;

int tpa_writer_has_db(void) { return atomic_load(&g_has_db); }
int tpa_writer_live(void) { return atomic_load(&g_thread_live); }

static int step(enum tpa_stmt which) { return tpa_db_step(tpa_db_stmt(which)); }

static void beat(void) { atomic_fetch_add_explicit(&g_beat, 1, memory_order_relaxed); }

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
    while (tpa_ring_pop(g_buf, &v)) {
        tpa_run_count_dropped();
        beat();
    }
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

static void wait_1ms(void) {
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
}

/* The ring is empty and nothing is open: the run row if it changed, the
 * flush waiters, then a short wait for more.  -1 on failure, 1 when no
 * thread of the host is left (watched only after the main thread left). */
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
    if (atomic_load(&g_watch_alone) && tpa_self_alone()) return 1;
    wait_1ms();
    return 0;
}

/* Until asked to stop (and drained, or past the deadline), disabled, or
 * alone: TPA_WRITER_ALONE then, else 0. */
static int drain(struct batch *b) {
    struct tpa_rec_view v;
    for (;; beat()) {
        if (atomic_load(&tpa_state) == TPA_DISABLED) {
            b->ok = 0;
            return 0;
        }
        if (past_deadline()) return 0;
        if (!b->in_txn && stopping_and_empty()) return 0;
        if (!b->in_txn &&
            tpa_modules_refresh(tpa_db_stmt(TPA_ST_INSERT_module), tpa_db_stmt(TPA_ST_MODULE_UNLOAD), 0) != 0) {
            b->ok = tpa_db_fail("cannot update module table") == 0;
            return 0;
        }
        int got = tpa_ring_pop(g_buf, &v);
        if (got && write_record(b, &v) != 0) {
            b->ok = 0;
            return 0;
        }
        uint64_t tail = tpa_ring_tail();
        if (maybe_commit(b, got, tail) != 0) {
            b->ok = 0;
            return 0;
        }
        int rc = (!got && !b->in_txn) ? idle(tail) : 0;
        if (rc < 0) b->ok = 0;
        if (rc != 0) return rc > 0 ? TPA_WRITER_ALONE : 0;
    }
}

int tpa_writer_run(void) { return drain(&g_batch); }

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
    atomic_store(&g_final_done, 1);
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

void tpa_writer_end(void) {
    end_database(&g_batch);
    atomic_store(&g_committed, tpa_ring_tail());
    pthread_mutex_lock(&g_mu);
    atomic_store(&g_thread_live, 0);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

/* The run row (its start facts on a new file, its state) and a new file's
 * module table, in one transaction. */
static int write_start_rows(int reopened) {
    if (!reopened && tpa_rows_insert_run(tpa_db_stmt(TPA_ST_INSERT_run)) != 0)
        return tpa_db_fail("cannot write run row");
    if (reopened) tpa_rows_reset();
    if (step(TPA_ST_BEGIN) ||
        (!reopened && tpa_modules_refresh(tpa_db_stmt(TPA_ST_INSERT_module), tpa_db_stmt(TPA_ST_MODULE_UNLOAD), 1)) ||
        tpa_rows_write_run(NULL) || step(TPA_ST_COMMIT))
        return tpa_db_fail(reopened ? "cannot reopen the run row" : "cannot write module table");
    tpa_db_made_whole(reopened);
    return 0;
}

/* On the first record's thread, under process_life's start lock: the file
 * (or, after a failed exec, the same file again).  On failure what was
 * made is closed and removed. */
int tpa_writer_open(void) {
    int reopen = atomic_exchange(&g_reopen, 0);
    int rc = reopen ? tpa_db_reopen() : tpa_db_open();
    if (rc == 0) rc = write_start_rows(reopen);
    if (rc != 0) {
        tpa_db_close();
        tpa_db_remove_files();
        return -1;
    }
    g_batch = (struct batch){0, 0, 1, 0};
    atomic_store(&g_stop, 0);
    atomic_store(&g_final_done, 0);
    atomic_store(&g_has_db, 1);
    atomic_store(&g_thread_live, 1); /* the thread is created next */
    return 0;
}

/* The thread could not be created: the file goes. */
void tpa_writer_abandon(void) {
    atomic_store(&g_thread_live, 0);
    atomic_store(&g_has_db, 0);
    tpa_db_close();
    tpa_db_remove_files();
}

void tpa_writer_watch_alone(void) {
    atomic_store(&g_watch_alone, 1);
    wake_waiters();
}

static void request_flush(uint64_t target) {
    uint64_t cur = atomic_load(&g_flush_req);
    while (cur < target && !atomic_compare_exchange_weak(&g_flush_req, &cur, target)) {}
}

int tpa_writer_flush(int timeout_ms) {
    if (atomic_load(&tpa_state) != TPA_RUNNING) return TPAUDIT_EDISABLED;
    if (!atomic_load(&g_has_db)) return 0; /* a fork child that recorded nothing */
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

int tpa_writer_stop(const struct tpa_run_end *end, int discard_if_empty) {
    if (!atomic_load(&g_has_db) || !atomic_load(&g_thread_live)) return -1;
    g_end = *end;
    atomic_store(&g_discard_if_empty, discard_if_empty);
    atomic_store(&g_drain_deadline, tpa_now_ns() + TPA_END_DRAIN_MS * 1000000LL);
    atomic_store(&g_stop, 1);
    return 0;
}

/* Waits, with atomics and nanosleep only, for the final run row however
 * long the writer takes to get the CPU, leaving only when it has made no
 * progress at all for TPA_END_STALL_MS (stuck in a system call); then at
 * most TPA_END_CLOSE_MS for the close. */
void tpa_writer_wait_end(void) {
    uint64_t seen = atomic_load(&g_beat);
    int64_t since = tpa_now_ns();
    while (atomic_load(&g_thread_live) && !atomic_load(&g_final_done)) {
        nap_100us();
        uint64_t now_beat = atomic_load(&g_beat);
        if (now_beat != seen) {
            seen = now_beat;
            since = tpa_now_ns();
        } else if (tpa_now_ns() - since > TPA_END_STALL_MS * 1000000LL) {
            return;
        }
    }
    int64_t end = tpa_now_ns() + TPA_END_CLOSE_MS * 1000000LL;
    while (atomic_load(&g_thread_live) && tpa_now_ns() < end) nap_100us();
}

/* After an exec that failed: 1 when the same file is to be reopened, 0
 * when nothing had been recorded (the next record starts a new file), -1
 * when the writer never stopped (it still runs). */
int tpa_writer_after_failed_exec(void) {
    if (atomic_load(&g_thread_live)) return -1;
    atomic_store(&g_has_db, 0);
    atomic_store(&g_stop, 0);
    atomic_store(&g_discard_if_empty, 0);
    if (atomic_exchange(&g_removed, 0)) return 0;
    atomic_store(&g_reopen, 1);
    return 1;
}

/* In the child: the parent's connection, statements and tables are
 * forgotten, never closed or freed (that would run SQLite's cleanup on the
 * parent's file, and touch pages the child shares with the parent); the
 * child's own database starts on its first record.  Returns 1 when the
 * child must not use SQLite (forked while SQLite changed its lists). */
int tpa_writer_reset_in_child(void) {
    pthread_mutex_init(&g_mu, NULL);
    pthread_cond_init(&g_cv, NULL);
    int sqlite_unsafe = tpa_db_forget_in_child();
    atomic_store(&g_stop, 0);
    atomic_store(&g_thread_live, 0);
    atomic_store(&g_has_db, 0);
    atomic_store(&g_final_done, 0);
    atomic_store(&g_watch_alone, 0);
    atomic_store(&g_flush_req, 0);
    atomic_store(&g_committed, 0);
    atomic_store(&g_discard_if_empty, 0);
    atomic_store(&g_removed, 0);
    atomic_store(&g_reopen, 0);
    tpa_rows_reset();
    tpa_ring_reset_in_child();
    tpa_stack_reset();
    tpa_modules_reset();
    return sqlite_unsafe;
}
