/* host_fork_exec.c - issue item 7: 8 threads record events while the main
 * thread runs 20 fork+exec of /bin/true and 20 forks that _exit at once.
 * Children that record nothing must leave no database. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostile_common.h"

static atomic_int g_stop;

static void *recorder(void *arg) {
    uint64_t k = (uint64_t)(uintptr_t)arg << 32;
    while (!atomic_load(&g_stop)) {
        host_event(++k);
        usleep(50);
    }
    return NULL;
}

int main(void) {
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        if (pthread_create(&th[i], NULL, recorder, (void *)(uintptr_t)i) != 0) return 2;
    int bad = 0;
    for (int i = 0; i < 40; i++) {
        pid_t pid = fork();
        if (pid < 0) return 2;
        if (pid == 0) {
            if (i % 2) _exit(0);
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    printf("40 children, %d bad\n", bad);
    return bad ? 1 : 0;
}
