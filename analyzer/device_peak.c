/* device_peak.c - the device's peak from the phase marks: each mark records
 * torch.cuda.max_memory_allocated (the most allocated bytes so far), so the
 * peak of a run is the most any mark saw, and it was reached during the
 * part of a step that ran before the first mark that saw it (forward,
 * backward, optimizer step, outside: _phases.py), with the last audit
 * taken in that part or the one before (the audit inside backward of
 * `tpaudit run --peak` is taken by the backward listener just before the
 * backward mark's), where the ledger says what was allocated.  Marks of
 * one device only: the device whose marks saw the most. */
#include "analyzer.h"

#include <stdlib.h>
#include <string.h>

/* The last finished audit that began in [from_ns, to_ns): its label and step
 * and the bytes allocated on `device` at it (measured less the allocator's cache). */
static int audit_in_part(sqlite3 *db, tpa_run_t *run, const char *device, int64_t from_ns, int64_t to_ns) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT a.label, a.step, sum(CASE WHEN l.owner_kind = 'measured' THEN l.bytes ELSE 0 END)"
                           "       - sum(CASE WHEN l.owner_kind = 'allocator_cache' THEN l.bytes ELSE 0 END)"
                           " FROM audit a JOIN ledger l ON l.audit_id = a.id AND l.device = ?1"
                           " WHERE a.end_ns IS NOT NULL AND a.begin_ns >= ?2 AND a.begin_ns < ?3"
                           " GROUP BY a.id ORDER BY a.begin_ns DESC, a.id DESC LIMIT 1",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, device, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 2, from_ns);
    sqlite3_bind_int64(st, 3, to_ns);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        run->device_peak_audit = tpa_column_text(st, 0);
        run->device_peak_audit_step = sqlite3_column_int64(st, 1);
        run->device_peak_audit_bytes = tpa_sane_bytes(sqlite3_column_int64(st, 2));
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

int tpa_read_device_peak(sqlite3 *db, tpa_run_t *run) {
    run->device_peak_step = -1;
    /* a file without marks, or with marks from before they read the peak */
    if (!tpa_query_int(db, "SELECT count(*) FROM pragma_table_info('phase_mark') WHERE name='peak_bytes'")) return 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT step, phase, owner, peak_bytes, ts_ns, device FROM phase_mark"
                           " WHERE peak_bytes IS NOT NULL AND"
                           " device = (SELECT device FROM phase_mark WHERE peak_bytes IS NOT NULL"
                           "           ORDER BY peak_bytes DESC LIMIT 1) ORDER BY ts_ns, rowid",
                           -1, &st, NULL) != SQLITE_OK)
        return -1;
    int64_t prev_step = -1, prev_ts = 0, before_ts = 0, most = 0, part_from = 0, part_to = 0;
    char *prev_phase = NULL, *prev_owner = NULL, *device = NULL;
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
            part_from = before_ts; /* the part before it too: see above */
            part_to = sqlite3_column_int64(st, 4);
            if (!device) device = tpa_column_text(st, 5);
        }
        free(prev_phase);
        free(prev_owner);
        prev_step = sqlite3_column_int64(st, 0);
        before_ts = prev_ts;
        prev_ts = sqlite3_column_int64(st, 4);
        prev_phase = tpa_column_text(st, 1);
        prev_owner = tpa_column_text(st, 2);
    }
    free(prev_phase);
    free(prev_owner);
    sqlite3_finalize(st);
    run->device_peak_bytes = most;
    if (rc == SQLITE_DONE && run->device_peak_phase && device)
        rc = audit_in_part(db, run, device, part_from, part_to) ? SQLITE_ERROR : SQLITE_DONE;
    if (rc == SQLITE_DONE && tpa_read_peak_moment(db, run, device)) rc = SQLITE_ERROR;
    free(device);
    return rc == SQLITE_DONE ? 0 : -1;
}
