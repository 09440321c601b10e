/* verbs.h - the CLI's verbs other than `run` (launcher/launcher.h): each
 * takes the arguments after its name and gives the exit status (enum
 * tpa_exit, analyzer.h); main.c dispatches to them. */
#ifndef TPA_VERBS_H
#define TPA_VERBS_H

#include <stddef.h>
#include <stdint.h>

int tpa_cmd_report(int argc, char **argv);
int tpa_cmd_gate(int argc, char **argv);
int tpa_cmd_diff(int argc, char **argv);
int tpa_cmd_kinds(int argc, char **argv);
/* `diff`'s modules whose activations at the peak changed from `old` to
 * `new`, printed (diff_peak.c); the number of modules changed. */
struct tpa_report;
size_t tpa_diff_peaks(const struct tpa_report *old, const struct tpa_report *new);
/* `report --format memory-viz` (cmd_memviz.c): the exit status. */
struct tpa_memviz_options;
int tpa_report_memviz(int n_paths, char **paths, const char *output, const struct tpa_memviz_options *options,
                      int has_rank, int64_t rank);

#endif
