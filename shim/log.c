/* log.c - the one place where the shim writes to stderr: tpa_log() lines,
 * prefixed "tpaudit: ".  A line goes to fd 2 only while fd 2 is still the
 * file the process started with (same type, device, inode and rdev, noted
 * at load): a host that closed fds 0-2 and opened its own files there
 * would otherwise get the shim's warning inside its file.  No duplicate of
 * stderr is kept (it would keep a host's pipe open); a line that cannot be
 * written safely is dropped.  The identity is noted by tpa_config_load(),
 * the constructor's first step; before that no line is written. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host_guard.h"
#include "shim_internal.h"

struct file_id {
    int valid;
    mode_t type;
    dev_t dev, rdev;
    ino_t ino;
};

static struct file_id g_stderr; /* fd 2 at load; !valid: there was none */
static _Atomic int g_noted;
static _Atomic int g_level = TPA_LOG_WARN; /* TPAUDIT_LOG, set by config.c */

void tpa_log_set_level(int level) { atomic_store(&g_level, level); }

static int fd2_identity(struct file_id *id) {
    struct stat sb;
    if (fstat(2, &sb) != 0) return -1;
    *id = (struct file_id){1, sb.st_mode & S_IFMT, sb.st_dev, sb.st_rdev, sb.st_ino};
    return 0;
}

void tpa_log_note_stderr(void) {
    if (atomic_exchange(&g_noted, 1)) return;
    if (fd2_identity(&g_stderr) != 0) g_stderr.valid = 0;
}

/* 1 when fd 2 is still the stderr the process started with. */
static int stderr_is_ours(void) {
    struct file_id now;
    if (!g_stderr.valid || fd2_identity(&now) != 0) return 0;
    return now.type == g_stderr.type && now.dev == g_stderr.dev && now.ino == g_stderr.ino && now.rdev == g_stderr.rdev;
}

void tpa_log(int level, const char *fmt, ...) {
    if (level > atomic_load_explicit(&g_level, memory_order_relaxed)) return;
    char line[1024];
    int n = snprintf(line, sizeof line, "tpaudit: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0) m = 0;
    n += m;
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (!stderr_is_ours()) return; /* never into a file the host put on fd 2 */
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}
