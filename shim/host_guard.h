/* host_guard.h - what keeps the shim out of the host's way on its two
 * shared resources: the stderr the process started with (log.c) and the
 * free space of the output's file system (disk_guard.c). */
#ifndef TPA_HOST_GUARD_H
#define TPA_HOST_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "cupti_contract.h"

/* log.c: notes which file fd 2 is (device, inode, rdev, type) at load;
 * tpa_log() writes only while fd 2 is still that file. */
TPA_HIDDEN void tpa_log_note_stderr(void);
TPA_HIDDEN void tpa_log_set_level(int level); /* lines above it are not written */

/* disk_guard.c: the shim's SQLite writes only while more than the reserve
 * stays free on the output's file system. */
#define TPA_DISK_RESERVE_MIN (16ll << 20)
TPA_HIDDEN int tpa_disk_guard_install(void); /* wraps the private SQLite's write calls; 0 on success */
TPA_HIDDEN int tpa_disk_full(void);          /* 1 once the reserve was reached or a write met ENOSPC */
TPA_HIDDEN void tpa_disk_release(void);      /* after the stop: lets the end use the reserve (rollback, checkpoint) */
TPA_HIDDEN void tpa_disk_why(char *out, size_t len); /* "the file system is full" or "... down to the last N MiB ..." */
TPA_HIDDEN void tpa_disk_forget_in_child(void);

#endif
