/* loop.c — the epochs of a run: take batches in order from the loader,
 * hand them to the device, step the model, and account every second of an
 * epoch to waiting for data, copying or computing; one report line (and
 * JSON record, and checkpoint) per epoch. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/run_ctx.h"
#include "app/trace.h"
#include "nn/checkpoint.h"

/* ---------------------------------------------------------------- passes */

/* The run's records of pass id, just posted. */
static int add_pass(run_ctx *r, int id, load_pass_kind kind, int epoch)
{
    r->passes = xrealloc(r->passes, sizeof *r->passes * (size_t)(id + 1));
    r->acc = xrealloc(r->acc, sizeof *r->acc * (size_t)(id + 1));
    memset(&r->acc[id], 0, sizeof r->acc[id]);
    r->passes[id].kind = kind;
    r->passes[id].epoch = epoch;
    r->passes[id].val_pass = -1;
    r->npasses = id + 1;
    return id;
}

void run_post_passes(run_ctx *r)
{
    const options *o = r->o;
    r->build_pass = feed_post_build(&r->f);
    if (r->build_pass >= 0)
        add_pass(r, r->build_pass, LOAD_PASS_BUILD, -1);
    for (int ep = r->start_epoch; ep < o->epochs; ep++) {
        load_pass t = {.src = 0,
                       .kind =
                           o->diag_phase == DIAG_READ_ONLY ? LOAD_PASS_READ_ONLY : LOAD_PASS_TRAIN,
                       .epoch = (uint32_t)ep,
                       .shuffle = o->shuffle,
                       .drop_last = o->drop_last,
                       .max_batches = (uint32_t)o->max_batches,
                       .after_previous = ep == r->start_epoch && r->build_pass >= 0};
        int tid = add_pass(r, feed_post_pass(&r->f, t), t.kind, ep);
        if (r->f.have_val && !o->loader_only) {
            load_pass v = {.src = 1, .kind = LOAD_PASS_EVAL, .epoch = (uint32_t)ep};
            int vid =
                add_pass(r, feed_post_pass(&r->f, v), v.kind, ep); /* add_pass moves r->passes */
            r->passes[tid].val_pass = vid;
        }
    }
}

/* ---------------------------------------------------------------- report */

/* *sum += sign * d, counter by counter */
static void io_add(loader_io *sum, const loader_io *d, int sign)
{
    sum->bytes += (uint64_t)sign * d->bytes;
    sum->requests += (uint64_t)sign * d->requests;
    sum->retries += (uint64_t)sign * d->retries;
    sum->hits += (uint64_t)sign * d->hits;
    sum->downloads += (uint64_t)sign * d->downloads;
    sum->wait_s += sign * d->wait_s;
}

/* The epoch's I/O: its batches' (each filler's share) and the loader's
 * read-ahead since the last epoch line (loader_fetch_io; the first
 * epoch's from the loader's start);
 * the first epoch reported also has what came before it: opening the
 * data set (feed.setup_io) and the preload build. */
static void epoch_io(run_ctx *r, const pass_acc *a, epoch_rec *er)
{
    loader_io io = a->io, f1;
    loader_fetch_io(r->f.ldr, &f1);
    io_add(&io, &f1, 1);
    io_add(&io, &r->fetch_seen, -1);
    r->fetch_seen = f1;
    double fill = a->fill;
    if (r->nrecs == 0) {
        loader_io setup = r->f.setup_io;
        setup.wait_s = 0; /* not within any batch's fill time */
        io_add(&io, &setup, 1);
        if (r->build_pass >= 0) {
            io_add(&io, &r->acc[r->build_pass].io, 1);
            fill += r->acc[r->build_pass].fill;
        }
    }
    er->io_remote = r->f.train.remote;
    er->io_bytes = io.bytes;
    er->io_requests = io.requests;
    er->io_retries = io.retries;
    er->cache_hits = io.hits;
    er->cache_downloads = io.downloads;
    er->io_wait_s = io.wait_s;
    er->fill_s = fill;
    er->io_mb_s = er->epoch_s > 0 ? (double)io.bytes / (1024.0 * 1024.0) / er->epoch_s : 0;
}

static void emit_epoch(run_ctx *r, int tid)
{
    const options *o = r->o;
    pass_acc *a = &r->acc[tid];
    pass_info *ji = &r->passes[tid];
    epoch_rec er;
    memset(&er, 0, sizeof er);
    er.cfg = run_config_of(&r->c, r->f.batch, run_ctx_device(r), r->model_name);
    er.epoch = ji->epoch + 1;
    er.warmup = ji->epoch - r->start_epoch < r->warmup_epochs;
    er.images = a->images;
    /* from this process's first ask to its last step, but never shorter
     * than the loader took to make the batches: workers may have filled
     * the ring before the ask (a preload pass over a small set fits in it
     * whole), and the rate must not exceed what the loader produced */
    er.epoch_s = a->t1 - a->t0;
    if (a->made1 - a->made0 > er.epoch_s)
        er.epoch_s = a->made1 - a->made0;
    double t = er.epoch_s > 0 ? er.epoch_s : 1e-9;
    er.images_per_s = (double)a->images / t;
    er.data_wait_pct = 100 * a->wait / t;
    er.copy_pct = 100 * a->copy / t;
    er.compute_pct = o->loader_only ? NAN : 100 * a->compute / t;
    ranks_epoch(r, tid, &er); /* with several ranks: the whole pass's numbers */
    epoch_io(r, a, &er);      /* this process's loader's, over the epoch's time */
    er.gpu_util_avg = er.gpu_util_max = er.gpu_util_n = NAN;
    er.gpu_sm_pct = er.gpu_occ_pct = er.gpu_proc_mb = er.gpu_dev_mem_mb = NAN;
    /* busy%: the device's records when on, else the step spans (events) */
    er.gpu_span_pct = backend_has_busy(r->be) && !o->loader_only ? 100 * a->busy / t : NAN;
    er.gpu_busy_pct = a->act_on ? 100 * a->act.compute_s / t : er.gpu_span_pct;
    er.gpu_busy_from = a->act_on ? "activity" : isnan(er.gpu_span_pct) ? NULL : "span";
    er.gpu_h2d_pct = a->act_on ? 100 * a->act.h2d_s / t : NAN;
    er.gpu_d2h_pct = a->act_on ? 100 * a->act.d2h_s / t : NAN;
    er.gpu_overlap_pct = a->act_on ? 100 * a->act.overlap_s / t : NAN;
    er.gpu_act_dropped = a->act_on ? a->act.dropped : 0;
    if (r->monitor) {
        device_util u;
        device_monitor_stop(r->monitor, a->t0, a->t1, &u); /* NVML's samples cut to the epoch */
        if (u.mem_total)
            er.gpu_dev_mem_mb = (double)u.mem_used / (1024.0 * 1024.0);
        if (u.proc_mem)
            er.gpu_proc_mb = (double)u.proc_mem / (1024.0 * 1024.0);
        if (u.sm_available) {
            er.gpu_sm_pct = u.sm_util;
            er.gpu_occ_pct = u.sm_occ;
        } else if (!r->said_sm_na && u.sm_why[0] && strcmp(u.sm_why, u.why) != 0) {
            /* once: why sm%/occ is n/a, when not for the reason gpu% is */
            fprintf(stderr, "train: sm%%/occ n/a in epoch %d (%s)\n", ji->epoch + 1, u.sm_why);
            r->said_sm_na = 1;
        }
        if (u.windowed || u.available)
            er.gpu_util_n = u.samples;
        if (u.available) {
            er.gpu_util_avg = u.util_avg;
            er.gpu_util_max = u.util_max;
        } else if (!r->said_util_na) {
            char buf[200];
            fprintf(stderr, "train: %s\n", device_util_format(&u, buf, sizeof buf));
            r->said_util_na = 1;
        }
    }
    er.loss = a->stats.n ? a->stats.loss_sum / (double)a->stats.n : NAN;
    er.train_acc = a->stats.n ? (double)a->stats.correct / (double)a->stats.n : NAN;
    er.val_loss = er.val_acc = NAN;
    if (ji->val_pass >= 0) {
        pass_acc *v = &r->acc[ji->val_pass];
        if (v->stats.n) {
            er.val_loss = v->stats.loss_sum / (double)v->stats.n;
            er.val_acc = (double)v->stats.correct / (double)v->stats.n;
        }
    }
    if (o->loader_only)
        er.loss = er.train_acc = NAN;
    int pids[LOADER_MAX_WORKERS + 1];
    int np = loader_pids(r->f.ldr, pids, LOADER_MAX_WORKERS + 1);
    mem_usage mu;
    mem_usage_read(pids, np, &mu);
    er.rss_mb = mu.rss_mb;
    er.pss_mb = mu.pss_mb;
    er.procs = mu.nprocs;
    er.pinned_mb = (double)stager_pinned_bytes(r->stager) / (1024.0 * 1024.0);
    er.skipped = a->skipped;
    er.cache = r->c.mode == MODE_PRELOAD ? "preload" : r->f.ss.train.cold ? "cold" : "warm";
    er.lr = lr_at(r->hp.schedule, r->hp.lr, ji->epoch, o->epochs, 0, 1);
    report_progress_end(r->progress);
    if (r->nrecs == 0) {
        r->table_hide = report_columns(&er, report_width(stdout));
        report_header(stdout, r->table_hide);
    }
    report_epoch_line(stdout, &er, r->table_hide);
    if (r->json)
        run_json_wrote(r, report_epoch_json(r->json, &er, &r->mi));
    er.per_rank = NULL; /* r->per_rank is the last epoch's only */
    r->recs = xrealloc(r->recs, sizeof *r->recs * (size_t)(r->nrecs + 1));
    r->recs[r->nrecs++] = er;
}

static int save_checkpoint(run_ctx *r, int epoch, errbuf *e)
{
    if (!r->o->save || r->o->loader_only)
        return RUN_OK;
    ckpt_state ck = {.epoch = epoch + 1,
                     .step = r->steps,
                     .seed = r->o->seed,
                     .epochs = r->o->epochs,
                     .batch = r->f.batch,
                     .schedule = (int32_t)r->hp.schedule,
                     .lr = r->hp.lr,
                     .momentum = r->hp.momentum,
                     .wd = r->hp.wd,
                     .data = r->data_fp};
    if (checkpoint_save(r->o->save, &r->m, (const char *const *)r->class_names, &ck, e) != 0)
        return RUN_INTERNAL;
    return RUN_OK;
}

/* ---------------------------------------------------------------- the loop */

/* --trace: batch b's fill on its worker's "loader" track, and inside it
 * the batch's read, decode and transform times. The worker kept only
 * their sums per batch (in the slot header), so they are drawn back to
 * back from the fill's start, each as long as its sum: where the time
 * went, not the order of the samples. */
static void trace_fill(run_ctx *r, const loader_batch *b)
{
    if (!r->trace)
        return;
    long i = (long)b->index;
    trace_span(r->trace, b->filler, "loader", "fill", b->fill_t0, b->fill_s, i);
    double rest = b->fill_s - b->read_s - b->decode_s;
    double t = b->fill_t0;
    trace_span(r->trace, b->filler, "loader", "read", t, b->read_s, i);
    trace_span(r->trace, b->filler, "loader", "decode", t += b->read_s, b->decode_s, i);
    trace_span(r->trace, b->filler, "loader", "transform", t + b->decode_s, rest > 0 ? rest : 0, i);
}

/* --dump-batches: per training or evaluation batch, u32 epoch, index,
 * count, then count u32 sample indices, count i32 labels, count samples. */
static void dump_batch(run_ctx *r, const loader_batch *b)
{
    const pass_info *ji = &r->passes[b->pass];
    if (!r->dump || (ji->kind != LOAD_PASS_TRAIN && ji->kind != LOAD_PASS_EVAL))
        return;
    uint32_t head[3] = {(uint32_t)ji->epoch, b->index, b->count};
    fwrite(head, sizeof head, 1, r->dump);
    fwrite(b->indices, sizeof *b->indices, b->count, r->dump);
    fwrite(b->labels, sizeof *b->labels, b->count, r->dump);
    fwrite(b->data, r->f.sample_bytes, b->count, r->dump);
}

enum fetch_result { FETCH_FAILED = -1, FETCH_END = 0, FETCH_GOT = 1 };

/* Next batch from the loader, handed to the device: FETCH_GOT, FETCH_END,
 * or FETCH_FAILED with the loader's status in *status and the reason in e. */
static int fetch(run_ctx *r, loader_batch *b, const uint8_t **dev, int *status, errbuf *e)
{
    stager_make_room(r->stager);
    double t0 = now_sec();
    int rc = loader_next(r->f.ldr, b, e);
    double t1 = now_sec();
    if (rc == LOADER_END)
        return FETCH_END;
    if (rc != LOADER_OK) {
        *status = rc;
        r->f.bad_sample = rc == LOADER_BAD_SAMPLE;
        return FETCH_FAILED;
    }
    pass_acc *a = &r->acc[b->pass];
    if (!a->started) {
        a->started = 1;
        a->t0 = t0;
        a->made0 = b->fill_t0;
        if (r->monitor && r->passes[b->pass].kind != LOAD_PASS_EVAL)
            device_monitor_start(r->monitor);
    }
    a->wait += b->wait_s;
    a->skipped += b->skipped;
    a->fill += b->fill_s;
    io_add(&a->io, &b->io, 1);
    if (b->fill_t0 + b->fill_s > a->made1)
        a->made1 = b->fill_t0 + b->fill_s;
    dump_batch(r, b);
    trace_name_process(r->trace, b->filler, b->filler == (int)getpid() ? "train" : "loader worker");
    trace_fill(r, b);
    trace_span(r->trace, (int)getpid(), "main", "wait", t0, t1 - t0, (long)b->index);
    *dev = NULL;
    if (r->passes[b->pass].kind != LOAD_PASS_BUILD) {
        *dev = stager_push(r->stager, b);
        a->copy += stager_take_copy_s(r->stager);
        trace_span(r->trace, (int)getpid(), "main", "stage", t1, now_sec() - t1, (long)b->index);
    }
    return FETCH_GOT;
}

/* A step cut short by SIGINT/SIGTERM (backend.cancel): the run stops as
 * interrupted, without finishing the batch. */
static int step_cancelled(run_ctx *r, const loader_batch *b)
{
    stager_done(r->stager, b);
    report_progress_end(r->progress);
    return LOADER_INTERRUPTED;
}

/* --max-seconds: a training pass ends after the batch that takes it past
 * the limit (diagnosis bounds each phase so; see diagnose.h). */
static int pass_time_up(const run_ctx *r, const pass_info *ji, const pass_acc *a)
{
    return r->o->max_seconds > 0 && ji->kind != LOAD_PASS_EVAL &&
           now_sec() - a->t0 >= r->o->max_seconds;
}

/* --trace: the device's spans so far (copy and compute tracks of a
 * "device" process; none on the CPU) */
enum { TRACE_DEVICE_PID = 0 };

static void trace_device(run_ctx *r)
{
    backend_span sp[64];
    size_t n;
    if (!r->trace)
        return;
    while ((n = backend_timeline_take(r->be, sp, 64)) > 0)
        for (size_t i = 0; i < n; i++)
            trace_span(r->trace, TRACE_DEVICE_PID, sp[i].track, sp[i].name, sp[i].t0, sp[i].dur,
                       -1);
}

/* A batch of the preload build: its samples are in the cache already;
 * the last one commits the cache. With one cache for the node's ranks,
 * the others wait for it in ranks_node_cache: they go on after this
 * agreement (returned). */
static int build_batch(run_ctx *r, const loader_batch *b)
{
    const options *o = r->o;
    pass_acc *a = &r->acc[b->pass];
    uint32_t nb = load_pass_batches(r->f.ldr, b->pass);
    loader_release(r->f.ldr, b);
    a->images += b->count;
    report_progress(r->progress, "preload", b->index + 1, nb, now_sec() - a->t0, a->images);
    if (b->index + 1 < nb)
        return RUN_OK;
    report_progress_end(r->progress);
    errbuf ce;
    if (feed_cache_built(&r->f, a->t0, &ce) != 0)
        fprintf(stderr, "train: warning: %s (the cache stays in memory for this run)\n", ce.msg);
    char sz[32];
    printf("preload: decoded %llu samples (%s) in %.2f s with %d worker%s%s%s\n",
           (unsigned long long)a->images,
           fmt_bytes(sz, sizeof sz, (uint64_t)r->f.train.n * r->f.cache.sample_bytes), r->f.build_s,
           r->c.workers, r->c.workers == 1 ? "" : "s", o->cache ? "; saved to " : "",
           o->cache ? o->cache : "");
    fflush(stdout);
    return r->f.node_cache ? ranks_agree(r, RUN_OK) : RUN_OK;
}

/* The results of steps enqueued earlier, oldest first, into their passes'
 * numbers: those the device has finished, waiting while more than `keep`
 * are pending. A non-finite loss stops the run, naming its step. */
static int take_results(run_ctx *r, int keep, errbuf *e)
{
    step_stats st;
    step_tag tag;
    while (model_results_pending(&r->m) > 0 &&
           model_results_take(&r->m, model_results_pending(&r->m) > keep, &st, &tag)) {
        int pass = tag.pass;
        step_stats_add(&r->acc[pass].stats, &st);
        if (st.bad_labels) { /* the host checked them: what the device read differs */
            report_progress_end(r->progress);
            return fail(e, RUN_INTERNAL,
                        "epoch %d batch %ld: sample %ld has label %ld on the device, outside "
                        "0..%d (%ld such sample%s; internal error: the host's copy was checked)",
                        r->passes[pass].epoch + 1, tag.batch, st.bad_sample, st.bad_label,
                        r->m.nclasses - 1, st.bad_labels, st.bad_labels == 1 ? "" : "s");
        }
        if (st.nonfinite) {
            char msg[160];
            model_nonfinite_msg(msg, sizeof msg, r->passes[pass].epoch + 1, tag.batch,
                                st.n ? st.loss_sum / (double)st.n : NAN, tag.lr);
            report_progress_end(r->progress);
            return fail(e, RUN_NONFINITE, "%s; stopping (lower --lr?)", msg);
        }
    }
    return RUN_OK;
}

/* One training or evaluation step on batch b (on the device at dev), and
 * its accounting. The step is enqueued; its loss and accuracy come back
 * while the next one computes (take_results), so the host never waits for
 * the step it just enqueued. Returns RUN_OK or a failure status; the batch
 * goes back to the loader either way. */
static int step_batch(run_ctx *r, const loader_batch *b, const uint8_t *dev, errbuf *e)
{
    const options *o = r->o;
    pass_info *ji = &r->passes[b->pass];
    pass_acc *a = &r->acc[b->pass];
    uint32_t nb = load_pass_batches(r->f.ldr, b->pass);
    double t0 = now_sec(), comm = 0;
    int rc = RUN_OK;
    if (!o->loader_only) /* room for this step's results: the step before last is done */
        rc = take_results(r, MODEL_RESULTS_MAX - 1, e);
    /* every rank goes on, or all stop here (a failure found in the results
     * just taken included: this rank says so before any sum) */
    int agreed = ranks_agree(r, rc);
    if (agreed != RUN_OK) {
        stager_done(r->stager, b);
        report_progress_end(r->progress);
        return rc != RUN_OK ? rc : agreed;
    }
    if (!o->loader_only) {
        /* before busy_begin: waiting for the copy is not busy */
        model_batch mb = {.x = dev,
                          .labels = b->labels,
                          .dev_labels = stager_begin(r->stager, b), /* or NULL */
                          .B = (int)b->count};
        backend_busy_begin(r->be);
        double lr = lr_at(r->hp.schedule, r->hp.lr, ji->epoch, o->epochs, (long)b->index, (long)nb);
        step_tag tag = {.pass = b->pass, .batch = (long)b->index, .lr = lr};
        int res;
        if (ji->kind != LOAD_PASS_EVAL) {
            ranks_plan_step(r, b, &mb.split);
            res = model_train_enqueue(&r->m, &mb, (float)lr, (float)r->hp.momentum, (float)r->hp.wd,
                                      tag);
            r->steps += res != MODEL_STEP_CANCELLED;
            comm = dist_take_comm(&r->dist);
        } else {
            res = model_eval_enqueue(&r->m, &mb, tag);
        }
        if (res == MODEL_STEP_CANCELLED)
            return step_cancelled(r, b);
        backend_busy_end(r->be);
        if (o->test_slow_step > 0)
            burn_cpu_for(o->test_slow_step);
    }
    stager_done(r->stager, b);
    if (!o->loader_only) /* the results that are back, without waiting */
        rc = take_results(r, MODEL_RESULTS_MAX, e);
    if (rc != RUN_OK)
        return rc;
    a->compute += now_sec() - t0 - comm;
    a->comm += comm;
    trace_span(r->trace, (int)getpid(), "main", ji->kind == LOAD_PASS_EVAL ? "eval step" : "step",
               t0, now_sec() - t0, (long)b->index);
    a->images += b->count;
    if (ji->kind != LOAD_PASS_EVAL) {
        char what[32];
        snprintf(what, sizeof what, "epoch %d", ji->epoch + 1);
        report_progress(r->progress, what, b->index + 1, nb, now_sec() - a->t0, a->images);
    }
    return RUN_OK;
}

/* After the last batch of pass `pass` (or one that ran past --max-seconds,
 * time_up): close the pass, and report the epoch (and save the checkpoint)
 * once its validation pass, if any, is done. Returns RUN_OK, RUN_TIME_UP
 * or a failure status. */
static int end_of_pass(run_ctx *r, int pass, int time_up, errbuf *e)
{
    pass_info *ji = &r->passes[pass];
    pass_acc *a = &r->acc[pass];
    /* on a GPU, comm is the device's time in the sums (their timing events;
     * waits, bounded, for the last step's), not the host's to enqueue them */
    double comm_dev = dist_comm_device(&r->dist);
    if (!isnan(comm_dev))
        a->comm = comm_dev;
    int rc = take_results(r, 0, e); /* every step of the pass */
    if (rc != RUN_OK)
        return rc;
    a->t1 = now_sec();
    a->busy = backend_busy_take(r->be); /* per pass: validation's busy time stays its own */
    a->act_on = r->activity && backend_activity_take(r->be, a->t0, a->t1, &a->act);
    trace_device(r);
    int agreed = ranks_agree(r, RUN_OK); /* before the epoch's totals, a collective */
    if (agreed != RUN_OK)
        return agreed;
    if (time_up) { /* reported as it is, without its validation pass */
        emit_epoch(r, pass);
        return RUN_TIME_UP;
    }
    int tid = ji->kind != LOAD_PASS_EVAL ? pass : -1;
    if (ji->kind == LOAD_PASS_EVAL)
        for (int j = 0; j < r->npasses; j++)
            if (r->passes[j].val_pass == pass)
                tid = j;
    if (tid < 0 || (ji->kind != LOAD_PASS_EVAL && r->passes[tid].val_pass >= 0))
        return RUN_OK;
    emit_epoch(r, tid);
    return save_checkpoint(r, r->passes[tid].epoch, e);
}

/* Batch b: a build batch, or a step and, after a pass's last batch, its
 * end. Returns RUN_OK, RUN_TIME_UP or a failure status. */
static int process(run_ctx *r, const loader_batch *b, const uint8_t *dev, errbuf *e)
{
    if (r->passes[b->pass].kind == LOAD_PASS_BUILD)
        return build_batch(r, b);
    int rc = step_batch(r, b, dev, e);
    if (rc != RUN_OK)
        return rc;
    int last = b->index + 1 == load_pass_batches(r->f.ldr, b->pass);
    int time_up = !last && pass_time_up(r, &r->passes[b->pass], &r->acc[b->pass]);
    return last || time_up ? end_of_pass(r, b->pass, time_up, e) : RUN_OK;
}

int run_train_loop(run_ctx *r, errbuf *e)
{
    loader_batch cur, nxt;
    const uint8_t *cur_dev, *nxt_dev = NULL;
    if (r->trace && backend_has_timeline(r->be)) {
        trace_name_process(r->trace, TRACE_DEVICE_PID, "device");
        backend_timeline_start(r->be);
    }
    int status = RUN_OK;
    int have = fetch(r, &nxt, &nxt_dev, &status, e);
    int look = stager_lookahead(r->stager);
    while (have == FETCH_GOT) {
        cur = nxt;
        cur_dev = nxt_dev;
        /* a preload build batch goes back in process(); the first training
         * batch waits for it (after_previous), so fetch that one after */
        int ahead = look && r->passes[cur.pass].kind != LOAD_PASS_BUILD;
        if (ahead)
            have = fetch(r, &nxt, &nxt_dev, &status, e);
        int rc = process(r, &cur, cur_dev, e);
        if (rc == RUN_TIME_UP)
            return RUN_OK;
        if (rc != RUN_OK)
            return rc;
        if (have == FETCH_FAILED)
            break;
        if (!ahead)
            have = fetch(r, &nxt, &nxt_dev, &status, e);
    }
    if (have == FETCH_FAILED)
        report_progress_end(r->progress);
    return have == FETCH_FAILED ? status : RUN_OK;
}

static void free_refeed(backend *be, uint8_t **dev, int32_t **labels, int k)
{
    for (int j = 0; j < k; j++) {
        be->ops->free(be, dev[j]);
        free(labels[j]);
    }
}

/* DIAG_REFEED: train on a few batches kept in device memory, with no
 * loader in the loop at all (E4's "drop the disk reads" experiment): the
 * rate the model alone can consume. */
int run_refeed_loop(run_ctx *r, errbuf *e)
{
    enum { K = 4 };
    uint8_t *dev[K];
    int32_t *labels[K];
    uint32_t count[K];
    int k = 0, tid = -1, rc = RUN_OK;
    backend *be = r->be;
    while (k < K) {
        loader_batch b;
        int got = loader_next(r->f.ldr, &b, e);
        if (got == LOADER_END)
            break;
        if (got != LOADER_OK) {
            rc = got;
            r->f.bad_sample = got == LOADER_BAD_SAMPLE;
            break;
        }
        if (r->passes[b.pass].kind == LOAD_PASS_TRAIN && (tid < 0 || b.pass == tid)) {
            tid = b.pass;
            dev[k] = be->ops->alloc(be, (size_t)b.count * r->f.sample_bytes);
            be->ops->upload(be, dev[k], b.data, (size_t)b.count * r->f.sample_bytes);
            labels[k] = xmalloc(sizeof(int32_t) * b.count);
            memcpy(labels[k], b.labels, sizeof(int32_t) * b.count);
            count[k++] = b.count;
        }
        loader_release(r->f.ldr, &b);
        if (tid >= 0 && b.index + 1 == load_pass_batches(r->f.ldr, tid))
            break;
    }
    if (rc == RUN_OK && (k == 0 || r->o->loader_only))
        rc = fail(e, RUN_INTERNAL, "internal: nothing to re-feed");
    if (rc != RUN_OK) {
        free_refeed(be, dev, labels, k);
        return rc;
    }
    long steps = r->o->max_batches ? r->o->max_batches : (long)load_pass_batches(r->f.ldr, tid);
    pass_acc *a = &r->acc[tid];
    a->t0 = now_sec();
    for (long i = 0; i < steps && rc == RUN_OK && !pass_time_up(r, &r->passes[tid], a); i++) {
        step_stats step = {0};
        int j = (int)(i % k);
        double t0 = now_sec();
        backend_busy_begin(be);
        int res = model_train_step(&r->m, dev[j], labels[j], (int)count[j], (float)r->hp.lr,
                                   (float)r->hp.momentum, (float)r->hp.wd, &step);
        if (res == MODEL_STEP_CANCELLED) {
            rc = LOADER_INTERRUPTED;
        } else if (res != MODEL_STEP_OK) {
            errf(e, "re-fed batches: the loss became NaN or infinite");
            rc = RUN_NONFINITE;
        }
        backend_busy_end(be);
        if (r->o->test_slow_step > 0)
            burn_cpu_for(r->o->test_slow_step);
        a->compute += now_sec() - t0;
        step_stats_add(&a->stats, &step);
        a->images += count[j];
        if (run_signal_received())
            rc = LOADER_INTERRUPTED;
    }
    a->t1 = now_sec();
    a->busy = backend_busy_take(be);
    a->act_on = r->activity && backend_activity_take(be, a->t0, a->t1, &a->act);
    free_refeed(be, dev, labels, k);
    if (rc == RUN_OK)
        emit_epoch(r, tid);
    return rc;
}
