/* stack.c - native stacks: raw return addresses captured on the caller's
 * thread with libunwind (no malloc, no symbols), and their interning in the
 * writer (hash -> stack id, each distinct stack stored once).  A pipe
 * that libunwind makes during a capture (tpa_stack_capturing) is moved to
 * the shim's numbers by host_fds.c. */
#include <libunwind.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "binds.h"

static __thread int t_in_unwind __attribute__((tls_model("initial-exec")));

int tpa_stack_capturing(void) { return t_in_unwind; }

int tpa_stack_capture(uint64_t *ips, int max, int skip) {
    int depth = tpa_config()->stack_depth;
    if (max > depth) max = depth;
    if (max <= 0 || t_in_unwind) return 0;
    void *raw[TPA_MAX_STACK + 8];
    int want = max + skip + 1;
    if (want > (int)(sizeof raw / sizeof raw[0])) want = (int)(sizeof raw / sizeof raw[0]);
    t_in_unwind = 1;
    int n = unw_backtrace(raw, want);
    t_in_unwind = 0;
    int first = skip + 1; /* this function's own frame too */
    int out = 0;
    for (int i = first; i < n && out < max; i++) ips[out++] = (uint64_t)(uintptr_t)raw[i];
    return out;
}

struct stack_entry {
    uint64_t hash;
    int64_t id;
    int depth;
    uint64_t *ips;
};
static struct stack_entry *g_tab;
static size_t g_cap, g_used;
static int64_t g_next_id = 1;

/* Fork child: the parent's table is dropped, not freed (its pages stay
 * shared with the parent instead of being touched). */
void tpa_stack_reset(void) {
    g_tab = NULL;
    g_cap = g_used = 0;
    g_next_id = 1;
}

static uint64_t hash_ips(const uint64_t *ips, int n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= ips[i];
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
    }
    return h ? h : 1;
}

static int grow(void) {
    size_t cap = g_cap ? g_cap * 2 : 4096;
    struct stack_entry *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < g_cap; i++) {
        if (!g_tab[i].hash) continue;
        size_t j = g_tab[i].hash & (cap - 1);
        while (t[j].hash) j = (j + 1) & (cap - 1);
        t[j] = g_tab[i];
    }
    free(g_tab);
    g_tab = t;
    g_cap = cap;
    return 0;
}

int64_t tpa_stack_intern(sqlite3_stmt *ins, const uint64_t *ips, int n, int *err) {
    if (n <= 0) return 0;
    if ((g_used + 1) * 2 > g_cap && grow() != 0) {
        *err = 1;
        return 0;
    }
    uint64_t h = hash_ips(ips, n);
    size_t j = h & (g_cap - 1);
    while (g_tab[j].hash) {
        if (g_tab[j].hash == h && g_tab[j].depth == n && !memcmp(g_tab[j].ips, ips, 8u * (size_t)n)) return g_tab[j].id;
        j = (j + 1) & (g_cap - 1);
    }
    uint64_t *copy = malloc(8u * (size_t)n);
    if (!copy) {
        *err = 1;
        return 0;
    }
    memcpy(copy, ips, 8u * (size_t)n);
    int64_t id = g_next_id++;
    sqlite3_stmt *st = ins;
    int col = 0;
    sqlite3_reset(st);
    TPA_STACK_COLUMNS(BIND)
    if (sqlite3_step(st) != SQLITE_DONE) {
        free(copy);
        *err = 1;
        return 0;
    }
    g_tab[j] = (struct stack_entry){h, id, n, copy};
    g_used++;
    return id;
}
