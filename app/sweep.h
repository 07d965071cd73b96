/* sweep.h — run every combination of the list options, each in a fresh
 * process (an exec of this binary) so that memory, pinned pages and CUDA
 * contexts never carry over, then print one summary table. */
#ifndef TRAIN_SWEEP_H
#define TRAIN_SWEEP_H

#include "app/options.h"

/* Returns the exit status of the sweep: 0 when every configuration ran,
 * else the first failure's status (130/143 when interrupted). */
int sweep_run(const options *o);

/* What a sweep hands its configurations in the environment: the sweep's
 * command line as a JSON array (their run records name it, not their own
 * argv), and the notes earlier configurations printed, one a line, so
 * that each is said once per sweep. */
#define SWEEP_ARGV_ENV "TRAIN_SWEEP_ARGV"
#define SWEEP_SAID_ENV "TRAIN_SWEEP_SAID"

/* Whether note was said by an earlier configuration of this sweep (0
 * outside a sweep). */
int sweep_note_said(const options *o, const char *note);

#endif
