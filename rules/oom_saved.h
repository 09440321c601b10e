/* oom_saved.h - what a step saved for backward, by the module whose
 * forward made it (the ledger's "saved for backward in <module>" rows), as
 * the OOM's Held list and cause tell it: a module inside a numbered block
 * counted with its block (transformer.h.3.attn.c_attn with transformer.h.3)
 * and by its kind there (attn), the numbered blocks of one prefix rolled up
 * (transformer.h.0 ... transformer.h.11 as "transformer.h.0-11"), the
 * largest first (rules/oom_saved.c). */
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

/* The kinds of a block's children told apart at most, per group (the bytes
 * of any more count in the group's total only). */
#define TPA_SAVED_KINDS 16

/* The bytes of one kind of child of a group's blocks ("mlp" of every
 * transformer.h.N): the name's first part after the block, "" for bytes
 * the block made itself. */
typedef struct tpa_saved_kind {
    char name[64];
    int64_t bytes;
} tpa_saved_kind_t;

/* The groups of one prefix and number range (or one group of its own). */
typedef struct tpa_saved_group {
    char name[160]; /* the prefix of numbered groups, or the whole name */
    long first, last; /* the numbers of a numbered group, first > last when none */
    int count;        /* the blocks of a numbered group (its distinct numbers) */
    int64_t bytes;
    long number[TPA_SAVED_NUMBERS];   /* each block's number */
    int64_t of_number[TPA_SAVED_NUMBERS]; /* and its bytes */
    tpa_saved_kind_t kind[TPA_SAVED_KINDS];
    int kinds;
} tpa_saved_group_t;

typedef struct tpa_saved_modules {
    tpa_saved_group_t g[TPA_SAVED_GROUPS];
    size_t n;
    int64_t rest;
    int64_t bytes; /* every module's, `rest` included */
} tpa_saved_modules_t;

/* Adds `bytes` saved by module `module` ("transformer.h.3.attn"), to its
 * block ("transformer.h.3": the name up to its first numbered part). */
void tpa_saved_add(tpa_saved_modules_t *m, const char *module, int64_t bytes);

/* Appends the `listed` largest rolled-up groups to `t`, largest first:
 * "transformer.h.0-11 2.6 GiB (220.0 MiB each; mlp 60%), transformer.wte
 * 64.0 MiB, ...": a range's bytes per block ("each" when its blocks hold
 * within 5% of one another, else "each on average, the largest ..."), and
 * the share of the kind of child that made the most of a group's bytes
 * where its blocks have children; ", ..." when more. */
void tpa_saved_text(tpa_saved_modules_t *m, size_t listed, tpa_oom_text_t *t);

/* Appends one group's words, as tpa_saved_text lists them, to `t`
 * (m->g[0] the largest after tpa_saved_text). */
void tpa_saved_group_text(const tpa_saved_group_t *g, tpa_oom_text_t *t);

#endif
