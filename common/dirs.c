/* dirs.c - making the output directory, one way for `tpaudit run`
 * (launcher/cmd_run.c) and the shim (shim/db.c), see dirs.h. */
#include "dirs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
