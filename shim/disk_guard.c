/* disk_guard.c - leaves the last MiBs of the output's file system to the
 * host.  The private SQLite's write calls (write, pwrite, pwrite64) are
 * wrapped over db_fds.c's: each write is counted against a budget, the
 * free space above the reserve (at most 1 MiB at a time), refreshed with
 * fstatvfs on the file being written once it is spent.  A write that would
 * cut into the reserve, or that met ENOSPC/EDQUOT, fails with ENOSPC from
 * then on: SQLite reports SQLITE_FULL and the writer turns the shim off.
 * Then tpa_disk_release() lets the end use the reserve: the rollback, and
 * the close's checkpoint of the WAL into the database and removal of the
 * WAL, which give back more than they take.  Reserve: 1% of the file
 * system, at least 16 MiB, at most 64 MiB.  Only the thread that owns the
 * connection writes, so the state needs no lock. */
#include <errno.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "host_guard.h"

#define TPA_DISK_RESERVE_MAX (64ll << 20)
#define TPA_DISK_CHUNK       (1ll << 20)

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);

static write_fn n_write;
static pwrite_fn n_pwrite, n_pwrite64;
static int g_installed;
static int64_t g_budget; /* bytes that may be written before the next fstatvfs */
static _Atomic int64_t g_reserve = TPA_DISK_RESERVE_MIN;
static _Atomic int g_full, g_released; /* g_full: 0, or why (enum below) */
enum { RESERVE_REACHED = 1, FS_FULL = 2 };

int tpa_disk_full(void) { return atomic_load(&g_full) != 0; }

void tpa_disk_why(char *out, size_t len) {
    if (atomic_load(&g_full) == FS_FULL)
        snprintf(out, len, "the file system is full");
    else
        snprintf(out, len, "the file system is down to the last %lld MiB the shim leaves to the host",
                 (long long)(atomic_load(&g_reserve) >> 20));
}

void tpa_disk_release(void) { atomic_store(&g_released, 1); }

/* The budget from the file system of fd; a file system that reports no
 * size (some pseudo file systems) is not limited. */
static void refresh(int fd) {
    struct statvfs sv;
    if (fstatvfs(fd, &sv) != 0 || sv.f_blocks == 0) {
        g_budget = TPA_DISK_CHUNK;
        return;
    }
    int64_t total = (int64_t)sv.f_blocks * (int64_t)sv.f_frsize, avail = (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
    int64_t reserve = total / 100;
    if (reserve < TPA_DISK_RESERVE_MIN) reserve = TPA_DISK_RESERVE_MIN;
    if (reserve > TPA_DISK_RESERVE_MAX) reserve = TPA_DISK_RESERVE_MAX;
    atomic_store(&g_reserve, reserve);
    g_budget = avail - reserve < TPA_DISK_CHUNK ? avail - reserve : TPA_DISK_CHUNK;
}

/* 1 when n more bytes leave the reserve free; else errno = ENOSPC. */
static int room_for(int fd, size_t n) {
    if (atomic_load(&g_released)) return 1;
    if (!atomic_load(&g_full) && (int64_t)n > g_budget) refresh(fd);
    if (atomic_load(&g_full) || (int64_t)n > g_budget) {
        int none = 0;
        atomic_compare_exchange_strong(&g_full, &none, RESERVE_REACHED);
        errno = ENOSPC;
        return 0;
    }
    g_budget -= (int64_t)n;
    return 1;
}

static ssize_t noted(ssize_t w) {
    if (w < 0 && (errno == ENOSPC || errno == EDQUOT)) atomic_store(&g_full, FS_FULL); /* the host filled it */
    return w;
}

static ssize_t g_write(int fd, const void *b, size_t n) { return room_for(fd, n) ? noted(n_write(fd, b, n)) : -1; }
static ssize_t g_pwrite(int fd, const void *b, size_t n, off_t o) {
    return room_for(fd, n) ? noted(n_pwrite(fd, b, n, o)) : -1;
}
static ssize_t g_pwrite64(int fd, const void *b, size_t n, off_t o) {
    return room_for(fd, n) ? noted(n_pwrite64(fd, b, n, o)) : -1;
}

/* Wraps what is installed now (db_fds.c's checked calls); a call this
 * SQLite build does not use is left alone. */
static int wrap(sqlite3_vfs *vfs, const char *name, void *next_out, void *wrapper) {
    sqlite3_syscall_ptr next = vfs->xGetSystemCall(vfs, name);
    if (!next) return 0;
    memcpy(next_out, &next, sizeof next);
    return vfs->xSetSystemCall(vfs, name, (sqlite3_syscall_ptr)wrapper) == SQLITE_OK ? 0 : -1;
}

int tpa_disk_guard_install(void) {
    if (g_installed) return 0;
    sqlite3_vfs *vfs = sqlite3_vfs_find("unix");
    if (!vfs || vfs->iVersion < 3) return -1;
    int rc = wrap(vfs, "write", &n_write, (void *)g_write) | wrap(vfs, "pwrite", &n_pwrite, (void *)g_pwrite) |
             wrap(vfs, "pwrite64", &n_pwrite64, (void *)g_pwrite64);
    if (rc) return -1;
    g_installed = 1;
    return 0;
}

/* A fork child starts its own database with a fresh budget. */
void tpa_disk_forget_in_child(void) {
    g_budget = 0;
    atomic_store(&g_full, 0);
    atomic_store(&g_released, 0);
}
