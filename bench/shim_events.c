/* shim_events.c - figures for the shim's event path (run it under
 * LD_PRELOAD=libtpaudit.so): sustained events/s into SQLite, hot-path cost
 * per event (median, p99) with and without a 32-frame native stack, and the
 * slowdown of a host loop that records one event per iteration. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tpaudit.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static volatile uint64_t g_sink;
static void host_work(int n) {
    uint64_t x = g_sink;
    for (int i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    g_sink = x;
}

/* Recurses to give the stack capture `frames` frames to walk. */
static __attribute__((noinline)) int deep_event(int frames, tpaudit_event_t *e) {
    if (frames > 0) {
        int rc = deep_event(frames - 1, e);
        g_sink += (uint64_t)rc;
        return rc;
    }
    return tpaudit_record_event(e);
}

static void latency(const char *what, int capture, int n) {
    double *t = malloc(sizeof(double) * (size_t)n);
    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_PARAM_CREATED;
    e.name = "h.0.attn.c_attn.weight";
    e.capture_native = capture;
    int dropped = 0;
    for (int i = 0; i < n; i++) {
        e.new_key = (uint64_t)i + 1;
        double a = now_s();
        int rc = deep_event(capture ? 32 : 0, &e);
        t[i] = (now_s() - a) * 1e9;
        if (rc == TPAUDIT_EDROPPED) dropped++;
        if ((i & 1023) == 1023) tpaudit_flush(); /* keep the ring from filling */
    }
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    printf("hot path %-22s median %7.0f ns  p99 %7.0f ns  (%d events, %d dropped)\n", what, t[n / 2],
           t[(size_t)n * 99 / 100], n, dropped);
    free(t);
}

int main(void) {
    if (tpaudit_abi_version() == 0) {
        fprintf(stderr, "shim_events: run under LD_PRELOAD=libtpaudit.so\n");
        return 2;
    }
    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_PARAM_CREATED;
    e.name = "h.0.attn.c_attn.weight";
    const int n = 1000000;
    double a = now_s();
    long retries = 0;
    for (int i = 0; i < n; i++) {
        e.new_key = (uint64_t)i + 1;
        while (tpaudit_record_event(&e) == TPAUDIT_EDROPPED) {
            retries++;
            usleep(50);
        }
    }
    tpaudit_flush();
    double dt = now_s() - a;
    printf("sustained into SQLite: %.0f events/s (%d events in %.2f s, producer waited %ld times)\n", n / dt, n, dt,
           retries);

    latency("no stack", 0, 200000);
    latency("32-frame stack", 1, 200000);

    const int iters = 100000, work = 200; /* fits the ring: no flush inside the timed loops */
    tpaudit_flush();
    a = now_s();
    retries = 0;
    for (int i = 0; i < iters; i++) host_work(work);
    double base = now_s() - a;
    a = now_s();
    for (int i = 0; i < iters; i++) {
        host_work(work);
        e.new_key = (uint64_t)i + 1;
        if (tpaudit_record_event(&e) == TPAUDIT_EDROPPED) retries++;
    }
    double with = now_s() - a;
    tpaudit_flush();
    printf("host loop (%d iterations of %d LCG steps): %.1f ns/iter alone, %.1f ns/iter with one event,"
           " slowdown %.3fx (%ld dropped)\n",
           iters, work, base / iters * 1e9, with / iters * 1e9, with / base, retries);
    return 0;
}
