/* finding_kinds.h - the one table of finding kinds (finding_kinds.c): each
 * kind's name, one-line summary, severity rule, the keys it goes out under
 * in JSON, JUnit and text, how its bytes are counted, and its message.  The
 * analyzer finds kinds in table order, the renderers list them from it and
 * `tpaudit kinds` prints it (the docs point there); nothing else names or
 * counts the kinds. */
#ifndef TPA_FINDING_KINDS_H
#define TPA_FINDING_KINDS_H

#include <stddef.h>
#include <stdint.h>

/* How a kind's severity is decided. */
enum tpa_severity_rule {
    TPA_SEVERITY_ERROR,                   /* always an error */
    TPA_SEVERITY_WARNING_UNLESS_SUCCESSOR, /* a warning, an error when it is the live successor of a stale finding */
    TPA_SEVERITY_WARNING                   /* always a warning */
};

/* Which optimizer state a finding's state_bytes counts. */
enum tpa_state_rule {
    TPA_STATE_NONE,  /* none */
    TPA_STATE_OWN,   /* the state the optimizer keeps keyed by the tensor */
    TPA_STATE_MASTER /* the master its map entry pairs it with, and that master's state */
};

typedef struct tpa_kind {
    const char *name;       /* the finding's "kind" */
    const char *json_key;   /* its key in JSON totals.by_kind */
    const char *junit_name; /* its JUnit testcase name and failure type */
    const char *text_label; /* its label in the text report */
    const char *summary;    /* what it means, in one line (`tpaudit kinds`) */
    enum tpa_severity_rule severity;
    int retains;        /* its storage counts toward retained bytes */
    int view_keeps_own; /* a view into storage live params share still retains its own bytes */
    int has_successor;  /* a live successor is looked for */
    enum tpa_state_rule state;
    /* Judged across audits, from the ledger (rules/memory_growth.c), not by
     * one audit's query: its bytes are a holder's and grow per step. */
    int grows;
    /* Judged once per process from its oom rows (rules/out_of_memory.c),
     * not at an audit: an allocation that failed for want of device memory. */
    int oom;
    /* The run's verdict when a finding of this kind is among its errors
     * ("MEMORY GROWTH"); NULL: the verdict of stale tensors. */
    const char *verdict;
    const char *holder_fallback; /* holder class when none was recorded */
    const char *state_words;     /* what its state bytes are, in the message */
    /* The message: {holder} {path} {name} {shape} {retained} are the
     * finding's; {state} is ", plus N of its <state_words>" when it has
     * state bytes; {successor} names the live successor or says there is
     * none; {replaced} explains an error of a warning-unless-successor kind;
     * {created} is the user's line that made the newest tensor kept,
     * {kept} what one element is, {rate} the bytes per step. */
    const char *message;
} tpa_kind_t;

extern const tpa_kind_t tpa_kinds[];
extern const size_t tpa_n_kinds;

/* The kind named `name`, or NULL (a kind read back from another version). */
const tpa_kind_t *tpa_kind_named(const char *name);
/* Its severity rule in words: "error", or a warning and when it is an error. */
const char *tpa_kind_severity_text(const tpa_kind_t *k);
/* Its text label, or `name` itself for a kind not in the table. */
const char *tpa_kind_label(const char *name);

struct tpa_finding;
/* 1 when `f` is of a kind judged across audits (memory_growth). */
int tpa_finding_grows(const struct tpa_finding *f);
/* What makes a finding worse when it rises (gate --baseline, diff): its
 * bytes per step when it grows, else its retained bytes. */
int64_t tpa_finding_measure(const struct tpa_finding *f);

#endif
