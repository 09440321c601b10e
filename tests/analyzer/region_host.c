/* region_host.c - a native program using tpaudit.h the way a runtime does:
 * it carves a parameter arena (recorded as a region with its native stack),
 * builds an optimizer over a tensor in it, replaces that tensor, and audits.
 * The analyzer must report the stale tensor inside the arena, with the
 * arena's allocation stack symbolized to carve_parameter_arena.  That
 * function carries a C++ mangled symbol name, native::carve_parameter_arena
 * (unsigned long), so the report must also show it demangled. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tpaudit.h"

static float *arena;

static void carve_parameter_arena(size_t bytes) __asm__("_ZN6native21carve_parameter_arenaEm");
__attribute__((noinline)) static void carve_parameter_arena(size_t bytes) {
    arena = calloc(1, bytes);
    tpaudit_region_t region = TPAUDIT_INIT_REGION;
    region.op = TPAUDIT_REGION_ALLOC;
    region.address = (uint64_t)(uintptr_t)arena;
    region.bytes = bytes;
    region.label = "params";
    region.capture_native = 1;
    tpaudit_record_region(&region);
}

static void record(uint64_t key, const char *name, int64_t rows, void *data) {
    int64_t shape[2] = {rows, 16};
    tpaudit_tensor_t t = TPAUDIT_INIT_TENSOR;
    t.key = key;
    t.name = name;
    t.ndim = 2;
    t.shape = shape;
    t.dtype = "float32";
    t.device = "cpu";
    t.storage_ptr = (uint64_t)(uintptr_t)data;
    t.storage_bytes = (uint64_t)rows * 16 * 4;
    t.nbytes = t.storage_bytes;
    t.requires_grad = 1;
    t.type = "native";
    tpaudit_record_tensor(&t);
}

static void ref(int holder, int role, const char *path, uint64_t key) {
    tpaudit_ref_t r = TPAUDIT_INIT_REF;
    r.holder_kind = holder;
    r.holder_class = holder == TPAUDIT_HOLDER_MODULE ? "native.Model" : "native.SGD";
    r.holder_id = (uint64_t)holder;
    r.path = path;
    r.role = role;
    r.tensor_key = key;
    tpaudit_record_ref(&r);
}

int main(void) {
    carve_parameter_arena(2 * 100 * 16 * 4);
    float *old_table = arena, *new_table = arena + 100 * 16;
    int64_t audit = tpaudit_audit_begin("step", 1);
    record(1, "embed.weight", 100, old_table);
    record(2, "embed.weight", 104, new_table);
    ref(TPAUDIT_HOLDER_OPTIMIZER, TPAUDIT_ROLE_GROUP_PARAM, "param_groups[0].params[0]", 1);
    ref(TPAUDIT_HOLDER_MODULE, TPAUDIT_ROLE_PARAM, "embed.weight", 2);
    tpaudit_audit_end(audit);
    printf("old table at %p\n", (void *)old_table);
    free(arena);
    return 0;
}
