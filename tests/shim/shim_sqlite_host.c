/* shim_sqlite_host.c - a host that uses SQLite itself; its own database must
 * work beside the shim's, and it installs its own SIGTERM handler, which must
 * still run and choose the exit status. */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tpaudit.h"

static volatile sig_atomic_t g_term;
static void on_term(int sig) {
    (void)sig;
    g_term = 1;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    sqlite3 *db;
    if (sqlite3_open(argv[1], &db) != SQLITE_OK) return 2;
    char *err = NULL;
    if (sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES(42);", NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "host sqlite: %s\n", err);
        return 2;
    }
    sqlite3_close(db);
    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_OPTIMIZER_CREATED;
    e.holder_class = "AdamW";
    tpaudit_record_event(&e);
    if (argc > 2 && !strcmp(argv[2], "wait-term")) {
        signal(SIGTERM, on_term);
        printf("ready\n");
        fflush(stdout);
        while (!g_term) usleep(1000);
        printf("host handler ran\n");
        return 7;
    }
    return 0;
}
