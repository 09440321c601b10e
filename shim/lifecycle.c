/* lifecycle.c - the shim's state (running, disabled, closed) and its life
 * in the host: constructor (config, output file, writer, Python bootstrap,
 * CUPTI), clean end through on_exit (which
 * sees the exit status), _exit and exec (exec_exit.c calls in here), a
 * SIGTERM/SIGINT flush installed on the first record and only over a default
 * disposition, and fork.  A process's database starts on its first record:
 * one that records nothing (a shell, env, a fork child) leaves none. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim_internal.h"

#define TPA_SIGNAL_FLUSH_MS     1000
#define TPA_DESTRUCTOR_FLUSH_MS 100

_Atomic int tpa_state;

static _Atomic int g_started, g_finished, g_signals_done;
static _Atomic pid_t g_owner; /* the process this state belongs to (not a vfork child) */

void tpa_disable(const char *why) {
    int expect = TPA_RUNNING;
    if (atomic_compare_exchange_strong(&tpa_state, &expect, TPA_DISABLED))
        tpa_log(TPA_LOG_WARN, "disabled: %s; the host continues without auditing", why);
    tpa_run_mark_incomplete();
}

static void finish(int has_status, int status, const char *ended_by) {
    if (atomic_exchange(&g_finished, 1)) return;
    if (atomic_load(&tpa_state) == TPA_RUNNING) {
        tpa_cupti_flush();
        tpa_cupti_shutdown();
    }
    tpa_writer_finish(has_status, status, ended_by, 0);
}

static void on_exit_cb(int status, void *arg) {
    (void)arg;
    finish(1, status, "exit");
}

/* Runs from _dl_fini, before on_exit_cb (registered earlier, so it runs
 * later): commit what is queued, briefly; the final run row comes from
 * on_exit_cb.  The library is linked -z nodelete, so on_exit_cb stays mapped. */
__attribute__((destructor)) static void tpa_destructor(void) {
    if (atomic_load(&tpa_state) == TPA_RUNNING && tpa_writer_has_db()) tpa_writer_flush(TPA_DESTRUCTOR_FLUSH_MS);
}

int tpa_before_exec(void) {
    if (atomic_load(&g_owner) != getpid()) return 0; /* a vfork child shares our memory: hands off */
    if (atomic_load(&tpa_state) != TPA_RUNNING || !tpa_writer_has_db()) return 0;
    if (atomic_exchange(&g_finished, 1)) return 0;
    tpa_cupti_flush();
    tpa_writer_finish(0, 0, "exec", 1);
    return 1;
}

void tpa_after_failed_exec(int ended) {
    if (!ended) return;
    atomic_store(&g_finished, 0);
    tpa_writer_resume_after_exec();
}

void tpa_before__exit(int status) {
    if (atomic_load(&g_owner) != getpid()) return;
    finish(1, status, "_exit");
}

/* Installed only over SIG_DFL: the host is about to die of this signal, so
 * commit what is queued, then die of it the same way. */
static void on_signal(int sig) {
    tpa_run_mark_incomplete();
    tpa_writer_flush_signal_safe(TPA_SIGNAL_FLUSH_MS);
    signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
}

static void install_over_default(int sig) {
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) != 0) return;
    if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL) return; /* the host's, or ignored */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

/* On the first record, not at load: an interpreter (CPython installs its
 * SIGINT handler only over SIG_DFL) has set up its own handlers by then.
 * SIGINT is never taken in a Python interpreter. */
void tpa_signals_install_lazily(void) {
    if (atomic_exchange(&g_signals_done, 1)) return;
    install_over_default(SIGTERM);
    if (!tpa_is_python()) install_over_default(SIGINT);
}

static void atfork_child(void) {
    atomic_store(&g_owner, getpid());
    int was = atomic_load(&tpa_state);
    if (was == TPA_CLOSED) atomic_store(&tpa_state, TPA_RUNNING);
    tpa_writer_reset_in_child();
    tpa_run_reset_counters();
    tpa_cupti_after_fork_child();
    atomic_store(&g_finished, 0);
}

static void start(void) {
    if (atomic_exchange(&g_started, 1)) return;
    atomic_store(&g_owner, getpid());
    tpa_self_find();
    if (tpa_self_path()[0]) setenv("TPAUDIT_LIBRARY", tpa_self_path(), 1);
    tpa_config_load();
    tpa_run_init();
    tpa_python_bootstrap();
    tpa_exec_resolve();
    atomic_store(&tpa_state, TPA_RUNNING);                     /* the database starts with the first record */
    if (tpa_run_python_is_worth_a_file()) tpa_writer_ensure(); /* the probe is off: say so in a file */
    on_exit(on_exit_cb, NULL);
    pthread_atfork(NULL, NULL, atfork_child);
    if (tpa_config()->cupti_enabled)
        tpa_cupti_on_load();
    else
        tpa_run_set_cupti_status("off: TPAUDIT_CUPTI=off");
}

__attribute__((constructor)) static void tpa_constructor(void) { start(); }

TPA_API int InitializeInjection(void) {
    start();
    if (atomic_load(&tpa_state) != TPA_RUNNING || !tpa_config()->cupti_enabled) return 1;
    tpa_cupti_on_injection();
    return 1;
}
