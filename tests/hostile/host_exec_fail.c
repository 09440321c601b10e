/* host_exec_fail.c - an exec that the shim expects to succeed (an
 * executable regular file) fails (ENOEXEC: the file is no program), and the
 * host goes on recording.  Mode "recorded": an audit before and after the
 * exec; mode "empty": the exec comes before any record. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hostile_common.h"

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int recorded = !strcmp(argv[1], "recorded");
    if (recorded) host_audit(1);
    char *args[] = {argv[2], NULL};
    execv(argv[2], args);
    printf("exec failed: %s\n", errno == ENOEXEC ? "ENOEXEC" : "other");
    host_audit(2);
    return 0;
}
