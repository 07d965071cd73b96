/* reexec.h — run this binary again, in a fresh process, with the user's
 * command line adjusted: the swept options removed and `extra` appended.
 * Sweeps, --diagnose and --workers auto all measure configurations this
 * way, so no memory, pinned pages or CUDA context carries over. */
#ifndef TRAIN_REEXEC_H
#define TRAIN_REEXEC_H

#include "app/options.h"
#include "app/report.h"

/* Runs the child and waits. On return *status is its exit status (128+sig
 * when killed) and, when it left one, *s its summary record (strings in
 * strbuf). Returns 0 when a summary was read, -1 otherwise. quiet sends the
 * child's stdout to /dev/null. The child dies with its parent (SIGKILL,
 * PR_SET_PDEATHSIG) and hands its summary back through an inherited memfd
 * (--summary-out /proc/self/fd/N), so a killed sweep leaves no process and
 * no file. */
int reexec_run(const options *o, char *const extra[], int quiet, summary_rec *s, char *strbuf,
               size_t len, int *status);

/* Forward SIGINT/SIGTERM to the running child; returns the signal the
 * parent received (0 if none). */
void reexec_install_signals(void);
int reexec_signal_received(void);

#endif
