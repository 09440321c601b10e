/* cupti_oom.c - an allocation call that returned out-of-memory, seen at the
 * exit of the CUPTI callbacks cupti_trace.c already takes (cudaMalloc,
 * cuMemAlloc, the async and pool allocations, managed memory, cuMemCreate):
 * one oom row with the size asked, the device's free and total bytes read
 * from the driver at that moment, and the caller's native stack.  The
 * device memory by library at that moment comes from the alloc rows, offline
 * (docs/ANALYZER.md, "Out of memory").  Costs one comparison per allocation
 * call that succeeded. */
#include <dlfcn.h>
#include <string.h>

#include "cupti_api.h"
#include "cupti_oom.h"

/* CUDA_ERROR_OUT_OF_MEMORY and cudaErrorMemoryAllocation are both 2. */
#define TPA_CUDA_OUT_OF_MEMORY 2

/* Every allocation call watched has the size as its second parameter, after
 * the pointer (or handle) it fills: cuMemAlloc_v2(dptr, bytesize),
 * cudaMalloc(devPtr, size), cuMemAllocAsync(dptr, bytesize, stream),
 * cuMemAllocFromPoolAsync(dptr, bytesize, pool, stream), cuMemCreate(handle,
 * size, prop, flags), cudaMallocManaged(devPtr, size, flags), ... */
struct out_then_size {
    void *out;
    size_t size;
};

static int watched(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
        return cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 || cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged ||
               cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync ||
               cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync || cbid == CUPTI_DRIVER_TRACE_CBID_cuMemCreate;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
        return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020 ||
               cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000 ||
               cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020 ||
               cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020;
    return 0;
}

/* The driver's view of the current device: its ordinal, free and total bytes. */
static void device_memory(tpaudit_oom_t *o) {
    typedef int (*get_info_fn)(size_t *, size_t *);
    typedef int (*get_device_fn)(int *);
    void *info_sym = dlsym(RTLD_DEFAULT, "cuMemGetInfo_v2"), *dev_sym = dlsym(RTLD_DEFAULT, "cuCtxGetDevice");
    get_info_fn get_info;
    get_device_fn get_device;
    size_t free_b = 0, total_b = 0;
    int dev = -1;
    if (info_sym) {
        memcpy(&get_info, &info_sym, sizeof info_sym);
        if (get_info(&free_b, &total_b) == 0) {
            o->free_bytes = (int64_t)free_b;
            o->total_bytes = (int64_t)total_b;
        }
    }
    if (dev_sym) {
        memcpy(&get_device, &dev_sym, sizeof dev_sym);
        if (get_device(&dev) == 0) o->device = dev;
    }
}

int tpa_cupti_oom_check(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *info) {
    if (info->callbackSite != CUPTI_API_EXIT || !info->functionReturnValue || !watched(domain, cbid)) return 0;
    int status = *(const int *)info->functionReturnValue; /* CUresult and cudaError_t are both enums */
    if (status != TPA_CUDA_OUT_OF_MEMORY) return 0;
    tpaudit_oom_t o = TPAUDIT_INIT_OOM;
    struct out_then_size params;
    if (info->functionParams) {
        memcpy(&params, info->functionParams, sizeof params);
        o.requested = params.size;
    }
    o.source = "cuda";
    o.api = info->functionName;
    device_memory(&o);
    /* no wait for ring space inside the driver's call; skip this file's and cupti_trace.c's frames */
    tpa_emit_oom(&o, 1, 3, 0);
    return 1;
}
