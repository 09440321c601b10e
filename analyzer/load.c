/* load.c - reads each database: its run row, then (through judge.c) the
 * judged audit, the allocation scan, the audit marks and the headline
 * findings, into one report with all ranks merged.
 *
 * Databases are read in parallel by a small pool of threads (one per
 * online CPU, at most 8; TPAUDIT_JOBS sets the number), each into a report
 * of its own, merged afterwards in the order of the files, so the result
 * does not depend on the threads.  Each database is opened once, and only
 * what the caller needs is read (tpa_need): the gate reads no stacks and no
 * allocations.  On a failure, the first file in order that failed says why. */
#include "analyzer.h"
#include "out_of_memory.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define MAX_JOBS 8

/* The run row into `run`; -1 when there is none. */
static int read_run_row(sqlite3 *db, tpa_run_t *run) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db,
                           "SELECT host, pid, rank, world_size, argv, complete, dropped_events, cupti_dropped, cupti, "
                           "python, ppid FROM run",
                           -1, &st, NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return -1;
    }
    run->host = tpa_column_text(st, 0);
    run->pid = sqlite3_column_int64(st, 1);
    if (run->pid < 0 || run->pid > INT32_MAX) run->pid = 0;
    run->ppid = sqlite3_column_int64(st, 10);
    if (run->ppid < 0 || run->ppid > INT32_MAX) run->ppid = 0;
    /* A rank outside [0, 2^31) or a world size outside [1, 2^31] is no rank. */
    int64_t rank = sqlite3_column_int64(st, 2), world = sqlite3_column_int64(st, 3);
    run->has_rank = sqlite3_column_type(st, 2) == SQLITE_INTEGER && rank >= 0 && rank < INT32_MAX;
    run->rank = run->has_rank ? rank : 0;
    run->has_world_size = sqlite3_column_type(st, 3) == SQLITE_INTEGER && world >= 1 && world <= INT32_MAX;
    run->world_size = run->has_world_size ? world : 0;
    run->argv = tpa_column_text(st, 4);
    run->complete = sqlite3_column_int64(st, 5) == 1;
    int64_t dropped = sqlite3_column_int64(st, 6), cupti_dropped = sqlite3_column_int64(st, 7);
    run->dropped_events = dropped < 0 || cupti_dropped < 0 ? INT64_MAX : tpa_add_bytes(dropped, cupti_dropped);
    run->cupti = tpa_column_text(st, 8);
    run->python = tpa_column_text(st, 9);
    sqlite3_finalize(st);
    return 0;
}

/* The process built a model or an optimizer (its events say so). */
static int built_model(sqlite3 *db) {
    sqlite3_stmt *st;
    int built = 1; /* when it cannot be asked, it is a run */
    if (sqlite3_prepare_v2(db,
                           "SELECT EXISTS (SELECT 1 FROM event WHERE kind IN ('param_created','optimizer_created'))",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        built = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return built;
}

/* What the judged audit's error findings retain (its mark on the plot). */
static int64_t headline_stale_bytes(const tpa_report_t *r) {
    int64_t sum = 0;
    for (size_t i = 0; i < r->n_findings; i++)
        if (r->findings[i].is_error) sum = tpa_add_bytes(sum, r->findings[i].retained_bytes);
    return sum;
}

/* A database the shim is still creating (tpa_db_open's "starting"): a run
 * with nothing recorded yet, which cannot be judged (its process may still
 * build a model), so never clean. */
static void starting_run(tpa_run_t *run, tpa_report_t *r) {
    run->inconclusive = 1;
    run->why_inconclusive = tpa_strdup("starting: its process is still creating its database");
    r->inconclusive = 1;
}

/* The memory a report asked for (allocations, the ledger, the owner
 * timeline, device memory) into `run`. 0, or -1 with why. */
static int read_memory(sqlite3 *db, const char *file, int needs, int64_t before_ns, int64_t audit, tpa_run_t *run,
                       char *why, size_t why_len) {
    const char *what = NULL;
    if ((needs & TPA_NEED_MEMORY) && tpa_scan_allocations(db, before_ns, run))
        what = "allocations";
    else if ((needs & TPA_NEED_MEMORY) && tpa_read_ledger(db, audit, run))
        what = "the ledger";
    else if ((needs & (TPA_NEED_MEMORY | TPA_NEED_PEAK)) && (tpa_read_peak(db, run) || tpa_read_device_peak(db, run)))
        what = "the peak of activations";
    else if (((needs & TPA_NEED_OWNERS) && tpa_read_owner_timeline(db, run)) ||
             ((needs & TPA_NEED_DEVICE_MEMORY) && tpa_read_device_memory(db, &run->device_memory)))
        what = "the owner timeline";
    if (!what) return 0;
    snprintf(why, why_len, "%s: cannot query %s: %s", file, what, sqlite3_errmsg(db));
    return -1;
}

/* One database into `r`, a report of its own (one run). 0, or -1 with why. */
static int load_one(const char *file, int needs, tpa_report_t *r, char *why, size_t why_len) {
    sqlite3 *db = NULL;
    int opened = tpa_db_open(file, &db, why, why_len);
    if (opened < 0) return -1;
    r->symbolize = tpa_symbolize_stack;
    r->runs = calloc(1, sizeof *r->runs);
    if (!r->runs) {
        tpa_db_close(db);
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    r->n_runs = 1;
    tpa_run_t *run = &r->runs[0];
    const char *base = strrchr(file, '/');
    run->file = tpa_strdup(base ? base + 1 : file);
    run->headline_step = -1;
    int no_run = opened == 1 || read_run_row(db, run) != 0;
    if (no_run && (opened == 1 || tpa_db_named_by_shim(file))) {
        tpa_db_close(db);
        why[0] = 0;
        starting_run(run, r);
        return 0;
    }
    if (no_run) {
        snprintf(why, why_len, "%s has no run row: not a tpaudit database", file);
        tpa_db_close(db);
        return -1;
    }
    char sql_why[256];
    if (tpa_findings_prepare(db, sql_why, sizeof sql_why)) {
        snprintf(why, why_len, "%s: cannot query: %s", file, sql_why);
        tpa_db_close(db);
        return -1;
    }
    tpa_judged_audit_t audit = tpa_judge_audit(db, run);
    tpa_oom_judge_at(db, run, &audit);
    run->audited_model = audit.id != 0 || built_model(db);
    tpa_judge_inconclusive(db, run, r);
    tpa_oom_last_samples(db, run);
    if (read_memory(db, file, needs, audit.id ? audit.begin_ns : INT64_MAX, audit.id, run, why, why_len)) {
        tpa_db_close(db);
        return -1;
    }
    int rc = tpa_judge_headline(db, &audit, (needs & TPA_NEED_DETAILS) ? TPA_DETAILS_ALL : TPA_DETAILS_NONE, 0, r);
    if (!rc) rc = tpa_library_growth(db, audit.id, 0, needs & TPA_NEED_DETAILS, r);
    if (!rc) rc = tpa_oom_findings(db, run, (needs & TPA_NEED_DETAILS) ? r->symbolize : NULL, r);
    if (!rc) tpa_judge_parts_off(run, r);
    if (rc) snprintf(why, why_len, "%s: cannot query: %s", file, sqlite3_errmsg(db));
    if (!rc && (needs & TPA_NEED_MARKS)) tpa_judge_marks(db, run, audit.id, headline_stale_bytes(r));
    if (!rc && (needs & TPA_NEED_MARKS)) tpa_oom_marks(db, run);
    if (!rc && (needs & TPA_NEED_MEMORY) && tpa_read_growth_series(db, r, 0))
        snprintf(why, why_len, "%s: cannot query the growth samples: %s", file, sqlite3_errmsg(db)), rc = -1;
    tpa_db_close(db);
    return rc;
}

/* The databases to read and where each goes; threads take the next index. */
typedef struct load_job {
    char **files;
    size_t n, next, failed_at; /* failed_at: the first index that failed, else n */
    int needs;
    tpa_report_t *parts;
    pthread_mutex_t lock;
    char why[8400];
} load_job_t;

static void *load_worker(void *arg) {
    load_job_t *job = arg;
    char why[8400];
    for (;;) {
        pthread_mutex_lock(&job->lock);
        size_t i = job->next++;
        int stop = i >= job->n || i > job->failed_at;
        pthread_mutex_unlock(&job->lock);
        if (stop) return NULL;
        why[0] = 0;
        if (load_one(job->files[i], job->needs, &job->parts[i], why, sizeof why)) {
            pthread_mutex_lock(&job->lock);
            if (i < job->failed_at) {
                job->failed_at = i;
                snprintf(job->why, sizeof job->why, "%s", why);
            }
            pthread_mutex_unlock(&job->lock);
        }
    }
}

/* Threads to read with: TPAUDIT_JOBS when it is 1-64, else one per online CPU (at most 8). */
static size_t jobs_for(size_t n_files) {
    const char *env = getenv("TPAUDIT_JOBS");
    long jobs = env && *env ? strtol(env, NULL, 10) : 0;
    if (jobs < 1 || jobs > 64) {
        jobs = sysconf(_SC_NPROCESSORS_ONLN);
        if (jobs > MAX_JOBS) jobs = MAX_JOBS;
        if (jobs < 1) jobs = 1;
    }
    return (size_t)jobs < n_files ? (size_t)jobs : n_files ? n_files : 1;
}

/* The parts, in file order, into `report` (their strings and arrays move). */
static int merge_parts(tpa_report_t *parts, size_t n, tpa_report_t *report) {
    size_t n_findings = 0;
    for (size_t i = 0; i < n; i++) n_findings += parts[i].n_findings;
    report->runs = calloc(n ? n : 1, sizeof *report->runs);
    report->findings = calloc(n_findings ? n_findings : 1, sizeof *report->findings);
    if (!report->runs || !report->findings) return -1;
    for (size_t i = 0; i < n; i++) {
        report->runs[report->n_runs++] = parts[i].runs[0];
        for (size_t j = 0; j < parts[i].n_findings; j++) {
            tpa_finding_t *f = &report->findings[report->n_findings++];
            *f = parts[i].findings[j];
            f->run_index = i;
        }
        report->inconclusive |= parts[i].inconclusive;
        free(parts[i].runs);
        free(parts[i].findings);
        memset(&parts[i], 0, sizeof parts[i]);
    }
    return 0;
}

/* Reads files[0..n) with `needs` into parts, on a pool of threads; 0, or
 * -1 with why of the first file (in order) that failed. */
static int load_all(char **files, size_t n, int needs, tpa_report_t *parts, char *why, size_t why_len) {
    load_job_t job = {.files = files, .n = n, .failed_at = n, .needs = needs, .parts = parts};
    if (pthread_mutex_init(&job.lock, NULL)) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    size_t jobs = jobs_for(n), started = 0;
    pthread_t threads[64];
    while (started + 1 < jobs && pthread_create(&threads[started], NULL, load_worker, &job) == 0) started++;
    load_worker(&job); /* this thread reads too */
    for (size_t t = 0; t < started; t++) pthread_join(threads[t], NULL);
    pthread_mutex_destroy(&job.lock);
    if (job.failed_at < n) snprintf(why, why_len, "%s", job.why);
    return job.failed_at < n ? -1 : 0;
}

/* The findings of `full` (read with details) take the place of run i's in
 * `r` when they are the same findings (kinds and tensors, in order). */
static void take_details(tpa_report_t *r, size_t first, size_t count, tpa_report_t *full) {
    if (full->n_findings != count) return; /* written meanwhile: it keeps what it has */
    for (size_t j = 0; j < count; j++)
        if (full->findings[j].key != r->findings[first + j].key ||
            strcmp(full->findings[j].kind, r->findings[first + j].kind))
            return;
    for (size_t j = 0; j < count; j++) {
        tpa_finding_t *old = &r->findings[first + j];
        full->findings[j].run_index = old->run_index;
        full->findings[j].group_first = old->group_first;
        tpa_finding_free(old);
        *old = full->findings[j];
        memset(&full->findings[j], 0, sizeof full->findings[j]);
    }
}

/* Details for the findings that stand for their group (TPA_NEED_LEAD_DETAILS):
 * the runs that hold one are read again, with details. */
static int load_lead_details(char **files, tpa_report_t *r, char *why, size_t why_len) {
    size_t n = 0, *first = calloc(r->n_runs + 1, sizeof *first), *runs = calloc(r->n_runs + 1, sizeof *runs);
    char **sub = calloc(r->n_runs + 1, sizeof *sub);
    int rc = !first || !runs || !sub ? -1 : 0;
    for (size_t j = r->n_findings; !rc && j-- > 0;) /* each run's first finding (they are in run order) */
        first[r->findings[j].run_index] = j;
    for (size_t j = 0; !rc && j < r->n_findings; j++) {
        const tpa_finding_t *f = &r->findings[j];
        size_t run = f->run_index;
        if ((f->group_first && f->group_first != j + 1) || (n && runs[n - 1] == run)) continue;
        runs[n] = run;
        sub[n++] = files[run];
    }
    tpa_report_t *parts = rc ? NULL : calloc(n + 1, sizeof *parts);
    if (!rc && (!parts || load_all(sub, n, TPA_NEED_DETAILS, parts, why, why_len))) rc = -1;
    for (size_t k = 0; !rc && k < n; k++) {
        size_t count = 0;
        for (size_t j = first[runs[k]]; j < r->n_findings && r->findings[j].run_index == runs[k]; j++) count++;
        take_details(r, first[runs[k]], count, &parts[k]);
    }
    for (size_t k = 0; parts && k < n; k++) tpa_report_free(&parts[k]);
    free(parts), free(first), free(runs), free(sub);
    if (rc && !*why) snprintf(why, why_len, "out of memory");
    return rc;
}

int tpa_analyze_for(char **files, size_t n_files, int needs, tpa_report_t *report, char *why, size_t why_len) {
    memset(report, 0, sizeof *report);
    if (why_len) why[0] = 0;
    /* No allocation statistics: SQLite then takes no global lock per allocation. */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    tpa_db_clean_stale();
    tpa_report_t *parts = calloc(n_files ? n_files : 1, sizeof *parts);
    int rc = parts ? load_all(files, n_files, needs & ~TPA_NEED_LEAD_DETAILS, parts, why, why_len) : -1;
    if (!rc && merge_parts(parts, n_files, report)) rc = -1;
    for (size_t i = 0; parts && i < n_files; i++) tpa_report_free(&parts[i]);
    free(parts);
    if (!rc && (tpa_group_findings(report) ||
                ((needs & TPA_NEED_LEAD_DETAILS) && load_lead_details(files, report, why, why_len))))
        rc = -1;
    if (rc && !*why) snprintf(why, why_len, "out of memory");
    if (!rc) tpa_mark_helpers(report);
    return rc;
}

int tpa_analyze(char **files, size_t n_files, tpa_report_t *report, char *why, size_t why_len) {
    return tpa_analyze_for(files, n_files, TPA_NEED_ALL, report, why, why_len);
}

/* Runs by (host, pid), to find a run's parent among them. */
typedef struct by_pid {
    int64_t pid;
    size_t run;
} by_pid_t;

static int cmp_pid(const void *a, const void *b) {
    const by_pid_t *x = a, *y = b;
    return x->pid < y->pid ? -1 : x->pid > y->pid ? 1 : x->run < y->run ? -1 : x->run > y->run;
}

static int same_rank(const tpa_run_t *a, const tpa_run_t *b) {
    return a->has_rank == b->has_rank && (!a->has_rank || a->rank == b->rank);
}

static int same_host(const tpa_run_t *a, const tpa_run_t *b) { return a->host && b->host && !strcmp(a->host, b->host); }

/* The run that is the parent of run `i` (same host, its ppid), or SIZE_MAX. */
static size_t parent_of(const tpa_report_t *r, const by_pid_t *pids, size_t i) {
    const tpa_run_t *run = &r->runs[i];
    by_pid_t key = {run->ppid, 0};
    size_t lo = 0, hi = r->n_runs;
    while (lo < hi) { /* the first entry with pid >= ppid */
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_pid(&pids[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < r->n_runs && pids[lo].pid == run->ppid; lo++)
        if (pids[lo].run != i && same_host(&r->runs[pids[lo].run], run)) return pids[lo].run;
    return SIZE_MAX;
}

/* The run a model-less run `i` belongs to: its farthest ancestor with its
 * rank (up to the first that audited a model), unless that one audited no
 * model and another run of the rank did; SIZE_MAX when none. */
static size_t owner_of(const tpa_report_t *r, const by_pid_t *pids, const size_t *model_of_rank, size_t i) {
    size_t p = i, top = SIZE_MAX;
    for (int depth = 0; depth < 64; depth++) {
        size_t q = parent_of(r, pids, p);
        if (q == SIZE_MAX || !same_rank(&r->runs[q], &r->runs[i])) break;
        top = p = q;
        if (r->runs[q].audited_model) return q;
    }
    return model_of_rank[i] != SIZE_MAX ? model_of_rank[i] : top;
}

void tpa_mark_helpers(tpa_report_t *r) {
    size_t n = r->n_runs;
    by_pid_t *pids = malloc((n ? n : 1) * sizeof *pids), *ranks = malloc((n ? n : 1) * sizeof *ranks);
    size_t *model_of_rank = malloc((n ? n : 1) * sizeof *model_of_rank);
    size_t n_ranks = 0;
    for (size_t i = 0; pids && ranks && model_of_rank && i < n; i++) {
        pids[i] = (by_pid_t){r->runs[i].pid, i};
        if (r->runs[i].has_rank && r->runs[i].audited_model) ranks[n_ranks++] = (by_pid_t){r->runs[i].rank, i};
    }
    if (!pids || !ranks || !model_of_rank) n = 0; /* out of memory: every run stays a run */
    qsort(pids, n, sizeof *pids, cmp_pid);
    qsort(ranks, n_ranks, sizeof *ranks, cmp_pid); /* by rank, then run */
    for (size_t i = 0; i < n; i++) {
        by_pid_t key = {r->runs[i].rank, 0}, *hit = NULL;
        size_t lo = 0, hi = n_ranks;
        while (r->runs[i].has_rank && lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (ranks[mid].pid < key.pid)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (r->runs[i].has_rank && lo < n_ranks && ranks[lo].pid == key.pid) hit = &ranks[lo];
        model_of_rank[i] = hit ? hit->run : SIZE_MAX;
    }
    for (size_t i = 0; i < n; i++) {
        tpa_run_t *run = &r->runs[i];
        if (run->audited_model || tpa_judge_unvouched(run)) continue; /* the probe off, or records lost */
        size_t owner = owner_of(r, pids, model_of_rank, i);
        if (owner != SIZE_MAX && owner != i) run->helper_of = owner + 1;
    }
    /* A helper is judged with its run: it is not inconclusive on its own. */
    r->inconclusive = 0;
    for (size_t i = 0; i < r->n_runs; i++) {
        if (r->runs[i].helper_of) r->runs[i].inconclusive = 0;
        r->inconclusive |= r->runs[i].inconclusive;
    }
    free(pids);
    free(ranks);
    free(model_of_rank);
}
