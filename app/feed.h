/* feed.h — the data side of a run: the data sets, the transforms and the
 * sample size they give, the preload cache, the loader and the passes
 * posted to it. train's runs (app/run.c, app/loop.c) and the Python module
 * (python/) both use this, and only this, to make and drive their loader,
 * so the two cannot disagree about what a sample or a pass is. The
 * per-sample work the loader's workers do is loader/sample.h's.
 *
 *   feed_init, then feed_data and feed_cache (or feed_open: all three),
 *   then feed_loader (or, in a spawned supervisor, feed_serve);
 *   feed_post_build / feed_post_pass for each pass, loader_next/release
 *   for its batches, feed_cache_built after a build's last batch;
 *   feed_close after any of these, also after a failure.
 */
#ifndef TRAIN_FEED_H
#define TRAIN_FEED_H

#include <stddef.h>

#include "app/options.h"
#include "app/run.h"
#include "loader/cache.h"
#include "loader/dataset.h"
#include "loader/loader.h"
#include "loader/sample.h"

struct dist;

/* how the loader's processes start */
enum feed_mode {
    FEED_FORK = 0, /* train: the loader forks its supervisor */
    FEED_SPAWN,    /* the Python module: it spawns one; the cache is made shareable */
    FEED_SERVE,    /* in that supervisor: the cache is the one handed over */
};

/* --batch's default (options keep 0: "the model's", which is this for every model) */
enum { FEED_DEFAULT_BATCH = 64 };

typedef struct feed {
    /* feed_init */
    const options *o;
    int mode;                /* MODE_LAZY or MODE_PRELOAD */
    int workers;             /* loader worker processes (0: the caller's process loads) */
    int prefetch;            /* batches each worker works ahead */
    int batch;               /* samples per batch; train may change it before feed_loader */
    int feed_mode;           /* enum feed_mode */
    int rank, ranks;         /* this process's share of every pass */
    const struct dist *node; /* the launcher's ranks, for one preload cache per
                                node (train), or NULL */
    /* feed_data */
    shard_cache_opts shards; /* remote shards' cache (o->shards, its folder set) */
    int shards_temp;         /* that folder is this feed's own: removed by feed_close */
    dataset train, val;
    int have_val;
    sample_setup ss;
    size_t sample_bytes;
    int fixed_h, fixed_w;    /* the first good image's size */
    int order;               /* training passes' LOAD_ORDER_* (--order, resolved) */
    uint32_t shuffle_buffer; /* --order shards: the buffer in samples */
    /* feed_cache (--mode preload) */
    preload_cache cache;
    int use_cache;
    int node_cache; /* one cache for the node's ranks (cache_open_node): local rank 0 builds */
    double build_s; /* the build's seconds (feed_cache_built) */
    /* feed_loader */
    loader *ldr;
    loader_io setup_io; /* this process's I/O before the loader began (opening
                           the data set: listing, indexes, probes); counted in
                           the first epoch's */
    int bad_sample;     /* the run stopped at an image it could not read: the size probe's
                       first row, or a batch's sample (run_loop) */
} feed;

/* f zeroed, then the choice c (its batch, else FEED_DEFAULT_BATCH). */
void feed_init(feed *f, const options *o, const run_choice *c, int feed_mode, int rank, int ranks,
               const struct dist *node);
/* The data sets (and validation classes mapped onto training's), the
 * transforms of training and evaluation, the sample size; checks that
 * every sample gets that size. Returns a run_status. */
int feed_data(feed *f, errbuf *e);
/* --mode preload: map (or reuse) the cache of base images. */
int feed_cache(feed *f, errbuf *e);
/* The loader for f->batch (forks, or spawns extra->spawn_argv; extra's
 * spawn_argv, should_stop and stop_ctx are used, the rest comes from f). */
int feed_loader(feed *f, const loader_config *extra, errbuf *e);
/* feed_init with o's first choices, feed_data and feed_cache: for a
 * loader without a run (the Python module and its supervisor). */
int feed_open(feed *f, const options *o, int feed_mode, int rank, int ranks, errbuf *e);
/* In the spawned supervisor, after feed_open: serve the caller (returns
 * only on failure). */
int feed_serve(feed *f, errbuf *e);
/* Undoes all of the above, also after a failure. */
void feed_close(feed *f);

/* The shard cache, when any of specs[0..nspecs) (NULLs skipped) names
 * data behind URLs (dataset_is_remote), set as co's shard_cache: the
 * folder --shard-cache names (%h expanded, created), else a temporary one
 * (*temp = 1: removed by the close); the size limit --shard-cache-size,
 * else half the folder's free space. Local data: sc->dir stays NULL. 0,
 * or -1 with e. */
int feed_shard_cache_open(const options *o, const char *const *specs, int nspecs, csv_opts *co,
                          shard_cache_opts *sc, int *temp, errbuf *e);
void feed_shard_cache_close(shard_cache_opts *sc, int temp);

/* The preload build's pass, when the cache needs one: its pass id, else -1
 * (no cache, or one complete already). */
int feed_post_build(feed *f);
/* A pass (training, evaluation, read-only) of j's source, kind, epoch,
 * shuffle, drop_last, max_batches and after_previous, in f->batch samples
 * and this rank's share: its pass id. */
int feed_post_pass(feed *f, load_pass j);
/* After the build's last batch, taken t0 seconds (now_sec) after it
 * started: the cache committed (a --cache file saved). -1 with e when
 * that failed: the cache stays usable in memory for this process. */
int feed_cache_built(feed *f, double t0, errbuf *e);

#endif
