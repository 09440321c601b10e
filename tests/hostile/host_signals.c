/* host_signals.c - a host that records, then looks at or meets its signals:
 *   query        prints what sigaction and signal() answer for the signals
 *                it never set (SIG_DFL without the shim)
 *   curses       installs its clean-up handler on SIGTERM only where the
 *                action is SIG_DFL (as ncurses does), raises SIGTERM, exits 0
 *   term         sets SIGTERM to SIG_DFL itself, then raises it (dies of it)
 *   embed LIB    dlopens libpython (LIB), Py_Initialize, and raises SIGINT in
 *                Python: KeyboardInterrupt must come, rc 0
 *   pipe         an audit holding a stale parameter, 10,000 events, then
 *                writes to stdout until SIGPIPE ends it (run it | head -c 1)
 *   abort        the same audit and events, then abort()
 *   kill9        the same, then SIGKILL (no handler runs)
 * Without the shim every tpaudit_* call is a no-op. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostile_common.h"

static volatile sig_atomic_t g_cleaned;

static void clean_up(int sig) {
    (void)sig;
    g_cleaned = 1;
}

static const char *name_of(void (*h)(int)) { return h == SIG_DFL ? "default" : h == SIG_IGN ? "ignored" : "handler"; }

static int query(void) {
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGPIPE, SIGSEGV, SIGUSR1, SIGALRM};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction cur;
        sigaction(sigs[i], NULL, &cur);
        printf("%d sigaction %s flags %#x\n", sigs[i], name_of(cur.sa_handler), (unsigned)(cur.sa_flags & ~0x04000000));
    }
    void (*prev)(int) = signal(SIGUSR1, clean_up);
    printf("signal(SIGUSR1) was %s\n", name_of(prev));
    prev = signal(SIGUSR1, SIG_DFL);
    printf("signal(SIGUSR1) then %s\n", name_of(prev));
    struct sigaction back;
    sigaction(SIGUSR1, NULL, &back);
    printf("SIGUSR1 now %s\n", name_of(back.sa_handler));
    return 0;
}

static int curses(void) {
    struct sigaction cur;
    sigaction(SIGTERM, NULL, &cur);
    if (cur.sa_handler == SIG_DFL) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = clean_up;
        sigaction(SIGTERM, &sa, NULL);
    }
    raise(SIGTERM);
    printf("cleaned up: %d\n", (int)g_cleaned);
    return g_cleaned ? 0 : 1;
}

static int embed(const char *lib) {
    void *py = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (!py) {
        fprintf(stderr, "host_signals: %s\n", dlerror());
        return 77;
    }
    void (*init)(void) = (void (*)(void))dlsym(py, "Py_Initialize");
    int (*run)(const char *) = (int (*)(const char *))dlsym(py, "PyRun_SimpleString");
    int (*fin)(void) = (int (*)(void))dlsym(py, "Py_FinalizeEx");
    if (!init || !run || !fin) return 77;
    init();
    int rc = run("import os, signal, sys, time\n"
                 "print('getsignal', signal.getsignal(signal.SIGINT) is signal.default_int_handler, flush=True)\n"
                 "try:\n"
                 "    os.kill(os.getpid(), signal.SIGINT)\n"
                 "    time.sleep(2)\n"
                 "    print('no KeyboardInterrupt', flush=True)\n"
                 "    sys.exit(1)\n"
                 "except KeyboardInterrupt:\n"
                 "    print('KeyboardInterrupt', flush=True)\n");
    fin();
    return rc == 0 ? 0 : 1;
}

static void add_ref(int holder, int role, const char *path, uint64_t key) {
    tpaudit_ref_t r = TPAUDIT_INIT_REF;
    r.holder_kind = holder;
    r.holder_class = holder == TPAUDIT_HOLDER_MODULE ? "Net" : "SGD";
    r.holder_id = (uint64_t)holder * 10;
    r.path = path;
    r.role = role;
    r.tensor_key = key;
    tpaudit_record_ref(&r);
}

/* An audit whose optimizer holds a parameter the model no longer has. */
static void stale_audit(void) {
    int64_t id = tpaudit_audit_begin("step", 1);
    int64_t shape[1] = {1024};
    for (uint64_t key = 1; key <= 2; key++) {
        tpaudit_tensor_t t = TPAUDIT_INIT_TENSOR;
        t.key = key;
        t.name = key == 1 ? "fc.weight" : "old.weight";
        t.ndim = 1;
        t.shape = shape;
        t.dtype = "float32";
        t.device = "cpu";
        t.storage_ptr = 4096 * key;
        t.storage_bytes = t.nbytes = 4096;
        t.type = "Parameter";
        tpaudit_record_tensor(&t);
    }
    add_ref(TPAUDIT_HOLDER_MODULE, TPAUDIT_ROLE_PARAM, "fc.weight", 1);
    add_ref(TPAUDIT_HOLDER_OPTIMIZER, TPAUDIT_ROLE_GROUP_PARAM, "param_groups[0].params[0]", 1);
    add_ref(TPAUDIT_HOLDER_OPTIMIZER, TPAUDIT_ROLE_GROUP_PARAM, "param_groups[0].params[1]", 2);
    tpaudit_audit_end(id);
    for (uint64_t k = 0; k < 10000; k++) host_event(1000 + k);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "query";
    host_event(1);
    if (!strcmp(mode, "query")) return query();
    if (!strcmp(mode, "curses")) return curses();
    if (!strcmp(mode, "term")) {
        signal(SIGTERM, SIG_DFL);
        raise(SIGTERM);
        return 1;
    }
    if (!strcmp(mode, "embed") && argc > 2) return embed(argv[2]);
    if (!strcmp(mode, "pipe") || !strcmp(mode, "abort") || !strcmp(mode, "kill9")) {
        stale_audit();
        if (!strcmp(mode, "abort")) abort();
        if (!strcmp(mode, "kill9")) raise(SIGKILL);
        for (;;) fputs("line of output\n", stdout);
    }
    return 2;
}
