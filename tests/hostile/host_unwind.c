/* host_unwind.c - a host whose stacks pass a frame without unwind
 * information (host_unwind_frame.c), where libunwind checks memory through
 * a pipe.  It records through that frame, prints the number its first
 * open() gets, closes every descriptor above 2, opens its own input (3) and
 * output (4) files, records through the frame again (deeper in the stack,
 * where libunwind checks memory anew), then copies the input to the output.  Nothing of the shim's may read or write those files. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void record_without_unwind_info(int n); /* host_unwind_frame.c */

/* Records from deeper in the stack, on pages libunwind has not checked yet. */
static void record_deeper(int depth, int n) {
    volatile char pad[16384];
    pad[0] = (char)depth;
    if (depth > 0)
        record_deeper(depth - 1, n);
    else
        record_without_unwind_info(n);
    pad[1] = pad[0];
}

int main(void) {
    record_without_unwind_info(1);
    int first = open("/dev/null", O_RDONLY);
    printf("first open: %d\n", first);
    for (int fd = 3; fd < 256; fd++) close(fd);
    FILE *f = fopen("in.txt", "w");
    if (!f) return 1;
    fputs("input line of the host\n", f);
    fclose(f);
    int in = open("in.txt", O_RDONLY), out = open("out.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    printf("in %d out %d\n", in, out);
    for (int depth = 1; depth <= 8; depth++) record_deeper(depth, 10);
    char buf[256];
    ssize_t n = read(in, buf, sizeof buf);
    if (n > 0 && write(out, buf, (size_t)n) != n) return 1;
    close(in);
    close(out);
    printf("copied %zd bytes\n", n);
    return 0;
}
