/* run_signals.c - signals of `tpaudit run`. Dispositions the user set up
 * (nohup's ignored SIGHUP, a background job's ignored SIGINT) reach the
 * child unchanged; every other asynchronous signal sent to tpaudit is
 * passed to the child once: a signal the terminal sent to the whole
 * foreground process group (Ctrl-C, Ctrl-\, window size, hangup) has
 * reached the child already and is not sent again. When the child died of
 * a signal, tpaudit ends by the same signal. */
#define _GNU_SOURCE
#include "run_parts.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static volatile sig_atomic_t g_child;
static volatile sig_atomic_t g_stop;
static pid_t g_pgrp;
static sigset_t g_forwardable, g_saved_mask;
static struct sigaction g_saved[NSIG];
static unsigned char g_installed[NSIG];
static struct sigaction g_saved_pipe;

/* Synchronous faults, job-control stops (the terminal stops the whole
 * group, tpaudit with it), SIGCHLD and the uncatchable ones stay as they are. */
static int forwardable(int sig) {
    switch (sig) {
    case SIGKILL:
    case SIGSTOP:
    case SIGCHLD:
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
    case SIGTRAP:
    case SIGSYS:
    case SIGABRT:
    case SIGPIPE:
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU: return 0;
    default: return 1;
    }
}

static void on_signal(int sig, siginfo_t *info, void *uctx) {
    (void)uctx;
    pid_t child = g_child;
    if (child <= 0) {
        g_stop = 1;
        return;
    }
    /* Sent by the kernel to our foreground process group, which the child
     * is still in: it has this signal already. */
    if (info && info->si_code == SI_KERNEL && getpgid(child) == g_pgrp) return;
    kill(child, sig);
}

void tpa_run_signals_prepare(void) {
    g_pgrp = getpgrp();
    sigemptyset(&g_forwardable);
    for (int sig = 1; sig < NSIG; sig++)
        if (forwardable(sig)) sigaddset(&g_forwardable, sig);
    sigprocmask(SIG_BLOCK, &g_forwardable, &g_saved_mask);
    for (int sig = 1; sig < NSIG; sig++) {
        if (!forwardable(sig)) continue;
        struct sigaction old;
        if (sigaction(sig, NULL, &old) != 0) continue; /* glibc's reserved real-time signals */
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) continue; /* stays ignored */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sa.sa_mask = g_forwardable;
        if (sigaction(sig, &sa, &g_saved[sig]) == 0) g_installed[sig] = 1;
    }
    /* A closed stderr must not kill tpaudit while it reports; the child
     * gets the inherited SIGPIPE disposition back. */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &g_saved_pipe);
}

void tpa_run_signals_child(void) {
    for (int sig = 1; sig < NSIG; sig++)
        if (g_installed[sig]) sigaction(sig, &g_saved[sig], NULL);
    sigaction(SIGPIPE, &g_saved_pipe, NULL);
    sigprocmask(SIG_SETMASK, &g_saved_mask, NULL);
}

void tpa_run_signals_parent(pid_t child) {
    g_child = child;
    sigprocmask(SIG_SETMASK, &g_saved_mask, NULL);
}

void tpa_run_signals_child_gone(void) {
    sigset_t old;
    sigprocmask(SIG_BLOCK, &g_forwardable, &old);
    g_child = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
}

int tpa_run_signals_stop_requested(void) { return g_stop; }

void tpa_run_die_by(int sig) {
    fflush(NULL);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    kill(getpid(), sig);
}
