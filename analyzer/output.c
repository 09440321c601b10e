/* output.c - writes a rendered report to stdout or to a file, through a
 * temporary file renamed into place only when rendering succeeded, so a
 * failed run never leaves a partial report behind; parses SIZE arguments. */
#include "analyzer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int tpa_write_output(const char *path, int (*render)(const tpa_report_t *, FILE *), const tpa_report_t *report) {
    if (!path || !strcmp(path, "-")) return render(report, stdout) || fflush(stdout) ? -1 : 0;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp-%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    int rc = render(report, f);
    if (fclose(f) != 0) rc = -1;
    if (rc == 0 && rename(tmp, path) != 0) rc = -1;
    if (rc != 0) unlink(tmp);
    return rc;
}

int tpa_parse_size(const char *text, int64_t *bytes) {
    char *end;
    double v = strtod(text, &end);
    if (end == text || v < 0) return -1;
    static const struct { const char *unit; double scale; } units[] = {
        {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
        {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}};
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (!strcmp(end, units[i].unit)) { *bytes = (int64_t)(v * units[i].scale + 0.5); return 0; }
    return -1;
}
