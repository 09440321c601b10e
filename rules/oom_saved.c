/* oom_saved.c - a step's saved-for-backward bytes by module group, with
 * the numbered groups of one prefix (a model's blocks) rolled up, for the
 * OOM's Held list (oom_saved.h). */
#include "oom_saved.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The length of `group`'s prefix before a trailing ".<number>", and that
 * number in *number; the whole length and -1 when it has none. */
static size_t numbered(const char *group, long *number) {
    size_t len = strlen(group), at = len;
    while (at > 0 && isdigit((unsigned char)group[at - 1])) at--;
    if (at == len || at < 2 || group[at - 1] != '.' || len - at > 9) {
        *number = -1;
        return len;
    }
    *number = strtol(group + at, NULL, 10);
    return at - 1;
}

void tpa_saved_add(tpa_saved_modules_t *m, const char *group, int64_t bytes) {
    long number;
    size_t len = numbered(group, &number);
    if (len >= sizeof m->g[0].name) len = sizeof m->g[0].name - 1;
    tpa_saved_group_t *g = NULL;
    for (size_t i = 0; i < m->n && !g; i++)
        if ((m->g[i].first <= m->g[i].last) == (number >= 0) && strlen(m->g[i].name) == len &&
            !strncmp(m->g[i].name, group, len))
            g = &m->g[i];
    if (!g) {
        if (m->n >= TPA_SAVED_GROUPS) {
            m->rest += bytes;
            return;
        }
        g = &m->g[m->n++];
        memset(g, 0, sizeof *g);
        memcpy(g->name, group, len);
        g->first = number >= 0 ? number : 1;
        g->last = number >= 0 ? number : 0;
        g->least = g->most = bytes;
    }
    if (number >= 0) {
        if (number < g->first) g->first = number;
        if (number > g->last) g->last = number;
    }
    g->count++;
    g->bytes += bytes;
    if (bytes < g->least) g->least = bytes;
    if (bytes > g->most) g->most = bytes;
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
        tpa_oom_add(t, "%s%s", i ? ", " : "", g->name);
        if (g->first <= g->last && g->count > 1)
            tpa_oom_add(t, ".%ld-%ld %s (%d %s %s)", g->first, g->last, tpa_oom_bytes(g->bytes, a, sizeof a), g->count,
                        g->most - g->least <= g->most / 20 ? "x" : "of them, the largest",
                        tpa_oom_bytes(g->most, b, sizeof b));
        else if (g->first <= g->last)
            tpa_oom_add(t, ".%ld %s", g->first, tpa_oom_bytes(g->bytes, a, sizeof a));
        else
            tpa_oom_add(t, " %s", tpa_oom_bytes(g->bytes, a, sizeof a));
    }
    if (m->n > listed || m->rest > 0) tpa_oom_add(t, ", ...");
}
