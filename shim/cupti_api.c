/*
 * cupti_api.c - finds libcupti (soname first, then the toolkit's usual
 * folders) and resolves the entry points in struct tpa_cupti_api.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cupti_api.h"

void *tpa_cupti_open(void) {
    static const char *names[] = {"libcupti.so.13", "libcupti.so"};
    static const char *dirs[] = {"/usr/local/cuda/lib64", "/usr/local/cuda/extras/CUPTI/lib64"};
    char path[4096];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    const char *home = getenv("CUDA_HOME");
    if (home && *home) {
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            snprintf(path, sizeof path, "%s/extras/CUPTI/lib64/%s", home, names[i]);
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h) return h;
            snprintf(path, sizeof path, "%s/lib64/%s", home, names[i]);
            if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) return h;
        }
    }
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++)
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            snprintf(path, sizeof path, "%s/%s", dirs[d], names[i]);
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h) return h;
        }
    return NULL;
}

#define RESOLVE(field, name)                     \
    do {                                         \
        void *sym_ = dlsym(api->lib, name);      \
        if (!sym_) {                             \
            *why = "libcupti lacks " name;       \
            return TPAUDIT_EDISABLED;            \
        }                                        \
        memcpy(&api->field, &sym_, sizeof sym_); \
    } while (0)

int tpa_cupti_api_load(struct tpa_cupti_api *api, const char **why) {
    memset(api, 0, sizeof *api);
    api->lib = tpa_cupti_open();
    if (!api->lib) {
        *why = "libcupti not found";
        return TPAUDIT_EDISABLED;
    }
    RESOLVE(subscribe, "cuptiSubscribe");
    RESOLVE(unsubscribe, "cuptiUnsubscribe");
    RESOLVE(enable_callback, "cuptiEnableCallback");
    RESOLVE(activity_enable, "cuptiActivityEnable");
    RESOLVE(activity_disable, "cuptiActivityDisable");
    RESOLVE(register_callbacks, "cuptiActivityRegisterCallbacks");
    RESOLVE(register_timestamp, "cuptiActivityRegisterTimestampCallback");
    RESOLVE(get_next_record, "cuptiActivityGetNextRecord");
    RESOLVE(get_dropped, "cuptiActivityGetNumDroppedRecords");
    RESOLVE(flush_all, "cuptiActivityFlushAll");
    RESOLVE(get_timestamp, "cuptiGetTimestamp");
    RESOLVE(get_result_string, "cuptiGetResultString");
    return 0;
}
