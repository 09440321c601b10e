/* shim_lifecycle.c - fork and exit cost in a busy host, with and without
 * the shim, measured in the same run.  usage: shim_lifecycle SHIM [ROUNDS]
 *   fork: 8 threads record events while the main thread runs 50 x
 *         (fork + exec /bin/true + wait); prints the loop's seconds.
 *   exit: 64 threads record events; the main thread calls exit(0); the
 *         driver times from the host's last line to waitpid's return.
 *   pthread_exit: the main thread records 10,000 events and leaves by
 *         pthread_exit, the last thread of the host; timed as exit is (the
 *         process ends when the shim sees no host thread left).
 * Each figure is printed for both, with the ratio shim / plain. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tpaudit.h"

#define FORK_LOOPS 50

static atomic_int g_stop;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *recorder(void *arg) {
    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_PARAM_CREATED;
    e.new_key = (uint64_t)(uintptr_t)arg << 32;
    int pause_us = (int)((uintptr_t)arg >> 16);
    while (!atomic_load(&g_stop)) {
        e.new_key++;
        tpaudit_record_event(&e);
        if (pause_us) usleep((useconds_t)pause_us);
    }
    return NULL;
}

static void start_recorders(int n, int pause_us) {
    for (int i = 0; i < n; i++) {
        pthread_t th;
        pthread_create(&th, NULL, recorder, (void *)(uintptr_t)(((uintptr_t)pause_us << 16) | (uintptr_t)i));
        pthread_detach(th);
    }
}

static int host_fork(void) {
    start_recorders(8, 20);
    usleep(100000);
    double t0 = now_s();
    for (int i = 0; i < FORK_LOOPS; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            if (getenv("BENCH_EXEC_PLAIN")) {
                char *env[] = {NULL};
                execle("/bin/true", "true", (char *)NULL, env);
            }
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int st;
        waitpid(pid, &st, 0);
    }
    printf("%.6f\n", now_s() - t0);
    atomic_store(&g_stop, 1);
    return 0;
}

static int host_exit(void) {
    start_recorders(64, 0);
    usleep(300000);
    printf("%.9f\n", now_s());
    fflush(stdout);
    exit(0);
}

static int host_pthread_exit(void) {
    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_PARAM_CREATED;
    for (uint64_t k = 1; k <= 10000; k++) {
        e.new_key = k;
        tpaudit_record_event(&e);
    }
    printf("%.9f\n", now_s());
    fflush(stdout);
    pthread_exit(NULL);
}

/* Runs this program in a mode, with or without LD_PRELOAD; returns the
 * figure: the fork loop's seconds, or the exit's seconds. */
static double run_mode(const char *self, const char *mode, const char *shim, const char *out_dir) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        if (shim) {
            setenv("LD_PRELOAD", shim, 1);
            setenv("TPAUDIT_OUT", out_dir, 1);
        } else {
            unsetenv("LD_PRELOAD");
        }
        execl(self, self, mode, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char line[64] = {0};
    ssize_t n = read(fds[0], line, sizeof line - 1);
    int st;
    waitpid(pid, &st, 0);
    double done = now_s();
    close(fds[0]);
    if (n <= 0) return -1;
    double v = atof(line);
    return strcmp(mode, "fork") ? done - v : v;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "fork")) return host_fork();
    if (argc >= 2 && !strcmp(argv[1], "exit")) return host_exit();
    if (argc >= 2 && !strcmp(argv[1], "pthread_exit")) return host_pthread_exit();
    if (argc < 2) {
        fprintf(stderr, "usage: %s SHIM [ROUNDS]\n", argv[0]);
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    char self[4096];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k <= 0) return 2;
    self[k] = 0;
    char out_dir[] = "/tmp/tpaudit-bench-XXXXXX";
    if (!mkdtemp(out_dir)) return 2;
    static const char *const modes[] = {"fork", "exit", "pthread_exit"};
    static const char *const what[] = {"50 x fork+exec+wait, 8 recording threads", "exit() with 64 recording threads",
                                       "pthread_exit of the last host thread"};
    for (int m = 0; m < 3; m++)
        for (int r = 0; r < rounds; r++) {
            double plain = run_mode(self, modes[m], NULL, out_dir);
            double with = run_mode(self, modes[m], argv[1], out_dir);
            printf("%-42s round %d: plain %.3f s, shim %.3f s, ratio %.2fx\n", what[m], r + 1, plain, with,
                   plain > 0 ? with / plain : 0.0);
            fflush(stdout);
        }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", out_dir);
    return system(cmd) == 0 ? 0 : 1;
}
