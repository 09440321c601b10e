/* host_closefds.c - issue item 2: the host closes every descriptor above 2
 * (close_range, as daemons do), opens its own files and keeps recording.
 * Its files must hold exactly what it wrote. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostile_common.h"

static int write_file(const char *path, const char *text) {
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    return n == (ssize_t)strlen(text) ? fd : -1;
}

int main(void) {
    for (int i = 0; i < 100; i++) host_event((uint64_t)i);
    tpaudit_flush();
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) return 2;
    int a = write_file("host-a.txt", "host data 17 byte");
    int b = write_file("host-b.txt", "second host file\n");
    if (a < 0 || b < 0) return 3;
    for (int i = 0; i < 5000; i++) host_event((uint64_t)(1000 + i));
    tpaudit_flush();
    host_audit(1);
    tpaudit_flush();
    char buf[64] = {0};
    ssize_t n = pread(a, buf, sizeof buf - 1, 0);
    close(a);
    close(b);
    printf("read back %zd bytes: %s\n", n, buf);
    return n == 17 && !strcmp(buf, "host data 17 byte") ? 0 : 1;
}
