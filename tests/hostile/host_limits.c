/* host_limits.c - issue item 8: under the limits the runner sets, the host
 * records an event, then `files` opens /dev/null until it fails (at most
 * 32) and prints how many it got; `memory` allocates and touches 6 MiB. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostile_common.h"

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    host_event(1);
    if (!strcmp(argv[1], "files")) {
        int n = 0;
        while (n < 32 && open("/dev/null", O_RDONLY) >= 0) n++;
        printf("opened %d files\n", n);
        return 0;
    }
    size_t len = 6u << 20;
    char *p = malloc(len);
    if (!p) {
        printf("malloc failed\n");
        return 1;
    }
    memset(p, 1, len);
    printf("touched %zu bytes\n", len);
    free(p);
    return 0;
}
