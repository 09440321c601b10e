/* options.h - the command line's contract shared by the verbs (cli/) and
 * `tpaudit run` (launcher/): the exit codes and the option helpers
 * (options.c).  The bottom floor (common/). */
#ifndef TPA_OPTIONS_H
#define TPA_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

/* Every verb's exit status (docs/tpaudit.1, EXIT STATUS). */
enum tpa_exit { TPA_EXIT_OK = 0, TPA_EXIT_GATE = 1, TPA_EXIT_USAGE = 2, TPA_EXIT_INCONCLUSIVE = 3 };
/* What a verb's option parsers return when all went well and the verb goes
 * on; anything else is the exit status (a usage error, or TPA_EXIT_OK after
 * --help). */
#define TPA_OPTIONS_OK (-1)

/* SIZE: a number and a unit in any case (B, KiB/K, MiB/M, GiB/G, TiB/T
 * binary; KB, MB, GB, TB decimal). 0, -1 malformed, -2 beyond int64. */
int tpa_parse_size(const char *text, int64_t *bytes);
/* A getopt result a command does not take itself: 'h' prints usage to
 * stdout and gives TPA_EXIT_OK; ':' or '?' prints the one stderr line of
 * the error and gives TPA_EXIT_USAGE. */
int tpa_option_help_or_error(const char *verb, int c, char **argv, void (*usage)(FILE *));

#endif
