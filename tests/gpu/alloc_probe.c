/* alloc_probe.c - a CUDA program making known allocations and frees
 * (cudaMalloc, cuMemAlloc, cudaMallocAsync, pinned host memory); prints
 * each as "ALLOC kind address bytes" so the test can compare them with the
 * database the shim wrote. Exits 77 when there is no GPU. */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "probe_audit.h"

#define CHECK(call)                                                                     \
    do {                                                                                \
        int rc_ = (int)(call);                                                          \
        if (rc_ != 0) {                                                                 \
            fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #call, rc_); \
            return 1;                                                                   \
        }                                                                               \
    } while (0)

__attribute__((noinline)) static int allocate_with_runtime(void **ptrs, const size_t *sizes, int n) {
    for (int i = 0; i < n; i++) {
        CHECK(cudaMalloc(&ptrs[i], sizes[i]));
        printf("ALLOC device 0x%llx %zu\n", (unsigned long long)(size_t)ptrs[i], sizes[i]);
    }
    return 0;
}

__attribute__((noinline)) static int allocate_with_driver(CUdeviceptr *p, size_t bytes) {
    CHECK(cuMemAlloc(p, bytes));
    printf("ALLOC driver 0x%llx %zu\n", (unsigned long long)*p, bytes);
    return 0;
}

int main(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("skip: no CUDA device\n");
        return 77;
    }
    static const size_t sizes[] = {1 << 20, 3 << 20, 64 << 20};
    void *ptrs[3];
    if (allocate_with_runtime(ptrs, sizes, 3)) return 1;
    CUdeviceptr dptr;
    if (allocate_with_driver(&dptr, 5 << 20)) return 1;
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream));
    void *async_ptr;
    CHECK(cudaMallocAsync(&async_ptr, 7 << 20, stream));
    CHECK(cudaStreamSynchronize(stream));
    printf("ALLOC async 0x%llx %d\n", (unsigned long long)(size_t)async_ptr, 7 << 20);
    void *host;
    CHECK(cudaMallocHost(&host, 2 << 20));
    printf("ALLOC pinned 0x%llx %d\n", (unsigned long long)(size_t)host, 2 << 20);
    /* An optimizer-held tensor in the 64 MiB buffer that no model holds:
     * the report must place it in that allocation, made in allocate_with_runtime. */
    int64_t shape[1] = {(int64_t)(sizes[2] / 4)};
    probe_audit_stale_table("probe", ptrs[2], sizes[2], 1, shape);
    for (int i = 0; i < 3; i++) CHECK(cudaFree(ptrs[i]));
    CHECK(cuMemFree(dptr));
    CHECK(cudaFreeAsync(async_ptr, stream));
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaFreeHost(host));
    CHECK(cudaStreamDestroy(stream));
    printf("FREES 6\n");
    return 0;
}
