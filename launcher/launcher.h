/* launcher.h - `tpaudit run` (cmd_run.c): CMD under the shim, then the
 * verdict; takes the arguments after `run` and gives the exit status (enum
 * tpa_exit, analyzer.h; RUN.md). */
#ifndef TPA_LAUNCHER_H
#define TPA_LAUNCHER_H

int tpa_cmd_run(int argc, char **argv);

#endif
