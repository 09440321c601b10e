/* tprt_main.c - the tprt command line.  `tprt train` checks its options,
 * forks the tensor-parallel ranks over shared-memory collectives (NCCL on
 * the device path, one GPU per rank) and trains GPT-2 on synthetic tokens.
 * The parent process is rank 0 and the supervisor (so there is one process,
 * and one tpaudit database, per rank): a rank that dies or fails marks the
 * collectives dead, every other rank fails out of its next collective, the
 * parent stops the rest, waits for all of them and exits 1.  Bad input:
 * one "tprt: ..." line, exit 2. */
#define _DEFAULT_SOURCE
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

#ifndef TPRT_HAVE_CUDA
#define TPRT_HAVE_CUDA 0
#endif
#ifndef TPRT_HAVE_NCCL
#define TPRT_HAVE_NCCL 0
#endif
#if TPRT_HAVE_CUDA
#include "gpt2_cuda.h" /* kernels/cuda: the device path */
#endif
#if TPRT_HAVE_NCCL
#include "collectives_nccl.h" /* its collectives at TP>1: one rank per GPU */
#endif
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
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--device")) o->device = v;
        else if (!strcmp(a, "--policy")) {
            if (!strcmp(v, "buggy")) o->policy = TPRT_POLICY_BUGGY;
            else if (!strcmp(v, "fixed")) o->policy = TPRT_POLICY_FIXED;
            else return bad("--policy: unknown policy '%s' (buggy, fixed)", v);
        } else if (!strcmp(a, "--tp")) { if (!(rc = parse_num(a, v, 1, MAX_RANKS, &x))) o->tp = (int)x; }
        else if (!strcmp(a, "--steps")) { if (!(rc = parse_num(a, v, 0, 1e9, &x))) o->steps = (int)x; }
        else if (!strcmp(a, "--batch")) { if (!(rc = parse_num(a, v, 1, 1 << 16, &x))) o->batch = (int)x; }
        else if (!strcmp(a, "--seq")) { if (!(rc = parse_num(a, v, 1, 1 << 16, &x))) o->seq = (int)x; }
        else if (!strcmp(a, "--seed")) { if (!(rc = parse_num(a, v, 0, 1e18, &x))) o->seed = (unsigned long long)x; }
        else if (!strcmp(a, "--lr")) { if (!(rc = parse_num(a, v, 1e-12, 10, &x))) o->lr = (float)x; }
        else if (!strcmp(a, "--timeout")) { if (!(rc = parse_num(a, v, 0.1, 86400, &x))) o->timeout = x; }
        else return bad("unknown option %s", a);
        if (rc) return rc;
        if (x != (double)(long long)x && strcmp(a, "--lr") && strcmp(a, "--timeout")) return bad("%s: not an integer '%s'", a, v);
    }
    gpt2_config c;
    if (gpt2_config_named(o->model, &c)) return bad("--model: unknown model '%s' (tiny, gpt2-124m)", o->model);
    if (!strcmp(o->device, "cuda") && !TPRT_HAVE_CUDA) return bad("--device cuda: this build has no CUDA backend");
    if (strcmp(o->device, "cpu") && strcmp(o->device, "cuda")) return bad("--device: unknown device '%s' (cpu, cuda)", o->device);
#if TPRT_HAVE_CUDA
    if (!strcmp(o->device, "cuda")) {
        char why[160];
        if (o->tp != 1 && !TPRT_HAVE_NCCL) return bad("--device cuda: --tp %d: this build has no NCCL backend", o->tp);
        /* TP>1: rank 0 counts the GPUs after fork() (a CUDA context must not cross a fork) */
        if (o->tp == 1 && tprt_cuda_available(why, sizeof why)) return bad("--device cuda: %s", why);
    }
#endif
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

/* Prints why a rank stops; makes the other ranks fail out of their collectives. */
static int rank_fail(tprt_comm *c, const char *what, int rc) {
    if (rc < 0 && c->error[0]) fprintf(stderr, "tprt: rank %d: %s: %s\n", c->rank, what, c->error);
    else fprintf(stderr, "tprt: rank %d: %s failed (out of memory?)\n", c->rank, what);
    if (c->world > 1 && rc != TPRT_COMM_EABORT) c->ops->abort(c, c->rank);
    return 1;
}

static int g_device __attribute__((unused)); /* this rank's GPU (device path; unused without CUDA) */

/* A device-path failure: prints it; the other ranks' collectives fail too. */
static int cuda_rank_fail(tprt_comm *c, int rc) {
#if TPRT_HAVE_CUDA
    fprintf(stderr, "tprt: rank %d: CUDA: %s\n", c->rank, tprt_cuda_error());
#endif
    if (c->world > 1 && rc != TPRT_COMM_EABORT) c->ops->abort(c, c->rank);
    return 1;
}

static int rank_main(const options *op, tprt_comm *comm) {
    tpaudit_set_rank(comm->rank, comm->world);
    gpt2_config cfg;
    gpt2_config_named(op->model, &cfg);
    int BT = op->batch * op->seq, rc = 0, status = 0, cuda = !strcmp(op->device, "cuda");
#if TPRT_HAVE_CUDA
    tprt_cuda_model *dev = NULL;
#endif
    gpt2_model *m = gpt2_create(&cfg, op->seed);
    tprt_adamw *o = m ? tprt_adamw_create(m, op->lr, 0.1f, 1.0f) : NULL;
    int *tok = malloc(sizeof(int) * (size_t)BT), *tgt = malloc(sizeof(int) * (size_t)BT);
    if (!m || !o || !tok || !tgt) { status = rank_fail(comm, "model setup", -1); goto done; }
    tprt_audit_created(o);
    /* the policy runs after the optimizer exists, as in the ColossalAI flow */
    if ((rc = tp_policy_apply(m, o, op->policy, comm)) || (!cuda && (rc = gpt2_alloc_acts(m, op->batch, op->seq)))) {
        status = rank_fail(comm, "tensor-parallel setup", rc);
        goto done;
    }
#if TPRT_HAVE_CUDA
    if (cuda) { /* weights, masters, state and activations move to the device; the host copies stay as built */
        m->B = op->batch, m->T = op->seq;
        if (!(dev = tprt_cuda_create(m, o, op->batch, op->seq, g_device))) {
            fprintf(stderr, "tprt: rank %d: CUDA setup: %s\n", comm->rank, tprt_cuda_error());
            if (comm->world > 1) comm->ops->abort(comm, comm->rank);
            status = 1;
            goto done;
        }
    }
#endif
    for (int step = 1; step <= op->steps; step++) {
        double t0 = now_s();
        tprt_synthetic_batch(tok, tgt, op->batch, op->seq, cfg.vocab, op->seed, step);
#if TPRT_HAVE_CUDA
        if (cuda) {
            tprt_cuda_zero_grad(dev);
            if ((rc = tprt_cuda_forward(dev, tok, tgt, comm)) || (rc = tprt_cuda_backward(dev, comm))) {
                status = cuda_rank_fail(comm, rc);
                goto done;
            }
        } else
#endif
        {
            gpt2_zero_grad(m);
            if ((rc = gpt2_forward(m, tok, tgt, comm))) { status = rank_fail(comm, "forward", rc); goto done; }
            if ((rc = gpt2_backward(m, comm))) { status = rank_fail(comm, "backward", rc); goto done; }
        }
        if (step == 1 && comm->world > 1) { /* replicated grads agree on every rank (CPU: bit for bit) */
            char why[160];
#if TPRT_HAVE_CUDA
            rc = cuda ? tprt_cuda_check_replicated_grads(dev, comm, why, sizeof why)
                      : gpt2_check_replicated_grads(m, comm, why, sizeof why);
#else
            rc = gpt2_check_replicated_grads(m, comm, why, sizeof why);
#endif
            if (rc) {
                if (rc > 0) fprintf(stderr, "tprt: rank %d: %s\n", comm->rank, why);
                status = rc > 0 ? 1 : cuda ? cuda_rank_fail(comm, rc) : rank_fail(comm, "grad check", rc);
                goto done;
            }
        }
        if (tprt_audit_wanted(step)) tprt_audit(m, o, "step", step);
#if TPRT_HAVE_CUDA
        if (cuda && (rc = tprt_cuda_step(dev, comm))) {
            status = cuda_rank_fail(comm, rc);
            goto done;
        }
#endif
        if (!cuda && (rc = tprt_adamw_step(o, m, comm))) { status = rank_fail(comm, "optimizer step", rc); goto done; }
        double dt = now_s() - t0;
        if (comm->rank == 0) {
            printf("step %d loss %.6f tokens/s %.0f\n", step, m->loss, (double)BT / (dt > 0 ? dt : 1e-9));
            fflush(stdout);
        }
    }
    if (tprt_audit_wanted(-1)) tprt_audit(m, o, "exit", -1);
done:
#if TPRT_HAVE_CUDA
    if (dev) tprt_cuda_profile_report(dev, stderr);
    tprt_cuda_free(dev);
#endif
    tprt_adamw_free(o, m);
    gpt2_free(m);
    free(tok);
    free(tgt);
    return status;
}

/* ---- the supervisor (rank 0's process) ---- */
static tprt_shm *g_shm;
#if TPRT_HAVE_NCCL
static tprt_nccl_rdv *g_rdv; /* device path at TP>1: the NCCL id and the dead-rank word */

static int shared_gpu_allowed(void) {
    const char *v = getenv("TPRT_ALLOW_SHARED_GPU");
    return v && !strcmp(v, "1");
}

/* Rank r joins the NCCL communicator.  Rank 0 (CUDA untouched before the
 * fork) counts the GPUs, refuses too few, and hands the unique id to the
 * others through g_rdv.  0 joined; 2 refused (rank 0 said why, once); 1 failed. */
static int nccl_join(const options *op, int r, tprt_comm *c) {
    char why[200] = "";
    int ndev = 0, verdict;
    memset(c, 0, sizeof *c);
    if (r == 0) {
        verdict = 0;
        if ((ndev = tprt_cuda_device_count(why, sizeof why)) < 0) verdict = bad("--device cuda: %s", why);
        else if (ndev < op->tp && !shared_gpu_allowed())
            verdict = bad("--tp %d needs %d GPUs, this machine has %d (NCCL refuses two ranks of one communicator on one "
                          "GPU; TPRT_ALLOW_SHARED_GPU=1 tries it anyway, over loopback sockets)", op->tp, op->tp, ndev);
        if (!verdict && ndev < op->tp) {
            fprintf(stderr, "tprt: TPRT_ALLOW_SHARED_GPU=1: %d ranks on %d GPU(s), one NCCL_HOSTID per rank, loopback "
                            "sockets (slow; for testing)\n", op->tp, ndev);
            tprt_nccl_shared_gpu_env(r);
        }
        if (tprt_nccl_publish(g_rdv, verdict, ndev, why, sizeof why)) {
            fprintf(stderr, "tprt: rank 0: %s\n", why);
            return 1;
        }
        if (verdict) return verdict;
    } else {
        verdict = tprt_nccl_wait(g_rdv, op->timeout, &ndev, why, sizeof why);
        if (verdict) {
            if (why[0]) fprintf(stderr, "tprt: rank %d: %s\n", r, why);
            return verdict;
        }
        if (ndev < op->tp) tprt_nccl_shared_gpu_env(r);
    }
    g_device = r % ndev;
    if (tprt_nccl_attach(c, g_rdv, r, op->tp, g_device, op->timeout)) {
        fprintf(stderr, "tprt: rank %d: GPU %d: %s\n", r, g_device, c->error);
        tprt_nccl_detach(c);
        return 1;
    }
    return 0;
}
#endif

/* One rank: its communicator (NCCL on the device path at TP>1, else the shared segment), then training. */
static int run_rank(const options *op, int r) {
    tprt_comm c;
#if TPRT_HAVE_NCCL
    if (g_rdv) {
        int st = nccl_join(op, r, &c);
        if (st) return st;
        st = rank_main(op, &c);
        tprt_nccl_detach(&c);
        return st;
    }
#endif
    tprt_shm_attach(g_shm, &c, r);
    return rank_main(op, &c);
}

static void mark_dead(int r) { /* async-signal-safe */
    tprt_shm_mark_dead(g_shm, r);
#if TPRT_HAVE_NCCL
    tprt_nccl_mark_dead(g_rdv, r);
#endif
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
    for (int r = 1; r < g_world; r++) if (!g_done[r] && g_pid[r] > 0) kill(g_pid[r], sig);
}

static int train(const options *op) {
    int N = op->tp;
    if (N == 1) {
        tprt_comm c;
        memset(&c, 0, sizeof c);
        c.world = 1;
        return rank_main(op, &c);
    }
    if (!(g_shm = tprt_shm_create(N, op->timeout))) { fprintf(stderr, "tprt: cannot map shared memory for %d ranks\n", N); return 1; }
#if TPRT_HAVE_NCCL
    if (!strcmp(op->device, "cuda") && !(g_rdv = tprt_nccl_rdv_create(N))) {
        fprintf(stderr, "tprt: cannot map shared memory for %d ranks\n", N);
        return 1;
    }
#endif
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
        if (p < 0) { fprintf(stderr, "tprt: fork: %s\n", strerror(errno)); mark_dead(0); status = 1; break; }
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
        if (!wait_children(5.0)) { signal_children(SIGKILL); wait_children(5.0); }
        return 2;
    }
    int culprit[MAX_RANKS] = {0}, stopped[MAX_RANKS] = {0};
    for (int r = 1; r < N; r++) culprit[r] = g_done[r] && failed(g_status[r]);
    if (status && !wait_children(2.0)) { /* the others fail out of their collectives; stop stragglers */
        for (int r = 1; r < N; r++) stopped[r] = !g_done[r];
        signal_children(SIGTERM);
        if (!wait_children(5.0)) { signal_children(SIGKILL); wait_children(5.0); }
    } else if (!wait_children(op->timeout)) {
        fprintf(stderr, "tprt: ranks still running %.0f s after rank 0 finished; killing them\n", op->timeout);
        signal_children(SIGKILL);
        wait_children(5.0);
        status = 1;
    }
    for (int r = 1; r < N; r++) {
        if (!g_done[r] || !failed(g_status[r])) continue;
        int st = g_status[r];
        if (stopped[r] && !culprit[r]) fprintf(stderr, "tprt: rank %d (pid %d) stopped\n", r, (int)g_pid[r]);
        else if (WIFSIGNALED(st)) fprintf(stderr, "tprt: rank %d (pid %d) was killed by signal %d\n", r, (int)g_pid[r], WTERMSIG(st));
        else fprintf(stderr, "tprt: rank %d (pid %d) exited with status %d\n", r, (int)g_pid[r], WEXITSTATUS(st));
        status = 1;
    }
    if (status) fprintf(stderr, "tprt: training aborted: a rank failed, all %d ranks stopped\n", N);
    return status;
}

int main(int argc, char **argv) {
    if (argc < 2) return bad("usage: tprt train [options] (see tprt --help)");
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) { fputs(USAGE, stdout); return 0; }
    if (strcmp(argv[1], "train")) return bad("unknown command '%s' (train)", argv[1]);
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { fputs(USAGE, stdout); return 0; }
    options op;
    int rc = parse(argc, argv, &op);
    if (rc) return rc;
    return train(&op);
}
