/* finding_kinds.c - the table of finding kinds (see finding_kinds.h).  The
 * order here is the order findings are found and listed in. */
#include "finding_kinds.h"
#include "tpa_model.h"

#include <string.h>

#define STALE_MESSAGE(verb)                                                                                     \
    "{holder} {path} " verb " {name} {shape}, which is no longer a model parameter ({retained} retained{state}" \
    "{successor})"

/* The kind's name, and its JSON key, JUnit name and text label, which are
 * the name itself for every kind so far. */
#define NAMED(kind) .name = kind, .json_key = kind, .junit_name = kind, .text_label = kind

/* One kind a row: names and severity, what its bytes count, then how its
 * message reads and what it means. */
// clang-format off
const tpa_kind_t tpa_kinds[] = {
    {NAMED("stale_param"), .severity = TPA_SEVERITY_ERROR,
     .retains = 1, .has_successor = 1, .state = TPA_STATE_OWN, .state_words = "optimizer state",
     .holder_fallback = "optimizer", .message = STALE_MESSAGE("holds"),
     .summary = "the optimizer updates a tensor that is no longer a model parameter"},
    {NAMED("orphan_state"), .severity = TPA_SEVERITY_ERROR, .retains = 1,
     .holder_fallback = "optimizer", .message = "{holder} {path} keys state by a tensor in no param group ({retained} retained)",
     .summary = "optimizer state keyed by a tensor in no param group"},
    {NAMED("state_shape_mismatch"), .severity = TPA_SEVERITY_ERROR,
     .holder_fallback = "optimizer", .message = "{holder} {path} has shape {shape}, different from its parameter's",
     .summary = "a state tensor's shape differs from its parameter's"},
    {NAMED("stale_map_entry"), .severity = TPA_SEVERITY_ERROR,
     .retains = 1, .view_keeps_own = 1, .has_successor = 1, .state = TPA_STATE_MASTER,
     .state_words = "master and optimizer state",
     .holder_fallback = "wrapper", .message = STALE_MESSAGE("keeps"),
     .summary = "a mixed-precision or ZeRO wrapper's working tensor left the model; its master and state are retained"},
    {NAMED("untrained_param"), .severity = TPA_SEVERITY_WARNING_UNLESS_SUCCESSOR,
     .holder_fallback = "optimizer",
     .message = "{name} {shape} requires grad but no optimizer holds it: it is never trained{replaced}",
     .summary = "a trainable parameter no optimizer holds"},
    {NAMED("memory_growth"), .severity = TPA_SEVERITY_ERROR, .grows = 1, .verdict = "MEMORY GROWTH",
     .holder_fallback = "object", .message = "`{name}`{created} keeps {kept} every step: {rate}/step",
     .summary = "the bytes one holder (or one library) keeps grow from audit to audit in the steady state"},
    {NAMED("out_of_memory"), .severity = TPA_SEVERITY_ERROR, .oom = 1, .verdict = "OUT OF MEMORY",
     .holder_fallback = "device", .message = "{oom}",
     .summary = "the run died of an allocation the device had no memory for; names who held the memory and why"},
    {NAMED("caught_out_of_memory"), .severity = TPA_SEVERITY_WARNING, .oom = 1,
     .holder_fallback = "device", .message = "{oom}",
     .summary = "an allocation ran out of device memory and the program caught it and went on (a batch-size finder)"},
};
// clang-format on
const size_t tpa_n_kinds = sizeof tpa_kinds / sizeof tpa_kinds[0];

const tpa_kind_t *tpa_kind_named(const char *name) {
    for (size_t k = 0; name && k < tpa_n_kinds; k++)
        if (!strcmp(tpa_kinds[k].name, name)) return &tpa_kinds[k];
    return NULL;
}

const char *tpa_kind_severity_text(const tpa_kind_t *k) {
    switch (k->severity) { /* no default: a new rule must get its words here */
    case TPA_SEVERITY_ERROR: return "error";
    case TPA_SEVERITY_WARNING_UNLESS_SUCCESSOR: return "warning (error when it succeeds a stale tensor)";
    case TPA_SEVERITY_WARNING: return "warning";
    }
    return "error";
}

int tpa_finding_grows(const tpa_finding_t *f) {
    const tpa_kind_t *k = tpa_kind_named(f->kind);
    return k && k->grows;
}

int64_t tpa_finding_measure(const tpa_finding_t *f) {
    return tpa_finding_grows(f) ? f->growth_per_step : f->retained_bytes;
}

const char *tpa_kind_label(const char *name) {
    const tpa_kind_t *k = tpa_kind_named(name);
    return k ? k->text_label : name;
}
