/* lifecycle.c - the shim's life in the host: constructor (config, output
 * file, writer, Python bootstrap, CUPTI), clean end through on_exit (which
 * sees the exit status), SIGTERM/SIGINT flush then chain to the host's
 * disposition, fork (the child opens its own file), and the
 * CUDA_INJECTION64_PATH entry point. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "shim_core.h"

static char g_self[PATH_MAX];
static _Atomic int g_started, g_finished;
static struct sigaction g_prev_term, g_prev_int;
static int g_have_term, g_have_int;

const char *tpa_self_path(void) { return g_self; }

static void finish(int has_status, int status) {
    if (atomic_exchange(&g_finished, 1)) return;
    if (atomic_load(&tpa_state) == TPA_RUNNING) {
        tpa_cupti_flush();
        tpa_cupti_shutdown();
    }
    tpa_writer_finish(has_status, status);
}

static void on_exit_cb(int status, void *arg) {
    (void)arg;
    finish(1, status);
}

/* Runs from _dl_fini, before on_exit_cb (registered earlier, so it runs
 * later): commit what is queued; the final run row comes from on_exit_cb.
 * The library is linked -z nodelete, so on_exit_cb stays mapped. */
__attribute__((destructor)) static void tpa_destructor(void) {
    if (atomic_load(&tpa_state) == TPA_RUNNING) tpa_writer_flush(5000);
}

static void on_signal(int sig, siginfo_t *info, void *uctx) {
    tpa_run_mark_incomplete();
    tpa_writer_flush_signal_safe(2000);
    struct sigaction *prev = sig == SIGTERM ? &g_prev_term : &g_prev_int;
    if (prev->sa_flags & SA_SIGINFO) {
        if (prev->sa_sigaction) prev->sa_sigaction(sig, info, uctx);
        return;
    }
    if (prev->sa_handler == SIG_IGN) return;
    if (prev->sa_handler != SIG_DFL) {
        prev->sa_handler(sig);
        return;
    }
    /* default: die by the same signal, so the host's status is unchanged */
    signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
}

static void install_signal(int sig, struct sigaction *prev, int *have) {
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) != 0) return;
    if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN) return; /* keep inherited ignore */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, prev) == 0) *have = 1;
}

static void atfork_prepare(void) { tpa_writer_pause_for_fork(); }
static void atfork_parent(void) { tpa_writer_resume_after_fork(); }

static void atfork_child(void) {
    int was = atomic_load(&tpa_state);
    tpa_writer_reset_in_child();
    tpa_run_reset_counters();
    tpa_cupti_after_fork_child();
    atomic_store(&g_finished, 0);
    if (was == TPA_RUNNING || was == TPA_CLOSED) {
        atomic_store(&tpa_state, TPA_OFF);
        if (was == TPA_RUNNING) tpa_writer_start();
    }
}

static void find_self(void) {
    Dl_info info;
    if (dladdr((void *)&find_self, &info) && info.dli_fname) {
        if (!realpath(info.dli_fname, g_self)) {
            strncpy(g_self, info.dli_fname, sizeof g_self - 1);
        }
    }
}

static void start(void) {
    if (atomic_exchange(&g_started, 1)) return;
    find_self();
    if (g_self[0]) setenv("TPAUDIT_LIBRARY", g_self, 1);
    tpa_config_load();
    tpa_run_init();
    tpa_python_bootstrap();
    if (tpa_writer_start() != 0) return;
    on_exit(on_exit_cb, NULL);
    install_signal(SIGTERM, &g_prev_term, &g_have_term);
    install_signal(SIGINT, &g_prev_int, &g_have_int);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
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
