/* dirs.h - making the output directory and naming it absolutely (dirs.c),
 * shared by `tpaudit run` and the shim, which makes it when run without the launcher.  The bottom
 * floor (common/); built again as PIC for the shim. */
#ifndef TPA_DIRS_H
#define TPA_DIRS_H

#include <stddef.h>

/* Makes `dir` and its parents (0777 before the umask).  0 when `dir` is a
 * directory now (made, or there before); -1 with errno otherwise: EEXIST
 * when something else is there, a parent's error when that parent could
 * not be made, ENAMETOOLONG beyond 4 KiB. */
int tpa_make_dirs(const char *dir);
/* `dir` as an absolute name into out[len]: itself when absolute, else the
 * working directory joined with it (a leading "./" dropped).  0, or -1
 * (out undefined) when the working directory cannot be read or the name
 * does not fit. */
int tpa_absolute_dir(const char *dir, char *out, size_t len);

#endif
