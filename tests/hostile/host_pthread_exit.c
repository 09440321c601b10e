/* host_pthread_exit.c - the main thread records, then calls pthread_exit
 * while (mode "threads") four threads go on recording for a while, or
 * (mode "alone") with no other thread of the host left.  The process ends
 * when its last thread does, with status 0. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hostile_common.h"

static void *recorder(void *arg) {
    uint64_t k = (uint64_t)(uintptr_t)arg << 32;
    for (int i = 0; i < 1000; i++) host_event(++k);
    usleep(50000);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 && !strcmp(argv[1], "threads") ? 4 : 0;
    host_audit(1);
    for (int i = 0; i < threads; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, recorder, (void *)(uintptr_t)(i + 1)) != 0) return 2;
    }
    printf("main thread leaves\n");
    fflush(stdout);
    pthread_exit(NULL);
}
