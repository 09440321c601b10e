/* config.c - reads the TPAUDIT_* environment once (bad values: one warning
 * and the default), logging to stderr, and the monotonic clock.  The output
 * directory is made absolute here, so a child forked after chdir() writes
 * beside its parent. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim_internal.h"

static struct tpa_config g_cfg = {"./tpaudit-out", 1, 1, 32, TPA_LOG_WARN};
static char g_audit[256] = "1,2,exit";

const struct tpa_config *tpa_config(void) { return &g_cfg; }
const char *tpa_audit_spec(void) { return g_audit; }

void tpa_log(int level, const char *fmt, ...) {
    if (level > g_cfg.log_level) return;
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
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}

int64_t tpa_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int parse_choice(const char *name, const char *const *words, int n, int dflt) {
    const char *v = getenv(name);
    if (!v) return dflt;
    for (int i = 0; i < n; i++)
        if (strcmp(v, words[i]) == 0) return i;
    tpa_log(TPA_LOG_WARN, "bad %s='%s' (expected %s%s%s%s%s), using %s", name, v, words[0],
            n > 1 ? "|" : "", n > 1 ? words[1] : "", n > 2 ? "|" : "", n > 2 ? words[2] : "",
            words[dflt]);
    return dflt;
}

static int parse_step(const char *s, const char *e, long *out) {
    if (s == e) return 0;
    long v = 0;
    for (const char *p = s; p < e; p++) {
        if (*p < '0' || *p > '9' || v > 100000000L) return 0;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return 1;
}

/* comma list of: N, a-b (a <= b), exit, all, none */
static int audit_spec_valid(const char *v) {
    if (!*v) return 0;
    const char *p = v;
    while (1) {
        const char *e = strchr(p, ',');
        if (!e) e = p + strlen(p);
        size_t len = (size_t)(e - p);
        long a, b;
        const char *dash = memchr(p, '-', len);
        if ((len == 4 && !memcmp(p, "exit", 4)) || (len == 3 && !memcmp(p, "all", 3)) ||
            (len == 4 && !memcmp(p, "none", 4))) {
        } else if (dash) {
            if (!parse_step(p, dash, &a) || !parse_step(dash + 1, e, &b) || a > b) return 0;
        } else if (!parse_step(p, e, &a)) {
            return 0;
        }
        if (!*e) return 1;
        p = e + 1;
    }
}

void tpa_config_load(void) {
    static const char *const logs[] = {"warn", "info", "debug"};
    static const char *const onoff[] = {"auto", "off"};
    g_cfg.log_level = parse_choice("TPAUDIT_LOG", logs, 3, TPA_LOG_WARN);
    g_cfg.cupti_enabled = parse_choice("TPAUDIT_CUPTI", onoff, 2, 0) == 0;
    g_cfg.python_enabled = parse_choice("TPAUDIT_PYTHON", onoff, 2, 0) == 0;

    const char *out = getenv("TPAUDIT_OUT");
    if (out) {
        if (!*out || strlen(out) >= sizeof g_cfg.out_dir - 64)
            tpa_log(TPA_LOG_WARN, "bad TPAUDIT_OUT (empty or too long), using ./tpaudit-out");
        else
            snprintf(g_cfg.out_dir, sizeof g_cfg.out_dir, "%s", out);
    }

    if (g_cfg.out_dir[0] != '/') {
        char cwd[2048];
        const char *r = g_cfg.out_dir[0] == '.' && g_cfg.out_dir[1] == '/' ? g_cfg.out_dir + 2 : g_cfg.out_dir;
        size_t need = strlen(r) + 2;
        if (getcwd(cwd, sizeof cwd) && strlen(cwd) + need < sizeof g_cfg.out_dir - 64) {
            char abs[sizeof g_cfg.out_dir];
            size_t k = strlen(cwd);
            memcpy(abs, cwd, k);
            if (k > 1) abs[k++] = '/';
            memcpy(abs + k, r, need - 1); /* with its NUL */
            memcpy(g_cfg.out_dir, abs, sizeof abs);
        }
    }

    const char *depth = getenv("TPAUDIT_STACK_DEPTH");
    if (depth) {
        char *end;
        errno = 0;
        long d = strtol(depth, &end, 10);
        if (errno || end == depth || *end || d < 0 || d > TPA_MAX_STACK)
            tpa_log(TPA_LOG_WARN, "bad TPAUDIT_STACK_DEPTH='%s' (expected 0..%d), using 32", depth,
                    TPA_MAX_STACK);
        else
            g_cfg.stack_depth = (int)d;
    }

    const char *audit = getenv("TPAUDIT_AUDIT");
    if (audit) {
        if (strlen(audit) < sizeof g_audit && audit_spec_valid(audit)) {
            snprintf(g_audit, sizeof g_audit, "%s", audit);
        } else {
            tpa_log(TPA_LOG_WARN,
                    "bad TPAUDIT_AUDIT='%.200s' (expected steps, a-b ranges, exit, all, none), using 1,2,exit",
                    audit);
            setenv("TPAUDIT_AUDIT", g_audit, 1); /* the probe then reads the default */
        }
    }
}
