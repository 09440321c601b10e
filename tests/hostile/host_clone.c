/* host_clone.c - a child made by the raw clone system call (SIGCHLD only:
 * no fork handlers run in it) records an audit and 1000 events and exits;
 * the parent, which recorded before the clone, waits for it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostile_common.h"

int main(void) {
    host_audit(1);
    tpaudit_flush();
    fflush(stdout);
    long pid = syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
    if (pid < 0) return 2;
    if (pid == 0) {
        host_audit(2);
        for (uint64_t k = 1; k <= 1000; k++) host_event(k);
        exit(4);
    }
    int status = 0;
    if (waitpid((pid_t)pid, &status, 0) != (pid_t)pid) return 2;
    host_event(5000);
    printf("child ended with %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}
