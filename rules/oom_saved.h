/* oom_saved.h - what a step saved for backward, by the module whose
 * forward made it (the ledger's "saved for backward in <module>" rows), as
 * the OOM's Held list tells it: a module inside a numbered block counted
 * with its block (transformer.h.3.attn.c_attn with transformer.h.3), the
 * numbered blocks of one prefix rolled up (transformer.h.0 ...
 * transformer.h.11 as "transformer.h.0-11"), the largest first
 * (rules/oom_saved.c). */
#ifndef TPA_RULES_OOM_SAVED_H
#define TPA_RULES_OOM_SAVED_H

#include <stddef.h>
#include <stdint.h>

#include "oom_text.h"

/* Module groups told apart at most; the bytes of any more count in `rest`. */
#define TPA_SAVED_GROUPS 64
/* The numbers of one group's blocks told apart at most (the bytes of any
 * more count in the group's total only). */
#define TPA_SAVED_NUMBERS 256

/* The groups of one prefix and number range (or one group of its own). */
typedef struct tpa_saved_group {
    char name[160]; /* the prefix of numbered groups, or the whole name */
    long first, last; /* the numbers of a numbered group, first > last when none */
    int count;        /* the blocks of a numbered group (its distinct numbers) */
    int64_t bytes;
    long number[TPA_SAVED_NUMBERS];   /* each block's number */
    int64_t of_number[TPA_SAVED_NUMBERS]; /* and its bytes */
} tpa_saved_group_t;

typedef struct tpa_saved_modules {
    tpa_saved_group_t g[TPA_SAVED_GROUPS];
    size_t n;
    int64_t rest;
} tpa_saved_modules_t;

/* Adds `bytes` saved by module `module` ("transformer.h.3.attn"), to its
 * block ("transformer.h.3": the name up to its first numbered part). */
void tpa_saved_add(tpa_saved_modules_t *m, const char *module, int64_t bytes);

/* Appends the `listed` largest rolled-up groups to `t`: "transformer.h.0-11
 * 2.6 GiB (12 x 220.0 MiB), transformer.wte 64.0 MiB, ..." ("12 x" when the
 * groups of a range hold within 5% of one another, else "12 of them, the
 * largest ..."); ", ..." when more. */
void tpa_saved_text(tpa_saved_modules_t *m, size_t listed, tpa_oom_text_t *t);

#endif
