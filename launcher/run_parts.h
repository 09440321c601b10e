/* run_parts.h - the pieces of `tpaudit run` (cmd_run.c): its signal
 * handling (run_signals.c), the check that a target can take the shim
 * (run_target.c), the output directory's lock (run_lock.c) and the live
 * status line (run_status.c). Internal to launcher/. */
#ifndef TPA_RUN_PARTS_H
#define TPA_RUN_PARTS_H

#include <stddef.h>
#include <sys/types.h>

/* Before fork: blocks every forwardable signal and installs the forwarder
 * on each one that was not inherited as ignored (those stay ignored, in
 * tpaudit and in the child). */
void tpa_run_signals_prepare(void);
/* In the child, before exec: the inherited dispositions and mask again. */
void tpa_run_signals_child(void);
/* In the parent after fork: names the child and unblocks (signals that
 * arrived meanwhile are forwarded now). */
void tpa_run_signals_parent(pid_t child);
/* The child is gone (waited with WNOWAIT): nothing is forwarded any more. */
void tpa_run_signals_child_gone(void);
/* A signal arrived after the child was gone (stop waiting for descendants). */
int tpa_run_signals_stop_requested(void);
/* Ends this process by `sig` as the child ended (no core file of our own);
 * returns only when that signal does not end a process. */
void tpa_run_die_by(int sig);

/* The file execvp would run for `cmd` (PATH search); 0, or -1 when none. */
int tpa_run_resolve(const char *cmd, char *path, size_t len);
/* 0 when the loader will preload the shim into `path`, else 1 with `why`
 * ("is statically linked", "is setuid", ...). Scripts are judged by their
 * interpreter. */
int tpa_run_unpreloadable(const char *path, char *why, size_t len);

/* The lock on an output directory (run_lock.c): takes an exclusive flock
 * on DIR/TPA_RUN_LOCK_NAME, held until this process exits; 0 (locked, or
 * no lock possible there), or -1 after one `tpaudit: run:` line when
 * another run holds it. */
#define TPA_RUN_LOCK_NAME ".tpaudit-run.lock"
int tpa_run_lock(const char *dir);
int tpa_run_lock_is_name(const char *name); /* the lock file is not one of a run's files */

/* The live status line on a terminal (run_status.c): started after the
 * child, it redraws "tpaudit: running: N processes, N audits, N findings so
 * far" on stderr once a second when it changed; NULL, and nothing shown,
 * when stderr is not a terminal. Stop clears the line. */
typedef struct tpa_run_status tpa_run_status_t;
tpa_run_status_t *tpa_run_status_start(const char *dir);
void tpa_run_status_stop(tpa_run_status_t *s);

#endif
