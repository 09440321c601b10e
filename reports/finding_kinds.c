/* finding_kinds.c - the table of finding kinds (see finding_kinds.h).  The
 * order here is the order findings are found and listed in. */
#include "finding_kinds.h"

#include <string.h>

#define STALE_MESSAGE(verb)                                                                                     \
    "{holder} {path} " verb " {name} {shape}, which is no longer a model parameter ({retained} retained{state}" \
    "{successor})"

const tpa_kind_t tpa_kinds[] = {
    {.name = "stale_param",
     .json_key = "stale_param",
     .junit_name = "stale_param",
     .text_label = "stale_param",
     .summary = "the optimizer updates a tensor that is no longer a model parameter",
     .severity = TPA_SEVERITY_ERROR,
     .retains = 1,
     .has_successor = 1,
     .state = TPA_STATE_OWN,
     .holder_fallback = "optimizer",
     .state_words = "optimizer state",
     .message = STALE_MESSAGE("holds")},
    {.name = "orphan_state",
     .json_key = "orphan_state",
     .junit_name = "orphan_state",
     .text_label = "orphan_state",
     .summary = "optimizer state keyed by a tensor in no param group",
     .severity = TPA_SEVERITY_ERROR,
     .retains = 1,
     .holder_fallback = "optimizer",
     .message = "{holder} {path} keys state by a tensor in no param group ({retained} retained)"},
    {.name = "state_shape_mismatch",
     .json_key = "state_shape_mismatch",
     .junit_name = "state_shape_mismatch",
     .text_label = "state_shape_mismatch",
     .summary = "a state tensor's shape differs from its parameter's",
     .severity = TPA_SEVERITY_ERROR,
     .holder_fallback = "optimizer",
     .message = "{holder} {path} has shape {shape}, different from its parameter's"},
    {.name = "stale_map_entry",
     .json_key = "stale_map_entry",
     .junit_name = "stale_map_entry",
     .text_label = "stale_map_entry",
     .summary = "a mixed-precision or ZeRO wrapper's working tensor left the model; its master and state are retained",
     .severity = TPA_SEVERITY_ERROR,
     .retains = 1,
     .view_keeps_own = 1,
     .has_successor = 1,
     .state = TPA_STATE_MASTER,
     .holder_fallback = "wrapper",
     .state_words = "master and optimizer state",
     .message = STALE_MESSAGE("keeps")},
    {.name = "untrained_param",
     .json_key = "untrained_param",
     .junit_name = "untrained_param",
     .text_label = "untrained_param",
     .summary = "a trainable parameter no optimizer holds",
     .severity = TPA_SEVERITY_WARNING_UNLESS_SUCCESSOR,
     .holder_fallback = "optimizer",
     .message = "{name} {shape} requires grad but no optimizer holds it: it is never trained{replaced}"},
};
const size_t tpa_n_kinds = sizeof tpa_kinds / sizeof tpa_kinds[0];

const tpa_kind_t *tpa_kind_named(const char *name) {
    for (size_t k = 0; name && k < tpa_n_kinds; k++)
        if (!strcmp(tpa_kinds[k].name, name)) return &tpa_kinds[k];
    return NULL;
}

const char *tpa_kind_severity_text(const tpa_kind_t *k) {
    return k->severity == TPA_SEVERITY_ERROR ? "error" : "warning (error when it succeeds a stale tensor)";
}

const char *tpa_kind_label(const char *name) {
    const tpa_kind_t *k = tpa_kind_named(name);
    return k ? k->text_label : name;
}
