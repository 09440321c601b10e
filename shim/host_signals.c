/* host_signals.c - the shim's signal handlers, out of the host's sight.
 * process_life.c puts one handler on the signals that end a process by
 * default (tpa_sig_take), so that what is queued is committed before the
 * process dies of them; only over SIG_DFL, never over a host handler or an
 * ignored signal.  The host must see the dispositions it would see without
 * the shim, so sigaction, signal, bsd_signal, sysv_signal and __sysv_signal
 * are interposed: where the shim's handler stands for the default, a query
 * answers the default the host last set (or found); a handler or SIG_IGN of
 * the host's replaces the shim's, which gives the signal up; SIG_DFL set by
 * the host keeps the shim's handler, or puts it there (a Python program that
 * sets SIGPIPE back to SIG_DFL gets the flush too).  The shim takes a signal only where
 * these interposers are what the process calls (LD_PRELOAD); loaded later
 * (dlopen, CUDA_INJECTION64_PATH) it takes none.  Every call here is
 * async-signal-safe: no lock, no allocation (the real functions are resolved
 * in the constructor, tpa_sig_resolve). */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "shim_internal.h"

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef void (*handler_fn)(int);
typedef handler_fn (*signal_fn)(int, handler_fn);

static sigaction_fn r_sigaction;
static signal_fn r_signal, r_bsd_signal, r_sysv_signal, r___sysv_signal;
static _Atomic int g_taken[_NSIG];     /* the shim's handler stands for SIG_DFL */
static _Atomic int g_wanted[_NSIG];    /* retaken when the host sets SIG_DFL again */
static struct sigaction g_view[_NSIG]; /* what a query of a taken signal answers */
static handler_fn g_handler;

static void *next_sym(const char *name) { return dlsym(RTLD_NEXT, name); }

void tpa_sig_resolve(void) {
    void *p;
    if (!r_sigaction && (p = next_sym("sigaction"))) memcpy(&r_sigaction, &p, sizeof p);
    if (!r_signal && (p = next_sym("signal"))) memcpy(&r_signal, &p, sizeof p);
    if (!r_bsd_signal && (p = next_sym("bsd_signal"))) memcpy(&r_bsd_signal, &p, sizeof p);
    if (!r_sysv_signal && (p = next_sym("sysv_signal"))) memcpy(&r_sysv_signal, &p, sizeof p);
    if (!r___sysv_signal && (p = next_sym("__sysv_signal"))) memcpy(&r___sysv_signal, &p, sizeof p);
}

static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (!r_sigaction) tpa_sig_resolve();
    if (!r_sigaction) {
        errno = ENOSYS;
        return -1;
    }
    return r_sigaction(sig, act, old);
}

static int is_default(const struct sigaction *a) { return !(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_DFL; }

static int in_range(int sig) { return sig > 0 && sig < _NSIG; }

/* The shim's handler over SIG_DFL; `view` is what the host will be shown. */
static int put_handler(int sig, const struct sigaction *view) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = g_handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    g_view[sig] = *view;
    if (real_sigaction(sig, &sa, NULL) != 0) return -1;
    atomic_store(&g_taken[sig], 1);
    return 0;
}

/* 1 when the process's calls to sigaction reach this file. */
static int interposed(void) {
    Dl_info mine, theirs;
    void *seen = dlsym(RTLD_DEFAULT, "sigaction");
    return seen && dladdr((void *)tpa_sig_resolve, &mine) && dladdr(seen, &theirs) &&
           mine.dli_fbase == theirs.dli_fbase;
}

int tpa_sig_take(int sig, void (*handler)(int)) {
    if (!in_range(sig) || !interposed()) return -1;
    g_handler = handler;
    atomic_store(&g_wanted[sig], 1); /* also when the host sets SIG_DFL later */
    struct sigaction cur;
    if (real_sigaction(sig, NULL, &cur) != 0 || !is_default(&cur)) return -1; /* the host's, or ignored */
    return put_handler(sig, &cur);
}

/* From the shim's handler: the host's default back, then the signal again
 * (unblocked), so the process ends as it would have without the shim. */
void tpa_sig_die_of(int sig) {
    if (!in_range(sig)) return;
    atomic_store(&g_wanted[sig], 0);
    atomic_store(&g_taken[sig], 0);
    struct sigaction dfl = g_view[sig];
    dfl.sa_handler = SIG_DFL;
    dfl.sa_flags &= ~SA_SIGINFO;
    real_sigaction(sig, &dfl, NULL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
}

TPA_API int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (!in_range(sig) || !atomic_load(&g_wanted[sig])) return real_sigaction(sig, act, old);
    if (!atomic_load(&g_taken[sig])) { /* the host's handler: the shim comes back only over SIG_DFL */
        if (!act || !is_default(act)) return real_sigaction(sig, act, old);
        struct sigaction prev;
        if (real_sigaction(sig, NULL, &prev) != 0) return -1;
        if (put_handler(sig, act) != 0) return real_sigaction(sig, act, old);
        if (old) *old = prev;
        return 0;
    }
    struct sigaction shown = g_view[sig];
    if (act && !is_default(act)) {
        atomic_store(&g_taken[sig], 0);
        if (real_sigaction(sig, act, NULL) != 0) {
            atomic_store(&g_taken[sig], 1);
            return -1;
        }
    } else if (act) {
        g_view[sig] = *act;
    }
    if (old) *old = shown;
    return 0;
}

/* signal() and its variants: the real one unless the shim wants the
 * signal, else the same action through sigaction above (bsd: SA_RESTART,
 * the signal masked in its handler; sysv: one shot, not masked). */
static handler_fn set_handler(signal_fn real, int sig, handler_fn h, int sysv) {
    if (!in_range(sig) || !atomic_load(&g_wanted[sig])) {
        if (!real) tpa_sig_resolve();
        if (real) return real(sig, h);
    }
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    if (sysv) {
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    } else {
        sigaddset(&sa.sa_mask, sig);
        sa.sa_flags = SA_RESTART;
    }
    if (sigaction(sig, &sa, &old) != 0) return SIG_ERR;
    return old.sa_handler;
}

TPA_API handler_fn signal(int sig, handler_fn h) { return set_handler(r_signal, sig, h, 0); }
TPA_API handler_fn bsd_signal(int sig, handler_fn h) { return set_handler(r_bsd_signal, sig, h, 0); }
TPA_API handler_fn sysv_signal(int sig, handler_fn h) { return set_handler(r_sysv_signal, sig, h, 1); }
TPA_API handler_fn __sysv_signal(int sig, handler_fn h) { return set_handler(r___sysv_signal, sig, h, 1); }
