/* db_fds.c - the file descriptors of the shim's SQLite.  The private SQLite's
 * unix VFS lets its system calls be replaced (xSetSystemCall); the shim's
 * `open` moves every descriptor to a high number with O_CLOEXEC and
 * remembers its identity (st_dev, st_ino).  Every call that acts on a
 * descriptor (read, write, lock, truncate, map, close) first checks that the
 * number still refers to that file: a host that closed it (close_range) or
 * put its own file there makes the call fail with EBADF, so SQLite reports an
 * I/O error and the writer turns the shim off.  Nothing is ever written,
 * locked or closed through a number the shim no longer owns.  Only the
 * thread that owns the connection calls these (the shim's SQLite runs
 * single-threaded), so the table needs no lock. */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim_internal.h"


struct owned_fd {
    int fd;
    dev_t dev;
    ino_t ino;
};
static struct owned_fd g_owned[TPA_MAX_DB_FDS];
static _Atomic int g_lost;
static int g_installed;
/* files this process created (the database, and SQLite's -wal/-shm/-journal):
 * only these are ever removed */
#define TPA_MAX_CREATED 16
static uint64_t g_created_dev[TPA_MAX_CREATED], g_created_ino[TPA_MAX_CREATED];
static int g_ncreated;

void tpa_dbfd_note_created(uint64_t dev, uint64_t ino) {
    if (tpa_dbfd_created(dev, ino)) return;
    int i = g_ncreated < TPA_MAX_CREATED ? g_ncreated++ : TPA_MAX_CREATED - 1;
    g_created_dev[i] = dev;
    g_created_ino[i] = ino;
}

int tpa_dbfd_created(uint64_t dev, uint64_t ino) {
    for (int i = 0; i < g_ncreated; i++)
        if (g_created_dev[i] == dev && g_created_ino[i] == ino) return 1;
    return 0;
}

typedef int (*open_fn)(const char *, int, int);
typedef int (*close_fn)(int);
typedef int (*fcntl_fn)(int, int, ...);
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef int (*ftruncate_fn)(int, off_t);
typedef int (*fchmod_fn)(int, mode_t);
typedef int (*fallocate_fn)(int, off_t, off_t);
typedef int (*fchown_fn)(int, uid_t, gid_t);
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);

static open_fn r_open;
static close_fn r_close;
static fcntl_fn r_fcntl;
static read_fn r_read;
static pread_fn r_pread, r_pread64;
static write_fn r_write;
static pwrite_fn r_pwrite, r_pwrite64;
static ftruncate_fn r_ftruncate;
static fchmod_fn r_fchmod;
static fallocate_fn r_fallocate;
static fchown_fn r_fchown;
static mmap_fn r_mmap;

int tpa_dbfd_floor(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    rlim_t top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1024 ? 1024 : rl.rlim_cur;
    if (top < TPA_MIN_NOFILE) return -1;
    return (int)top - TPA_MAX_DB_FDS - 8;
}

int tpa_dbfd_lost(void) { return atomic_load(&g_lost); }

int tpa_dbfd_lowest(void) {
    int low = -1;
    for (int i = 0; i < TPA_MAX_DB_FDS; i++) {
        int fd = __atomic_load_n(&g_owned[i].fd, __ATOMIC_RELAXED); /* read from host threads */
        if (fd >= 0 && (low < 0 || fd < low)) low = fd;
    }
    return low;
}

static int owned(int fd);

/* Before each transaction: 0 when every open descriptor is still ours. */
int tpa_dbfd_check(void) {
    for (int i = 0; i < TPA_MAX_DB_FDS; i++)
        if (g_owned[i].fd >= 0 && !owned(g_owned[i].fd)) return -1;
    return atomic_load(&g_lost) ? -1 : 0;
}

/* The entry of fd, or with fd -1 a free entry. */
static struct owned_fd *find(int fd) {
    for (int i = 0; i < TPA_MAX_DB_FDS; i++)
        if (g_owned[i].fd == fd) return &g_owned[i];
    return NULL;
}

/* 1 when fd is one of ours and still refers to the file it was opened on. */
static int owned(int fd) {
    struct owned_fd *o = fd >= 0 ? find(fd) : NULL;
    struct stat sb;
    if (o && fstat(fd, &sb) == 0 && sb.st_dev == o->dev && sb.st_ino == o->ino) return 1;
    atomic_store(&g_lost, 1);
    errno = EBADF;
    return 0;
}

static int w_open(const char *path, int flags, int mode) {
    int floor = tpa_dbfd_floor();
    struct owned_fd *slot = find(-1);
    if (floor < 0 || !slot) {
        errno = EMFILE;
        return -1;
    }
    struct stat before;
    int existed = lstat(path, &before) == 0;
    int low = r_open(path, flags | O_CLOEXEC, mode);
    if (low < 0) return -1;
    int fd = fcntl(low, F_DUPFD_CLOEXEC, floor);
    int saved = errno;
    close(low);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        if (fd >= 0) close(fd);
        errno = fd < 0 ? saved : EIO;
        return -1;
    }
    *slot = (struct owned_fd){fd, sb.st_dev, sb.st_ino};
    if (!existed && (flags & O_CREAT)) tpa_dbfd_note_created((uint64_t)sb.st_dev, (uint64_t)sb.st_ino);
    return fd;
}

static int w_close(int fd) {
    struct owned_fd *o = fd >= 0 ? find(fd) : NULL;
    int mine = owned(fd);
    if (o) o->fd = -1;
    return mine ? r_close(fd) : 0; /* a number that is no longer ours is left to the host */
}

static int w_fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (!owned(fd)) return -1;
    return r_fcntl(fd, cmd, arg);
}

static ssize_t w_read(int fd, void *b, size_t n) { return owned(fd) ? r_read(fd, b, n) : -1; }
static ssize_t w_pread(int fd, void *b, size_t n, off_t o) { return owned(fd) ? r_pread(fd, b, n, o) : -1; }
static ssize_t w_pread64(int fd, void *b, size_t n, off_t o) { return owned(fd) ? r_pread64(fd, b, n, o) : -1; }
static ssize_t w_write(int fd, const void *b, size_t n) { return owned(fd) ? r_write(fd, b, n) : -1; }
static ssize_t w_pwrite(int fd, const void *b, size_t n, off_t o) { return owned(fd) ? r_pwrite(fd, b, n, o) : -1; }
static ssize_t w_pwrite64(int fd, const void *b, size_t n, off_t o) { return owned(fd) ? r_pwrite64(fd, b, n, o) : -1; }
static int w_ftruncate(int fd, off_t n) { return owned(fd) ? r_ftruncate(fd, n) : -1; }
static int w_fchmod(int fd, mode_t m) { return owned(fd) ? r_fchmod(fd, m) : -1; }
static int w_fallocate(int fd, off_t o, off_t n) { return owned(fd) ? r_fallocate(fd, o, n) : EBADF; }
static int w_fchown(int fd, uid_t u, gid_t g) { return owned(fd) ? r_fchown(fd, u, g) : -1; }
static void *w_mmap(void *a, size_t n, int prot, int fl, int fd, off_t o) {
    if (fd >= 0 && !(fl & MAP_ANONYMOUS) && !owned(fd)) return MAP_FAILED;
    return r_mmap(a, n, prot, fl, fd, o);
}

static int hook(sqlite3_vfs *vfs, const char *name, void *real_out, void *wrapper) {
    sqlite3_syscall_ptr real = vfs->xGetSystemCall(vfs, name);
    if (!real) return 0; /* not used by this SQLite build */
    memcpy(real_out, &real, sizeof real);
    return vfs->xSetSystemCall(vfs, name, (sqlite3_syscall_ptr)wrapper) == SQLITE_OK ? 0 : -1;
}

int tpa_dbfd_install(void) {
    if (g_installed) return 0;
    for (int i = 0; i < TPA_MAX_DB_FDS; i++) g_owned[i].fd = -1;
    if (sqlite3_config(SQLITE_CONFIG_SINGLETHREAD) != SQLITE_OK ||
        sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) != SQLITE_OK || sqlite3_initialize() != SQLITE_OK)
        return -1;
    sqlite3_vfs *vfs = sqlite3_vfs_find("unix");
    if (!vfs || vfs->iVersion < 3) return -1;
    int rc = 0;
    rc |= hook(vfs, "open", &r_open, (void *)w_open);
    rc |= hook(vfs, "close", &r_close, (void *)w_close);
    rc |= hook(vfs, "fcntl", &r_fcntl, (void *)w_fcntl);
    rc |= hook(vfs, "read", &r_read, (void *)w_read);
    rc |= hook(vfs, "pread", &r_pread, (void *)w_pread);
    rc |= hook(vfs, "pread64", &r_pread64, (void *)w_pread64);
    rc |= hook(vfs, "write", &r_write, (void *)w_write);
    rc |= hook(vfs, "pwrite", &r_pwrite, (void *)w_pwrite);
    rc |= hook(vfs, "pwrite64", &r_pwrite64, (void *)w_pwrite64);
    rc |= hook(vfs, "ftruncate", &r_ftruncate, (void *)w_ftruncate);
    rc |= hook(vfs, "fchmod", &r_fchmod, (void *)w_fchmod);
    rc |= hook(vfs, "fallocate", &r_fallocate, (void *)w_fallocate);
    rc |= hook(vfs, "fchown", &r_fchown, (void *)w_fchown);
    rc |= hook(vfs, "mmap", &r_mmap, (void *)w_mmap);
    if (rc || !r_open || !r_close || !r_fcntl) return -1;
    g_installed = 1;
    return 0;
}

/* The shim's own opens go straight to the kernel, not through host_fds.c's
 * open (the host's EMFILE path). */
int tpa_open_direct(const char *path, int flags, mode_t mode) {
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

int tpa_dbfd_identity(const char *path, uint64_t *dev, uint64_t *ino) {
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return -1;
    *dev = (uint64_t)sb.st_dev;
    *ino = (uint64_t)sb.st_ino;
    return 0;
}

/* In a fork child: the parent's descriptors were inherited; close the ones
 * that are still ours (the host has not run yet) and forget them all. */
void tpa_dbfd_forget_in_child(void) {
    if (!g_installed) return;
    for (int i = 0; i < TPA_MAX_DB_FDS; i++) {
        int fd = g_owned[i].fd;
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_dev == g_owned[i].dev && sb.st_ino == g_owned[i].ino) close(fd);
        g_owned[i].fd = -1;
    }
    atomic_store(&g_lost, 0);
    g_ncreated = 0;
}
