/*
 * cupti_policy.c - when tpaudit leaves CUPTI to another tool (see
 * cupti_policy.h): the state table for a subscriber that arrives later, and
 * the environment check for tools injected before the process started.
 */
#include "cupti_policy.h"

#include <stdio.h>
#include <string.h>

enum tpa_cupti_yield tpa_cupti_yield_action(int state) {
    switch (state) {
    case TPA_CUPTI_IDLE: return TPA_YIELD_FORBID;
    case TPA_CUPTI_ON: return TPA_YIELD_HAND_OVER;
    case TPA_CUPTI_STARTING:
    case TPA_CUPTI_YIELDING: return TPA_YIELD_WAIT;
    default: return TPA_YIELD_NOTHING;
    }
}

/* Library names of NVIDIA's tool launchers as they appear in LD_PRELOAD. */
static const char *const TOOL_PRELOADS[] = {
    "libToolsInjection", /* Nsight Systems */
    "libTreeLauncher",   /* Nsight Compute, compute-sanitizer */
    "libsanitizer-",     /* compute-sanitizer */
    "libcuda-gdb",       /* cuda-gdb */
};

static const char *base_name(const char *path, size_t n, size_t *base_len) {
    size_t start = n;
    while (start > 0 && path[start - 1] != '/') start--;
    *base_len = n - start;
    return path + start;
}

int tpa_cupti_other_tool(const char *injection, const char *self, const char *nvtx_injection, const char *ld_preload,
                         char *why, size_t len) {
    if (injection && *injection && !(self && *self && strcmp(injection, self) == 0)) {
        snprintf(why, len, "CUDA_INJECTION64_PATH names another tool (%s)", injection);
        return 1;
    }
    if (nvtx_injection && *nvtx_injection) {
        snprintf(why, len, "NVTX_INJECTION64_PATH names a profiler (%s)", nvtx_injection);
        return 1;
    }
    for (const char *p = ld_preload; p && *p;) {
        size_t n = strcspn(p, ": ");
        size_t blen;
        const char *base = base_name(p, n, &blen);
        for (size_t i = 0; i < sizeof TOOL_PRELOADS / sizeof *TOOL_PRELOADS; i++) {
            size_t tlen = strlen(TOOL_PRELOADS[i]);
            if (blen >= tlen && strncmp(base, TOOL_PRELOADS[i], tlen) == 0) {
                snprintf(why, len, "LD_PRELOAD holds a CUDA tool (%.*s)", (int)blen, base);
                return 1;
            }
        }
        p += n;
        while (*p == ':' || *p == ' ') p++;
    }
    return 0;
}
