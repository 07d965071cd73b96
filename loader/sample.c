/* sample.c — see sample.h.
 *
 *   lazy, training     img_load with augmentation (flip, random crop)
 *   lazy, evaluation   img_load without augmentation
 *   preload            img_augment from the cached base image
 *   build              img_load_base into the cache entry
 *   read-only          the file's bytes only (diagnosis)
 */
#define _POSIX_C_SOURCE 200809L
#include "loader/sample.h"
#include "loader/cache.h"
#include "loader/remote.h"
#include "loader/shard_cache.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the image's out-of-memory return is the loader's (never skipped) */
// NOLINTNEXTLINE(misc-redundant-expression): two names for one value, and this keeps them one
_Static_assert(IMG_ENOMEM == LOADER_LOAD_NO_MEMORY, "out of memory: one code");

typedef struct load_ctx {
    const sample_setup *s;
    img_ctx *img;
    uint8_t *base; /* a cached base image, copied out of the mapping */
} load_ctx;

void *sample_worker_init(void *arg)
{
    load_ctx *c = xcalloc(1, sizeof *c);
    c->s = arg;
    c->img = img_ctx_create();
    return c;
}

void sample_worker_fini(void *wctx)
{
    load_ctx *c = wctx;
    img_ctx_free(c->img);
    free(c->base);
    free(c);
}

void sample_phase_times(void *wctx, double *read_s, double *decode_s)
{
    load_ctx *c = wctx;
    img_ctx_times(c->img, read_s, decode_s);
}

/* a pass the preload cache serves: no file or shard is read */
static int from_preload(const sample_setup *s, int src, load_pass_kind kind)
{
    return (kind == LOAD_PASS_TRAIN || kind == LOAD_PASS_EVAL) && s->cache && src == 0;
}

uint32_t sample_fetch_unit(void *arg, int src, load_pass_kind kind, uint32_t index)
{
    const sample_setup *s = arg;
    const dataset *ds = s->src[src];
    if (!ds->remote || from_preload(s, src, kind))
        return UINT32_MAX;
    return (uint32_t)(ds->rows[index].path % UINT32_MAX); /* one string per shard */
}

void sample_fetch(void *arg, int src, uint32_t index)
{
    const sample_setup *s = arg;
    const dataset *ds = s->src[src];
    errbuf e; /* a failure is the worker's to meet and report */
    shard_cache_prefetch(ds->cache, dataset_path(ds, index), &e);
}

void sample_io_counts(void *wctx, loader_io *io)
{
    (void)wctx; /* the counters are the process's */
    remote_stats rs = remote_stats_get();
    shard_cache_stats cs = shard_cache_stats_get();
    *io = (loader_io){.bytes = rs.bytes,
                      .requests = rs.requests,
                      .retries = rs.retries,
                      .hits = cs.hits,
                      .downloads = cs.downloads,
                      .wait_s = cs.wait_s};
}

int sample_load(void *wctx, int src, uint32_t index, load_pass_kind kind, rng *r, uint8_t *out,
                errbuf *e)
{
    load_ctx *c = wctx;
    const sample_setup *s = c->s;
    img_src at; /* where the image is: a file, or a shard's member */
    char where[ERR_MAX], local[4096];
    /* a remote shard: its copy in the shard cache, downloaded now when no
     * process of the node has */
    int from_cache = from_preload(s, src, kind);
    if (!from_cache)
        if (dataset_src_local(s->src[src], index, &at, where, sizeof where, local, sizeof local, 1,
                              e) != 0)
            return -1;
    /* the preload build makes the training base: with --random-crop that
     * is the uncropped resize, which evaluation's centre crop is not */
    const img_params *p = kind == LOAD_PASS_EVAL ? &s->eval : &s->train;
    if (s->slow_load > 0 && kind != LOAD_PASS_READ_ONLY)
        burn_cpu_for(s->slow_load); /* a slow decoder, not slow storage */
    switch (kind) {
    case LOAD_PASS_READ_ONLY: {
        long n = img_read_only_src(c->img, &at, p, e);
        if (n < 0)
            return -1;
        memset(out, (int)(n & 0xff), (size_t)s->channels * s->out_h * s->out_w);
        return 0;
    }
    case LOAD_PASS_BUILD: {
        const uint8_t *base;
        int bh, bw;
        int rc = img_load_base_src(c->img, &at, p, &base, &bh, &bw, e);
        if (rc != 0)
            return rc;
        if (bh != s->base_h || bw != s->base_w)
            return errf(e,
                        "%s: is %dx%d (HxW) after resizing%s, expected %dx%d like the first image "
                        "(--mode preload needs one size: use --resize HxW)",
                        at.name, bh, bw,
                        s->train.crop_h > 0 && !s->train.random_crop ? " and cropping" : "",
                        s->base_h, s->base_w);
        if (cache_copy(s->cache + (size_t)index * s->base_bytes, base, s->base_bytes) != 0)
            return errf(e, "%s: %s", s->cache_path ? s->cache_path : "preload cache",
                        CACHE_TRUNCATED);
        return 0;
    }
    case LOAD_PASS_TRAIN:
    case LOAD_PASS_EVAL:
        if (from_cache) { /* copied under the SIGBUS guard: a mapped file can shrink */
            if (!c->base)
                c->base = xmalloc(s->base_bytes);
            if (cache_copy(c->base, s->cache + (size_t)index * s->base_bytes, s->base_bytes) != 0)
                return errf(e, "%s: %s", s->cache_path ? s->cache_path : "preload cache",
                            CACHE_TRUNCATED);
            return img_augment(out, s->out_h, s->out_w, c->base, s->base_h, s->base_w, p, r, e);
        }
        return img_load_src(c->img, &at, p, r, out, s->out_h, s->out_w, e);
    }
    return errf(e, "internal: unknown job kind %d", (int)kind);
}
