/* process_life.c - the process's life as the shim sees it: one state
 * machine, every transition a named function here.  entry.c (constructor,
 * on_exit, fork handler, exec family, _exit) and api.c call in; this file
 * calls down into the writer, the ring and the run state, never up.
 *
 *   state (tpa_state, page)      transition                  next state
 *   OFF                          start                       RUNNING, no database
 *   RUNNING, no database         first_record                RUNNING, recording
 *   RUNNING, recording           exit (any thread), _exit    CLOSED (final run row)
 *   RUNNING, recording           hostless (the last host     CLOSED, then glibc's exit(0)
 *                                thread left by pthread_exit)
 *   RUNNING, recording           exec                        CLOSED (ended_by 'exec')
 *   CLOSED after exec            exec_failed                 RUNNING, recording (same file)
 *   any, in a fork child         fork_child                  RUNNING, no database
 *   any, in a clone child        clone_child (seen on the    RUNNING, no database
 *                                next record or end)
 *   RUNNING, recording           signal (one that ends the   unchanged (flushed), then the
 *                                process, over SIG_DFL)      default action
 *   RUNNING                      disabled (tpa_disable in    DISABLED (any file may take it:
 *                                run_state.c)                a failure, a full disk)
 *
 * A copy of the process that ran no fork handler (a raw clone) is noticed
 * through a page mapped MADV_WIPEONFORK: the copy finds it zeroed. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"
#include "verdict.h"

#define TPA_SIGNAL_FLUSH_MS 1000
#define TPA_OPENING_WAIT_MS 10000
#define TPA_WRITER_STACK    (256u * 1024u)
#define TPA_NPROC_ROOM      32 /* threads RLIMIT_NPROC must still allow for the writer to start */

/* Zeroed in every copy of the process (MADV_WIPEONFORK). */
struct life_page {
    _Atomic int admitted; /* records go straight to the ring */
    _Atomic pid_t owner;  /* the process this page belongs to; 0 in a copy */
};
static struct life_page g_fallback; /* no page: copies are seen only through fork handlers */
static struct life_page *g_page = &g_fallback;

static pthread_mutex_t g_start_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_started, g_finished, g_signals_done, g_opening, g_writer_up, g_main_left, g_hostless;
static __thread int t_opening __attribute__((tls_model("initial-exec")));
static pthread_key_t g_main_key;
static pthread_t g_writer_tid;
static int g_main_key_made;
static sigset_t g_host_mask; /* the signal mask of the thread that started the writer */

static void close_state(void) {
    int expect = TPA_RUNNING;
    atomic_compare_exchange_strong(&tpa_state, &expect, TPA_CLOSED); /* producers stop here */
}

/* The main thread's key: its destructor runs when the main thread leaves
 * by pthread_exit, never at exit(). */
static void main_left(void *value) {
    (void)value;
    atomic_store(&g_main_left, 1);
    tpa_writer_watch_alone();
}

static void mark_main_thread(void) {
    if (g_main_key_made) pthread_setspecific(g_main_key, (void *)1);
}

static void map_page(void) {
    void *p = mmap(NULL, sizeof(struct life_page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    if (madvise(p, sizeof(struct life_page), MADV_WIPEONFORK) != 0) {
        munmap(p, sizeof(struct life_page));
        return;
    }
    g_page = p;
}

/* ---- start ---- */
int tpa_life_start(void) {
    if (atomic_exchange(&g_started, 1)) return 0;
    map_page();
    atomic_store(&g_page->owner, getpid());
    if (gettid() == getpid() && pthread_key_create(&g_main_key, main_left) == 0) {
        g_main_key_made = 1;
        mark_main_thread();
    }
    tpa_sig_resolve();
    tpa_self_find();
    if (tpa_self_path()[0]) setenv("TPAUDIT_LIBRARY", tpa_self_path(), 1);
    tpa_config_load();
    tpa_run_init();
    tpa_python_bootstrap();
    atomic_store(&tpa_state, TPA_RUNNING);                            /* the database starts with the first record */
    if (tpa_run_python_is_worth_a_file()) tpa_life_begin_recording(); /* the probe is off: say so in a file */
    return 1;
}

/* ---- fork_child and clone_child: the parent's database is forgotten ---- */
static int child_reset(void) {
    atomic_store(&g_page->owner, getpid());
    atomic_store(&g_page->admitted, 0);
    pthread_mutex_init(&g_start_mu, NULL);
    atomic_store(&g_opening, 0);
    atomic_store(&g_writer_up, 0);
    atomic_store(&g_main_left, 0);
    mark_main_thread(); /* the child's one thread is its main thread */
    if (atomic_load(&tpa_state) == TPA_CLOSED) atomic_store(&tpa_state, TPA_RUNNING);
    int sqlite_unsafe = tpa_writer_reset_in_child();
    tpa_verdict_reset_in_child();
    tpa_run_reset_counters();
    atomic_store(&g_finished, 0);
    if (sqlite_unsafe && atomic_load(&tpa_state) == TPA_RUNNING) {
        atomic_store(&tpa_state, TPA_DISABLED); /* forked while SQLite changed its lists */
        tpa_log(TPA_LOG_INFO, "fork child: not recording (forked while the database was being opened)");
    }
    return 1;
}

void tpa_life_fork_child(void) { child_reset(); }

/* 1 when this process turned out to be a copy made without fork handlers
 * (it is then reset as a fork child is). */
int tpa_life_notice_copy(void) {
    if (atomic_load_explicit(&g_page->owner, memory_order_relaxed) || !atomic_load(&g_started)) return 0;
    tpa_log(TPA_LOG_INFO,
            "a copy of the process made without fork handlers (clone): recording into a database of its own");
    return child_reset();
}

/* ---- first_record: the database, the writer thread, the signals ---- */
static void *writer_thread(void *arg);

static int start_writer_thread(void) {
    sigset_t all;
    sigfillset(&all);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, TPA_WRITER_STACK);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_sigmask(SIG_SETMASK, &all, &g_host_mask); /* the host's handlers never run on it */
    int rc = pthread_create(&g_writer_tid, &attr, writer_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &g_host_mask, NULL);
    pthread_attr_destroy(&attr);
    return rc;
}

/* The database's first pages are written on the host's thread: SIGXFSZ
 * (RLIMIT_FSIZE) is blocked meanwhile, and one the shim's writes raised is
 * taken back, so the host never dies of the shim's file.  Its write fails
 * with EFBIG and the shim turns off instead. */
static sigset_t only_xfsz(void) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGXFSZ);
    return s;
}

static int xfsz_pending(void) {
    sigset_t pending;
    return sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
}

/* Takes back the SIGXFSZ that the shim's writes raised (blocked meanwhile). */
static void drop_xfsz(void) {
    sigset_t xfsz = only_xfsz();
    struct timespec now = {0, 0};
    while (sigtimedwait(&xfsz, NULL, &now) == SIGXFSZ) {}
}

static int open_file_guarded(void) {
    sigset_t xfsz = only_xfsz(), before;
    pthread_sigmask(SIG_BLOCK, &xfsz, &before);
    int was_pending = xfsz_pending();
    int rc = tpa_writer_open();
    if (!was_pending && xfsz_pending()) drop_xfsz();
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    return rc;
}

/* The writer takes one of the user's RLIMIT_NPROC slots: it is started only
 * while TPA_NPROC_ROOM are left, and the shim goes without one otherwise. */
static int room_for_writer(void) {
    long room = tpa_self_thread_room();
    if (room >= TPA_NPROC_ROOM) return 1;
    char why[160];
    snprintf(why, sizeof why,
             "RLIMIT_NPROC leaves the user fewer than %d more threads: the shim starts no thread of its own",
             TPA_NPROC_ROOM);
    tpa_disable(why);
    return 0;
}

static int open_locked(void) {
    if (atomic_load(&g_writer_up)) return 0;
    if (atomic_load(&tpa_state) != TPA_RUNNING || !room_for_writer() || tpa_ring_ensure() != 0)
        return TPAUDIT_EDISABLED;
    if (open_file_guarded() != 0) return TPAUDIT_EDISABLED;
    if (start_writer_thread() != 0) {
        tpa_disable("cannot start the writer thread (memory limit?)");
        tpa_writer_abandon();
        return TPAUDIT_EDISABLED;
    }
    if (atomic_load(&g_main_left)) tpa_writer_watch_alone();
    atomic_store(&g_writer_up, 1);
    return 0;
}

int tpa_life_begin_recording(void) {
    tpa_life_notice_copy();
    if (atomic_load_explicit(&g_writer_up, memory_order_acquire)) return 0;
    if (!atomic_load(&g_started)) return TPAUDIT_EDISABLED;
    pthread_mutex_lock(&g_start_mu);
    t_opening = 1;
    atomic_store(&g_opening, 1); /* before the state check: an exit now waits for the open */
    int rc = open_locked();
    atomic_store(&g_opening, 0);
    t_opening = 0;
    pthread_mutex_unlock(&g_start_mu);
    return rc;
}

/* ---- signal: commit what is queued, then die of it the same way ---- */
/* The signals that end a process by default and that a host or a user
 * sends (SIGTERM, SIGINT, SIGHUP, ...), raises (abort), or meets (SIGPIPE, a
 * fault).  Not SIGXFSZ (the shim's own writes could raise it), SIGTRAP or
 * SIGSYS (debuggers, seccomp), nor the real-time ones. */
static const int k_fatal_signals[] = {SIGTERM, SIGINT,  SIGHUP,    SIGQUIT, SIGABRT, SIGPIPE, SIGALRM, SIGUSR1,
                                      SIGUSR2, SIGXCPU, SIGVTALRM, SIGSEGV, SIGBUS,  SIGFPE,  SIGILL};

static void on_signal(int sig) {
    tpa_run_mark_incomplete();
    tpa_writer_flush_signal_safe(TPA_SIGNAL_FLUSH_MS);
    tpa_sig_die_of(sig);
}

/* On the first record, not at load: an interpreter has set up its own
 * handlers by then.  Each only over SIG_DFL, out of the host's sight
 * (host_signals.c); a host that sets its own later replaces it. */
static void install_signals_once(void) {
    if (atomic_exchange(&g_signals_done, 1)) return;
    for (size_t i = 0; i < sizeof k_fatal_signals / sizeof *k_fatal_signals; i++)
        tpa_sig_take(k_fatal_signals[i], on_signal);
}

/* Every record passes here: one load while this process records. */
int tpa_enqueue(int type, const void *fixed, uint32_t fixed_len, const char *const *strs, const uint32_t *caps,
                int nstr, const uint64_t *ips, int nips, int wait_ms) {
    if (__builtin_expect(!atomic_load_explicit(&g_page->admitted, memory_order_acquire), 0)) {
        int rc = tpa_life_begin_recording();
        if (rc != 0) return rc;
        install_signals_once();
        atomic_store(&g_page->admitted, 1);
    }
    return tpa_ring_put(type, fixed, fixed_len, strs, caps, nstr, ips, nips, wait_ms);
}

/* ---- exit, _exit, exec: the end of the database ---- */
static void nap_1ms(void) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* A first record still creating the database is let finish (unless it is
 * this very thread, interrupted by a signal), so the end finds it whole. */
static void wait_opening(void) {
    for (int ms = 0; atomic_load(&g_opening) && !t_opening && ms < TPA_OPENING_WAIT_MS; ms++) nap_1ms();
}

static void end_database(int has_status, int status, const char *ended_by, int discard_if_empty) {
    struct tpa_run_end end = {0, has_status, status, ended_by};
    if (atomic_load(&g_writer_up) && tpa_writer_stop(&end, discard_if_empty) == 0) tpa_writer_wait_end();
}

/* 1 when this process (not a vfork child sharing its memory) is running
 * and, with need_db, has its database. */
int tpa_life_running_here(int need_db) {
    tpa_life_notice_copy();
    return atomic_load(&g_page->owner) == getpid() && atomic_load(&tpa_state) == TPA_RUNNING &&
           (!need_db || atomic_load(&g_writer_up));
}

/* An interpreter that loaded torch while its probe never started (python
 * -S, a program that skips site) leaves a database that says so. */
static void record_probe_never_started(void) {
    if (atomic_load(&g_writer_up) || atomic_load(&tpa_state) != TPA_RUNNING || !tpa_run_python_pending() ||
        !tpa_torch_loaded())
        return;
    tpa_run_set_text("python", TPA_PYTHON_NEVER_STARTED);
    tpa_life_begin_recording();
}

void tpa_life_exit(int status, const char *ended_by) {
    tpa_life_notice_copy();
    if (atomic_load(&g_page->owner) != getpid()) return; /* a vfork child shares our memory: hands off */
    if (!atomic_load(&g_finished)) record_probe_never_started();
    if (atomic_exchange(&g_finished, 1)) return;
    close_state();
    wait_opening();
    end_database(1, status, ended_by, 0);
}

int tpa_life_exec(void) {
    if (!tpa_life_running_here(1)) return 0;
    if (atomic_exchange(&g_finished, 1)) return 0;
    close_state();
    end_database(0, 0, "exec", 1);
    return 1;
}

void tpa_life_exec_failed(int ended) {
    if (!ended) return;
    atomic_store(&g_finished, 0);
    int reopen = tpa_writer_after_failed_exec();
    if (reopen < 0) return; /* the writer never stopped (timed out): the shim stays closed */
    int expect = TPA_CLOSED;
    if (!atomic_compare_exchange_strong(&tpa_state, &expect, TPA_RUNNING)) return;
    atomic_store(&g_writer_up, 0);
    atomic_store(&g_page->admitted, 0);
    if (reopen) tpa_life_begin_recording(); /* else none was kept: the next record makes a new file */
}

/* ---- descriptors given back: the host ran out of them (EMFILE).  The
 * database is closed (kept, marked incomplete) and the shim stays off.
 * 1 when there was one to close. ---- */
int tpa_life_give_back_fds(void) {
    if (!tpa_life_running_here(1) || pthread_equal(pthread_self(), g_writer_tid)) return 0;
    tpa_disable("the host ran out of file descriptors (RLIMIT_NOFILE): the shim gives its own back");
    tpa_writer_wait_end();
    return 1;
}

/* ---- hostless: the writer is the last thread.  It ends the database and
 * returns; glibc then calls exit(0) on it, as on the last host thread. ---- */
static void life_hostless(void) {
    if (atomic_exchange(&g_finished, 1)) return;
    close_state();
    struct tpa_run_end end = {0, 1, 0, "exit"};
    if (tpa_writer_stop(&end, 0) == 0) tpa_writer_run();
    atomic_store(&g_hostless, 1);
}

static void *writer_thread(void *arg) {
    (void)arg;
    if (tpa_writer_run() == TPA_WRITER_ALONE) life_hostless();
    tpa_writer_end();
    if (atomic_load(&g_hostless)) { /* the exit handlers run here: the host's mask, less the shim's SIGXFSZ */
        drop_xfsz();
        pthread_sigmask(SIG_SETMASK, &g_host_mask, NULL);
    }
    return NULL;
}
