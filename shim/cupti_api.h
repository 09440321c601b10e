/*
 * cupti_api.h - the CUPTI entry points the shim uses, resolved at run time
 * with dlopen/dlsym so that libtpaudit.so links neither libcupti nor libcuda.
 */
#ifndef TPAUDIT_CUPTI_API_H
#define TPAUDIT_CUPTI_API_H

#include <cupti.h>

#include "cupti_contract.h"

struct tpa_cupti_api {
    void *lib;
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
    CUptiResult (*activity_enable)(CUpti_ActivityKind);
    CUptiResult (*activity_disable)(CUpti_ActivityKind);
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*register_timestamp)(CUpti_TimestampCallbackFunc);
    CUptiResult (*get_next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*get_dropped)(CUcontext, uint32_t, size_t *);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*get_timestamp)(uint64_t *);
    CUptiResult (*get_result_string)(CUptiResult, const char **);
    /* optional (NULL where libcupti lacks it) */
    CUptiResult (*set_attribute)(CUpti_ActivityAttribute, size_t *, void *);
};

/* dlopen of libcupti: one already loaded, the loader's search by soname,
 * the CUDA toolkit (CUDA_HOME, /usr/local/cuda), then the nvidia CUPTI
 * package beside the CUDA libraries loaded (torch's wheels); cupti_api.c. */
TPA_HIDDEN void *tpa_cupti_open(void);

/* Loads libcupti and resolves every entry point; 0 on success, else a
 * negative status with `why` set to a static explanation. */
TPA_HIDDEN int tpa_cupti_api_load(struct tpa_cupti_api *api, const char **why);

#endif /* TPAUDIT_CUPTI_API_H */
