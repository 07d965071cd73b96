/* sweep.h — run every combination of the list options, each in a fresh
 * process (an exec of this binary) so that memory, pinned pages and CUDA
 * contexts never carry over, then print one summary table. */
#ifndef TRAIN_SWEEP_H
#define TRAIN_SWEEP_H

#include "app/options.h"

/* Returns the exit status of the sweep: 0 when every configuration ran,
 * else the first failure's status (130/143 when interrupted). */
int sweep_run(const options *o);

#endif
