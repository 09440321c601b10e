/* host_disk_full.c - a host on a small file system that holds the output
 * directory: it writes BEFORE MiB of its own (host-before.bin), records
 * about 120 MiB of events (flushing every 1000, so the shim writes them),
 * then writes AFTER MiB more (host-data.bin).  Without the shim both files
 * fit; with it, only if the shim stopped before the file system's last MiBs
 * (or, when BEFORE left less than that, never made its database) and gave
 * back its WAL.  Exits 5 when its own write fails, as a job whose checkpoint
 * hit a full disk.  usage: host_disk_full BEFORE_MIB AFTER_MIB */
#include <errno.h>
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

/* Writes `mib` MiB to `path`; 0, or -1 after a line on stderr. */
static int write_file(const char *path, long mib) {
    static char block[1 << 16];
    memset(block, 'h', sizeof block);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0) return -1;
    for (long k = 0; k < mib * 16; k++)
        if (write(fd, block, sizeof block) != (ssize_t)sizeof block) {
            fprintf(stderr, "host: write %s: %s\n", path, strerror(errno));
            close(fd);
            return -1;
        }
    return close(fd);
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    long before = atol(argv[1]), after = atol(argv[2]);
    if (before && write_file("host-before.bin", before) != 0) return 5;
    record_events(60);
    if (write_file("host-data.bin", after) != 0) return 5;
    printf("wrote %ld + %ld MiB\n", before, after);
    return 0;
}
