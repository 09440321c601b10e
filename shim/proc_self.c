/* proc_self.c - facts about the host process the shim's files share: the
 * shim's own path, whether the program is a Python interpreter, its
 * command line (raw, and as the run row's JSON argv), whether the calling
 * thread is the last one alive, whether torch's library is loaded, and how
 * many more threads RLIMIT_NPROC leaves to the user. */
#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim_internal.h"

static char g_self[PATH_MAX];

const char *tpa_self_path(void) { return g_self; }

/* /proc/PID/task links 2 + the process's threads, and a main thread that
 * left by pthread_exit stays counted (a zombie) until the process ends: 4
 * is the main thread and the caller alone.  No descriptor is opened. */
int tpa_self_alone(void) {
    struct stat sb;
    return stat("/proc/self/task", &sb) == 0 && sb.st_nlink == 4;
}

void tpa_self_find(void) {
    Dl_info info;
    if (dladdr((void *)&tpa_self_find, &info) && info.dli_fname) {
        if (!realpath(info.dli_fname, g_self)) { strncpy(g_self, info.dli_fname, sizeof g_self - 1); }
    }
}

int tpa_is_python(void) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return 0;
    exe[n] = 0;
    const char *base = strrchr(exe, '/');
    base = base ? base + 1 : exe;
    return strncmp(base, "python", 6) == 0;
}

int tpa_read_cmdline(char *buf, int cap) {
    int fd = tpa_open_direct("/proc/self/cmdline", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return 0;
    int n = 0;
    while (n < cap - 1) {
        ssize_t r = read(fd, buf + n, (size_t)(cap - 1 - n));
        if (r <= 0) break;
        n += (int)r;
    }
    close(fd);
    buf[n] = 0;
    return n;
}

/* Appends one argument as a JSON string; returns the new length. */
static size_t put_json_string(char *out, size_t cap, size_t k, const char *a, size_t len) {
    out[k++] = '"';
    for (size_t j = 0; j < len && k + 8 < cap; j++) {
        unsigned char c = (unsigned char)a[j];
        if (c == '"' || c == '\\') {
            out[k++] = '\\';
            out[k++] = (char)c;
        } else if (c < 0x20) {
            k += (size_t)snprintf(out + k, cap - k, "\\u%04x", c);
        } else {
            out[k++] = (char)c;
        }
    }
    out[k++] = '"';
    return k;
}

void tpa_argv_json(char *out, size_t cap) {
    char cmd[16384];
    int n = tpa_read_cmdline(cmd, sizeof cmd);
    size_t k = 0;
    out[k++] = '[';
    for (int i = 0; i < n;) {
        const char *a = cmd + i;
        size_t len = strlen(a);
        if (k + 8 >= cap) break;
        if (i) out[k++] = ',';
        k = put_json_string(out, cap, k, a, len);
        i += (int)len + 1;
    }
    out[k++] = ']';
    out[k] = 0;
}

static int torch_object(struct dl_phdr_info *info, size_t size, void *found) {
    (void)size;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    if (base && (!strncmp(base + 1, "libtorch", 8) || !strncmp(base + 1, "libc10.", 7))) *(int *)found = 1;
    return *(int *)found;
}

int tpa_torch_loaded(void) {
    int found = 0;
    dl_iterate_phdr(torch_object, &found);
    return found;
}

/* The threads of the user's processes: each /proc/PID the user owns, its
 * task directory's links less 2. */
static long user_threads(uid_t uid) {
    DIR *d = opendir("/proc");
    if (!d) return -1;
    long n = 0;
    char path[300];
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat sb;
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s", e->d_name);
        if (stat(path, &sb) != 0 || sb.st_uid != uid) continue;
        snprintf(path, sizeof path, "/proc/%s/task", e->d_name);
        n += stat(path, &sb) == 0 && sb.st_nlink > 2 ? (long)sb.st_nlink - 2 : 1;
    }
    closedir(d);
    return n;
}

long tpa_self_thread_room(void) {
    struct rlimit rl;
    uid_t uid = getuid();
    if (uid == 0 || getrlimit(RLIMIT_NPROC, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return LONG_MAX;
    long used = user_threads(uid);
    if (used < 0) return LONG_MAX; /* no /proc: it cannot tell */
    return (long)rl.rlim_cur - used;
}
