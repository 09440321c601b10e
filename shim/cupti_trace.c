/* cupti_trace.c - CUPTI allocation tracing: memory activity records (every
 * device allocation and free, the framework's, NCCL's and cuBLAS's alike)
 * and driver/runtime allocation API callbacks that capture the caller's
 * native stack, tied together by correlation id.
 *
 * Start-up is lazy: under LD_PRELOAD the shim points CUDA_INJECTION64_PATH
 * at itself, so libcuda calls InitializeInjection when the process first
 * initializes CUDA; a process that never uses CUDA never loads it. The
 * subscription happens at most once however both paths are taken.
 *
 * Profilers come first: CUPTI has one subscriber and one set of activity
 * buffers per process, so tpaudit stays off when another CUDA tool is
 * injected (cupti_policy.c), and it hands CUPTI over when another client
 * (torch.profiler's kineto, any CUPTI tool) calls cuptiSubscribe or
 * cuptiActivityRegisterCallbacks later: the shim exports those names, so a
 * caller linked against libcupti reaches them first; tpaudit flushes its
 * records, disables its kinds, unsubscribes, restores CUPTI's default
 * clock, and then lets the call through to libcupti. */
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cupti_api.h"
#include "cupti_oom.h"
#include "cupti_policy.h"
#include "cupti_translate.h"

#define TPA_CUPTI_BUFFERS      16
#define TPA_CUPTI_BUFFER_BYTES (4u << 20)

static struct tpa_cupti_api g_api;
static CUpti_SubscriberHandle g_subscriber;
static atomic_int g_state; /* enum tpa_cupti_state */

/* Pre-sized buffers handed to CUPTI and recycled when it returns them. */
static uint8_t *g_buffers[TPA_CUPTI_BUFFERS];
static atomic_int g_buffer_busy[TPA_CUPTI_BUFFERS];
static _Thread_local int t_in_callback;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = NULL;
    *size = 0;
    *max_records = 0;
    for (int i = 0; i < TPA_CUPTI_BUFFERS; i++) {
        int expected = 0;
        if (g_buffers[i] && atomic_compare_exchange_strong(&g_buffer_busy[i], &expected, 1)) {
            *buffer = g_buffers[i];
            *size = TPA_CUPTI_BUFFER_BYTES;
            return;
        }
    }
    /* All buffers in flight: CUPTI drops records and counts them. */
}

static void release_buffer(uint8_t *buffer) {
    for (int i = 0; i < TPA_CUPTI_BUFFERS; i++)
        if (g_buffers[i] == buffer) atomic_store(&g_buffer_busy[i], 0);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)size;
    CUpti_Activity *record = NULL;
    while (valid && g_api.get_next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
        struct tpa_alloc_rec row;
        int have = 0;
        if (record->kind == CUPTI_ACTIVITY_KIND_MEMORY2)
            have = tpa_cupti_translate_memory((const tpa_cupti_memory_rec *)record, 0, &row);
        else if (record->kind == CUPTI_ACTIVITY_KIND_MEMORY_POOL)
            have = tpa_cupti_translate_pool((const tpa_cupti_pool_rec *)record, 0, &row);
        if (have) tpa_emit_alloc(&row);
    }
    size_t dropped = 0;
    if (g_api.get_dropped(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped) tpa_run_add_cupti_dropped(dropped);
    release_buffer(buffer);
}

static uint64_t timestamp_now(void) { return (uint64_t)tpa_now_ns(); }

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
    (void)userdata;
    const CUpti_CallbackData *info = data;
    if (info->callbackSite == CUPTI_API_EXIT && !t_in_callback) {
        t_in_callback = 1;
        tpa_cupti_oom_check(domain, cbid, info);
        t_in_callback = 0;
        return;
    }
    if (info->callbackSite != CUPTI_API_ENTER || t_in_callback) return;
    t_in_callback = 1;
    uint64_t ips[TPA_MAX_STACK];
    int depth = tpa_config()->stack_depth;
    int n = tpa_stack_capture(ips, depth < TPA_MAX_STACK ? depth : TPA_MAX_STACK, 2);
    tpa_emit_api_call(info->correlationId, info->functionName, tpa_now_ns(), ips, n);
    t_in_callback = 0;
}

static const CUpti_CallbackId DRIVER_IDS[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,     CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,      CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,       CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,          CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
};
static const CUpti_CallbackId RUNTIME_IDS[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocHost_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaHostAlloc_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeHost_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocManaged_v6000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaFreeAsync_v11020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMallocFromPoolAsync_v11020,
};

static void turn_off(const char *why) {
    tpa_run_set_cupti_status(why);
    atomic_store(&g_state, TPA_CUPTI_OFF);
}

/* CUPTI makes device buffers for the timestamps of kernels, copies and sets
 * (3 of about 3 MB per context by default), which the shim never asks for:
 * none are made in advance, so the program's device keeps those bytes and
 * its out-of-memory message reads as without the shim (docs/CUPTI.md). */
static void keep_device_buffers_unmade(void) {
    size_t none = 0, size = sizeof none;
    if (g_api.set_attribute)
        g_api.set_attribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, &size, &none);
}

static int start_tracing(void) {
    int expected = TPA_CUPTI_IDLE;
    if (!atomic_compare_exchange_strong(&g_state, &expected, TPA_CUPTI_STARTING)) return 0;
    const char *why = NULL;
    if (tpa_cupti_api_load(&g_api, &why) != 0) {
        tpa_log(TPA_LOG_INFO, "CUPTI unavailable (%s); ownership audits go on", why ? why : "?");
        char status[160];
        snprintf(status, sizeof status, "off: %s", why ? why : "libcupti not loadable");
        turn_off(status);
        return -1;
    }
    CUptiResult rc = g_api.subscribe(&g_subscriber, (CUpti_CallbackFunc)on_api, NULL);
    if (rc != CUPTI_SUCCESS) {
        const char *msg = "?";
        g_api.get_result_string(rc, &msg);
        int other = rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
        tpa_log(TPA_LOG_WARN, "CUPTI is held by another tool (%s); allocation tracing off, ownership audits go on",
                other ? "a second subscriber is not allowed" : msg);
        turn_off(other ? "off: another CUPTI subscriber holds CUPTI" : "off: cuptiSubscribe failed");
        return -1;
    }
    for (size_t i = 0; i < sizeof DRIVER_IDS / sizeof *DRIVER_IDS; i++)
        g_api.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, DRIVER_IDS[i]);
    for (size_t i = 0; i < sizeof RUNTIME_IDS / sizeof *RUNTIME_IDS; i++)
        g_api.enable_callback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, RUNTIME_IDS[i]);
    for (int i = 0; i < TPA_CUPTI_BUFFERS; i++) g_buffers[i] = aligned_alloc(8, TPA_CUPTI_BUFFER_BYTES);
    g_api.register_timestamp(timestamp_now);
    keep_device_buffers_unmade();
    if (g_api.register_callbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        g_api.activity_enable(CUPTI_ACTIVITY_KIND_MEMORY2) != CUPTI_SUCCESS) {
        g_api.unsubscribe(g_subscriber);
        turn_off("off: CUPTI activity API refused");
        return -1;
    }
    g_api.activity_enable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
    tpa_run_set_cupti_status("on");
    atomic_store(&g_state, TPA_CUPTI_ON);
    tpa_log(TPA_LOG_INFO, "CUPTI allocation tracing on");
    return 0;
}

int tpa_cupti_on_load(void) {
    const char *injection = getenv("CUDA_INJECTION64_PATH");
    const char *self = getenv("TPAUDIT_LIBRARY");
    char why[320], status[360];
    if (tpa_cupti_other_tool(injection, self, getenv("NVTX_INJECTION64_PATH"), getenv("LD_PRELOAD"), why, sizeof why)) {
        /* libcuda loads that tool, not us, and it needs CUPTI to itself. */
        tpa_log(TPA_LOG_WARN, "%s; allocation tracing off, ownership audits go on", why);
        snprintf(status, sizeof status, "off: %s", why);
        turn_off(status);
        return 0;
    }
    if ((!injection || !*injection) && self && *self) setenv("CUDA_INJECTION64_PATH", self, 1);
    tpa_run_set_cupti_status("off: CUDA not initialized by the process");
    return 0;
}

int tpa_cupti_on_injection(void) { return start_tracing(); }

void tpa_cupti_flush(void) {
    if (atomic_load(&g_state) == TPA_CUPTI_ON) g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

void tpa_cupti_shutdown(void) { tpa_cupti_flush(); }

void tpa_cupti_after_fork_child(void) {
    /* CUDA does not survive fork; the child starts over if it initializes CUDA. */
    if (atomic_load(&g_state) == TPA_CUPTI_ON) atomic_store(&g_state, TPA_CUPTI_OFF);
}

/* ---- handing CUPTI over to another client ---- */

/* CUPTI's own clock on Linux (cupti_activity.h), for the next client. */
static uint64_t CUPTIAPI cupti_default_clock(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void hand_over(const char *entry) {
    for (;;) {
        int state = atomic_load(&g_state);
        switch (tpa_cupti_yield_action(state)) {
        case TPA_YIELD_NOTHING: return;
        case TPA_YIELD_WAIT: sched_yield(); continue;
        case TPA_YIELD_FORBID:
            if (!atomic_compare_exchange_strong(&g_state, &state, TPA_CUPTI_OFF)) continue;
            if (tpa_config()->cupti_enabled) {
                tpa_run_set_cupti_status(TPA_CUPTI_YIELDED);
                tpa_log(TPA_LOG_WARN,
                        "another CUPTI client (%s) is in this process; tpaudit leaves CUPTI to it: "
                        "allocation tracing off, ownership audits go on",
                        entry);
            }
            return;
        case TPA_YIELD_HAND_OVER:
            if (!atomic_compare_exchange_strong(&g_state, &state, TPA_CUPTI_YIELDING)) continue;
            g_api.activity_disable(CUPTI_ACTIVITY_KIND_MEMORY2);
            g_api.activity_disable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
            g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); /* our records so far reach the database */
            g_api.unsubscribe(g_subscriber);
            g_api.register_timestamp(cupti_default_clock);
            tpa_run_set_cupti_status(TPA_CUPTI_YIELDED);
            tpa_log(TPA_LOG_WARN,
                    "another CUPTI client (%s) started; tpaudit handed CUPTI over: allocation "
                    "tracing off from here (records so far kept), ownership audits go on",
                    entry);
            atomic_store(&g_state, TPA_CUPTI_OFF);
            return;
        }
    }
}

/* The libcupti definition behind ours: the next object in the lookup
 * order, else libcupti opened the way the tracer opens it. */
static void *real_entry(const char *name) {
    void *sym = dlsym(RTLD_NEXT, name);
    if (!sym) {
        void *lib = tpa_cupti_open();
        if (lib) sym = dlsym(lib, name);
    }
    return sym;
}

typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*subscribe_v2_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *, CUpti_SubscriberParams *);
typedef CUptiResult (*register_fn)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);

TPA_API CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                            void *userdata) {
    hand_over("cuptiSubscribe");
    void *sym = real_entry("cuptiSubscribe");
    subscribe_fn real;
    if (!sym) return CUPTI_ERROR_NOT_INITIALIZED;
    memcpy(&real, &sym, sizeof sym);
    return real(subscriber, callback, userdata);
}

TPA_API CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                               void *userdata, CUpti_SubscriberParams *params) {
    hand_over("cuptiSubscribe_v2");
    void *sym = real_entry("cuptiSubscribe_v2");
    subscribe_v2_fn real;
    if (!sym) return CUPTI_ERROR_NOT_INITIALIZED;
    memcpy(&real, &sym, sizeof sym);
    return real(subscriber, callback, userdata, params);
}

TPA_API CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                            CUpti_BuffersCallbackCompleteFunc completed) {
    hand_over("cuptiActivityRegisterCallbacks");
    void *sym = real_entry("cuptiActivityRegisterCallbacks");
    register_fn real;
    if (!sym) return CUPTI_ERROR_NOT_INITIALIZED;
    memcpy(&real, &sym, sizeof sym);
    return real(requested, completed);
}
