/* feed.c — the data side of a run: the data sets, the sample size the
 * transforms give, the preload cache and the loader, from the options.
 * train's runs (run.c) and the Python module (python/) both set up their
 * loader here, so the two cannot disagree about what a sample is. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "app/feed.h"
#include "comm/dist.h"

void run_choice_first(const options *o, run_choice *c)
{
    c->workers = o->workers.v[0];
    c->prefetch = o->prefetch.v[0];
    c->batch = o->batch.v[0];
    c->mode = o->mode.v[0];
    c->pin = o->pin.v[0];
    c->non_blocking = o->non_blocking.v[0];
}

/* ---------------------------------------------------------------- data */

/* Validation labels mapped onto the training set's classes by name. */
static int map_val_classes(feed *f, errbuf *e)
{
    dataset *t = &f->train, *v = &f->val;
    if (!t->names && !v->names)
        return 0;
    if (t->names != v->names)
        return errf(e, "%s: labels are %s but %s has %s", v->csv_path,
                    v->names ? "names" : "numbers", t->csv_path, t->names ? "names" : "numbers");
    int32_t *map = xmalloc(sizeof(int32_t) * v->nclasses);
    for (uint32_t c = 0; c < v->nclasses; c++) {
        const char *name = v->strs + v->class_names[c];
        map[c] = -1;
        for (uint32_t k = 0; k < t->nclasses; k++)
            if (!strcmp(name, t->strs + t->class_names[k]))
                map[c] = (int32_t)k;
    }
    for (uint32_t i = 0; i < v->n; i++) {
        int32_t k = map[v->rows[i].label];
        if (k < 0) {
            char msg[ERR_MAX], where[2 * ERR_MAX];
            snprintf(msg, sizeof msg, "class '%s' does not occur in the training set %s",
                     v->strs + v->class_names[v->rows[i].label], t->csv_path);
            errf(e, "%s", dataset_row_message(v, i, msg, where, sizeof where));
            free(map);
            return -1;
        }
        v->rows[i].label = k;
    }
    free(map);
    return 0;
}

/* The first image whose header reads: its size and channels fix the
 * sample size when no --resize/--crop does. Without --skip-bad that is the
 * first row's image; with it, a bad first row is skipped like any other
 * (the workers name it when they meet it). */
static int probe_first_good(feed *f, uint32_t *first, int *w, int *h, int *ch, errbuf *e)
{
    const dataset *t = &f->train;
    errbuf pe, first_err = {{0}};
    for (uint32_t i = 0; i < t->n; i++) {
        img_src at;
        char where[ERR_MAX], local[4096];
        if (dataset_src_local(t, i, &at, where, sizeof where, local, sizeof local, 1, &pe) == 0 &&
            img_probe_src(&at, f->o->img.exif, w, h, ch, &pe) == 0) {
            *first = i;
            return 0;
        }
        if (i == 0)
            first_err = pe;
        if (!f->o->csv_o.skip_bad)
            break;
    }
    char where[2 * ERR_MAX];
    dataset_row_message(t, 0, first_err.msg, where, sizeof where);
    if (f->o->csv_o.skip_bad && t->n > 1)
        return errf(e, "%s: no readable image among %u %s (--skip-bad); the first: %s", t->csv_path,
                    t->n, t->folder || t->members ? "images" : "rows", where);
    f->bad_sample = 1;
    return errf(e, "%s", where);
}

/* A row named in a message about two rows: `line 3 img/a.png` in a CSV,
 * the image path in a folder. */
static const char *row_name(const dataset *t, uint32_t i, char *buf, size_t len)
{
    img_src at;
    if (t->members) /* `SHARD: member NAME` */
        dataset_src(t, i, &at, buf, len);
    else if (t->folder)
        snprintf(buf, len, "%s", dataset_path(t, i));
    else
        snprintf(buf, len, "line %u %s", t->rows[i].line, dataset_path(t, i));
    return buf;
}

/* Probe this many images spread over the set for their sizes. */
#define SIZE_PROBES 32

/* Images that give samples of different sizes cannot share a batch: when
 * no --resize HxW / --crop makes every sample one size, look at a few
 * images spread over the set and stop now, naming two that differ and the
 * fix, instead of deep into the first epoch (or after sizing the model
 * from one of them). Preload also needs one base size. */
static int check_sizes(feed *f, uint32_t first, errbuf *e)
{
    const img_params *p = &f->ss.train;
    int by_resize = p->resize_h > 0 && p->resize_w > 0;
    int base_fixed = by_resize || (p->crop_h > 0 && !p->random_crop);
    int need_base = f->mode == MODE_PRELOAD;
    if ((p->crop_h > 0 || by_resize) && (!need_base || base_fixed))
        return 0;
    const dataset *t = &f->train;
    int b0h, b0w; /* the first image's base */
    img_base_size(p, f->fixed_h, f->fixed_w, &b0h, &b0w);
    uint32_t step = t->n > SIZE_PROBES ? t->n / SIZE_PROBES : 1;
    for (uint32_t i = first + 1; i < t->n; i += step) {
        int w, h, ch, oh, ow, bh, bw;
        errbuf pe;
        img_src at;
        char where[ERR_MAX], local[4096];
        /* a remote shard not downloaded yet is not fetched for this */
        if (dataset_src_local(t, i, &at, where, sizeof where, local, sizeof local, 0, &pe) != 0 ||
            img_probe_src(&at, p->exif, &w, &h, &ch, &pe) != 0)
            continue; /* a bad file is the loader's to report */
        img_output_size(p, h, w, &oh, &ow);
        img_base_size(p, h, w, &bh, &bw);
        if (oh == f->ss.out_h && ow == f->ss.out_w && (!need_base || (bh == b0h && bw == b0w)))
            continue;
        char a[ERR_MAX], b[ERR_MAX];
        char short_only[96] = "";
        if (p->resize_short > 0 && p->crop_h <= 0)
            snprintf(short_only, sizeof short_only,
                     " (--resize %d sets the shorter side only and keeps each aspect ratio)",
                     p->resize_short);
        return errf(e,
                    "%s: images differ in size%s: %s is %dx%d (width x height), %s is %dx%d; "
                    "a batch needs one size: give --resize HxW (every image to that size), or "
                    "--resize N --crop HxW (shorter side to N, then a crop, as torchvision's "
                    "Resize + CenterCrop)%s",
                    t->csv_path, short_only, row_name(t, first, a, sizeof a), f->fixed_w,
                    f->fixed_h, row_name(t, i, b, sizeof b), w, h,
                    need_base && !base_fixed
                        ? "; --mode preload keeps one base image per sample, so it needs "
                          "--resize HxW or a centre crop"
                        : "");
    }
    return 0;
}

static int feed_data_(feed *f, errbuf *e);

/* Its messages carry CSV paths, image paths and class names: control bytes
 * escaped (esc_path; escaping twice changes nothing). */
int feed_data(feed *f, errbuf *e)
{
    int rc = feed_data_(f, e);
    if (rc != RUN_OK) {
        char tmp[ESC_MAX];
        snprintf(e->msg, sizeof e->msg, "%s", esc_path(e->msg, tmp, sizeof tmp));
    }
    return rc;
}

int feed_shard_cache_open(const options *o, const char *const *specs, int nspecs, csv_opts *co,
                          shard_cache_opts *sc, int *temp, errbuf *e)
{
    *sc = o->shards;
    sc->dir = NULL;
    *temp = 0;
    int remote = 0;
    for (int i = 0; i < nspecs; i++)
        remote |= specs[i] && dataset_is_remote(specs[i]);
    if (!remote)
        return 0;
    co->shard_cache = sc;
    if (o->shard_cache) {
        sc->dir = shard_cache_dir_expand(o->shard_cache);
    } else {
        const char *tmp = getenv("TMPDIR");
        char *t = xmalloc(strlen(tmp && *tmp ? tmp : "/tmp") + 32);
        sprintf(t, "%s/train-shards-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(t)) {
            int rc = errf(e, "cannot make a shard cache folder %s: %s (give --shard-cache DIR)", t,
                          strerror(errno));
            free(t);
            sc->dir = NULL;
            return rc;
        }
        sc->dir = t;
        *temp = 1;
    }
    if (shard_cache_prepare(sc, e) != 0) {
        feed_shard_cache_close(sc, *temp);
        *temp = 0;
        return -1;
    }
    if (!sc->limit) {
        struct statvfs sv;
        sc->limit = statvfs(sc->dir, &sv) == 0 ? (uint64_t)sv.f_bavail * sv.f_frsize / 2
                                               : (uint64_t)10 << 30;
    }
    return 0;
}

void feed_shard_cache_close(shard_cache_opts *sc, int temp)
{
    if (temp && sc->dir)
        shard_cache_remove_dir(sc->dir);
    else if (sc->dir) /* after the loader: its processes' half downloads */
        shard_cache_sweep(sc);
    free(sc->dir);
    sc->dir = NULL;
}

/* --order and --shuffle-buffer for the training set: auto streams remote
 * shards (each shard needed once per epoch, in a known order) and shuffles
 * everything else globally; the buffer's default is 4 shards' worth. */
static int feed_order(feed *f, errbuf *e)
{
    const options *o = f->o;
    const dataset *t = &f->train;
    f->order = o->order == ORDER_AUTO     ? (t->remote ? LOAD_ORDER_SHARDS : LOAD_ORDER_GLOBAL)
               : o->order == ORDER_SHARDS ? LOAD_ORDER_SHARDS
                                          : LOAD_ORDER_GLOBAL;
    if (f->order == LOAD_ORDER_SHARDS && !t->shard_first)
        return errf(e,
                    "--order shards: %s is a %s, not tar shards (use --order global, or shards "
                    "written by build/tools/shard)",
                    o->csv, t->folder ? "folder" : "CSV");
    uint64_t buf = o->shuffle_buffer;
    if (buf == 0 && t->nshards)
        buf = (4 * (uint64_t)t->n + t->nshards - 1) / t->nshards;
    f->shuffle_buffer = (uint32_t)(buf < 1 ? 1 : buf > t->n ? t->n : buf);
    return 0;
}

static int feed_data_(feed *f, errbuf *e)
{
    const options *o = f->o;
    csv_opts co = o->csv_o;
    const char *specs[] = {o->csv, o->val_csv};
    if (feed_shard_cache_open(o, specs, 2, &co, &f->shards, &f->shards_temp, e) != 0)
        return RUN_BAD_INPUT;
    if (dataset_load(&f->train, o->csv, &co, e) != 0)
        return RUN_BAD_INPUT;
    if (o->val_csv) {
        if (dataset_load(&f->val, o->val_csv, &co, e) != 0)
            return RUN_BAD_INPUT;
        f->have_val = 1;
        if (map_val_classes(f, e) != 0)
            return RUN_BAD_INPUT;
        if (!f->train.names && f->val.nclasses > f->train.nclasses)
            f->train.nclasses = f->val.nclasses; /* model classes cover both */
    }
    if (feed_order(f, e) != 0)
        return RUN_BAD_INPUT;
    int w, h, ch;
    uint32_t first = 0;
    if (probe_first_good(f, &first, &w, &h, &ch, e) != 0)
        return RUN_BAD_INPUT;
    f->fixed_h = h;
    f->fixed_w = w;
    int channels = o->channels ? o->channels : (ch >= 3 ? 3 : 1);
    img_params p = o->img;
    p.channels = channels;
    p.cold = o->cold && f->mode == MODE_LAZY;
    if (p.hflip < 0)
        p.hflip = 0.5f;
    f->ss.train = p;
    f->ss.eval = p;
    f->ss.eval.hflip = 0;
    f->ss.eval.random_crop = 0;
    memset(f->ss.eval.jitter, 0, sizeof f->ss.eval.jitter);
    if (p.rrc) { /* training cuts from the file; evaluation resizes and centre-crops */
        f->ss.train.crop_h = o->rrc_h;
        f->ss.train.crop_w = o->rrc_w;
        f->ss.train.resize_h = f->ss.train.resize_w = f->ss.train.resize_short = 0;
        img_params *ev = &f->ss.eval;
        ev->rrc = 0;
        if (!ev->crop_h) {
            ev->crop_h = o->rrc_h;
            ev->crop_w = o->rrc_w;
        }
        if (!ev->resize_short && !ev->resize_h)
            ev->resize_short = o->rrc_h < o->rrc_w ? o->rrc_h : o->rrc_w;
        p = f->ss.train;
    }
    f->ss.channels = channels;
    img_output_size(&p, h, w, &f->ss.out_h, &f->ss.out_w);
    f->ss.src[0] = &f->train;
    f->ss.src[1] = &f->val;
    f->ss.slow_load = o->test_slow_rank < 0 || o->test_slow_rank == f->rank ? o->test_slow_load : 0;
    f->sample_bytes = (size_t)channels * f->ss.out_h * f->ss.out_w;
    return check_sizes(f, first, e) != 0 ? RUN_BAD_INPUT : RUN_OK;
}

/* ---------------------------------------------------------------- loader */

/* Where a node's ranks keep their one copy without --cache (memory), and
 * how long the other ranks wait for local rank 0 to make it (it reads the
 * CSV and stats the images first). */
#define NODE_CACHE_DIR "/dev/shm"
#define NODE_CACHE_WAIT_S 120.0

/* Several ranks of a job on this node (known from the launcher before
 * MPI starts) keep one copy of the preload cache: local rank 0 builds it,
 * the others map it. */
static int node_shares_cache(const feed *f)
{
    return f->node && f->node->launched && f->node->local_size > 1 && f->feed_mode == FEED_FORK &&
           f->o->diag_phase == DIAG_NONE;
}

int feed_cache(feed *f, errbuf *e)
{
    if (f->mode != MODE_PRELOAD)
        return RUN_OK;
    int bh, bw;
    if (img_base_size(&f->ss.train, f->fixed_h, f->fixed_w, &bh, &bw) != 0)
        return fail(e, RUN_BAD_INPUT,
                    "--mode preload needs every image to have the same size after resizing: "
                    "use --resize HxW (or a centre --crop)");
    uint64_t key = cache_key(&f->train, &f->ss.train, bh, bw);
    if (f->feed_mode == FEED_SERVE) { /* the caller's cache, built or being built */
        if (cache_attach(&f->cache, LOADER_SERVE_CACHE_FD, &f->train, f->ss.channels, bh, bw,
                         f->o->cache != NULL, e) != 0)
            return RUN_INTERNAL;
    } else if (node_shares_cache(f)) {
        char node[4096];
        if (f->o->cache)
            snprintf(node, sizeof node, "%s.node-%s", f->o->cache, f->node->job);
        else
            snprintf(node, sizeof node, "%s/train-%s-%016llx", NODE_CACHE_DIR, f->node->job,
                     (unsigned long long)key);
        if (cache_open_node(&f->cache, f->o->cache, node, f->node->local_rank == 0, &f->train,
                            f->ss.channels, bh, bw, key, f->o->mem_limit, NODE_CACHE_WAIT_S,
                            e) != 0)
            return RUN_BAD_INPUT;
        f->node_cache = 1;
    } else if (cache_open_shared(&f->cache, f->o->cache, &f->train, f->ss.channels, bh, bw, key,
                                 f->o->mem_limit, f->feed_mode == FEED_SPAWN, e) != 0) {
        if (f->o->cache) { /* named with its option, as --save and --json are */
            char m[ERR_MAX];
            snprintf(m, sizeof m, "%s", e->msg);
            errf(e, "--cache: %s", m);
        }
        return RUN_BAD_INPUT;
    }
    f->use_cache = 1;
    f->ss.cache = f->cache.data;
    f->ss.cache_path = f->o->cache;
    f->ss.base_h = bh;
    f->ss.base_w = bw;
    f->ss.base_bytes = f->cache.sample_bytes;
    return RUN_OK;
}

/* The loader's configuration for r: the same in the process that takes
 * batches and in a spawned supervisor (loader_serve checks the size). */
static loader_config feed_config(feed *f)
{
    loader_config pc = {.workers = f->workers,
                        .prefetch = f->prefetch,
                        .batch = (uint32_t)f->batch,
                        .sample_bytes = f->sample_bytes,
                        .nsrc = f->have_val ? 2 : 1,
                        .seed = f->o->seed,
                        .skip_bad = f->o->csv_o.skip_bad,
                        .respawn = f->o->respawn,
                        .timeout = f->o->timeout,
                        .load = sample_load,
                        .worker_init = sample_worker_init,
                        .worker_fini = sample_worker_fini,
                        .phase_times = sample_phase_times,
                        .io_counts = sample_io_counts,
                        .arg = &f->ss};
    pc.src[0] = &f->train;
    pc.src[1] = &f->val;
    if (f->train.remote || (f->have_val && f->val.remote)) {
        pc.fetch_unit = sample_fetch_unit;
        pc.fetch = sample_fetch;
        pc.read_ahead = f->o->read_ahead;
    }
    return pc;
}

int feed_loader(feed *f, const loader_config *extra, errbuf *e)
{
    loader_config pc = feed_config(f);
    if (extra) {
        pc.spawn_argv = extra->spawn_argv;
        pc.spawn_cache_fd = f->use_cache ? cache_share_fd(&f->cache) : -1;
        pc.should_stop = extra->should_stop;
        pc.stop_ctx = extra->stop_ctx;
    }
    sample_io_counts(NULL, &f->setup_io);
    f->ldr = loader_create(&pc, e);
    return f->ldr ? RUN_OK : RUN_BAD_INPUT;
}

void feed_init(feed *f, const options *o, const run_choice *c, int feed_mode, int rank, int ranks,
               const struct dist *node)
{
    memset(f, 0, sizeof *f);
    f->o = o;
    f->mode = c->mode;
    f->workers = c->workers;
    f->prefetch = c->prefetch;
    f->batch = c->batch ? c->batch : FEED_DEFAULT_BATCH;
    f->feed_mode = feed_mode;
    f->rank = rank;
    f->ranks = ranks;
    f->node = node;
}

int feed_open(feed *f, const options *o, int feed_mode, int rank, int ranks, errbuf *e)
{
    run_choice c;
    run_choice_first(o, &c);
    feed_init(f, o, &c, feed_mode, rank, ranks, NULL);
    int rc = feed_data(f, e);
    return rc == RUN_OK ? feed_cache(f, e) : rc;
}

int feed_serve(feed *f, errbuf *e)
{
    loader_config pc = feed_config(f);
    loader_serve(&pc, e);
    return RUN_INTERNAL;
}

void feed_close(feed *f)
{
    loader_destroy(f->ldr);
    f->ldr = NULL;
    if (f->use_cache)
        cache_close(&f->cache);
    f->use_cache = 0;
    dataset_free(&f->train);
    dataset_free(&f->val);
    feed_shard_cache_close(&f->shards, f->shards_temp);
    f->shards_temp = 0;
}

/* ---------------------------------------------------------------- passes */

int feed_post_build(feed *f)
{
    if (!f->use_cache || f->cache.ready)
        return -1;
    load_pass b = {.src = 0, .kind = LOAD_PASS_BUILD};
    return feed_post_pass(f, b);
}

int feed_post_pass(feed *f, load_pass j)
{
    j.batch = (uint32_t)f->batch;
    if (j.src == 0 && j.kind != LOAD_PASS_BUILD) {
        j.order = f->order;
        j.shuffle_buffer = f->shuffle_buffer;
    }
    if (j.kind != LOAD_PASS_BUILD) { /* every rank builds the whole cache */
        j.rank = (uint32_t)f->rank;
        j.ranks = (uint32_t)(f->ranks > 0 ? f->ranks : 1);
    }
    return loader_post(f->ldr, &j);
}

int feed_cache_built(feed *f, double t0, errbuf *e)
{
    f->build_s = now_sec() - t0;
    int rc = cache_commit(&f->cache, e);
    f->cache.ready = 1; /* complete in memory, saved or not */
    return rc;
}
