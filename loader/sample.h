/* sample.h — what a loader worker does per sample, for each job kind and
 * load mode: the bridge between the loader (loader/loader.h) and the image
 * pipeline (image/image.h) and preload cache (loader/cache.h). */
#ifndef TRAIN_SAMPLE_H
#define TRAIN_SAMPLE_H

#include <stdint.h>

#include "image/image.h"
#include "loader/dataset.h"
#include "loader/loader.h"

typedef struct sample_setup {
    const dataset *src[LOADER_MAX_SOURCES];
    img_params train; /* augmentation on */
    img_params eval;  /* no flip, centre crop */
    int out_h, out_w, channels;
    /* preload: the training set's base images, one after another */
    uint8_t *cache;
    const char *cache_path; /* its file (--cache), for the message when it is truncated */
    int base_h, base_w;
    size_t base_bytes;
    double slow_load; /* test hook: extra seconds of work per sample */
} sample_setup;

/* The loader's callbacks; arg is the sample_setup. */
void *sample_worker_init(void *arg);
void sample_worker_fini(void *wctx);
int sample_load(void *wctx, int src, uint32_t index, load_pass_kind kind, rng *r, uint8_t *out,
                errbuf *e);
/* loader_config.fetch_unit / fetch: a remote row's shard (the offset of
 * its URL), UINT32_MAX for a local row or a pass served by the preload
 * cache; and making that shard local ahead of the workers. */
uint32_t sample_fetch_unit(void *arg, int src, load_pass_kind kind, uint32_t index);
void sample_fetch(void *arg, int src, uint32_t index);
/* loader_config.phase_times: the image context's read and decode seconds */
void sample_phase_times(void *wctx, double *read_s, double *decode_s);
/* loader_config.io_counts: this process's remote requests (remote.h) and
 * shard-cache lookups (shard_cache.h) so far */
void sample_io_counts(void *wctx, loader_io *io);

#endif
