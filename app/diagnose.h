/* diagnose.h — E4's bottleneck recipe, automated, and --workers auto.
 *
 * --diagnose measures, each in a fresh process: (a) the full pipeline, (b)
 * the loader alone, (c) the loader reading files without decoding them, (d)
 * the model alone on batches kept in device memory. Each phase stops after
 * --diagnose-batches batches (200) or after the batch that passes
 * --diagnose-seconds (15 s; the child's hidden --max-seconds), whichever
 * comes first, and prints its rate, images and seconds as it ends; a
 * --mode preload build is not cut short. The children get the first value
 * of every option a sweep varies. From the rates it says whether the run is
 * bound by compute, by decoding or by storage, and what to try; for a
 * remote training set whose loader spent at least half of its fill time
 * waiting for shards (the loader phase's io_wait_s against fill_s), the
 * storage is the network: "I/O-bound", with the rate and requests seen.
 *
 * --workers auto probes the loader alone with 1, 2, ... up to the core
 * count workers, and picks the smallest count within 5% of the best rate or
 * faster than the model consumes (tf.data's AUTOTUNE; PyTorch has none).
 */
#ifndef TRAIN_DIAGNOSE_H
#define TRAIN_DIAGNOSE_H

#include "app/options.h"

typedef enum diag_verdict {
    VERDICT_COMPUTE_BOUND,
    VERDICT_DECODE_BOUND,
    VERDICT_STORAGE_BOUND,
    VERDICT_IO_BOUND, /* remote shards: the loader waits for downloads */
    VERDICT_UNKNOWN,
} diag_verdict;

typedef struct diag_rates {
    double full, loader, read_only, model; /* images per second, NaN if not measured */
    int workers, cores;
    /* the loader phase's I/O, when the training set is remote (remote 1) */
    int remote;
    const char *host;   /* scheme://host of the training set's URLs */
    double io_wait_s;   /* seconds its fillers waited for shards ... */
    double fill_s;      /* ... of the seconds they spent filling batches */
    double io_mb_s;     /* MiB received per second */
    double io_requests; /* requests made */
    double io_bytes;    /* bytes received */
} diag_rates;

/* Pure: the verdict and the advice for these rates. */
diag_verdict diagnose_verdict(const diag_rates *r, char *text, size_t len);

int diagnose_run(const options *o);

/* Resolve --workers auto: probe and return the count (prints what it
 * measured); -1 on failure (message printed). */
int autotune_workers(const options *o);

#endif
