/* host_exit_worker.c - eight threads start recording at once while a ninth
 * calls exit(3) a moment later, often while the first record is still
 * creating the database. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "hostile_common.h"

static pthread_barrier_t g_go;

static void *recorder(void *arg) {
    uint64_t k = (uint64_t)(uintptr_t)arg << 32;
    pthread_barrier_wait(&g_go);
    for (;;) host_event(++k);
    return NULL;
}

static void *exiter(void *arg) {
    long delay_us = (long)(intptr_t)arg;
    pthread_barrier_wait(&g_go);
    struct timespec ts = {0, delay_us * 1000};
    nanosleep(&ts, NULL);
    exit(3);
}

int main(int argc, char **argv) {
    long delay_us = argc > 1 ? atol(argv[1]) : 200;
    if (pthread_barrier_init(&g_go, NULL, 9) != 0) return 2;
    pthread_t th;
    for (int i = 0; i < 8; i++)
        if (pthread_create(&th, NULL, recorder, (void *)(uintptr_t)(i + 1)) != 0) return 2;
    if (pthread_create(&th, NULL, exiter, (void *)(intptr_t)delay_us) != 0) return 2;
    for (;;) pause();
}
