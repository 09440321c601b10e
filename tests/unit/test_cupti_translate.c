/* test_cupti_translate.c - checks the CUPTI record -> alloc row translation
 * on records built with the installed toolkit's real CUPTI structs; runs on
 * machines without a GPU (label "unit"). */
#include <stdio.h>
#include <string.h>

#include "cupti_translate.h"

#include "../expect.h"

static tpa_cupti_memory_rec memory_record(CUpti_ActivityMemoryOperationType op, CUpti_ActivityMemoryKind kind) {
    tpa_cupti_memory_rec r;
    memset(&r, 0, sizeof r);
    r.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    r.memoryOperationType = op;
    r.memoryKind = kind;
    r.address = 0x7f0000200000ull;
    r.bytes = 20u << 20;
    r.timestamp = 1000;
    r.deviceId = 3;
    r.contextId = 7;
    r.streamId = 11;
    r.correlationId = 42;
    r.name = "cudaMalloc";
    return r;
}

int main(void) {
    struct tpa_alloc_rec row;
    tpa_cupti_memory_rec alloc =
        memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    EXPECT(tpa_cupti_translate_memory(&alloc, 5, &row) == 1);
    EXPECT(row.op == TPA_ALLOC && row.memkind == TPA_MEM_DEVICE);
    EXPECT(row.address == 0x7f0000200000ull && row.bytes == (20u << 20));
    EXPECT(row.ts_ns == 1005 && row.device == 3 && row.context == 7 && row.stream == 11 && row.correlation == 42);
    EXPECT(row.pool == 0 && row.label && strcmp(row.label, "cudaMalloc") == 0);

    tpa_cupti_memory_rec release =
        memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
    EXPECT(tpa_cupti_translate_memory(&release, 0, &row) == 1);
    EXPECT(row.op == TPA_FREE && row.memkind == TPA_MEM_PINNED);

    tpa_cupti_memory_rec managed =
        memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED);
    EXPECT(tpa_cupti_translate_memory(&managed, 0, &row) == 1 && row.memkind == TPA_MEM_MANAGED);

    tpa_cupti_memory_rec pooled =
        memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    pooled.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    pooled.memoryPoolConfig.address = 0x7f0000000000ull;
    EXPECT(tpa_cupti_translate_memory(&pooled, 0, &row) == 1 && row.memkind == TPA_MEM_POOL &&
           row.pool == 0x7f0000000000ull);

    tpa_cupti_memory_rec other =
        memory_record(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    EXPECT(tpa_cupti_translate_memory(&other, 0, &row) == 0);
    other.kind = CUPTI_ACTIVITY_KIND_KERNEL;
    EXPECT(tpa_cupti_translate_memory(&other, 0, &row) == 0);

    tpa_cupti_pool_rec pool;
    memset(&pool, 0, sizeof pool);
    pool.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    pool.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
    pool.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    pool.address = 0x7f1000000000ull;
    pool.size = 1ull << 30;
    EXPECT(tpa_cupti_translate_pool(&pool, 0, &row) == 1);
    EXPECT(row.op == TPA_ALLOC && row.memkind == TPA_MEM_POOL && row.address == 0x7f1000000000ull &&
           row.bytes == (1ull << 30));
    pool.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED;
    EXPECT(tpa_cupti_translate_pool(&pool, 0, &row) == 1 && row.op == TPA_FREE);
    pool.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
    EXPECT(tpa_cupti_translate_pool(&pool, 0, &row) == 0);

    if (expect_failures) {
        fprintf(stderr, "%d checks failed\n", expect_failures);
        return 1;
    }
    puts("cupti translation: all checks passed");
    return 0;
}
