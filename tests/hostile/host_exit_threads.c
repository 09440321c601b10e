/* host_exit_threads.c - issue item 6: 64 threads record events without a
 * pause while the main thread calls exit(0). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hostile_common.h"

static void *recorder(void *arg) {
    uint64_t k = (uint64_t)(uintptr_t)arg << 32;
    for (;;) host_event(++k);
    return NULL;
}

int main(void) {
    for (int i = 0; i < 64; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, recorder, (void *)(uintptr_t)i) != 0) return 2;
    }
    usleep(300000);
    printf("exiting\n");
    fflush(stdout);
    exit(0);
}
