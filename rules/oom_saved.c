/* oom_saved.c - a step's saved-for-backward bytes by module, counted with
 * their blocks and the numbered blocks of one prefix (a model's layers)
 * rolled up, for the OOM's Held list (oom_saved.h). */
#include "oom_saved.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The length of a module's block: its name up to the end of its first
 * part that is a number ("transformer.h.3.attn" -> "transformer.h.3"),
 * the whole name when none is. */
static size_t block_of(const char *module) {
    const char *part = module;
    for (;;) {
        const char *end = strchr(part, '.');
        size_t len = end ? (size_t)(end - part) : strlen(part);
        size_t digits = strspn(part, "0123456789");
        if (len > 0 && digits == len) return (size_t)(part - module) + len;
        if (!end) return strlen(module);
        part = end + 1;
    }
}

/* The length of `group`'s prefix before a trailing ".<number>" (of its
 * first `len` characters), and that number in *number; `len` and -1 when
 * it has none. */
static size_t numbered(const char *group, size_t len, long *number) {
    size_t at = len;
    while (at > 0 && isdigit((unsigned char)group[at - 1])) at--;
    if (at == len || at < 2 || group[at - 1] != '.' || len - at > 9) {
        *number = -1;
        return len;
    }
    *number = strtol(group + at, NULL, 10);
    return at - 1;
}

/* Adds `bytes` to block `number` of numbered group g. */
static void add_to_block(tpa_saved_group_t *g, long number, int64_t bytes) {
    for (int i = 0; i < g->count; i++)
        if (g->number[i] == number) {
            g->of_number[i] += bytes;
            return;
        }
    if (g->count >= TPA_SAVED_NUMBERS) return;
    g->number[g->count] = number;
    g->of_number[g->count++] = bytes;
}

void tpa_saved_add(tpa_saved_modules_t *m, const char *module, int64_t bytes) {
    long number;
    size_t len = numbered(module, block_of(module), &number);
    if (len >= sizeof m->g[0].name) len = sizeof m->g[0].name - 1;
    tpa_saved_group_t *g = NULL;
    for (size_t i = 0; i < m->n && !g; i++)
        if ((m->g[i].first <= m->g[i].last) == (number >= 0) && strlen(m->g[i].name) == len &&
            !strncmp(m->g[i].name, module, len))
            g = &m->g[i];
    if (!g) {
        if (m->n >= TPA_SAVED_GROUPS) {
            m->rest += bytes;
            return;
        }
        g = &m->g[m->n++];
        memset(g, 0, sizeof *g);
        memcpy(g->name, module, len);
        g->first = number >= 0 ? number : 1;
        g->last = number >= 0 ? number : 0;
    }
    if (number >= 0) {
        if (number < g->first) g->first = number;
        if (number > g->last) g->last = number;
        add_to_block(g, number, bytes);
    }
    g->bytes += bytes;
}

/* The smallest and largest of a numbered group's blocks. */
static void spread(const tpa_saved_group_t *g, int64_t *least, int64_t *most) {
    *least = *most = g->count ? g->of_number[0] : 0;
    for (int i = 1; i < g->count; i++) {
        if (g->of_number[i] < *least) *least = g->of_number[i];
        if (g->of_number[i] > *most) *most = g->of_number[i];
    }
}

static int by_bytes(const void *pa, const void *pb) {
    const tpa_saved_group_t *a = pa, *b = pb;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return strcmp(a->name, b->name);
}

void tpa_saved_text(tpa_saved_modules_t *m, size_t listed, tpa_oom_text_t *t) {
    char a[32], b[32];
    qsort(m->g, m->n, sizeof *m->g, by_bytes);
    for (size_t i = 0; i < m->n && i < listed; i++) {
        const tpa_saved_group_t *g = &m->g[i];
        int64_t least, most;
        spread(g, &least, &most);
        tpa_oom_add(t, "%s%s", i ? ", " : "", g->name);
        if (g->first <= g->last && g->count > 1)
            tpa_oom_add(t, ".%ld-%ld %s (%d %s %s)", g->first, g->last, tpa_oom_bytes(g->bytes, a, sizeof a), g->count,
                        most - least <= most / 20 ? "x" : "of them, the largest", tpa_oom_bytes(most, b, sizeof b));
        else if (g->first <= g->last)
            tpa_oom_add(t, ".%ld %s", g->first, tpa_oom_bytes(g->bytes, a, sizeof a));
        else
            tpa_oom_add(t, " %s", tpa_oom_bytes(g->bytes, a, sizeof a));
    }
    if (m->n > listed || m->rest > 0) tpa_oom_add(t, ", ...");
}
