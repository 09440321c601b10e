/* host_chdir_fork.c - issue item 10: records, changes into a new directory,
 * forks; the child records too.  With the default output directory both
 * databases must land in the directory the process started in. */
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostile_common.h"

int main(void) {
    host_event(1);
    if (mkdir("sub", 0755) != 0 || chdir("sub") != 0) return 2;
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
        host_event(2);
        tpaudit_flush();
        return 0;
    }
    int st;
    waitpid(pid, &st, 0);
    printf("child %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "failed");
    return 0;
}
