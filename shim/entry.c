/* exec_exit.c - the exec family and _exit/_Exit, interposed so that a
 * process image that ends through them still ends its database: before an
 * exec that can succeed (the file exists and is executable) the database is
 * drained, gets its final run row with ended_by = 'exec' (or is removed when
 * the process recorded nothing) and is closed; if the exec fails anyway it
 * is reopened and recording goes on.  _exit/_Exit end it like exit() does,
 * with ended_by = '_exit'.  A vfork child (it shares the parent's memory)
 * and a fork child that recorded nothing go straight to the real call.
 * glibc's exit() reaches _exit internally, not through these. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim_internal.h"

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

void tpa_exec_resolve(void) {
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

/* The real call between tpa_before_exec and tpa_after_failed_exec; errno kept. */
#define AROUND_EXEC(likely, call)                      \
    do {                                               \
        int ended_ = (likely) ? tpa_before_exec() : 0; \
        int rc_ = (call);                              \
        int err_ = errno;                              \
        tpa_after_failed_exec(ended_);                 \
        errno = err_;                                  \
        return rc_;                                    \
    } while (0)

TPA_API int execve(const char *path, char *const argv[], char *const envp[]) {
    tpa_exec_resolve();
    if (!r_execve) return (int)syscall(SYS_execve, path, argv, envp);
    AROUND_EXEC(runnable(path), r_execve(path, argv, envp));
}

TPA_API int execv(const char *path, char *const argv[]) {
    tpa_exec_resolve();
    AROUND_EXEC(runnable(path), r_execv(path, argv));
}

TPA_API int execvp(const char *file, char *const argv[]) {
    tpa_exec_resolve();
    AROUND_EXEC(runnable_on_path(file), r_execvp(file, argv));
}

TPA_API int execvpe(const char *file, char *const argv[], char *const envp[]) {
    tpa_exec_resolve();
    AROUND_EXEC(runnable_on_path(file), r_execvpe(file, argv, envp));
}

TPA_API int fexecve(int fd, char *const argv[], char *const envp[]) {
    tpa_exec_resolve();
    AROUND_EXEC(fcntl(fd, F_GETFD) >= 0, r_fexecve(fd, argv, envp));
}

TPA_API int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags) {
    tpa_exec_resolve();
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

TPA_API void _exit(int status) {
    tpa_before__exit(status);
    if (r__exit) r__exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

TPA_API void _Exit(int status) {
    tpa_before__exit(status);
    if (r__Exit) r__Exit(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}
