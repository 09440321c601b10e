/* verbs.h - the CLI's verbs other than `run` (launcher/launcher.h): each
 * takes the arguments after its name and gives the exit status (enum
 * tpa_exit, analyzer.h); main.c dispatches to them. */
#ifndef TPA_VERBS_H
#define TPA_VERBS_H

int tpa_cmd_report(int argc, char **argv);
int tpa_cmd_gate(int argc, char **argv);
int tpa_cmd_diff(int argc, char **argv);
int tpa_cmd_kinds(int argc, char **argv);

#endif
