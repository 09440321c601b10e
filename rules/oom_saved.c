/* oom_saved.c - a step's saved-for-backward bytes by module, counted with
 * their blocks and by the kind of child that made them there, the numbered
 * blocks of one prefix (a model's layers) rolled up, for the OOM's Held
 * list and cause (oom_saved.h). */
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

/* Adds `bytes` to g's kind of child `kind` (its first `len` characters). */
static void add_to_kind(tpa_saved_group_t *g, const char *kind, size_t len, int64_t bytes) {
    if (len >= sizeof g->kind[0].name) len = sizeof g->kind[0].name - 1;
    for (int i = 0; i < g->kinds; i++)
        if (strlen(g->kind[i].name) == len && !strncmp(g->kind[i].name, kind, len)) {
            g->kind[i].bytes += bytes;
            return;
        }
    if (g->kinds >= TPA_SAVED_KINDS) return;
    memcpy(g->kind[g->kinds].name, kind, len);
    g->kind[g->kinds].name[len] = 0;
    g->kind[g->kinds++].bytes = bytes;
}

void tpa_saved_add(tpa_saved_modules_t *m, const char *module, int64_t bytes) {
    long number;
    size_t block = block_of(module);
    size_t len = numbered(module, block, &number);
    m->bytes += bytes;
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
    const char *kind = module[block] == '.' ? module + block + 1 : module + block;
    add_to_kind(g, kind, strcspn(kind, "."), bytes);
    g->bytes += bytes;
}

/* The smallest, largest and mean of a numbered group's blocks. */
static void spread(const tpa_saved_group_t *g, int64_t *least, int64_t *most, int64_t *mean) {
    int64_t sum = 0;
    *least = *most = g->count ? g->of_number[0] : 0;
    for (int i = 0; i < g->count; i++) {
        if (g->of_number[i] < *least) *least = g->of_number[i];
        if (g->of_number[i] > *most) *most = g->of_number[i];
        sum += g->of_number[i];
    }
    *mean = g->count ? sum / g->count : 0;
}

/* The named kind of child that made the most of g's bytes; NULL when its
 * blocks made all of them themselves. */
static const tpa_saved_kind_t *largest_kind(const tpa_saved_group_t *g) {
    const tpa_saved_kind_t *top = NULL;
    for (int i = 0; i < g->kinds; i++)
        if (g->kind[i].name[0] && (!top || g->kind[i].bytes > top->bytes)) top = &g->kind[i];
    return top;
}

static int by_bytes(const void *pa, const void *pb) {
    const tpa_saved_group_t *a = pa, *b = pb;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return strcmp(a->name, b->name);
}

void tpa_saved_group_text(const tpa_saved_group_t *g, tpa_oom_text_t *t) {
    char a[32], b[32];
    int64_t least, most, mean;
    const tpa_saved_kind_t *kind = largest_kind(g);
    int share = kind && g->bytes > 0 ? (int)((100 * kind->bytes + g->bytes / 2) / g->bytes) : 0;
    spread(g, &least, &most, &mean);
    tpa_oom_add(t, "%s", g->name[0] ? g->name : "the model");
    if (g->first <= g->last && g->count > 1) {
        tpa_oom_add(t, ".%ld-%ld %s (", g->first, g->last, tpa_oom_bytes(g->bytes, a, sizeof a));
        if (g->last - g->first + 1 != g->count) tpa_oom_add(t, "%d blocks, ", g->count);
        tpa_oom_add(t, "%s each", tpa_oom_bytes(mean, a, sizeof a));
        if (most - least > most / 20) tpa_oom_add(t, " on average, the largest %s", tpa_oom_bytes(most, b, sizeof b));
        if (kind) tpa_oom_add(t, "; %s %d%%", kind->name, share);
        tpa_oom_add(t, ")");
        return;
    }
    if (g->first <= g->last) tpa_oom_add(t, ".%ld", g->first);
    tpa_oom_add(t, " %s", tpa_oom_bytes(g->bytes, a, sizeof a));
    if (kind) tpa_oom_add(t, " (%s %d%%)", kind->name, share);
}

void tpa_saved_text(tpa_saved_modules_t *m, size_t listed, tpa_oom_text_t *t) {
    qsort(m->g, m->n, sizeof *m->g, by_bytes);
    for (size_t i = 0; i < m->n && i < listed; i++) {
        if (i) tpa_oom_add(t, ", ");
        tpa_saved_group_text(&m->g[i], t);
    }
    if (m->n > listed || m->rest > 0) tpa_oom_add(t, ", ...");
}
