/* config.c - reads the TPAUDIT_* environment once (bad values: one warning
 * and the default) and the monotonic clock (log.c writes to stderr).  The output
 * directory is made absolute here, so a child forked after chdir() writes
 * beside its parent. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dirs.h"
#include "host_guard.h"
#include "shim_internal.h"

static struct tpa_config g_cfg = {TPAUDIT_DEFAULT_OUT, 1, 1, 32, TPA_LOG_WARN};

const struct tpa_config *tpa_config(void) { return &g_cfg; }

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
    tpa_log(TPA_LOG_WARN, "bad %s='%s' (expected %s%s%s%s%s), using %s", name, v, words[0], n > 1 ? "|" : "",
            n > 1 ? words[1] : "", n > 2 ? "|" : "", n > 2 ? words[2] : "", words[dflt]);
    return dflt;
}

/* The audit plan: which optimizer steps TPAUDIT_AUDIT names.  The grammar
 * (docs/ENVIRONMENT.md) is a comma list of items, each with optional spaces
 * around it, words in any case:
 *     N        one step (1-based, 1..100000000)
 *     a-b      steps a to b, a <= b (spaces allowed around the dash)
 *     all      every step (also: every)
 *     exit     the audit at process exit
 *     none     nothing (the list may be only this)
 * A malformed value gives one warning and the default; the variable is left
 * as the user set it.  This is the one parser: tprt and the Python probe ask
 * it through tpaudit_v1_audit_wants() and tpaudit_v1_audit_next(). */
#define TPA_PLAN_RANGES 64
struct tpa_audit_plan {
    int all_steps, at_exit, n;
    long lo[TPA_PLAN_RANGES], hi[TPA_PLAN_RANGES];
};
static const char k_default_audit[] = "1,2,exit";
static struct tpa_audit_plan g_plan; /* set by tpa_config_load() */

static int is_space(char c) { return c == ' ' || c == '\t'; }

static const char *skip_spaces(const char *p, const char *e) {
    while (p < e && is_space(*p)) p++;
    return p;
}

/* A step number at *p (advanced past it); 0 when there is none. */
static int parse_step(const char **p, const char *e, long *out) {
    const char *s = *p;
    long v = 0;
    while (*p < e && **p >= '0' && **p <= '9') {
        if (v > 100000000L / 10) return 0;
        v = v * 10 + (**p - '0');
        (*p)++;
    }
    if (*p == s || v < 1 || v > 100000000L) return 0;
    *out = v;
    return 1;
}

static int word_is(const char *s, const char *e, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(e - s) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if ((s[i] | 0x20) != word[i]) return 0;
    return 1;
}

/* One item between s and e (spaces trimmed by the caller). */
static int plan_item(struct tpa_audit_plan *plan, const char *s, const char *e) {
    if (word_is(s, e, "all") || word_is(s, e, "every")) return plan->all_steps = 1;
    if (word_is(s, e, "exit")) return plan->at_exit = 1;
    if (word_is(s, e, "none")) return 1;
    long lo, hi;
    const char *p = s;
    if (!parse_step(&p, e, &lo)) return 0;
    hi = lo;
    p = skip_spaces(p, e);
    if (p < e && *p == '-') {
        p = skip_spaces(p + 1, e);
        if (!parse_step(&p, e, &hi) || hi < lo) return 0;
    }
    if (p != e || plan->n == TPA_PLAN_RANGES) return 0;
    plan->lo[plan->n] = lo;
    plan->hi[plan->n++] = hi;
    return 1;
}

/* Parses `text` into *plan; 0 when it is malformed. */
static int plan_parse(const char *text, struct tpa_audit_plan *plan) {
    memset(plan, 0, sizeof *plan);
    const char *p = text;
    while (1) {
        const char *e = strchr(p, ',');
        if (!e) e = p + strlen(p);
        const char *s = skip_spaces(p, e), *t = e;
        while (t > s && is_space(t[-1])) t--;
        if (s == t || !plan_item(plan, s, t)) return 0;
        if (!*e) return 1;
        p = e + 1;
    }
}

/* 1 when the plan asks for step `step` (-1: the audit at exit), else 0. */
TPA_API int tpaudit_v1_audit_wants(int64_t step) {
    if (step < 0) return g_plan.at_exit;
    if (g_plan.all_steps) return 1;
    for (int i = 0; i < g_plan.n; i++)
        if (step >= g_plan.lo[i] && step <= g_plan.hi[i]) return 1;
    return 0;
}

/* The first step after `after` that the plan asks for, 0 when none: lets a
 * caller that counts steps compare one number per step. */
TPA_API int64_t tpaudit_v1_audit_next(int64_t after) {
    if (after < 0) after = 0;
    if (g_plan.all_steps) return after + 1;
    int64_t next = 0;
    for (int i = 0; i < g_plan.n; i++) {
        if (g_plan.hi[i] <= after) continue;
        int64_t first = g_plan.lo[i] > after ? g_plan.lo[i] : after + 1;
        if (next == 0 || first < next) next = first;
    }
    return next;
}

void tpa_config_load(void) {
    tpa_log_note_stderr(); /* which file stderr is, before any line */
    static const char *const logs[] = {"warn", "info", "debug"};
    static const char *const onoff[] = {"auto", "off"};
    g_cfg.log_level = parse_choice("TPAUDIT_LOG", logs, 3, TPA_LOG_WARN);
    tpa_log_set_level(g_cfg.log_level);
    g_cfg.cupti_enabled = parse_choice("TPAUDIT_CUPTI", onoff, 2, 0) == 0;
    g_cfg.python_enabled = parse_choice("TPAUDIT_PYTHON", onoff, 2, 0) == 0;

    const char *out = getenv("TPAUDIT_OUT");
    if (out) {
        if (!*out || strlen(out) >= sizeof g_cfg.out_dir - 64)
            tpa_log(TPA_LOG_WARN, "bad TPAUDIT_OUT (empty or too long), using " TPAUDIT_DEFAULT_OUT);
        else
            snprintf(g_cfg.out_dir, sizeof g_cfg.out_dir, "%s", out);
    }

    char abs[sizeof g_cfg.out_dir];
    if (tpa_absolute_dir(g_cfg.out_dir, abs, sizeof abs - 64) == 0) memcpy(g_cfg.out_dir, abs, sizeof abs);

    const char *depth = getenv("TPAUDIT_STACK_DEPTH");
    if (depth) {
        char *end;
        errno = 0;
        long d = strtol(depth, &end, 10);
        if (errno || end == depth || *end || d < 0 || d > TPA_MAX_STACK)
            tpa_log(TPA_LOG_WARN, "bad TPAUDIT_STACK_DEPTH='%s' (expected 0..%d), using 32", depth, TPA_MAX_STACK);
        else
            g_cfg.stack_depth = (int)d;
    }

    const char *audit = getenv("TPAUDIT_AUDIT");
    struct tpa_audit_plan plan;
    plan_parse(k_default_audit, &g_plan);
    if (audit && plan_parse(audit, &plan))
        g_plan = plan;
    else if (audit)
        tpa_log(TPA_LOG_WARN, "bad TPAUDIT_AUDIT='%.200s' (expected steps, a-b ranges, all, exit, none), using %s",
                audit, k_default_audit);
}
