/* shim_fsize.c - runs a command with RLIMIT_FSIZE set (bytes), SIGXFSZ left
 * at its default action (a write past the limit kills the thread's process
 * unless the shim keeps its own writes away from the host's threads), to
 * show the shim's behaviour on a full disk. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    struct rlimit rl = {strtoul(argv[1], NULL, 10), strtoul(argv[1], NULL, 10)};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return 2;
    execvp(argv[2], argv + 2);
    perror("execvp");
    return 127;
}
