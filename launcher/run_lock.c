/* run_lock.c - one `tpaudit run` at a time per output directory: an
 * exclusive flock(2) on DIR/.tpaudit-run.lock, taken before the directory
 * is judged empty and held until tpaudit exits (the kernel drops it then,
 * however it ends).  The descriptor is close-on-exec, so CMD and its
 * descendants never hold it.  The file stays (removing it could let two
 * runs lock two different files); it holds the pid of the run that locked
 * it last, for the refusal line, and is not a database.  Where no lock can
 * be taken (a read-only directory, a file system without flock) the run
 * goes on unlocked, as it did before there was a lock. */
#define _GNU_SOURCE
#include "run_parts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

int tpa_run_lock_is_name(const char *name) { return strcmp(name, TPA_RUN_LOCK_NAME) == 0; }

/* The pid the holder wrote, or 0. */
static long holder_pid(int fd) {
    char buf[32] = {0};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    long pid = 0;
    if (n > 0 && sscanf(buf, "%ld", &pid) != 1) pid = 0;
    return pid;
}

int tpa_run_lock(const char *dir) {
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, TPA_RUN_LOCK_NAME) >= sizeof path) return 0;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return 0; /* a read-only directory, a planted link: no lock, the run goes on as before */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int busy = errno == EWOULDBLOCK;
        long pid = busy ? holder_pid(fd) : 0;
        close(fd);
        if (!busy) return 0; /* a file system without locks */
        char who[40] = "";
        if (pid > 0) snprintf(who, sizeof who, " (pid %ld)", pid);
        fprintf(stderr, "tpaudit: run: another tpaudit run%s is writing into %s; wait for it, or -o a new directory\n",
                who, dir);
        return -1;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    int noted = ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) == n;
    (void)noted; /* the pid is only for another run's message */
    return 0;    /* fd stays open, and locked, until this process ends */
}
