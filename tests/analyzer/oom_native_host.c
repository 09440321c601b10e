/* oom_native_host.c - a native runtime that runs out of device memory, on
 * the CPU: it carves its weights as a region, then an allocation fails and
 * it records the OOM through the public API (tpaudit_record_oom, with its
 * native stack) before it gives up, as tprt does when cudaMalloc fails.
 * usage: oom_native_host fatal|caught  (caught: it halves the request, goes
 * on and exits 0) */
#include <stdio.h>
#include <string.h>

#include "tpaudit.h"

static char weights[1 << 16];

/* The runtime's allocator: the one frame the report must name. */
__attribute__((noinline)) static int arena_alloc_activations(unsigned long long bytes) {
    tpaudit_oom_t oom = TPAUDIT_INIT_OOM;
    oom.source = "oom_native_host";
    oom.api = "cudaMalloc";
    oom.device = 0;
    oom.requested = bytes;
    oom.free_bytes = 1ll << 30;
    oom.total_bytes = 80ll << 30;
    oom.capture_native = 1;
    return tpaudit_record_oom(&oom) > 0 ? -1 : -2;
}

int main(int argc, char **argv) {
    int caught = argc > 1 && !strcmp(argv[1], "caught");
    tpaudit_region_t reg = TPAUDIT_INIT_REGION;
    reg.op = TPAUDIT_REGION_ALLOC;
    reg.address = (uint64_t)(uintptr_t)weights;
    reg.bytes = sizeof weights;
    reg.device = 0;
    reg.label = "oom_native_host.weights";
    tpaudit_record_region(&reg);
    unsigned long long want = 4ull << 30;
    if (arena_alloc_activations(want) == -2) return 3; /* not under the shim */
    if (!caught) {
        fprintf(stderr, "oom_native_host: out of memory allocating %llu bytes\n", want);
        return 1;
    }
    tpaudit_record_region(&reg); /* the smaller batch fits and it goes on */
    return 0;
}
