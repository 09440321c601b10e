/* host_fds.c - where the host's descriptor calls reach the shim, so that the
 * shim takes no descriptor the host needs:
 *   - libunwind opens a pipe to check memory the first time a stack passes
 *     a frame without unwind information, at the lowest free numbers, where
 *     the host later opens its own files (and libunwind would then read and
 *     write them).  The pipe made during a capture (stack.c) is moved to the
 *     shim's numbers, above the database's (O_CLOEXEC), as db_fds.c does.
 *   - a host that runs out of descriptors (EMFILE from open, openat, creat,
 *     socket, accept, dup, pipe) gets the shim's back: the shim turns off
 *     (process_life.c closes the database, kept and marked incomplete, and
 *     the pipe) and the call is made again.
 *   - a host whose lowest-free search reached the shim's numbers (a call of
 *     those returned a number above one the shim holds, which the host would
 *     have got without the shim) gets them back the same way, and the number
 *     it got is moved down to the lowest free one (the same open file, its
 *     close-on-exec flag kept): the numbers a host gets are those it gets
 *     without the shim (a host near RLIMIT_NOFILE, or one with more than
 *     about 1000 open descriptors, turns the shim off there).
 * Calls that glibc makes internally (fopen's open) do not pass here. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim_internal.h"

static _Atomic int g_pipe[2] = {-1, -1}; /* libunwind's, moved up */

/* The next definition of each name (libc's), resolved in the constructor
 * (tpa_fds_resolve) so that no host call needs dlsym; one made before that
 * goes to the kernel itself. */
static struct {
    int (*open)(const char *, int, ...), (*open64)(const char *, int, ...);
    int (*openat)(int, const char *, int, ...), (*openat64)(int, const char *, int, ...);
    int (*creat)(const char *, mode_t), (*socket)(int, int, int), (*dup)(int), (*pipe2)(int[2], int);
    int (*accept)(int, struct sockaddr *, socklen_t *), (*accept4)(int, struct sockaddr *, socklen_t *, int);
} r;

#define RESOLVE(name)                            \
    do {                                         \
        void *p_ = dlsym(RTLD_NEXT, #name);      \
        if (p_) memcpy(&r.name, &p_, sizeof p_); \
    } while (0)

void tpa_fds_resolve(void) {
    RESOLVE(open);
    RESOLVE(open64);
    RESOLVE(openat);
    RESOLVE(openat64);
    RESOLVE(creat);
    RESOLVE(socket);
    RESOLVE(dup);
    RESOLVE(pipe2);
    RESOLVE(accept);
    RESOLVE(accept4);
}

/* The call again after the shim gave its descriptors back, when it failed
 * for want of one; a number it got above the shim's, moved down (settle). */
#define RETRYING(call)                                               \
    do {                                                             \
        int rc_ = (call);                                            \
        if (rc_ < 0 && errno == EMFILE && give_back()) rc_ = (call); \
        if (rc_ >= 0) settle(&rc_, 1);                               \
        return rc_;                                                  \
    } while (0)

/* 1 when the shim had descriptors and gave them back. */
static int give_back(void) {
    if (!tpa_life_give_back_fds()) return 0;
    for (int i = 0; i < 2; i++) {
        int fd = atomic_exchange(&g_pipe[i], -1);
        if (fd >= 0) close(fd);
    }
    return 1;
}

/* The lowest number the shim holds (database or pipe), -1 when none. */
static int shim_lowest(void) {
    int low = tpa_dbfd_lowest();
    for (int i = 0; i < 2; i++) {
        int fd = atomic_load(&g_pipe[i]);
        if (fd >= 0 && (low < 0 || fd < low)) low = fd;
    }
    return low;
}

/* The n numbers a lowest-free call gave the host: when one lies above a
 * number the shim holds, the shim gives its own back and each is moved to
 * the lowest free number, as the host would have got them without it. */
static void settle(int *fds, int n) {
    int low = shim_lowest(), above = 0;
    for (int i = 0; i < n && low >= 0; i++) above |= fds[i] > low;
    if (!above || !give_back()) return;
    int saved = errno;
    for (int i = 0; i < n; i++) {
        int flags = fcntl(fds[i], F_GETFD);
        int moved = flags < 0 ? -1 : fcntl(fds[i], (flags & FD_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
        if (moved >= 0 && moved < fds[i]) {
            close(fds[i]);
            fds[i] = moved;
        } else if (moved >= 0) {
            close(moved);
        }
    }
    errno = saved;
}

/* The pair made during a capture, moved to the shim's numbers; both
 * closed, EMFILE, when there is no room there. */
static int move_up(int fds[2]) {
    int floor = tpa_dbfd_floor();
    int hi[2] = {-1, -1};
    for (int i = 0; i < 2 && floor >= 0; i++) hi[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, floor + TPA_MAX_DB_FDS);
    close(fds[0]);
    close(fds[1]);
    if (hi[0] < 0 || hi[1] < 0) {
        if (hi[0] >= 0) close(hi[0]);
        if (hi[1] >= 0) close(hi[1]);
        errno = EMFILE;
        return -1;
    }
    fds[0] = hi[0];
    fds[1] = hi[1];
    atomic_store(&g_pipe[0], hi[0]);
    atomic_store(&g_pipe[1], hi[1]);
    return 0;
}

TPA_API int pipe2(int fds[2], int flags) {
#define PIPE2(fds, flags) (r.pipe2 ? r.pipe2(fds, flags) : (int)syscall(SYS_pipe2, fds, flags))
    if (tpa_stack_capturing()) return PIPE2(fds, flags) == 0 ? move_up(fds) : -1;
    int rc = PIPE2(fds, flags);
    if (rc < 0 && errno == EMFILE && give_back()) rc = PIPE2(fds, flags);
    if (rc == 0) settle(fds, 2);
    return rc;
}

TPA_API int pipe(int fds[2]) { return pipe2(fds, 0); }

/* open's mode is read only when the flags ask for one (O_CREAT, O_TMPFILE). */
#define MODE_ARG(flags, mode)            \
    mode_t mode = 0;                     \
    if (__OPEN_NEEDS_MODE(flags)) {      \
        va_list ap_;                     \
        va_start(ap_, flags);            \
        mode = (mode_t)va_arg(ap_, int); \
        va_end(ap_);                     \
    }

TPA_API int open(const char *path, int flags, ...) {
    MODE_ARG(flags, mode);
    RETRYING(r.open ? r.open(path, flags, mode) : (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode));
}

TPA_API int open64(const char *path, int flags, ...) {
    MODE_ARG(flags, mode);
    RETRYING(r.open64 ? r.open64(path, flags, mode) : (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode));
}

TPA_API int openat(int dir, const char *path, int flags, ...) {
    MODE_ARG(flags, mode);
    RETRYING(r.openat ? r.openat(dir, path, flags, mode) : (int)syscall(SYS_openat, dir, path, flags, mode));
}

TPA_API int openat64(int dir, const char *path, int flags, ...) {
    MODE_ARG(flags, mode);
    RETRYING(r.openat64 ? r.openat64(dir, path, flags, mode) : (int)syscall(SYS_openat, dir, path, flags, mode));
}

TPA_API int creat(const char *path, mode_t mode) {
    RETRYING(r.creat ? r.creat(path, mode)
                     : (int)syscall(SYS_openat, AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode));
}

TPA_API int socket(int domain, int type, int protocol) {
    RETRYING(r.socket ? r.socket(domain, type, protocol) : (int)syscall(SYS_socket, domain, type, protocol));
}

TPA_API int accept(int fd, struct sockaddr *addr, socklen_t *len) {
    RETRYING(r.accept ? r.accept(fd, addr, len) : (int)syscall(SYS_accept, fd, addr, len));
}

TPA_API int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
    RETRYING(r.accept4 ? r.accept4(fd, addr, len, flags) : (int)syscall(SYS_accept4, fd, addr, len, flags));
}

TPA_API int dup(int fd) { RETRYING(r.dup ? r.dup(fd) : (int)syscall(SYS_dup, fd)); }
