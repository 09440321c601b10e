/* test_tprt_kernels.c - checks tprt's CPU kernels: each backward against
 * central finite differences of a scalar loss L = sum(out * g) for a fixed
 * random g; and the shared-memory collectives: all-reduce sum/max across
 * forked ranks, and a dead rank making the others fail instead of hang. */
#define _DEFAULT_SOURCE
#include "collectives.h"
#include "layers.h"
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static unsigned long long rng = 42;
static float frand(void) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((rng >> 40) & 0xFFFFFF) / (float)0x1000000 * 2.0f - 1.0f;
}
static void fill(float *p, int n) {
    for (int i = 0; i < n; i++) p[i] = frand();
}

enum { B = 2, T = 3, C = 8, OC = 6, NH = 2 };
static float X[B * T * 3 * C], W[OC * C], BI[OC], G[B * T * 3 * C], OUT[B * T * 3 * C], AUX[B * T * T * NH * 2],
    AUX2[B * T];
static int which;

static double loss(void) { /* forward of kernel `which` dotted with G */
    int n = 0;
    switch (which) {
    case 0:
        matmul_forward(OUT, X, W, BI, B * T, C, OC);
        n = B * T * OC;
        break;
    case 1:
        layernorm_forward(OUT, AUX, AUX2, X, W, BI, B * T, C);
        n = B * T * C;
        break;
    case 2:
        gelu_forward(OUT, X, B * T * C);
        n = B * T * C;
        break;
    case 3:
        attention_forward(OUT, AUX, X, B, T, C, NH);
        n = B * T * C;
        break;
    }
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)OUT[i] * G[i];
    return s;
}

static int check(const char *what, float *param, const float *analytic, int n) {
    int bad = 0;
    for (int i = 0; i < n; i += (n > 12 ? n / 12 : 1)) {
        float keep = param[i], h = 1e-2f;
        param[i] = keep + h;
        double lp = loss();
        param[i] = keep - h;
        double lm = loss();
        param[i] = keep;
        double fd = (lp - lm) / (2.0 * h), an = analytic[i];
        if (fabs(fd - an) > 2e-3 + 2e-2 * fabs(fd)) {
            fprintf(stderr, "tpaudit: %s[%d]: finite difference %.6f, backward %.6f\n", what, i, fd, an);
            bad = 1;
        }
    }
    printf("%s: %s\n", what, bad ? "MISMATCH" : "ok");
    return bad;
}

static int test_fd(void) {
    static float dX[sizeof X / sizeof *X], dW[OC * C], dB[OC];
    int bad = 0;
    fill(X, B * T * 3 * C);
    fill(W, OC * C);
    fill(BI, OC);
    fill(G, B * T * 3 * C);
    for (which = 0; which < 4; which++) {
        memset(dX, 0, sizeof dX);
        memset(dW, 0, sizeof dW);
        memset(dB, 0, sizeof dB);
        loss();
        const char *nm[4] = {"matmul", "layernorm", "gelu", "attention"};
        char lab[64];
        if (which == 0) matmul_backward(dX, dW, dB, G, X, W, B * T, C, OC);
        if (which == 1) layernorm_backward(dX, dW, dB, G, X, W, AUX, AUX2, B * T, C);
        if (which == 2) gelu_backward(dX, X, G, B * T * C);
        if (which == 3) attention_backward(dX, G, X, AUX, B, T, C, NH);
        snprintf(lab, sizeof lab, "%s.dinp", nm[which]);
        bad |= check(lab, X, dX, which == 3 ? B * T * 3 * C : B * T * C);
        if (which <= 1) {
            snprintf(lab, sizeof lab, "%s.dweight", nm[which]);
            bad |= check(lab, W, dW, which == 0 ? OC * C : C);
            snprintf(lab, sizeof lab, "%s.dbias", nm[which]);
            bad |= check(lab, BI, dB, which == 0 ? OC : C);
        }
    }
    return bad;
}

static int run_ranks(int world, int dead_rank) {
    tprt_shm *s = tprt_shm_create(world, 20.0);
    if (!s) return 1;
    pid_t pids[8];
    for (int r = 0; r < world; r++) {
        if ((pids[r] = fork()) == 0) {
            tprt_comm c;
            tprt_shm_attach(s, &c, r);
            if (r == dead_rank) raise(SIGKILL);
            enum { N = (1 << 20) + 77 }; /* crosses a slot boundary */
            float *buf = malloc(sizeof(float) * N);
            for (int i = 0; i < N; i++) buf[i] = (float)(r + 1) * (float)(i % 5);
            int rc = tprt_allreduce(&c, buf, N, TPRT_SUM);
            float mx = (float)r;
            if (!rc) rc = tprt_allreduce(&c, &mx, 1, TPRT_MAX);
            if (rc) {
                fprintf(stderr, "tpaudit: rank %d: %s\n", r, c.error);
                _exit(3);
            }
            float tri = (float)(world * (world + 1) / 2);
            for (int i = 0; i < N; i++)
                if (buf[i] != tri * (float)(i % 5)) _exit(4);
            _exit(mx == (float)(world - 1) ? 0 : 5);
        }
    }
    int failures = 0, clear_errors = 0;
    for (int left = world; left > 0; left--) {
        int st;
        pid_t p = wait(&st);
        int r = 0;
        while (r < world && pids[r] != p) r++;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failures++;
            if (WIFEXITED(st) && WEXITSTATUS(st) == 3) clear_errors++;
            tprt_shm_mark_dead(s, r);
        }
    }
    if (dead_rank < 0) {
        printf("allreduce world %d: %s\n", world, failures ? "FAIL" : "ok");
        return failures != 0;
    }
    printf("dead rank: %d failed, %d with a clear error\n", failures, clear_errors);
    return !(failures == world && clear_errors == world - 1);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "fd")) return test_fd();
    if (!strcmp(argv[1], "allreduce")) return run_ranks(2, -1) | run_ranks(4, -1);
    if (!strcmp(argv[1], "deadrank")) return run_ranks(3, 1);
    return 2;
}
