/* tprt_main.c - the tprt command line.  `tprt train` checks its options,
 * forks the tensor-parallel ranks over shared-memory collectives (NCCL on
 * the device path, one GPU per rank) and trains GPT-2 on synthetic tokens.
 * The parent process is rank 0 and the supervisor (so there is one process,
 * and one tpaudit database, per rank): a rank that dies or fails marks the
 * collectives dead, every other rank fails out of its next collective, the
 * parent stops the rest, waits for all of them and exits 1.  Bad input:
 * one "tprt: ..." line, exit 2.  Per-device work goes through backend.h. */
#define _DEFAULT_SOURCE
#include "backend.h"
#include "model.h"
#include "tpaudit.h"
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 64

typedef struct {
    const char *model, *device;
    int tp, steps, batch, seq, policy;
    unsigned long long seed;
    float lr;
    double timeout;
} options;

static const char USAGE[] =
    "usage: tprt train [--model tiny|gpt2-124m] [--tp N] [--device cpu|cuda] [--steps S] [--batch B]\n"
    "                  [--seq T] [--policy buggy|fixed] [--seed K] [--lr X] [--timeout SECONDS]\n"
    "  Trains GPT-2 with N tensor-parallel ranks (forked processes) on synthetic tokens and\n"
    "  prints \"step S loss L tokens/s R\" per step. Defaults: tiny, 1, cpu, 20, 4, 64, fixed, 1, 1e-3, 60.\n"
    "  --policy buggy replaces the embedding after the optimizer exists (the bug tpaudit finds).\n"
    "exit: 0 trained, 1 a rank failed, 2 bad options\n";

static int bad(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("tprt: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

static int parse_num(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || v < lo || v > hi) return bad("%s: bad value '%s'", opt, s);
    *out = v;
    return 0;
}

static int parse(int argc, char **argv, options *o) {
    *o = (options){"tiny", "cpu", 1, 20, 4, 64, TPRT_POLICY_FIXED, 1, 1e-3f, 60.0};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2)) return bad("unexpected argument '%s'", a);
        if (i + 1 >= argc) return bad("%s needs a value", a);
        const char *v = argv[++i];
        double x = 0;
        int rc = 0;
        if (!strcmp(a, "--model"))
            o->model = v;
        else if (!strcmp(a, "--device"))
            o->device = v;
        else if (!strcmp(a, "--policy")) {
            if (!strcmp(v, "buggy"))
                o->policy = TPRT_POLICY_BUGGY;
            else if (!strcmp(v, "fixed"))
                o->policy = TPRT_POLICY_FIXED;
            else
                return bad("--policy: unknown policy '%s' (buggy, fixed)", v);
        } else if (!strcmp(a, "--tp")) {
            if (!(rc = parse_num(a, v, 1, MAX_RANKS, &x))) o->tp = (int)x;
        } else if (!strcmp(a, "--steps")) {
            if (!(rc = parse_num(a, v, 0, 1e9, &x))) o->steps = (int)x;
        } else if (!strcmp(a, "--batch")) {
            if (!(rc = parse_num(a, v, 1, 1 << 16, &x))) o->batch = (int)x;
        } else if (!strcmp(a, "--seq")) {
            if (!(rc = parse_num(a, v, 1, 1 << 16, &x))) o->seq = (int)x;
        } else if (!strcmp(a, "--seed")) {
            if (!(rc = parse_num(a, v, 0, 1e18, &x))) o->seed = (unsigned long long)x;
        } else if (!strcmp(a, "--lr")) {
            if (!(rc = parse_num(a, v, 1e-12, 10, &x))) o->lr = (float)x;
        } else if (!strcmp(a, "--timeout")) {
            if (!(rc = parse_num(a, v, 0.1, 86400, &x))) o->timeout = x;
        } else
            return bad("unknown option %s", a);
        if (rc) return rc;
        if (x != (double)(long long)x && strcmp(a, "--lr") && strcmp(a, "--timeout"))
            return bad("%s: not an integer '%s'", a, v);
    }
    gpt2_config c;
    if (gpt2_config_named(o->model, &c)) return bad("--model: unknown model '%s' (tiny, gpt2-124m)", o->model);
    const tprt_backend *be = tprt_backend_named(o->device);
    if (!be && !strcmp(o->device, "cuda")) return bad("--device cuda: this build has no CUDA backend");
    if (!be) return bad("--device: unknown device '%s' (cpu, cuda)", o->device);
    char why[160];
    if (be->check(o->tp, why, sizeof why)) return bad("--device %s: %s", o->device, why);
    if (o->tp > c.n_head) return bad("--tp %d is larger than the %d heads of %s", o->tp, c.n_head, o->model);
    if (c.n_head % o->tp) return bad("--tp %d does not divide the %d heads of %s", o->tp, c.n_head, o->model);
    if (o->seq > c.max_seq) return bad("--seq %d is longer than the %d positions of %s", o->seq, c.max_seq, o->model);
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Prints why a rank stops (the backend's words, else the comm's); makes the
 * other ranks fail out of their collectives. */
static int rank_fail(const tprt_backend *be, tprt_comm *c, const char *what, int rc) {
    if (be && be->explain)
        be->explain(c, what, rc);
    else if (rc < 0 && c->error[0])
        fprintf(stderr, "tprt: rank %d: %s: %s\n", c->rank, what, c->error);
    else
        fprintf(stderr, "tprt: rank %d: %s failed (out of memory?)\n", c->rank, what);
    if (c->world > 1 && rc != TPRT_COMM_EABORT) c->ops->abort(c, c->rank);
    return 1;
}

static int g_device; /* this rank's GPU (set when it joins its rank group) */

/* One step's forward, backward and (step 1, TP>1) replicated-grad check; 0 or the rank's exit status. */
static int rank_grads(const tprt_backend *be, void *st, tprt_comm *comm, const int *tok, const int *tgt, int step) {
    int rc;
    be->zero_grad(st);
    if ((rc = be->forward(st, tok, tgt, comm))) return rank_fail(be, comm, "forward", rc);
    if ((rc = be->backward(st, comm))) return rank_fail(be, comm, "backward", rc);
    if (step == 1 && comm->world > 1) { /* replicated grads agree on every rank (CPU: bit for bit) */
        char why[160];
        if ((rc = be->check_replicated_grads(st, comm, why, sizeof why)) > 0) {
            fprintf(stderr, "tprt: rank %d: %s\n", comm->rank, why);
            return 1;
        }
        if (rc) return rank_fail(be, comm, "grad check", rc);
    }
    return 0;
}

static int rank_main(const options *op, tprt_comm *comm) {
    tpaudit_set_rank(comm->rank, comm->world);
    gpt2_config cfg;
    gpt2_config_named(op->model, &cfg);
    const tprt_backend *be = tprt_backend_named(op->device);
    int BT = op->batch * op->seq, rc = 0, status = 0;
    void *st = NULL;
    gpt2_model *m = gpt2_create(&cfg, op->seed);
    tprt_adamw *o = m ? tprt_adamw_create(m, op->lr, 0.1f, 1.0f) : NULL;
    /* two batches: step s's in half s % 2, so the next one is made while this one's backward runs */
    int *tok = malloc(2 * sizeof(int) * (size_t)BT), *tgt = malloc(2 * sizeof(int) * (size_t)BT);
    if (!m || !o || !tok || !tgt) {
        status = rank_fail(NULL, comm, "model setup", -1);
        goto done;
    }
    tprt_audit_created(o);
    /* the policy runs after the optimizer exists, as in the ColossalAI flow */
    if ((rc = tp_policy_apply(m, o, op->policy, comm))) {
        status = rank_fail(NULL, comm, "tensor-parallel setup", rc);
        goto done;
    }
    if (!(st = be->create(m, o, op->batch, op->seq, g_device))) {
        status = rank_fail(be, comm, "setup", -1);
        goto done;
    }
    tprt_synthetic_batch(tok + BT, tgt + BT, op->batch, op->seq, cfg.vocab, op->seed, 1);
    for (int step = 1; step <= op->steps; step++) {
        double t0 = now_s();
        size_t cur = (size_t)(step % 2) * (size_t)BT, next = (size_t)BT - cur;
        if ((status = rank_grads(be, st, comm, tok + cur, tgt + cur, step))) goto done;
        /* the forward has read this batch; the device's backward is still under way (CUDA) */
        if (step < op->steps)
            tprt_synthetic_batch(tok + next, tgt + next, op->batch, op->seq, cfg.vocab, op->seed, step + 1);
        if (tprt_audit_wanted(step)) tprt_audit(m, o, "step", step);
        if ((rc = be->step(st, comm))) {
            status = rank_fail(be, comm, "optimizer step", rc);
            goto done;
        }
        double dt = now_s() - t0;
        if (comm->rank == 0) {
            printf("step %d loss %.6f tokens/s %.0f\n", step, m->loss, (double)BT / (dt > 0 ? dt : 1e-9));
            fflush(stdout);
        }
    }
    if (tprt_audit_wanted(-1)) tprt_audit(m, o, "exit", -1);
done:
    if (st) be->destroy(st);
    tprt_adamw_free(o, m);
    gpt2_free(m);
    free(tok);
    free(tgt);
    return status;
}

/* ---- the supervisor (rank 0's process) ---- */
static tprt_shm *g_shm;
static const tprt_rank_group *g_group; /* the device's own communicator at TP>1, else NULL */

/* One rank: its communicator (the device's rank group, else the shared segment), then training. */
static int run_rank(const options *op, int r) {
    tprt_comm c;
    if (g_group) {
        int st = g_group->join(r, op->tp, op->timeout, &c, &g_device);
        if (st) return st;
        st = rank_main(op, &c);
        g_group->leave(&c);
        return st;
    }
    tprt_shm_attach(g_shm, &c, r);
    return rank_main(op, &c);
}

static void mark_dead(int r) { /* async-signal-safe */
    tprt_shm_mark_dead(g_shm, r);
    if (g_group) g_group->mark_dead(r);
}
static pid_t g_pid[MAX_RANKS];
static int g_status[MAX_RANKS];
static volatile sig_atomic_t g_done[MAX_RANKS], g_world, g_reaped;

static int failed(int st) { return !WIFEXITED(st) || WEXITSTATUS(st) != 0; }

static void on_sigchld(int sig) {
    (void)sig;
    int saved = errno;
    for (int r = 1; r < g_world; r++) {
        int st;
        if (g_done[r] || g_pid[r] <= 0 || waitpid(g_pid[r], &st, WNOHANG) != g_pid[r]) continue;
        g_status[r] = st;
        g_done[r] = 1;
        g_reaped++;
        if (failed(st)) mark_dead(r); /* atomic: async-signal-safe */
    }
    errno = saved;
}

/* Waits until every child is reaped or `secs` pass; returns nonzero if all were. */
static int wait_children(double secs) {
    double end = now_s() + secs;
    while (g_reaped < g_world - 1 && now_s() < end) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        on_sigchld(SIGCHLD); /* also catches a signal that raced the check */
    }
    return g_reaped == g_world - 1;
}

static void signal_children(int sig) {
    for (int r = 1; r < g_world; r++)
        if (!g_done[r] && g_pid[r] > 0) kill(g_pid[r], sig);
}

static int train(const options *op) {
    int N = op->tp;
    if (N == 1) {
        tprt_comm c;
        memset(&c, 0, sizeof c);
        c.world = 1;
        return rank_main(op, &c);
    }
    if (!(g_shm = tprt_shm_create(N, op->timeout))) {
        fprintf(stderr, "tprt: cannot map shared memory for %d ranks\n", N);
        return 1;
    }
    g_group = tprt_backend_named(op->device)->group;
    if (g_group && g_group->prepare(N)) {
        fprintf(stderr, "tprt: cannot map shared memory for %d ranks\n", N);
        return 1;
    }
    g_world = N;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigchld;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old); /* no SIGCHLD before the pid is stored */
    pid_t parent = getpid();
    fflush(NULL);
    int status = 0;
    for (int r = 1; r < N && !status; r++) {
        pid_t p = fork();
        if (p < 0) {
            fprintf(stderr, "tprt: fork: %s\n", strerror(errno));
            mark_dead(0);
            status = 1;
            break;
        }
        if (p == 0) {
            signal(SIGCHLD, SIG_DFL);
            sigprocmask(SIG_SETMASK, &old, NULL);
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* rank 0 gone: so are we */
            if (getppid() != parent) _exit(1);
            exit(run_rank(op, r)); /* exit, not _exit: the shim closes its database */
        }
        g_pid[r] = p;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (!status) status = run_rank(op, 0);
    if (status == 2) { /* the device path refused (rank 0 said why): the others exit 2 silently */
        if (!wait_children(5.0)) {
            signal_children(SIGKILL);
            wait_children(5.0);
        }
        return 2;
    }
    int culprit[MAX_RANKS] = {0}, stopped[MAX_RANKS] = {0};
    for (int r = 1; r < N; r++) culprit[r] = g_done[r] && failed(g_status[r]);
    if (status && !wait_children(2.0)) { /* the others fail out of their collectives; stop stragglers */
        for (int r = 1; r < N; r++) stopped[r] = !g_done[r];
        signal_children(SIGTERM);
        if (!wait_children(5.0)) {
            signal_children(SIGKILL);
            wait_children(5.0);
        }
    } else if (!wait_children(op->timeout)) {
        fprintf(stderr, "tprt: ranks still running %.0f s after rank 0 finished; killing them\n", op->timeout);
        signal_children(SIGKILL);
        wait_children(5.0);
        status = 1;
    }
    for (int r = 1; r < N; r++) {
        if (!g_done[r] || !failed(g_status[r])) continue;
        int st = g_status[r];
        if (stopped[r] && !culprit[r])
            fprintf(stderr, "tprt: rank %d (pid %d) stopped\n", r, (int)g_pid[r]);
        else if (WIFSIGNALED(st))
            fprintf(stderr, "tprt: rank %d (pid %d) was killed by signal %d\n", r, (int)g_pid[r], WTERMSIG(st));
        else
            fprintf(stderr, "tprt: rank %d (pid %d) exited with status %d\n", r, (int)g_pid[r], WEXITSTATUS(st));
        status = 1;
    }
    if (status) fprintf(stderr, "tprt: training aborted: a rank failed, all %d ranks stopped\n", N);
    return status;
}

int main(int argc, char **argv) {
    if (argc < 2) return bad("usage: tprt train [options] (see tprt --help)");
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fputs(USAGE, stdout);
        return 0;
    }
    if (strcmp(argv[1], "train")) return bad("unknown command '%s' (train)", argv[1]);
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(USAGE, stdout);
            return 0;
        }
    options op;
    int rc = parse(argc, argv, &op);
    if (rc) return rc;
    return train(&op);
}
