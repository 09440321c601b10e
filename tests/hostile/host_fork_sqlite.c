/* host_fork_sqlite.c - issue item 1: one thread keeps the host's own SQLite
 * busy (in memory) while the main thread forks 60 times; every tenth child
 * records an event.  A shim that shared SQLite's global state with the host
 * deadlocked the child. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostile_common.h"

static atomic_int g_stop;

static void *sqlite_user(void *arg) {
    (void)arg;
    sqlite3 *db;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK) return NULL;
    sqlite3_exec(db, "CREATE TABLE t(x, y)", NULL, NULL, NULL);
    while (!atomic_load(&g_stop)) {
        sqlite3_exec(db, "INSERT INTO t VALUES(randomblob(200), 1); DELETE FROM t WHERE rowid % 3 = 0;", NULL, NULL,
                     NULL);
        sqlite3 *other;
        if (sqlite3_open(":memory:", &other) == SQLITE_OK) sqlite3_close(other);
    }
    sqlite3_close(db);
    return NULL;
}

int main(void) {
    pthread_t th;
    host_event(1);
    if (pthread_create(&th, NULL, sqlite_user, NULL) != 0) return 2;
    int bad = 0;
    for (int i = 0; i < 60; i++) {
        pid_t pid = fork();
        if (pid < 0) return 2;
        if (pid == 0) {
            if (i % 10 == 0) host_event(100 + (uint64_t)i);
            _exit(0);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
    }
    atomic_store(&g_stop, 1);
    pthread_join(th, NULL);
    printf("60 forks, %d bad\n", bad);
    return bad ? 1 : 0;
}
