/* host_disk_full.c - the host records about 120 MiB of events into an
 * output directory on its own small file system (flushing every 1000, so
 * the shim writes them), then writes a file of its own there (argv[1] MiB,
 * default 8).  Without the shim the file fits; with it, only if the shim
 * stopped before the file system's last MiBs and gave back its WAL.  Exits
 * 5 when its own write fails, as a job whose checkpoint hit a full disk. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostile_common.h"

static void record_events(int rounds) {
    static char detail[2000];
    memset(detail, 'd', sizeof detail - 1);
    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_PARAM_CREATED;
    e.name = "disk";
    e.detail = detail;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < 1000; i++) {
            e.new_key = (uint64_t)(r * 1000 + i + 1);
            tpaudit_record_event(&e);
        }
        tpaudit_flush();
    }
}

int main(int argc, char **argv) {
    long mib = argc > 1 ? atol(argv[1]) : 8;
    record_events(60);
    static char block[1 << 16];
    memset(block, 'h', sizeof block);
    int fd = open("host-data.bin", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) return 5;
    for (long k = 0; k < mib * 16; k++)
        if (write(fd, block, sizeof block) != (ssize_t)sizeof block) {
            perror("host: write host-data.bin");
            return 5;
        }
    if (close(fd) != 0) return 5;
    printf("wrote %ld MiB\n", mib);
    return 0;
}
