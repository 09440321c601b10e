/* test_oom_saved.c - the OOM Held list's and cause's account of what a step
 * saved for backward by module (rules/oom_saved.c): a module inside a
 * numbered block counted with its block, a model's numbered blocks rolled
 * up into one range with their bytes per block and the share of the kind
 * of child that made the most (mlp 60%), groups of their own beside them,
 * the largest first, an uneven range said so, a range with gaps counted,
 * blocks with no children told with no share, the unnumbered and numbered
 * groups of one name kept apart, and more groups than the list shows
 * ending in ", ...". */
#include <string.h>

#include "oom_saved.h"

#include "../expect.h"

#define MIB (1024 * 1024)

/* The text of m's `listed` largest groups. */
static const char *text(tpa_saved_modules_t *m, size_t listed, tpa_oom_text_t *t) {
    memset(t, 0, sizeof *t);
    tpa_saved_text(m, listed, t);
    return t->v;
}

int main(void) {
    static tpa_saved_modules_t m;
    tpa_oom_text_t t;
    char name[32];
    for (int i = 11; i >= 0; i--) { /* out of order, as a ledger's rows by bytes come */
        snprintf(name, sizeof name, "transformer.h.%d", i);
        tpa_saved_add(&m, name, 220 * MIB);
    }
    tpa_saved_add(&m, "transformer.wte", 64 * MIB);
    tpa_saved_add(&m, "lm_head", 8 * MIB);
    /* blocks that made their bytes themselves: no kind of child to name */
    EXPECT(!strcmp(text(&m, 3, &t), "transformer.h.0-11 2.6 GiB (220.0 MiB each), transformer.wte 64.0 MiB, "
                                    "lm_head 8.0 MiB"));
    EXPECT(!strcmp(text(&m, 2, &t), "transformer.h.0-11 2.6 GiB (220.0 MiB each), transformer.wte 64.0 MiB, ..."));
    EXPECT(m.bytes == (int64_t)12 * 220 * MIB + 72 * MIB);

    static tpa_saved_modules_t uneven;
    tpa_saved_add(&uneven, "layers.0", 100 * MIB);
    tpa_saved_add(&uneven, "layers.1", 50 * MIB);
    tpa_saved_add(&uneven, "layers", 1 * MIB); /* a group named as the prefix is one of its own */
    EXPECT(!strcmp(text(&uneven, 3, &t), "layers.0-1 150.0 MiB (75.0 MiB each on average, the largest 100.0 MiB), "
                                         "layers 1.0 MiB"));

    static tpa_saved_modules_t gaps; /* blocks 0, 2 and 5 only: the range says how many */
    const int present[] = {0, 2, 5};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "model.layers.%d.self_attn", present[i]);
        tpa_saved_add(&gaps, name, 10 * MIB);
    }
    EXPECT(!strcmp(text(&gaps, 1, &t), "model.layers.0-5 30.0 MiB (3 blocks, 10.0 MiB each; self_attn 100%)"));

    static tpa_saved_modules_t deep; /* the ledger's rows name the deepest module that made the bytes */
    const char *parts[] = {"attn", "mlp", "mlp.c_fc", "ln_1"};
    const int64_t part_bytes[] = {60 * MIB, 140 * MIB, 16 * MIB, 4 * MIB};
    for (int i = 0; i < 4; i++)
        for (int p = 0; p < 4; p++) {
            snprintf(name, sizeof name, "transformer.h.%d.%s", i, parts[p]);
            tpa_saved_add(&deep, name, part_bytes[p]);
        }
    tpa_saved_add(&deep, "transformer", MIB);
    tpa_saved_add(&deep, "1.attn", MIB / 2); /* a block numbered at the top is a group of its own */
    tpa_saved_add(&deep, "1.mlp", MIB / 2);
    /* mlp and mlp.c_fc are one kind (156 of each block's 220 MiB: 71%); "1" is a group of its own, its
     * kinds tied (the first named) */
    EXPECT(!strcmp(text(&deep, 3, &t), "transformer.h.0-3 880.0 MiB (220.0 MiB each; mlp 71%), 1 1.0 MiB (attn 50%), "
                                       "transformer 1.0 MiB"));
    tpa_oom_text_t top = {{0}, 0};
    tpa_saved_group_text(&deep.g[0], &top); /* the largest, as the cause names it */
    EXPECT(!strcmp(top.v, "transformer.h.0-3 880.0 MiB (220.0 MiB each; mlp 71%)"));

    static tpa_saved_modules_t uneven_kinds; /* a share with an uneven range: after the largest block */
    tpa_saved_add(&uneven_kinds, "h.0.mlp", 60 * MIB);
    tpa_saved_add(&uneven_kinds, "h.0.attn", 40 * MIB);
    tpa_saved_add(&uneven_kinds, "h.1.attn", 50 * MIB);
    EXPECT(!strcmp(text(&uneven_kinds, 1, &t), "h.0-1 150.0 MiB (75.0 MiB each on average, the largest 100.0 MiB; "
                                               "attn 60%)"));

    static tpa_saved_modules_t one;
    tpa_saved_add(&one, "0", 1280 * 1024);
    tpa_saved_add(&one, "2", MIB);
    tpa_saved_add(&one, "model.layers.3", MIB / 2);
    tpa_saved_add(&one, "", MIB / 4); /* the model's own forward */
    EXPECT(!strcmp(text(&one, 4, &t), "0 1.2 MiB, 2 1.0 MiB, model.layers.3 512.0 KiB, the model 256.0 KiB"));

    static tpa_saved_modules_t many;
    for (int i = 0; i < TPA_SAVED_GROUPS + 5; i++) {
        snprintf(name, sizeof name, "m%d", i);
        tpa_saved_add(&many, name, MIB);
    }
    EXPECT(many.n == TPA_SAVED_GROUPS && many.rest == 5 * MIB);
    EXPECT(strstr(text(&many, 1, &t), ", ...") != NULL);
    return expect_failures != 0;
}
