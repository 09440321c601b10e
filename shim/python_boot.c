/* python_boot.c - the C side of the Python bootstrap: in a Python
 * interpreter, prepend the probe's directory to PYTHONPATH (its
 * sitecustomize then loads the probe), unless TPAUDIT_PYTHON=off or the
 * interpreter runs with -I/-E, which ignore PYTHONPATH. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim_internal.h"

/* Scans Python's options up to the script / -c / -m for I or E. */
static int ignores_pythonpath(const char *cmd, int n) {
    int i = (int)strlen(cmd) + 1; /* skip argv[0] */
    while (i < n) {
        const char *a = cmd + i;
        i += (int)strlen(a) + 1;
        if (a[0] != '-' || a[1] == 0) return 0;
        if (a[1] == '-') {
            if (a[2] == 0) return 0;
            if (!strcmp(a, "--check-hash-based-pycs") && i < n) i += (int)strlen(cmd + i) + 1;
            continue;
        }
        for (const char *c = a + 1; *c; c++) {
            if (*c == 'I' || *c == 'E') return 1;
            if (*c == 'c' || *c == 'm') return 0;
            if (*c == 'W' || *c == 'X') {
                if (c[1] == 0 && i < n) i += (int)strlen(cmd + i) + 1;
                break;
            }
        }
    }
    return 0;
}

/* The probe's directory beside the shim: <libdir>/../share/tpaudit/python
 * (a prefix, the build tree), else <libdir>/../_probe (the Python package:
 * tpaudit/_lib/libtpaudit.so and tpaudit/_probe/sitecustomize.py). 0, or -1
 * after recording that the probe is off. */
static int find_probe(char real[PATH_MAX]) {
    static const char *const places[] = {"share/tpaudit/python", "_probe"};
    char dir[PATH_MAX], probe[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s", tpa_self_path());
    char *slash = strrchr(dir, '/');
    if (!slash) return -1;
    *slash = 0;
    for (size_t i = 0; i < sizeof places / sizeof *places; i++) {
        snprintf(probe, sizeof probe, "%s/../%s", dir, places[i]);
        struct stat sb;
        if (realpath(probe, real) && stat(real, &sb) == 0 && S_ISDIR(sb.st_mode)) return 0;
    }
    tpa_run_set_text("python", "off: probe not installed");
    tpa_log(TPA_LOG_WARN, "python ownership probe not found beside %s; allocation tracing continues", dir);
    return -1;
}

void tpa_python_bootstrap(void) {
    if (!tpa_is_python()) return;
    if (!tpa_config()->python_enabled) {
        tpa_run_set_text("python", "off: TPAUDIT_PYTHON=off");
        tpa_log(TPA_LOG_WARN, "python ownership probe off (TPAUDIT_PYTHON=off); allocation tracing continues");
        return;
    }
    char cmd[16384];
    int n = tpa_read_cmdline(cmd, sizeof cmd);
    if (ignores_pythonpath(cmd, n)) {
        tpa_run_set_text("python", "off: -I/-E");
        tpa_log(TPA_LOG_WARN,
                "python ownership probe off (python -I/-E ignores PYTHONPATH); allocation tracing continues");
        return;
    }
    char real[PATH_MAX];
    if (find_probe(real)) return;
    const char *old = getenv("PYTHONPATH");
    size_t rl = strlen(real);
    char path[3 * PATH_MAX];
    if (old && !strncmp(old, real, rl) && (old[rl] == 0 || old[rl] == ':'))
        snprintf(path, sizeof path, "%s", old); /* a child interpreter: already first */
    else if (old && *old)
        snprintf(path, sizeof path, "%s:%s", real, old);
    else
        snprintf(path, sizeof path, "%s", real);
    setenv("PYTHONPATH", path, 1);
    tpa_run_set_text("python", TPA_PYTHON_PENDING);
    tpa_log(TPA_LOG_INFO, "python probe bootstrap %s", real);
}
