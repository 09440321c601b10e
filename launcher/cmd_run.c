/* cmd_run.c - `tpaudit run [-o DIR] [--force] [--fail-fast] [--peak] [--] CMD...`: runs CMD with
 * the shim preloaded and an absolute TPAUDIT_OUT, returns its exit status
 * (or ends by the signal that ended it) after waiting up to 20 s for
 * descendants that outlived it (it is their subreaper), then prints the
 * verdict of the run and the command that shows the report. One run per
 * output directory: a directory that is not empty is refused unless
 * --force, which removes the databases of the earlier run.  --fail-fast sets
 * TPAUDIT_FAIL_FAST=1 for CMD (the probe ends the run at the first audit
 * with an error, exit status 4: docs/RUN.md); --peak sets TPAUDIT_PEAK=backward
 * (the probe also audits inside backward: docs/PROBE.md).  Signals:
 * run_signals.c; the preload check: run_target.c; the live status line on
 * a terminal: run_status.c. */
#define _GNU_SOURCE
#include "analyzer.h"
#include "dirs.h"
#include "tpaudit.h"
#include "launcher.h"
#include "run_parts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { DESCENDANT_GRACE_S = 20 };

static const char USAGE[] = "usage: tpaudit run [-o|--output DIR] [--force] [--fail-fast] [--peak] [--] CMD...\n"
                            "  Runs CMD with libtpaudit.so preloaded; every process it starts writes its own\n"
                            "  database into DIR (default " TPAUDIT_DEFAULT_OUT ", or $TPAUDIT_OUT). DIR must be empty or\n"
                            "  new: --force removes the databases an earlier run left there. Ends with the\n"
                            "  verdict on stderr; returns CMD's exit status (or ends by CMD's signal).\n"
                            "  --fail-fast: a Python program stops at the first audit that finds an error\n"
                            "  (exit status 4), its database complete.\n"
                            "  --peak: a Python program is also audited inside the first backward of each\n"
                            "  planned step, so the report has its peak of activations (TPAUDIT_PEAK="
                            TPAUDIT_PEAK_BACKWARD ").\n";

/* Reaps descendants that outlived the main child, for at most grace_s
 * seconds (or until a signal asks to stop), so every process has closed
 * its database when we return. */
static void wait_for_descendants(int grace_s) {
    struct timespec start, now, pause = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        pid_t done = waitpid(-1, NULL, WNOHANG);
        if (done < 0 && errno == ECHILD) return;
        if (done > 0) continue;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= grace_s || tpa_run_signals_stop_requested()) {
            fprintf(stderr,
                    "tpaudit: descendant processes still running after %d s; their databases may be incomplete\n",
                    (int)(now.tv_sec - start.tv_sec));
            return;
        }
        nanosleep(&pause, NULL);
    }
}

/* The shim beside this program: <dir>/../lib/libtpaudit.so (a prefix, the
 * build tree), then <dir>/../_lib/libtpaudit.so (the Python package, which
 * holds tpaudit/_bin/tpaudit and tpaudit/_lib/libtpaudit.so). */
static int find_shim(char *out, size_t len) {
    static const char *const places[] = {"lib", "_lib"};
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0;
    for (size_t i = 0; i < sizeof places / sizeof *places; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/../%s/libtpaudit.so", exe, places[i]);
        char real[PATH_MAX];
        if (realpath(path, real) && (size_t)snprintf(out, len, "%s", real) < len) return 0;
    }
    return -1;
}

static int is_database_file(const char *name) {
    static const char *suffixes[] = {".db", ".db-wal", ".db-shm", ".db-journal"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        size_t s = strlen(suffixes[i]);
        if (n > s && strcmp(name + n - s, suffixes[i]) == 0) return 1;
    }
    return 0;
}

/* Creates DIR (and its parents) and locks it (run_lock.c). A DIR with
 * entries is refused unless `force`, which removes the earlier run's
 * databases and keeps the rest. */
static int prepare_output(const char *dir, int force) {
    if (strlen(dir) >= PATH_MAX) {
        fprintf(stderr, "tpaudit: run: output directory name too long\n");
        return -1;
    }
    /* something other than a directory there (EEXIST) is refused by opendir below */
    if (tpa_make_dirs(dir) != 0 && errno != EEXIST) {
        fprintf(stderr, "tpaudit: run: cannot create output directory %s: %s\n", dir, strerror(errno));
        return -1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "tpaudit: run: output %s is not a usable directory: %s\n", dir, strerror(errno));
        return -1;
    }
    if (tpa_run_lock(dir)) { /* held until we exit: a second run at once is refused */
        closedir(d);
        return -1;
    }
    size_t entries = 0, removed = 0;
    int failed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || tpa_run_lock_is_name(e->d_name)) continue;
        entries++;
        if (!force || !is_database_file(e->d_name)) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            removed++;
        else
            failed = errno;
    }
    closedir(d);
    if (entries && !force) {
        fprintf(stderr,
                "tpaudit: run: output directory %s is not empty (an earlier run?); "
                "use --force to replace its databases, or -o a new directory\n",
                dir);
        return -1;
    }
    if (failed) {
        fprintf(stderr, "tpaudit: run: cannot remove the earlier databases in %s: %s\n", dir, strerror(failed));
        return -1;
    }
    if (removed)
        fprintf(stderr, "tpaudit: --force: removed %zu database file%s of an earlier run in %s\n", removed,
                removed == 1 ? "" : "s", dir);
    return 0;
}

/* The directory as it really is (symbolic links resolved) once it exists, else as named from here. */
static void absolute_path(const char *dir, char *out, size_t len) {
    char real[PATH_MAX];
    if (realpath(dir, real))
        snprintf(out, len, "%s", real);
    else if (tpa_absolute_dir(dir, out, len))
        snprintf(out, len, "%s", dir);
}

/* `dir` as a shell word, for the command we suggest. */
static void shell_word(const char *dir, char *out, size_t len) {
    int plain = *dir != 0;
    for (const char *p = dir; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./+-=:,@%", *p)) plain = 0;
    if (plain) {
        snprintf(out, len, "%s", dir);
        return;
    }
    size_t o = 0;
    if (o + 1 < len) out[o++] = '\'';
    for (const char *p = dir; *p && o + 5 < len; p++) {
        if (*p == '\'') {
            memcpy(out + o, "'\\''", 4);
            o += 4;
        } else
            out[o++] = *p;
    }
    if (o + 1 < len) out[o++] = '\'';
    out[o] = 0;
}

/* The verdict of the databases in `abs_dir`, and the next command. */
static void print_verdict(const char *shown_dir, const char *abs_dir) {
    char *args[1] = {(char *)abs_dir}, **files = NULL, why[1024], word[PATH_MAX + 64];
    size_t n_files = 0;
    shell_word(shown_dir, word, sizeof word);
    if (tpa_collect_paths(1, args, &files, &n_files, why, sizeof why)) {
        fprintf(stderr, "tpaudit: verdict: nothing audited: no process wrote a database into %s\n", shown_dir);
        return;
    }
    tpa_report_t r;
    memset(&r, 0, sizeof r);
    int rc = tpa_analyze(files, n_files, &r, why, sizeof why);
    for (size_t i = 0; i < n_files; i++) free(files[i]);
    free(files);
    if (rc) {
        fprintf(stderr, "tpaudit: cannot judge %s: %s\n", shown_dir, why);
        tpa_report_free(&r);
        return;
    }
    size_t errors = 0, warnings = 0, audits = 0;
    int64_t retained = 0;
    for (size_t i = 0; i < r.n_findings; i++) {
        if (r.findings[i].is_error)
            errors++, retained = tpa_add_bytes(retained, r.findings[i].retained_bytes);
        else
            warnings++;
    }
    for (size_t i = 0; i < r.n_runs; i++) audits += (size_t)r.runs[i].n_audits;
    char bytes[32], runs[48];
    tpa_format_bytes(retained, bytes, sizeof bytes);
    snprintf(runs, sizeof runs, "%zu process%s", r.n_runs, r.n_runs == 1 ? "" : "es");
    char growth[320]; /* "MEMORY GROWTH: `kept` +196 MiB/step" */
    tpa_format_growth_verdict(&r, growth, sizeof growth);
    size_t stale = tpa_count_stale_errors(&r);
    const tpa_finding_t *oom = tpa_top_oom(&r);
    if (oom)
        fprintf(stderr, "tpaudit: verdict: %s (%s)", tpa_term(oom->message), runs);
    else if (stale)
        fprintf(stderr, "tpaudit: verdict: STALE TENSORS: %zu error%s, %s retained by stale tensors%s%s (%s)", stale,
                stale == 1 ? "" : "s", bytes, growth[0] ? "; " : "", tpa_term(growth), runs);
    else if (growth[0])
        fprintf(stderr, "tpaudit: verdict: %s (%s)", tpa_term(growth), runs);
    else if (warnings)
        fprintf(stderr, "tpaudit: verdict: warnings only: %zu warning%s (%s)", warnings, warnings == 1 ? "" : "s",
                runs);
    else if (r.inconclusive)
        fprintf(stderr, "tpaudit: verdict: inconclusive: %zu audit%s in %s, no stale tensor found", audits,
                audits == 1 ? "" : "s", runs);
    else if (!audits)
        fprintf(stderr, "tpaudit: verdict: no audit happened (%s recorded, none reached an audit point)", runs);
    else
        fprintf(stderr, "tpaudit: verdict: clean: %zu audit%s in %s, no stale tensors", audits, audits == 1 ? "" : "s",
                runs);
    for (size_t i = 0; i < r.n_runs && r.inconclusive; i++)
        if (r.runs[i].inconclusive) {
            fprintf(stderr, "; INCONCLUSIVE: %s", r.runs[i].why_inconclusive ? r.runs[i].why_inconclusive : "?");
            break;
        }
    fprintf(stderr, "\ntpaudit: next: tpaudit report %s\n", word);
    tpa_report_free(&r);
}

struct run_options {
    const char *out_dir;
    int force;
    int fail_fast;
    int peak; /* --peak: TPAUDIT_PEAK=backward */
    int first_arg; /* index of CMD in argv */
};

/* TPA_OPTIONS_OK when the run goes on, else the exit status: --help printed
 * (TPA_EXIT_OK), or a usage error printed. */
static int parse_options(int argc, char **argv, struct run_options *o) {
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return TPA_EXIT_OK;
        }
        int *flag = !strcmp(a, "--force")       ? &o->force
                    : !strcmp(a, "--fail-fast") ? &o->fail_fast
                    : !strcmp(a, "--peak")      ? &o->peak
                                                : NULL;
        if (flag) {
            *flag = 1;
            continue;
        }
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (i + 1 >= argc || !argv[i + 1][0]) {
                fprintf(stderr, "tpaudit: run: %s needs a directory (%s DIR)\n", a, a);
                return TPA_EXIT_USAGE;
            }
            o->out_dir = argv[++i];
            continue;
        }
        if (!strncmp(a, "--output=", 9) || (!strncmp(a, "-o", 2) && a[2])) {
            o->out_dir = a[1] == '-' ? a + 9 : a + 2;
            if (!*o->out_dir) {
                fprintf(stderr, "tpaudit: run: --output needs a directory\n");
                return TPA_EXIT_USAGE;
            }
            continue;
        }
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "tpaudit: run: unknown option %s (see tpaudit run --help)\n", a);
            return TPA_EXIT_USAGE;
        }
        break;
    }
    if (i >= argc) {
        fprintf(stderr, "tpaudit: run: no command given (tpaudit run [-o DIR] [--] CMD...)\n");
        return TPA_EXIT_USAGE;
    }
    o->first_arg = i;
    return TPA_OPTIONS_OK;
}

static int set_preload(const char *shim) {
    const char *old = getenv("LD_PRELOAD");
    char *preload = NULL;
    if (old && *old && strstr(old, shim))
        preload = strdup(old);
    else if (asprintf(&preload, "%s%s%s", shim, old && *old ? ":" : "", old ? old : "") < 0)
        preload = NULL;
    if (!preload) return -1;
    setenv("LD_PRELOAD", preload, 1);
    free(preload);
    return 0;
}

/* The shim, the output directory and the environment the child gets:
 * TPAUDIT_OUT (absolute) and LD_PRELOAD.  Inside another `tpaudit run` (a
 * script that calls it again) it joins that run's directory (`nested`);
 * the outer run gives the verdict.  0, or -1 after saying why. */
static int prepare_environment(const struct run_options *o, const char **out_dir, char *abs_out, int *nested) {
    char shim[PATH_MAX];
    if (find_shim(shim, sizeof shim)) {
        fputs("tpaudit: cannot find libtpaudit.so beside this tpaudit (../lib or ../_lib)\n", stderr);
        return -1;
    }
    const char *inherited = getenv("TPAUDIT_OUT"), *old_preload = getenv("LD_PRELOAD");
    *nested = !o->out_dir && inherited && *inherited && old_preload && strstr(old_preload, shim);
    *out_dir = o->out_dir ? o->out_dir : inherited && *inherited ? inherited : TPAUDIT_DEFAULT_OUT;
    if (!*nested && prepare_output(*out_dir, o->force)) return -1;
    absolute_path(*out_dir, abs_out, PATH_MAX);
    setenv("TPAUDIT_OUT", abs_out, 1);
    if (o->fail_fast) setenv("TPAUDIT_FAIL_FAST", "1", 1);
    if (o->peak) setenv("TPAUDIT_PEAK", TPAUDIT_PEAK_BACKWARD, 1);
    return set_preload(shim) ? -1 : 0;
}

/* Forks and execs cmd with the shim preloaded; *report_fd reads the child's
 * errno when exec failed (a close-on-exec pipe: EOF when it worked).
 * 0, or -1 after saying why. */
static int start_child(char **cmd, pid_t *pid, int *report_fd) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) {
        perror("tpaudit: pipe");
        return -1;
    }
    tpa_run_signals_prepare();
    /* Orphaned descendants (multiprocessing's resource tracker, daemonized
     * workers) are re-parented to us, so we can wait for their databases. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    *pid = fork();
    if (*pid < 0) {
        perror("tpaudit: fork");
        return -1;
    }
    if (*pid == 0) {
        close(report[0]);
        tpa_run_signals_child();
        execvp(cmd[0], cmd);
        int err = errno;
        if (write(report[1], &err, sizeof err) < 0) _exit(127);
        _exit(127);
    }
    close(report[1]);
    tpa_run_signals_parent(*pid);
    *report_fd = report[0];
    return 0;
}

/* Waits for the child to end: *status is its wait status, *exec_errno the
 * errno of a failed exec (0 when exec worked).  0, or -1 after saying why. */
static int wait_child(pid_t pid, int report_fd, int *status, int *exec_errno) {
    int err = 0;
    ssize_t got;
    while ((got = read(report_fd, &err, sizeof err)) < 0 && errno == EINTR) {}
    close(report_fd);
    *exec_errno = got == (ssize_t)sizeof err ? err : 0;
    siginfo_t info;
    memset(&info, 0, sizeof info);
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) != 0)
        if (errno != EINTR) {
            perror("tpaudit: waitid");
            return -1;
        }
    tpa_run_signals_child_gone();
    *status = 0;
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {}
    return 0;
}

int tpa_cmd_run(int argc, char **argv) {
    struct run_options o = {0};
    int parsed = parse_options(argc, argv, &o);
    if (parsed != TPA_OPTIONS_OK) return parsed;
    char **cmd = argv + o.first_arg;
    const char *out_dir;
    char abs_out[PATH_MAX];
    int nested;
    if (prepare_environment(&o, &out_dir, abs_out, &nested)) return TPA_EXIT_USAGE;

    char target[PATH_MAX], why[PATH_MAX + 200];
    if (tpa_run_resolve(cmd[0], target, sizeof target) == 0 && tpa_run_unpreloadable(target, why, sizeof why))
        fprintf(stderr,
                "tpaudit: %s: the loader will not preload the shim, so this process is not audited "
                "(dynamically linked programs it starts still are)\n",
                why);

    pid_t pid;
    int report_fd, status, exec_errno;
    if (start_child(cmd, &pid, &report_fd)) return TPA_EXIT_USAGE;
    tpa_run_status_t *live = nested ? NULL : tpa_run_status_start(abs_out); /* a terminal only */
    int waited = wait_child(pid, report_fd, &status, &exec_errno);
    tpa_run_status_stop(live);
    if (waited) return TPA_EXIT_USAGE;
    if (exec_errno) {
        fprintf(stderr, "tpaudit: cannot run %s: %s\n", cmd[0], strerror(exec_errno));
        return exec_errno == ENOENT ? 127 : 126;
    }
    wait_for_descendants(DESCENDANT_GRACE_S);
    if (!nested) print_verdict(out_dir, abs_out);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        tpa_run_die_by(WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    return 1;
}
