/* static_host.c - linked statically (-static), so no loader runs and
 * LD_PRELOAD cannot take effect: `tpaudit run` must say so. */
#include <stdio.h>

int main(void) {
    puts("static host ran");
    return 0;
}
