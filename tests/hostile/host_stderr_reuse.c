/* host_stderr_reuse.c - the host closes every descriptor, 0-2 included
 * (close_range, as daemons do), and opens its own files, which take fds 0,
 * 1 and 2.  The shim then loses its database descriptors and turns itself
 * off; its warning must not land in the host's file on fd 2, which must
 * hold exactly what the host wrote. */
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostile_common.h"

static int put(int fd, const char *text) { return write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -1; }

int main(void) {
    for (int i = 0; i < 100; i++) host_event((uint64_t)i);
    tpaudit_flush();
    if (syscall(SYS_close_range, 0u, ~0u, 0u) != 0) return 2;
    static const char *const names[] = {"host-0.txt", "host-1.txt", "host-2.txt"};
    for (int i = 0; i < 3; i++)
        if (open(names[i], O_CREAT | O_RDWR | O_TRUNC, 0644) != i || put(i, "host data\n") != 0) return 3;
    for (int i = 0; i < 5000; i++) host_event((uint64_t)(1000 + i));
    tpaudit_flush();
    host_audit(1);
    tpaudit_flush();
    for (int i = 0; i < 3; i++)
        if (put(i, "host end\n") != 0) return 4;
    return 0;
}
