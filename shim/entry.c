/* entry.c - where the host's and libc's events reach the shim: the
 * constructor (and InitializeInjection), the destructor, on_exit (which
 * sees the exit status), the fork handler, and the interposed exec family
 * and _exit/_Exit.  Each hands its event to process_life.c's transition;
 * CUPTI is flushed here first, since process_life.c sits below the CUPTI
 * part.  Before an exec that can succeed (the file exists and is
 * executable) the database is ended (ended_by = 'exec', or removed when the
 * process recorded nothing); if the exec fails anyway it is reopened.
 * _exit/_Exit end it like exit() does, with ended_by = '_exit'.  glibc's
 * exit() reaches _exit internally, not through these. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim_internal.h"

#define TPA_DESTRUCTOR_FLUSH_MS 100

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);
typedef void (*exit_fn)(int);

static execve_fn r_execve, r_execvpe;
static execv_fn r_execv, r_execvp;
static fexecve_fn r_fexecve;
static execveat_fn r_execveat;
static exit_fn r__exit, r__Exit;

#define RESOLVE(var, name)                     \
    do {                                       \
        if (!(var)) {                          \
            void *p_ = dlsym(RTLD_NEXT, name); \
            memcpy(&(var), &p_, sizeof p_);    \
        }                                      \
    } while (0)

static void exec_resolve(void) {
    RESOLVE(r_execve, "execve");
    RESOLVE(r_execvpe, "execvpe");
    RESOLVE(r_execv, "execv");
    RESOLVE(r_execvp, "execvp");
    RESOLVE(r_fexecve, "fexecve");
    RESOLVE(r_execveat, "execveat");
    RESOLVE(r__exit, "_exit");
    RESOLVE(r__Exit, "_Exit");
}

static int runnable(const char *path) {
    struct stat sb;
    return path && access(path, X_OK) == 0 && stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* execvp's search: a name with a slash as is, else each PATH entry. */
static int runnable_on_path(const char *file) {
    if (!file || !*file) return 0;
    if (strchr(file, '/')) return runnable(file);
    const char *path = getenv("PATH");
    if (!path) path = "/bin:/usr/bin";
    char buf[PATH_MAX];
    for (const char *p = path;; p++) {
        const char *e = strchrnul(p, ':');
        int n = (int)(e - p);
        if (snprintf(buf, sizeof buf, "%.*s%s%s", n, p, n ? "/" : "", file) < (int)sizeof buf && runnable(buf))
            return 1;
        if (!*e) return 0;
        p = e;
    }
}

/* 1 when the database was ended for the exec. */
static int before_exec(void) {
    if (tpa_life_running_here(1)) tpa_cupti_flush();
    return tpa_life_exec();
}

/* The real call between before_exec and tpa_life_exec_failed; errno kept. */
#define AROUND_EXEC(likely, call)                  \
    do {                                           \
        int ended_ = (likely) ? before_exec() : 0; \
        int rc_ = (call);                          \
        int err_ = errno;                          \
        tpa_life_exec_failed(ended_);              \
        errno = err_;                              \
        return rc_;                                \
    } while (0)

TPA_API int execve(const char *path, char *const argv[], char *const envp[]) {
    exec_resolve();
    if (!r_execve) return (int)syscall(SYS_execve, path, argv, envp);
    AROUND_EXEC(runnable(path), r_execve(path, argv, envp));
}

TPA_API int execv(const char *path, char *const argv[]) {
    exec_resolve();
    AROUND_EXEC(runnable(path), r_execv(path, argv));
}

TPA_API int execvp(const char *file, char *const argv[]) {
    exec_resolve();
    AROUND_EXEC(runnable_on_path(file), r_execvp(file, argv));
}

TPA_API int execvpe(const char *file, char *const argv[], char *const envp[]) {
    exec_resolve();
    AROUND_EXEC(runnable_on_path(file), r_execvpe(file, argv, envp));
}

TPA_API int fexecve(int fd, char *const argv[], char *const envp[]) {
    exec_resolve();
    AROUND_EXEC(fcntl(fd, F_GETFD) >= 0, r_fexecve(fd, argv, envp));
}

TPA_API int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags) {
    exec_resolve();
    AROUND_EXEC(1, r_execveat(dirfd, path, argv, envp, flags));
}

/* execl, execlp, execle: the list copied into an argv array. */
static size_t list_len(va_list *ap) {
    va_list c;
    va_copy(c, *ap);
    size_t n = 1;
    while (va_arg(c, const char *)) n++;
    va_end(c);
    return n;
}

static void list_fill(char **argv, const char *arg, size_t n, va_list *ap) {
    argv[0] = (char *)arg;
    for (size_t i = 1; i <= n; i++) argv[i] = i < n ? va_arg(*ap, char *) : NULL;
}

#define LIST_EXEC(arg, last, call)                \
    va_list ap;                                   \
    va_start(ap, last);                           \
    size_t n = list_len(&ap);                     \
    char **argv = alloca((n + 1) * sizeof *argv); \
    list_fill(argv, arg, n, &ap);                 \
    call

TPA_API int execl(const char *path, const char *arg, ...) {
    LIST_EXEC(arg, arg, va_end(ap); return execv(path, argv););
}

TPA_API int execlp(const char *file, const char *arg, ...) {
    LIST_EXEC(arg, arg, va_end(ap); return execvp(file, argv););
}

TPA_API int execle(const char *path, const char *arg, ...) {
    LIST_EXEC(arg, arg, (void)va_arg(ap, char *); char *const *envp = va_arg(ap, char *const *); va_end(ap);
              return execve(path, argv, envp););
}

/* exit, _exit: CUPTI's last records, then the database's end. */
static void end_process(int status, const char *ended_by) {
    if (tpa_life_notice_copy()) tpa_cupti_after_fork_child();
    if (tpa_life_running_here(0)) {
        tpa_cupti_flush();
        tpa_cupti_shutdown();
    }
    tpa_life_exit(status, ended_by);
}

TPA_API void _exit(int status) {
    end_process(status, "_exit");
    if (r__exit) r__exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

TPA_API void _Exit(int status) {
    end_process(status, "_exit");
    if (r__Exit) r__Exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

static void on_exit_cb(int status, void *arg) {
    (void)arg;
    end_process(status, "exit");
}

/* Runs from _dl_fini, before on_exit_cb (registered earlier, so it runs
 * later): commit what is queued, briefly; the final run row comes from
 * on_exit_cb.  The library is linked -z nodelete, so on_exit_cb stays mapped. */
__attribute__((destructor)) static void tpa_destructor(void) {
    if (atomic_load(&tpa_state) == TPA_RUNNING && tpa_writer_has_db()) tpa_writer_flush(TPA_DESTRUCTOR_FLUSH_MS);
}

static void atfork_child(void) {
    tpa_life_fork_child();
    tpa_cupti_after_fork_child();
}

static void start(void) {
    tpa_fds_resolve();
    if (!tpa_life_start()) return;
    exec_resolve();
    on_exit(on_exit_cb, NULL);
    pthread_atfork(NULL, NULL, atfork_child);
    if (tpa_config()->cupti_enabled)
        tpa_cupti_on_load();
    else
        tpa_run_set_cupti_status("off: TPAUDIT_CUPTI=off");
}

__attribute__((constructor)) static void tpa_constructor(void) { start(); }

TPA_API int InitializeInjection(void) {
    start();
    if (atomic_load(&tpa_state) != TPA_RUNNING || !tpa_config()->cupti_enabled) return 1;
    tpa_cupti_on_injection();
    return 1;
}
