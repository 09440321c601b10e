/* output.c - writing a rendered report (the verbs' SIZE arguments and bad
 * options are common/options.c's).
 *
 * A report goes to a regular file (or a new one) through a temporary file
 * in the same directory, renamed into place only when rendering succeeded,
 * so a failed run never leaves a partial report behind.  Anything else (a
 * device such as /dev/null, a FIFO, a terminal) is opened and truncated as
 * a shell's `>` would, never replaced. */
#include "analyzer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*write_fn)(const void *ctx, FILE *out);

static int render_to_fd(int fd, write_fn render, const void *report) {
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return -1;
    }
    int rc = render(report, f);
    if (fclose(f) != 0) rc = -1;
    return rc;
}

/* A renderer of a report as a writer of anything. */
typedef struct report_writer {
    int (*render)(const tpa_report_t *, FILE *);
    const tpa_report_t *report;
} report_writer_t;

static int write_report(const void *ctx, FILE *out) {
    const report_writer_t *w = ctx;
    return w->render(w->report, out);
}

int tpa_write_output(const char *path, int (*render)(const tpa_report_t *, FILE *), const tpa_report_t *report,
                     char *why, size_t why_len) {
    report_writer_t w = {render, report};
    return tpa_write_output_with(path, write_report, &w, why, why_len);
}

int tpa_write_output_with(const char *path, int (*render)(const void *ctx, FILE *out), const void *report, char *why,
                          size_t why_len) {
    if (!path || !strcmp(path, "-")) {
        if (render(report, stdout) || fflush(stdout)) {
            snprintf(why, why_len, "cannot write to stdout: %s", strerror(errno));
            return -1;
        }
        return 0;
    }
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        if (S_ISDIR(sb.st_mode)) {
            snprintf(why, why_len, "cannot write report to %s: it is a directory", path);
            return -1;
        }
        int fd = open(path, O_WRONLY | O_TRUNC | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 || render_to_fd(fd, render, report)) {
            snprintf(why, why_len, "cannot write report to %s: %s", path, strerror(errno));
            return -1;
        }
        return 0;
    }
    /* A symlink to a regular file: replace the file it names, not the link. */
    char real[PATH_MAX];
    const char *target = realpath(path, real) ? real : path;
    char tmp[PATH_MAX + 32];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", target) >= sizeof tmp) {
        snprintf(why, why_len, "cannot write report to %s: path too long", path);
        return -1;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(why, why_len, "cannot write report to %s: %s", path, strerror(errno));
        return -1;
    }
    mode_t mask = umask(0);
    umask(mask);
    /* keep an existing report's mode; a new one gets the usual 0666 & ~umask */
    fchmod(fd, stat(target, &sb) == 0 ? (sb.st_mode & 07777) : (0666 & ~mask));
    int rc = render_to_fd(fd, render, report);
    int saved = errno;
    if (rc == 0 && rename(tmp, target) != 0) {
        rc = -1;
        saved = errno;
    }
    if (rc != 0) {
        unlink(tmp);
        snprintf(why, why_len, "cannot write report to %s: %s", path, strerror(saved));
    }
    return rc;
}
