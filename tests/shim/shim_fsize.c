/* shim_fsize.c - runs a command with RLIMIT_FSIZE set (bytes) and SIGXFSZ
 * ignored, to show the shim's behaviour on a full disk. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    struct rlimit rl = {strtoul(argv[1], NULL, 10), strtoul(argv[1], NULL, 10)};
    signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return 2;
    execvp(argv[2], argv + 2);
    perror("execvp");
    return 127;
}
