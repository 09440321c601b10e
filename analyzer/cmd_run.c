/* cmd_run.c - `tpaudit run [-o DIR] [--] CMD...`: runs CMD with the shim
 * preloaded and TPAUDIT_OUT set, forwards SIGINT/SIGTERM/SIGHUP to it and
 * returns its exit status (128+N when a signal ended it), after waiting up
 * to 20 s for descendants that outlived it (it is their subreaper). */
#define _GNU_SOURCE
#include "analyzer.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile pid_t child_pid;

enum { DESCENDANT_GRACE_S = 20 };

/* Reaps descendants that outlived the main child, for at most grace_s
 * seconds, so every process has closed its database when we return. */
static void wait_for_descendants(int grace_s) {
    struct timespec start, now, pause = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        pid_t done = waitpid(-1, NULL, WNOHANG);
        if (done < 0 && errno == ECHILD) return;
        if (done > 0) continue;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= grace_s) {
            fprintf(stderr, "tpaudit: descendant processes still running after %d s; their databases may be incomplete\n", grace_s);
            return;
        }
        nanosleep(&pause, NULL);
    }
}

static void forward(int sig) {
    if (child_pid > 0) kill(child_pid, sig);
}

/* <dir of this program>/../lib/libtpaudit.so */
static int find_shim(char *out, size_t len) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0;
    if ((size_t)snprintf(out, len, "%.*s/../lib/libtpaudit.so", (int)(len > 64 ? len - 64 : 1), exe) >= len) return -1;
    char real[PATH_MAX];
    if (!realpath(out, real)) return -1;
    snprintf(out, len, "%s", real);
    return 0;
}

int tpa_cmd_run(int argc, char **argv) {
    const char *out_dir = NULL;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--")) { i++; break; }
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            puts("usage: tpaudit run [-o DIR] [--] CMD...\n"
                 "  Runs CMD with libtpaudit.so preloaded; every process it starts writes its own\n"
                 "  database into DIR (default ./tpaudit-out). Returns CMD's exit status.");
            return TPA_EXIT_OK;
        }
        if (!strcmp(argv[i], "-o") && i + 1 < argc) { out_dir = argv[++i]; continue; }
        if (argv[i][0] == '-') { fprintf(stderr, "tpaudit: run: unknown option %s\n", argv[i]); return TPA_EXIT_USAGE; }
        break;
    }
    if (i >= argc) { fputs("usage: tpaudit run [-o DIR] [--] CMD...\n", stderr); return TPA_EXIT_USAGE; }
    char shim[PATH_MAX];
    if (find_shim(shim, sizeof shim)) { fputs("tpaudit: cannot find libtpaudit.so beside this tpaudit (../lib)\n", stderr); return TPA_EXIT_USAGE; }
    if (!out_dir) out_dir = getenv("TPAUDIT_OUT") ? getenv("TPAUDIT_OUT") : "./tpaudit-out";
    char parents[PATH_MAX];
    snprintf(parents, sizeof parents, "%s", out_dir);
    for (char *p = parents + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(parents, 0777); *p = '/'; }
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "tpaudit: cannot create output directory %s: %s\n", out_dir, strerror(errno));
        return TPA_EXIT_USAGE;
    }
    char abs_out[PATH_MAX];
    if (!realpath(out_dir, abs_out)) snprintf(abs_out, sizeof abs_out, "%s", out_dir);
    setenv("TPAUDIT_OUT", abs_out, 1);
    const char *old = getenv("LD_PRELOAD");
    char *preload = NULL;
    if (old && *old && strstr(old, shim)) preload = strdup(old);
    else if (asprintf(&preload, "%s%s%s", shim, old && *old ? ":" : "", old ? old : "") < 0) preload = NULL;
    if (!preload) return TPA_EXIT_USAGE;
    setenv("LD_PRELOAD", preload, 1);
    free(preload);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    /* Orphaned descendants (multiprocessing's resource tracker, daemonized
     * workers) are re-parented to us, so we can wait for their databases. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    pid_t pid = fork();
    if (pid < 0) { perror("tpaudit: fork"); return TPA_EXIT_USAGE; }
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        execvp(argv[i], argv + i);
        fprintf(stderr, "tpaudit: cannot run %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    child_pid = pid;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) { perror("tpaudit: waitpid"); return TPA_EXIT_USAGE; }
    wait_for_descendants(DESCENDANT_GRACE_S);
    fprintf(stderr, "tpaudit: databases in %s\n", abs_out);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
}
