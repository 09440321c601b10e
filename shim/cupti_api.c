/*
 * cupti_api.c - finds libcupti at run time and resolves the entry points in
 * struct tpa_cupti_api. libtpaudit.so never links it, so one build (the
 * wheel's) traces device memory wherever a libcupti exists, and runs
 * without one. The search, first found wins:
 *   1. a libcupti already in the process (a framework loaded it): one copy;
 *   2. the dynamic loader's search by soname (LD_LIBRARY_PATH, ldconfig);
 *   3. the CUDA toolkit: $CUDA_HOME, then /usr/local/cuda;
 *   4. the `nvidia` CUPTI package that PyTorch's CUDA wheels install beside
 *      torch (site-packages/nvidia/cu13/lib, or nvidia/cuda_cupti/lib),
 *      found from the CUDA libraries already loaded (tracing starts when the
 *      process initializes CUDA, so torch's libcudart is in by then).
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cupti_api.h"

static const char *const CUPTI_NAMES[] = {"libcupti.so.13", "libcupti.so"};
#define N_CUPTI_NAMES (sizeof CUPTI_NAMES / sizeof CUPTI_NAMES[0])

/* dlopen of each name in dir (or by soname when dir is NULL). */
static void *open_in(const char *dir, int flags) {
    char path[4096];
    for (size_t i = 0; i < N_CUPTI_NAMES; i++) {
        const char *name = CUPTI_NAMES[i];
        if (dir && (size_t)snprintf(path, sizeof path, "%s/%s", dir, name) < sizeof path) name = path;
        void *h = dlopen(name, flags);
        if (h) return h;
    }
    return NULL;
}

/* The toolkit's folders below root: extras/CUPTI/lib64, lib64. */
static void *open_toolkit(const char *root) {
    static const char *const subdirs[] = {"extras/CUPTI/lib64", "lib64"};
    char dir[4096];
    if (!root || !*root) return NULL;
    for (size_t i = 0; i < sizeof subdirs / sizeof *subdirs; i++) {
        if ((size_t)snprintf(dir, sizeof dir, "%s/%s", root, subdirs[i]) >= sizeof dir) continue;
        void *h = open_in(dir, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    return NULL;
}

/* A loaded object under site-packages/nvidia/ or site-packages/torch/:
 * its nvidia/ folder's CUPTI package folders. */
static int try_nvidia_package(struct dl_phdr_info *info, size_t size, void *found) {
    static const char *const markers[] = {"/nvidia/", "/torch/lib/"};
    static const char *const packages[] = {"nvidia/cu13/lib", "nvidia/cuda_cupti/lib"};
    (void)size;
    const char *name = info->dlpi_name;
    for (size_t m = 0; name && m < sizeof markers / sizeof *markers; m++) {
        const char *at = strstr(name, markers[m]);
        if (!at) continue;
        char dir[4096];
        for (size_t p = 0; p < sizeof packages / sizeof *packages; p++) {
            if ((size_t)snprintf(dir, sizeof dir, "%.*s/%s", (int)(at - name), name, packages[p]) >= sizeof dir)
                continue;
            if ((*(void **)found = open_in(dir, RTLD_NOW | RTLD_LOCAL))) return 1;
        }
    }
    return 0;
}

void *tpa_cupti_open(void) {
    void *h = open_in(NULL, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) h = open_in(NULL, RTLD_NOW | RTLD_LOCAL);
    if (!h) h = open_toolkit(getenv("CUDA_HOME"));
    if (!h) h = open_toolkit("/usr/local/cuda");
    if (!h) dl_iterate_phdr(try_nvidia_package, &h);
    return h;
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
        *why = "libcupti not found (no CUDA toolkit, no nvidia CUPTI package beside torch)";
        return TPAUDIT_EDISABLED;
    }
    struct link_map *map = NULL;
    if (dlinfo(api->lib, RTLD_DI_LINKMAP, &map) == 0 && map)
        tpa_log(TPA_LOG_INFO, "CUPTI from %s", map->l_name);
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
    void *set_attribute = dlsym(api->lib, "cuptiActivitySetAttribute");
    memcpy(&api->set_attribute, &set_attribute, sizeof set_attribute);
    return 0;
}
