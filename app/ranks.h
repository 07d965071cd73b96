/* ranks.h — what limits a data-parallel job, from its report. */
#ifndef TRAIN_RANKS_H
#define TRAIN_RANKS_H

#include <stddef.h>

/* Shares of the epoch, in percent, over the ranks of a job: wait_mean the
 * mean data wait, wait_max that of the slowest rank (rank `rank` on
 * `host`), comm the mean time in the gradient sum; ranks how many. One
 * line into buf: "rank R (HOST) is the straggler: ..." when one rank's
 * loader waits at least 15% and 10 points more than the others' mean
 * (the others then wait for it in the sum, as comm%); else
 * "communication-bound" at comm >= 30%, "data-bound" at wait_mean >= 30%,
 * else "compute-bound". Returns buf. */
const char *ranks_verdict_text(double wait_mean, double wait_max, int rank, const char *host,
                               double comm, int ranks, char *buf, size_t len);

#endif
