/* metrics.h — what the report measures outside the training step itself:
 * memory of every process of the run, and the machine it ran on. */
#ifndef TRAIN_METRICS_H
#define TRAIN_METRICS_H

#include <stddef.h>

typedef struct mem_usage {
    double rss_mb; /* resident set, summed over processes */
    double pss_mb; /* proportional set: shared pages split between sharers */
    int nprocs;    /* processes that could be read */
} mem_usage;

/* Sum Rss and Pss from /proc/PID/smaps_rollup of this process and `pids`. */
void mem_usage_read(const int *pids, int n, mem_usage *out);

typedef struct machine_info {
    int cores;
    char cpu[128];
    char gpu[128]; /* "" when none */
} machine_info;

void machine_info_read(machine_info *m);

#endif
