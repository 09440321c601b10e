/* dirs.c - making the output directory and its absolute name, one way
 * for `tpaudit run` (launcher/cmd_run.c) and the shim (shim/db.c,
 * shim/config.c), see dirs.h. */
#include "dirs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tpa_make_dirs(const char *dir) {
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int parent_error = 0; /* the first parent that could not be made: why `dir` cannot be */
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST && !parent_error) parent_error = errno;
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        if (errno == ENOENT && parent_error) errno = parent_error;
        return -1;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) return -1;
    if (!S_ISDIR(sb.st_mode)) {
        errno = EEXIST; /* what mkdir said of it */
        return -1;
    }
    return 0;
}

int tpa_absolute_dir(const char *dir, char *out, size_t len) {
    if (dir[0] == '/') return (size_t)snprintf(out, len, "%s", dir) < len ? 0 : -1;
    char cwd[4096];
    const char *rest = dir[0] == '.' && dir[1] == '/' ? dir + 2 : dir;
    if (!getcwd(cwd, sizeof cwd)) return -1;
    int n = snprintf(out, len, "%s%s%s", cwd, strcmp(cwd, "/") ? "/" : "", rest);
    return n >= 0 && (size_t)n < len ? 0 : -1;
}
