/* shim_killed.c - commits batches, printing "committed N" after each
 * tpaudit_flush() returns, then keeps going until killed with SIGKILL. */
#include <stdio.h>
#include <unistd.h>

#include "tpaudit.h"

int main(void) {
    tpaudit_event_t e = TPAUDIT_INIT_EVENT;
    e.kind = TPAUDIT_EVENT_PARAM_CREATED;
    long n = 0;
    tpaudit_set_run_info("note", "killed host");
    for (;;) {
        for (int i = 0; i < 1000; i++) {
            e.new_key = (uint64_t)++n;
            while (tpaudit_record_event(&e) == TPAUDIT_EDROPPED) usleep(100);
        }
        if (tpaudit_flush() == 0) {
            printf("committed %ld\n", n);
            fflush(stdout);
        }
        usleep(1000);
    }
}
