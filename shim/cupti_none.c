/* cupti_none.c - the CUPTI hooks of cupti_contract.h for a build without
 * CUPTI: every hook is a no-op and the run records why CUPTI is off. */
#include "cupti_contract.h"

int tpa_cupti_on_load(void) {
    tpa_run_set_cupti_status("off: built without CUPTI");
    return 0;
}

int tpa_cupti_on_injection(void) {
    tpa_run_set_cupti_status("off: built without CUPTI");
    return 0;
}

void tpa_cupti_flush(void) {}

void tpa_cupti_shutdown(void) {}

void tpa_cupti_after_fork_child(void) {}
