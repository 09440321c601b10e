/* audit_wants_host.c - prints which audits the shim's TPAUDIT_AUDIT plan
 * asks for (tpaudit_audit_wants, steps 1..12 and exit) and then the
 * variable as the process sees it, one line each (test_shim_contracts.py). */
#include <stdio.h>
#include <stdlib.h>

#include "tpaudit.h"

int main(void) {
    const char *sep = "";
    for (int step = 1; step <= 12; step++)
        if (tpaudit_audit_wants(step) == 1) printf("%s%d", sep, step), sep = " ";
    if (tpaudit_audit_wants(-1) == 1) printf("%sexit", sep);
    const char *env = getenv("TPAUDIT_AUDIT");
    printf("\n%s\n", env ? env : "(unset)");
    return tpaudit_audit_wants(1) == TPAUDIT_ENOTLOADED ? 3 : 0;
}
