/* device_peak.c - the device's peak from the phase marks: each mark records
 * torch.cuda.max_memory_allocated (the most allocated bytes so far), so the
 * peak of a run is the most any mark saw, and it was reached during the
 * part of a step that ran before the first mark that saw it (forward,
 * backward, optimizer step, outside: _phases.py).  Marks of one device
 * only: the device whose marks saw the most. */
#include "analyzer.h"

#include <stdlib.h>
#include <string.h>

static char *dup_text(sqlite3_stmt *st, int col) {
    const unsigned char *t = sqlite3_column_text(st, col);
    return t ? tpa_strdup((const char *)t) : NULL;
}

int tpa_read_device_peak(sqlite3 *db, tpa_run_t *run) {
    run->device_peak_step = -1;
    /* a file without marks, or with marks from before they read the peak */
    if (!tpa_query_int(db, "SELECT count(*) FROM pragma_table_info('phase_mark') WHERE name='peak_bytes'")) return 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT step, phase, owner, peak_bytes FROM phase_mark WHERE peak_bytes IS NOT NULL AND"
                           " device = (SELECT device FROM phase_mark WHERE peak_bytes IS NOT NULL"
                           "           ORDER BY peak_bytes DESC LIMIT 1) ORDER BY ts_ns, rowid",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    int64_t prev_step = -1, most = 0;
    char *prev_phase = NULL, *prev_owner = NULL;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t peak = tpa_sane_bytes(sqlite3_column_int64(st, 3));
        if (peak > most) { /* first reached in the part since the previous mark */
            most = peak;
            free(run->device_peak_phase);
            free(run->device_peak_owner);
            run->device_peak_phase = prev_phase ? tpa_strdup(prev_phase) : NULL;
            run->device_peak_owner = prev_owner ? tpa_strdup(prev_owner) : NULL;
            run->device_peak_step = prev_phase ? prev_step : -1;
        }
        free(prev_phase);
        free(prev_owner);
        prev_step = sqlite3_column_int64(st, 0);
        prev_phase = dup_text(st, 1);
        prev_owner = dup_text(st, 2);
    }
    free(prev_phase);
    free(prev_owner);
    sqlite3_finalize(st);
    run->device_peak_bytes = most;
    return rc == SQLITE_DONE ? 0 : -1;
}
