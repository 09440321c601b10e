/* memviz_device.c - the device a run's owners go to in the memory viewer's
 * export: the CUDA device of its ledger, or the one device whose segments
 * are PyTorch's caching allocator's. */
#include "memviz.h"

#include <stdlib.h>
#include <string.h>

/* The CUDA index of "cuda:N"; -1 for another device. */
static int64_t cuda_index(const char *device) {
    if (!device || strncmp(device, "cuda", 4)) return -1;
    return device[4] == ':' ? strtoll(device + 5, NULL, 10) : 0;
}

/* The device the owners go to: the ledger's, or the one device whose
 * segments are PyTorch's (also for a run without a ledger, whose audits go there). */
int64_t mv_owner_device(const tpa_run_t *run) {
    int64_t d = cuda_index(run->owner_device), only = -1;
    const tpa_device_memory_t *dm = run->device_memory;
    for (size_t i = 0; dm && i < dm->n_events; i++) {
        const tpa_segment_event_t *e = &dm->events[i];
        if (e->is_free || (e->stack >= 0 && dm->stacks[e->stack].library)) continue;
        if (e->device == d) return d;
        if (only < 0) only = e->device;
        if (only != e->device) return d;
    }
    return only >= 0 && (d >= 0 || !run->owner_device) ? only : d;
}
