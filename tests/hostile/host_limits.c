/* host_limits.c - under the limits the runner sets, the host records an
 * event, then `files [MAX]` opens /dev/null until it fails (at most MAX, 32
 * by default) and prints how many it got; `numbers` opens /dev/null until
 * it fails and prints each number it got, then a pipe's two after closing
 * 3 and 4, then closes 3..the last and opens one more; `threads N` starts N threads that
 * wait until all were tried and prints how many started; `memory`
 * allocates and touches 6 MiB. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostile_common.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static int g_go;

static void *wait_for_all(void *arg) {
    (void)arg;
    pthread_mutex_lock(&g_mu);
    while (!g_go) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

static int threads(int want) {
    pthread_t th[64];
    int n = 0;
    while (n < want && n < 64 && pthread_create(&th[n], NULL, wait_for_all, NULL) == 0) n++;
    pthread_mutex_lock(&g_mu);
    g_go = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    printf("started %d of %d threads\n", n, want);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    host_event(1);
    if (!strcmp(argv[1], "files")) {
        int max = argc > 2 ? atoi(argv[2]) : 32, n = 0;
        while (n < max && open("/dev/null", O_RDONLY) >= 0) n++;
        printf("opened %d files\n", n);
        return 0;
    }
    if (!strcmp(argv[1], "numbers")) {
        int fd, last = 2, p[2];
        while ((fd = open("/dev/null", O_RDONLY)) >= 0) printf("%d%c", last = fd, fd % 16 ? ' ' : '\n');
        close(3), close(4);
        if (pipe(p) == 0) printf("\npipe %d %d\n", p[0], p[1]);
        for (fd = 3; fd <= last; fd++) close(fd);
        printf("after closing 3..%d: %d\n", last, open("/dev/null", O_RDONLY));
        return 0;
    }
    if (!strcmp(argv[1], "threads") && argc > 2) return threads(atoi(argv[2]));
    size_t len = 6u << 20;
    char *p = malloc(len);
    if (!p) {
        printf("malloc failed\n");
        return 1;
    }
    memset(p, 1, len);
    printf("touched %zu bytes\n", len);
    free(p);
    return 0;
}
