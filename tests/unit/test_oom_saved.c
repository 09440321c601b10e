/* test_oom_saved.c - the OOM Held list's account of what a step saved for
 * backward by module (rules/oom_saved.c): a module inside a numbered block
 * counted with its block, a model's numbered blocks rolled up into one
 * range with their count and size, groups of their own beside them, the largest first, an uneven range said so, the
 * unnumbered and numbered groups of one name kept apart, and more groups
 * than the list shows ending in ", ...". */
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
    EXPECT(!strcmp(text(&m, 3, &t), "transformer.h.0-11 2.6 GiB (12 x 220.0 MiB), transformer.wte 64.0 MiB, "
                                    "lm_head 8.0 MiB"));
    EXPECT(!strcmp(text(&m, 2, &t), "transformer.h.0-11 2.6 GiB (12 x 220.0 MiB), transformer.wte 64.0 MiB, ..."));

    static tpa_saved_modules_t uneven;
    tpa_saved_add(&uneven, "layers.0", 100 * MIB);
    tpa_saved_add(&uneven, "layers.1", 50 * MIB);
    tpa_saved_add(&uneven, "layers", 1 * MIB); /* a group named as the prefix is one of its own */
    EXPECT(!strcmp(text(&uneven, 3, &t), "layers.0-1 150.0 MiB (2 of them, the largest 100.0 MiB), layers 1.0 MiB"));

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
    EXPECT(!strcmp(text(&deep, 3, &t), "transformer.h.0-3 880.0 MiB (4 x 220.0 MiB), 1 1.0 MiB, transformer 1.0 MiB"));

    static tpa_saved_modules_t one;
    tpa_saved_add(&one, "0", 1280 * 1024);
    tpa_saved_add(&one, "2", MIB);
    tpa_saved_add(&one, "model.layers.3", MIB / 2);
    EXPECT(!strcmp(text(&one, 3, &t), "0 1.2 MiB, 2 1.0 MiB, model.layers.3 512.0 KiB"));

    static tpa_saved_modules_t many;
    for (int i = 0; i < TPA_SAVED_GROUPS + 5; i++) {
        snprintf(name, sizeof name, "m%d", i);
        tpa_saved_add(&many, name, MIB);
    }
    EXPECT(many.n == TPA_SAVED_GROUPS && many.rest == 5 * MIB);
    EXPECT(strstr(text(&many, 1, &t), ", ...") != NULL);
    return expect_failures != 0;
}
