/* run_state.c - the shim's state word (tpa_state) with the one transition
 * any file may take, tpa_disable (a failure is found where it happens: a
 * SQLite call, a descriptor check, a full disk; process_life.c takes all the
 * others), and the counters and text fields of the run row, written by any
 * thread and copied into the database by the writer at each commit. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_internal.h"

static _Atomic uint64_t g_dropped, g_truncated, g_cupti_dropped;
static _Atomic int g_incomplete;
static _Atomic unsigned g_gen = 1;
static _Atomic int64_t g_rank = -1, g_world = -1, g_local = -1;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_cupti[256] = "off: not started", g_python[256] = "n/a", g_note[1024];

_Atomic int tpa_state;

void tpa_disable(const char *why) {
    int expect = TPA_RUNNING;
    if (atomic_compare_exchange_strong(&tpa_state, &expect, TPA_DISABLED))
        tpa_log(TPA_LOG_WARN, "disabled: %s; the host continues without auditing", why);
    tpa_run_mark_incomplete();
}

static int64_t env_int(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return -1;
    char *end;
    long long x = strtoll(v, &end, 10);
    return (*end || x < 0) ? -1 : (int64_t)x;
}

void tpa_run_init(void) {
    atomic_store(&g_rank, env_int("RANK"));
    atomic_store(&g_world, env_int("WORLD_SIZE"));
    atomic_store(&g_local, env_int("LOCAL_RANK"));
}

unsigned tpa_run_generation(void) { return atomic_load(&g_gen); }

void tpa_run_snapshot(struct tpa_run_snapshot *s) {
    s->rank = atomic_load(&g_rank);
    s->world_size = atomic_load(&g_world);
    s->local_rank = atomic_load(&g_local);
    s->dropped = atomic_load(&g_dropped);
    s->truncated = atomic_load(&g_truncated);
    s->cupti_dropped = atomic_load(&g_cupti_dropped);
    pthread_mutex_lock(&g_mu);
    memcpy(s->cupti, g_cupti, sizeof g_cupti);
    memcpy(s->python, g_python, sizeof g_python);
    memcpy(s->note, g_note, sizeof g_note);
    pthread_mutex_unlock(&g_mu);
}

void tpa_run_count_dropped(void) {
    atomic_fetch_add(&g_dropped, 1);
    atomic_store(&g_incomplete, 1);
    atomic_fetch_add(&g_gen, 1);
}

void tpa_run_count_truncated(void) {
    atomic_fetch_add(&g_truncated, 1);
    atomic_fetch_add(&g_gen, 1);
}

void tpa_run_mark_incomplete(void) {
    atomic_store(&g_incomplete, 1);
    atomic_fetch_add(&g_gen, 1);
}

int tpa_run_is_incomplete(void) { return atomic_load(&g_incomplete); }

void tpa_run_reset_counters(void) {
    atomic_store(&g_dropped, 0);
    atomic_store(&g_truncated, 0);
    atomic_store(&g_cupti_dropped, 0);
    atomic_store(&g_incomplete, 0);
    pthread_mutex_init(&g_mu, NULL);
    atomic_fetch_add(&g_gen, 1);
}

void tpa_run_set_rank(int rank, int world_size) {
    atomic_store(&g_rank, rank);
    atomic_store(&g_world, world_size);
    atomic_fetch_add(&g_gen, 1);
}

int tpa_run_set_text(const char *field, const char *value) {
    char *dst;
    size_t cap;
    if (!field || !value) return TPAUDIT_EINVAL;
    if (!strcmp(field, "python")) {
        dst = g_python;
        cap = sizeof g_python;
    } else if (!strcmp(field, "note")) {
        dst = g_note;
        cap = sizeof g_note;
    } else if (!strcmp(field, "cupti")) {
        dst = g_cupti;
        cap = sizeof g_cupti;
    } else {
        return TPAUDIT_EINVAL;
    }
    if (strlen(value) >= cap) tpa_run_count_truncated();
    pthread_mutex_lock(&g_mu);
    snprintf(dst, cap, "%s", value);
    pthread_mutex_unlock(&g_mu);
    atomic_fetch_add(&g_gen, 1);
    return 0;
}

int tpa_run_python_is_worth_a_file(void) {
    pthread_mutex_lock(&g_mu);
    /* "n/a" (not python), "idle: ..." (torch never imported) and the
     * provisional TPA_PYTHON_PENDING (the bootstrap has yet to run)
     * are not. */
    int worth =
        strcmp(g_python, "n/a") != 0 && strncmp(g_python, "idle", 4) != 0 && strcmp(g_python, TPA_PYTHON_PENDING) != 0;
    pthread_mutex_unlock(&g_mu);
    return worth;
}

int tpa_run_python_pending(void) {
    pthread_mutex_lock(&g_mu);
    int pending = strcmp(g_python, TPA_PYTHON_PENDING) == 0;
    pthread_mutex_unlock(&g_mu);
    return pending;
}

void tpa_run_set_cupti_status(const char *status) { tpa_run_set_text("cupti", status ? status : "off"); }

void tpa_run_add_cupti_dropped(uint64_t n) {
    if (!n) return;
    atomic_fetch_add(&g_cupti_dropped, n);
    tpa_run_mark_incomplete();
}
