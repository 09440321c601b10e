/* options.h - the command line's contract shared by the verbs (cli/) and
 * `tpaudit run` (launcher/): the exit codes and the option helpers
 * (options.c).  The bottom floor (common/). */
#ifndef TPA_OPTIONS_H
#define TPA_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

/* Every verb's exit status (docs/tpaudit.1, EXIT STATUS). */
enum tpa_exit { TPA_EXIT_OK = 0, TPA_EXIT_GATE = 1, TPA_EXIT_USAGE = 2, TPA_EXIT_INCONCLUSIVE = 3 };

/* SIZE: a number and a unit in any case (B, KiB/K, MiB/M, GiB/G, TiB/T
 * binary; KB, MB, GB, TB decimal). 0, -1 malformed, -2 beyond int64. */
int tpa_parse_size(const char *text, int64_t *bytes);
/* A getopt result a command does not take itself: 'h' prints usage to
 * stdout and gives TPA_EXIT_OK; ':' or '?' prints the one stderr line of
 * the error and gives TPA_EXIT_USAGE. */
int tpa_option_help_or_error(const char *verb, int c, char **argv, void (*usage)(FILE *));

#endif
