/* host_exec.c - issue item 5: each image records an audit (not flushed) and
 * replaces itself: `host_exec DEPTH END` execs itself DEPTH times (execv
 * and execl in turn), and the last image ends by END: exit or _exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostile_common.h"

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int depth = atoi(argv[1]);
    host_audit(depth);
    if (depth > 0) {
        char next[16];
        snprintf(next, sizeof next, "%d", depth - 1);
        if (depth % 2) {
            char *args[] = {argv[0], next, argv[2], NULL};
            execv("/proc/self/exe", args);
        } else {
            execl("/proc/self/exe", argv[0], next, argv[2], (char *)NULL);
        }
        perror("exec");
        return 1;
    }
    printf("end of the chain\n");
    fflush(stdout);
    if (!strcmp(argv[2], "_exit")) _exit(3);
    return 3;
}
