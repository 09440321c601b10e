/* shim_fork.c - records events before and after fork(); parent and child
 * must each end with their own complete database. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tpaudit.h"

static void events(int n, uint64_t base) {
    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_PARAM_CREATED;
    for (int i = 0; i < n; i++) {
        e.new_key = base + (uint64_t)i;
        tpaudit_record_event(&e);
    }
}

int main(void) {
    events(10, 1);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        events(7, 100);
        if (tpaudit_flush() != 0) exit(3);
        exit(0);
    }
    events(5, 200);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 2;
}
