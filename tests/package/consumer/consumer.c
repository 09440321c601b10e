/*
 * consumer.c - a program outside tpaudit's tree that uses the installed
 * public header, built by tests/package/test_consumer.sh once through
 * pkg-config and once through find_package(tpaudit). It records one audit
 * point; it prints the shim's ABI (0 without the shim, where every call is a
 * no-op) and exits 0 either way.
 */
#include <stdio.h>
#include <tpaudit.h>

int main(void) {
    int64_t audit = tpaudit_audit_begin("consumer", 1);
    if (audit > 0) tpaudit_audit_end(audit);
    printf("tpaudit abi %d\n", tpaudit_abi_version());
    return 0;
}
