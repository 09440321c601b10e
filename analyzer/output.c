/* output.c - what the verbs share on the command line: writing a rendered
 * report, parsing SIZE arguments and reporting a bad option.
 *
 * A report goes to a regular file (or a new one) through a temporary file
 * in the same directory, renamed into place only when rendering succeeded,
 * so a failed run never leaves a partial report behind.  Anything else (a
 * device such as /dev/null, a FIFO, a terminal) is opened and truncated as
 * a shell's `>` would, never replaced. */
#include "analyzer.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

int tpa_parse_size(const char *text, int64_t *bytes) {
    static const struct {
        const char *unit;
        double scale;
    } UNITS[] = {{"", 1},
                 {"B", 1},
                 {"KiB", 1024.0},
                 {"MiB", 1048576.0},
                 {"GiB", 1073741824.0},
                 {"TiB", 1099511627776.0},
                 {"KB", 1e3},
                 {"MB", 1e6},
                 {"GB", 1e9},
                 {"TB", 1e12},
                 {"K", 1024.0},
                 {"M", 1048576.0},
                 {"G", 1073741824.0},
                 {"T", 1099511627776.0}};
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    /* a decimal number only (strtod alone would also take inf, nan and hex) */
    const char *q = p;
    int digits = 0;
    while (isdigit((unsigned char)*q)) q++, digits++;
    if (*q == '.')
        for (q++; isdigit((unsigned char)*q); q++) digits++;
    if (!digits) return -1;
    if ((*q == 'e' || *q == 'E') &&
        (isdigit((unsigned char)q[1]) || ((q[1] == '+' || q[1] == '-') && isdigit((unsigned char)q[2])))) {
        q += 2;
        while (isdigit((unsigned char)*q)) q++;
    }
    char *end;
    double v = strtod(p, &end);
    if (end != q || !isfinite(v) || v < 0) return end == q && !isfinite(v) ? -2 : -1;
    while (isspace((unsigned char)*end)) end++;
    for (size_t i = 0; i < sizeof UNITS / sizeof *UNITS; i++)
        if (!strcasecmp(end, UNITS[i].unit)) {
            double b = v * UNITS[i].scale + 0.5;
            if (!(b < 9.2e18)) return -2; /* beyond int64 */
            *bytes = (int64_t)b;
            return 0;
        }
    return -1;
}

int tpa_option_help_or_error(const char *verb, int c, char **argv, void (*usage)(FILE *)) {
    if (c == 'h') {
        usage(stdout);
        return TPA_EXIT_OK;
    }
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    if (c == ':')
        fprintf(stderr, "tpaudit: %s: option '%s' needs a value (see tpaudit %s --help)\n", verb, tpa_term(arg), verb);
    else if (optopt && optopt != '?')
        fprintf(stderr, "tpaudit: %s: unknown option '-%c' (see tpaudit %s --help)\n", verb, optopt, verb);
    else
        fprintf(stderr, "tpaudit: %s: unknown option '%s' (see tpaudit %s --help)\n", verb, tpa_term(arg), verb);
    return TPA_EXIT_USAGE;
}
