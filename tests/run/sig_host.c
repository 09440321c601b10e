/* sig_host.c - a host for the `tpaudit run` tests. It records one
 * empty audit through tpaudit.h (so under the shim it writes a database and
 * its run is judged clean; without the shim the calls do nothing):
 *   sig_host dispositions      prints "SIG=ign|dfl|handled" for HUP INT QUIT TERM USR1
 *   sig_host count NAME        counts deliveries of signal NAME: prints "ready",
 *                              waits for the first one, then 0.5 s more for any
 *                              duplicate, prints "got N" and exits 0 (10 s limit) */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tpaudit.h"

static const struct {
    const char *name;
    int sig;
} NAMES[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},     {"QUIT", SIGQUIT}, {"TERM", SIGTERM}, {"USR1", SIGUSR1},
    {"USR2", SIGUSR2}, {"WINCH", SIGWINCH}, {"CONT", SIGCONT}, {"ALRM", SIGALRM},
};
static volatile sig_atomic_t g_count;

static void on_signal(int sig) {
    (void)sig;
    g_count++;
}

static int lookup(const char *name) {
    for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES; i++)
        if (!strcmp(NAMES[i].name, name)) return NAMES[i].sig;
    return -1;
}

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {}
}

/* After the dispositions are read: the shim installs its own SIGTERM and
 * SIGINT flush (over default dispositions) on a process's first record. */
static void record_an_audit(void) {
    int64_t audit = tpaudit_audit_begin("start", 0);
    if (audit > 0) tpaudit_audit_end(audit);
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "dispositions")) {
        for (size_t i = 0; i < 5; i++) {
            struct sigaction sa;
            sigaction(NAMES[i].sig, NULL, &sa);
            printf("%s=%s\n", NAMES[i].name,
                   sa.sa_handler == SIG_IGN   ? "ign"
                   : sa.sa_handler == SIG_DFL ? "dfl"
                                              : "handled");
        }
        record_an_audit();
        return 0;
    }
    int sig = argc == 3 && !strcmp(argv[1], "count") ? lookup(argv[2]) : -1;
    if (sig < 0) {
        fprintf(stderr, "usage: sig_host dispositions | count NAME\n");
        return 2;
    }
    record_an_audit();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(sig, &sa, NULL);
    printf("ready\n");
    fflush(stdout);
    for (int waited = 0; !g_count && waited < 10000; waited += 10) sleep_ms(10);
    sleep_ms(500);
    printf("got %d\n", (int)g_count);
    return 0;
}
