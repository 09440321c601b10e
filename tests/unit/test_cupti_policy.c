/* test_cupti_policy.c - when the shim leaves CUPTI to another tool
 * (shim/cupti_policy.c): the environment of Nsight Systems, Nsight Compute,
 * compute-sanitizer and other injection tools turns it off, its own
 * injection or a plain environment does not; and the state table for a
 * CUPTI client that arrives later. No GPU needed. */
#include <stdio.h>
#include <string.h>

#include "cupti_policy.h"

#include "../expect.h"

static int other(const char *inj, const char *nvtx, const char *preload, char *why) {
    return tpa_cupti_other_tool(inj, "/opt/tpaudit/lib/libtpaudit.so", nvtx, preload, why, 200);
}

int main(void) {
    char why[200];
    /* nothing else in the process */
    EXPECT(other(NULL, NULL, NULL, why) == 0);
    EXPECT(other("", "", "", why) == 0);
    EXPECT(other("/opt/tpaudit/lib/libtpaudit.so", NULL, "/opt/tpaudit/lib/libtpaudit.so", why) == 0);
    EXPECT(other(NULL, NULL, "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2:/opt/tpaudit/lib/libtpaudit.so", why) == 0);
    /* another injection library */
    EXPECT(other("/opt/nvidia/nsight-systems/target-linux-x64/libToolsInjection64.so", NULL, NULL, why) == 1);
    EXPECT(strstr(why, "CUDA_INJECTION64_PATH") && strstr(why, "libToolsInjection64.so"));
    EXPECT(other("/usr/local/cuda/compute-sanitizer/libsanitizer-collection.so", NULL, NULL, why) == 1);
    /* Nsight's NVTX injection */
    EXPECT(other(NULL, "/opt/nvidia/nsight-systems/target-linux-x64/libToolsInjection64.so", NULL, why) == 1);
    EXPECT(strstr(why, "NVTX_INJECTION64_PATH") != NULL);
    /* launchers' preloads, anywhere in the list, ':' or ' ' separated */
    EXPECT(other(NULL, NULL, "/opt/tpaudit/lib/libtpaudit.so:/opt/nsight/libToolsInjectionProxy64.so", why) == 1);
    EXPECT(strstr(why, "libToolsInjectionProxy64.so") != NULL);
    EXPECT(other(NULL, NULL, "/x/libTreeLauncherTargetInjection.so /opt/tpaudit/lib/libtpaudit.so", why) == 1);
    EXPECT(other(NULL, NULL, "libsanitizer-public.so", why) == 1);
    EXPECT(other(NULL, NULL, "/home/u/libToolsInjection_not_dir/libfoo.so", why) == 0); /* only base names count */

    /* a later client: hand over when on, never start when idle, wait in transitions */
    EXPECT(tpa_cupti_yield_action(TPA_CUPTI_IDLE) == TPA_YIELD_FORBID);
    EXPECT(tpa_cupti_yield_action(TPA_CUPTI_ON) == TPA_YIELD_HAND_OVER);
    EXPECT(tpa_cupti_yield_action(TPA_CUPTI_STARTING) == TPA_YIELD_WAIT);
    EXPECT(tpa_cupti_yield_action(TPA_CUPTI_YIELDING) == TPA_YIELD_WAIT);
    EXPECT(tpa_cupti_yield_action(TPA_CUPTI_OFF) == TPA_YIELD_NOTHING);
    EXPECT(strncmp(TPA_CUPTI_YIELDED, "off: ", 5) == 0);
    if (!expect_failures) puts("cupti policy: all checks passed");
    return expect_failures != 0;
}
