/* cupti_footprint.c - how much device memory each CUPTI set-up step costs a
 * process (docs/CUPTI.md, "device memory"). argv[1] names the steps taken
 * before the CUDA context is made, joined by '-': sub (cuptiSubscribe), cb
 * (driver and runtime callback domains), nopre (no device buffers made in
 * advance), reg (activity buffer callbacks), mem (MEMORY2 kind), pool
 * (MEMORY_POOL kind); then the workload: oom (one allocation larger than the
 * device), many (400 allocations of 148 MiB). Prints the bytes the device
 * has in use (total - free) after the context is made and after the workload.
 * Built and run by run.sh on the GPU machine; never built by CMake. */
#include <cuda_runtime.h>
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MANY 400
#define MANY_BYTES ((size_t)148 << 20)

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data) {
    (void)userdata, (void)domain, (void)id, (void)data;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *size = (size_t)1 << 20;
    *buffer = aligned_alloc(8, *size);
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx, (void)stream, (void)size, (void)valid;
    free(buffer);
}

static size_t device_in_use(void) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return total_bytes - free_bytes;
}

static int has(const char *steps, const char *step) { return strstr(steps, step) != NULL; }

static void set_up_cupti(const char *steps) {
    CUpti_SubscriberHandle subscriber;
    if (has(steps, "sub") && cuptiSubscribe(&subscriber, (CUpti_CallbackFunc)on_api, NULL) == CUPTI_SUCCESS &&
        has(steps, "cb")) {
        cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
        cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    }
    if (has(steps, "nopre")) {
        size_t none = 0, size = sizeof none;
        cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, &size, &none);
    }
    if (has(steps, "reg")) cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (has(steps, "mem")) cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2);
    if (has(steps, "pool")) cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
}

static void run_workload(const char *steps) {
    if (has(steps, "oom")) {
        void *too_large = NULL;
        size_t free_bytes = 0, total_bytes = 0;
        cudaMemGetInfo(&free_bytes, &total_bytes);
        if (cudaMalloc(&too_large, total_bytes * 2) == cudaSuccess) cudaFree(too_large);
        cudaGetLastError();
    }
    if (has(steps, "many")) {
        static void *blocks[MANY];
        for (int i = 0; i < MANY; i++) cudaMalloc(&blocks[i], MANY_BYTES);
        for (int i = 0; i < MANY; i++) cudaFree(blocks[i]);
    }
}

int main(int argc, char **argv) {
    const char *steps = argc > 1 ? argv[1] : "none";
    set_up_cupti(steps);
    cudaSetDevice(0);
    cudaFree(0);
    size_t after_context = device_in_use();
    run_workload(steps);
    size_t after_workload = device_in_use();
    printf("%-34s in use after the context %8.2f MiB, after the workload %8.2f MiB\n", steps,
           after_context / 1048576.0, after_workload / 1048576.0);
    return 0;
}
