/* shim_threads.c - 8 threads x 100000 events, then a flush, then prints
 * how many calls returned OK and how many were dropped. */
#include <pthread.h>
#include <stdio.h>

#include "tpaudit.h"

#define THREADS 8
#define EVENTS  100000

static long ok[THREADS], dropped[THREADS];

static void *worker(void *arg) {
    long t = (long)arg;
    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_PARAM_CREATED;
    e.name = "layer.weight";
    for (int i = 0; i < EVENTS; i++) {
        e.new_key = (uint64_t)(t * EVENTS + i + 1);
        int rc = tpaudit_record_event(&e);
        if (rc == TPAUDIT_OK)
            ok[t]++;
        else if (rc == TPAUDIT_EDROPPED)
            dropped[t]++;
    }
    return NULL;
}

int main(void) {
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    long sok = 0, sdrop = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        sok += ok[t];
        sdrop += dropped[t];
    }
    /* everything accepted is committed before the exit, however loaded the
     * machine: the exit's drain is bounded in time, this check is not */
    tpaudit_flush();
    printf("ok %ld dropped %ld\n", sok, sdrop);
    return 0;
}
