/* run.c — one configuration of train (see run.h).
 *
 * Order matters: everything the loader processes share (the CSV index, the
 * preload cache, the ring) exists before the loader forks them, and nothing
 * that starts threads (the CUDA runtime, NVML) runs until after. Then the
 * main loop takes batches in order, hands them to the device, steps the
 * model and accounts every second of an epoch to waiting for data, copying
 * or computing.
 */
#define _GNU_SOURCE
#include "app/run.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/run_ctx.h"
#include "app/sweep.h"
#include "app/trace.h"
#include "cpu/cpu.h"
#include "nn/checkpoint.h"

/* ---------------------------------------------------------------- signals */

static volatile sig_atomic_t g_signal;
static loader *volatile g_loader;

static void on_signal(int sig)
{
    if (!g_signal)
        g_signal = sig;
    loader_interrupt(g_loader);
}

void run_install_signals(void) { on_stop_signals(on_signal); /* the loader's waits return EINTR */ }

int run_signal_received(void) { return g_signal; }

run_config run_config_of(const run_choice *c, int batch, const char *device, const char *model_name)
{
    return (run_config){.device = device,
                        .model = model_name,
                        .mode = mode_name(c->mode),
                        .workers = c->workers,
                        .prefetch = c->prefetch,
                        .pin = c->pin,
                        .non_blocking = c->non_blocking,
                        .batch = batch};
}

/* ---------------------------------------------------------------- model choice */

/* --drop-last drops the short last batch; with fewer samples than one
 * batch that is every sample, and an epoch of nothing reports nothing. */
static int check_drop_last(run_ctx *r, errbuf *e)
{
    if (!r->o->drop_last || (uint32_t)r->f.batch <= r->f.train.n)
        return RUN_OK;
    return fail(e, RUN_BAD_INPUT,
                "--drop-last with --batch %d would drop every sample: %s has %u; lower --batch to "
                "%u or "
                "less, or leave out --drop-last",
                r->f.batch, r->f.train.csv_path, r->f.train.n, r->f.train.n);
}

/* Outputs are checked before any work: an unwritable --json or --save
 * found after an epoch loses that epoch. */
static int open_outputs(run_ctx *r, errbuf *e)
{
    const options *o = r->o;
    if (o->dump_batches && !(r->dump = fopen(o->dump_batches, "wb")))
        return fail(e, RUN_BAD_INPUT, "%s: cannot open for writing: %s", o->dump_batches,
                    strerror(errno));
    if (o->trace && !(r->trace = trace_open(o->trace, e)))
        return RUN_BAD_INPUT;
    trace_name_process(r->trace, (int)getpid(), "train");
    if (o->json) { /* never blocks on a FIFO, nor writes to a device */
        errbuf je;
        int fd = open_regular(o->json, O_WRONLY | O_CREAT | (o->sweep_child ? O_APPEND : O_TRUNC),
                              0666, &je);
        if (fd < 0 || !(r->json = fdopen(fd, o->sweep_child ? "a" : "w"))) {
            if (fd >= 0)
                close(fd);
            return fail(e, RUN_BAD_INPUT, "--json: %s", fd < 0 ? je.msg : strerror(errno));
        }
    }
    struct stat jst;
    if (r->json && fstat(fileno(r->json), &jst) == 0)
        r->json_start = r->json_good = (long long)jst.st_size;
    if (o->save && !o->loader_only) {
        atomic_file af;
        errbuf se;
        if (atomic_file_open(&af, o->save, &se) != 0)
            return fail(e, RUN_BAD_INPUT, "--save: %s", se.msg);
        atomic_file_abort(&af);
    }
    if (o->cache && r->c.mode == MODE_PRELOAD) { /* its folder, before the data is read */
        char *tmp = NULL;
        errbuf ce;
        int fd = replace_file_open(o->cache, &tmp, &ce);
        if (fd < 0)
            return fail(e, RUN_BAD_INPUT, "--cache: %s", ce.msg);
        close(fd);
        if (tmp)
            unlink(tmp);
        free(tmp);
    }
    return RUN_OK;
}

/* --resume promises the training the checkpoint was part of, continued
 * exactly: on other data (rows dropped, added, reordered or relabelled) it
 * would silently be another training. Refused unless --resume-any-data
 * says that is meant (then a warning). A checkpoint of version 1 has no
 * fingerprint: a note, and no check. */
static int check_resume_data(run_ctx *r, const ckpt_state *st, errbuf *e)
{
    const options *o = r->o;
    if (!st->has_data) {
        if (r->dist.rank == 0)
            fprintf(stderr,
                    "train: note: %s: an older checkpoint without its data's fingerprint; "
                    "the data is not compared with what it was trained on\n",
                    o->resume);
        return RUN_OK;
    }
    const data_fp *was = &st->data, *now = &r->data_fp;
    if (was->n == now->n && was->nclasses == now->nclasses && was->hash == now->hash)
        return RUN_OK;
    char what[ERR_MAX / 2];
    if (was->n != now->n || was->nclasses != now->nclasses)
        snprintf(what, sizeof what,
                 "%s now has %llu samples of %llu classes; the checkpoint was trained on %llu "
                 "samples of %llu classes",
                 o->csv, (unsigned long long)now->n, (unsigned long long)now->nclasses,
                 (unsigned long long)was->n, (unsigned long long)was->nclasses);
    else
        snprintf(what, sizeof what,
                 "%s has the %llu samples and %llu classes the checkpoint was trained on, but "
                 "other rows (paths, labels or their order changed)",
                 o->csv, (unsigned long long)now->n, (unsigned long long)now->nclasses);
    if (o->resume_any_data) {
        if (r->dist.rank == 0)
            fprintf(stderr,
                    "train: warning: --resume %s: %s; resuming anyway (--resume-any-data)\n",
                    o->resume, what);
        return RUN_OK;
    }
    return fail(e, RUN_BAD_INPUT,
                "--resume %s: %s; an exact resume needs the same data (--resume-any-data resumes "
                "on this data anyway)",
                o->resume, what);
}

static int setup_model_choice(run_ctx *r, ckpt_info *ck, errbuf *e)
{
    const options *o = r->o;
    if (o->loader_only) {
        r->model_name = "none";
        r->f.batch = r->c.batch ? r->c.batch : FEED_DEFAULT_BATCH;
        return check_drop_last(r, e);
    }
    if (o->resume) {
        if (checkpoint_read_info(o->resume, ck, e) != 0)
            return RUN_BAD_INPUT;
        if (o->model && strcmp(o->model, ck->model))
            return fail(e, RUN_BAD_INPUT, "%s: the checkpoint is a %s model, not --model %s",
                        o->resume, ck->model, o->model);
        r->model_name = ck->model;
    } else if (o->model) {
        r->model_name = o->model;
    } else {
        r->model_name = r->f.ss.out_h * r->f.ss.out_w <= 32 * 32 ? "lenet" : "convnet";
    }
    if (model_defaults(r->model_name, &r->hp) != 0) {
        char names[256] = "";
        for (const char *const *n = model_names(); *n; n++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     names[0] ? ", " : "", *n);
        return fail(e, RUN_BAD_INPUT,
                    "--model %s: unknown model (known: %s; --model list shows them)", r->model_name,
                    names);
    }
    if (!isnan(o->lr))
        r->hp.lr = o->lr;
    if (!isnan(o->momentum))
        r->hp.momentum = o->momentum;
    if (!isnan(o->wd))
        r->hp.wd = o->wd;
    if (o->schedule_given)
        r->hp.schedule = o->schedule;
    r->f.batch = r->c.batch ? r->c.batch : FEED_DEFAULT_BATCH;
    if (o->resume && !r->c.batch && ck->state.batch > 0)
        r->f.batch = ck->state.batch;
    return check_drop_last(r, e);
}

/* ---------------------------------------------------------------- device */

static void start_activity(run_ctx *r);

static int setup_device(run_ctx *r, char *note, size_t note_len, errbuf *e)
{
    const options *o = r->o;
    device_kind want = o->device_want;
    if (o->loader_only && want == DEVICE_AUTO)
        want = DEVICE_CPU;
    if (device_select_gpu(want, r->dist.local_rank, &r->dev, e) != 0)
        return RUN_BAD_INPUT;
    if (o->loader_only && r->dev.kind == DEVICE_CPU)
        snprintf(r->dev.line, sizeof r->dev.line, "device: none (--loader-only: no model runs)");
    int cores = cores_online();
    /* compute threads default to every core, even with loader workers:
     * the compute threads sleep while they wait for data and the workers
     * sleep when the ring is full, so the kernel hands each core to
     * whichever side has work. Reserving cores for the workers (the first
     * design) left LeNet on PNGs 45-80% slower with 2 workers and made no
     * difference on E1's JPEGs (docs/EXPERIMENTS.md, E2). */
    r->threads = o->threads ? o->threads : cores;
    if (!o->threads && r->dist.local_size > 1) /* ranks on one node share its cores */
        r->threads = cores / r->dist.local_size > 0 ? cores / r->dist.local_size : 1;
    if (r->dev.kind == DEVICE_CUDA) {
        r->be = device_create_cuda(&r->dev, e);
        if (!r->be && want == DEVICE_CUDA)
            return RUN_BAD_INPUT;
        if (!r->be) { /* --device auto: a GPU that will not start is no GPU */
            snprintf(r->dev.line, sizeof r->dev.line,
                     "device: cpu (the GPU was found but its backend did not "
                     "start: %.400s)",
                     e->msg);
            r->dev.kind = DEVICE_CPU;
        }
    }
    if (r->dev.kind == DEVICE_CUDA) { /* the libraries as loaded, not as built against */
        char libs[200], warn[400];
        if (device_gpu_libraries(libs, sizeof libs, warn, sizeof warn)) {
            size_t at = strlen(r->dev.line);
            snprintf(r->dev.line + at, sizeof r->dev.line - at, "; %s", libs);
            if (warn[0])
                fprintf(stderr, "train: warning: %s\n", warn);
        }
        if (r->dist.size > 1 && dist_nccl_version(libs, sizeof libs, warn, sizeof warn)) {
            size_t at = strlen(r->dev.line);
            snprintf(r->dev.line + at, sizeof r->dev.line - at, ", %s", libs);
            if (warn[0])
                fprintf(stderr, "train: warning: %s\n", warn);
        }
    }
    if (r->dev.kind == DEVICE_CUDA && !o->loader_only)
        start_activity(r);
    if (r->dev.kind != DEVICE_CUDA) {
        r->be = backend_cpu_create(r->threads, e);
        if (!r->be)
            return RUN_INTERNAL;
    }
    /* Ctrl-C stops a step between layers and between the CPU backend's
     * tasks; with several ranks a step always ends (a rank cut short would
     * miss the gradient sum the others wait in), and the signal stops every
     * rank at the next agreement instead */
    r->be->cancel = r->dist.size > 1 ? NULL : &g_signal;
    r->stager = stager_create(r->be, r->f.ldr, r->f.sample_bytes, r->f.batch, r->c.pin,
                              r->c.non_blocking, o->pin_force, note, note_len, e);
    if (!r->stager)
        return RUN_BAD_INPUT;
    /* report what the run does, not what was asked: --pin on the CPU or a
     * failed page-lock runs unpinned (the note says why) */
    r->c.pin = stager_pinned_bytes(r->stager) > 0;
    r->c.non_blocking = stager_async(r->stager);
    r->monitor = device_monitor_create(&r->dev);
    return RUN_OK;
}

/* busy% from the device's own records when the backend has them and
 * --gpu-activity is on; the header says which, and why not */
static void start_activity(run_ctx *r)
{
    char why[400] = "the backend has no activity records";
    if (!r->o->gpu_activity) {
        snprintf(r->activity_line, sizeof r->activity_line,
                 "gpu activity: off (--gpu-activity off): busy%% is each step's event span on the "
                 "compute stream, launch gaps included; no h2d%%/ovl%%");
        return;
    }
    if (r->be->ops->activity_start)
        r->activity = r->be->ops->activity_start(r->be, why, sizeof why);
    if (r->activity)
        snprintf(r->activity_line, sizeof r->activity_line,
                 "gpu activity: CUPTI activity records (busy%% = kernels, h2d%% = host-to-device "
                 "copies, ovl%% = both at once; --gpu-activity off saves host time per launch)");
    else
        snprintf(r->activity_line, sizeof r->activity_line,
                 "gpu activity: unavailable (%.400s): busy%% is each step's event span on the "
                 "compute stream, launch gaps included; no h2d%%/ovl%%",
                 why);
}

/* The CPU backend's activations grow with batch x image area: a photo set
 * at full size asks for tens of GB. Refuse before allocating, with the
 * number and the fix, rather than be killed by the OOM killer mid-step.
 * (On a GPU the activations live in device memory; cudaMalloc says when it
 * does not fit.) */
static int check_model_memory(run_ctx *r, int nclasses, errbuf *e)
{
    if (r->dev.kind != DEVICE_CPU)
        return 0;
    uint64_t need = model_memory_bytes(r->model_name, r->f.ss.channels, r->f.ss.out_h,
                                       r->f.ss.out_w, nclasses, r->f.batch, r->threads);
    uint64_t avail = mem_available_bytes();
    if (!avail || need <= avail / 10 * 9)
        return 0;
    char nb[32], ab[32];
    return errf(
        e,
        "model %s on %dx%dx%d inputs at batch %d needs about %s of memory for the CPU backend, "
        "but only %s is available: shrink the images (e.g. --resize 224 --crop 224, or "
        "--resize HxW) or lower --batch",
        r->model_name, r->f.ss.channels, r->f.ss.out_h, r->f.ss.out_w, r->f.batch,
        fmt_bytes(nb, sizeof nb, need), fmt_bytes(ab, sizeof ab, avail));
}

void run_norm_values(const options *o, int channels, float *mean, float *stdv)
{
    for (int c = 0; c < channels; c++) {
        mean[c] = o->nmean ? o->mean[o->nmean == 1 ? 0 : c] : 0.5f;
        if (o->normalize_imagenet) { /* grey: the channels' averages (torchvision has no grey preset) */
            static const float im_mean[3] = {0.485f, 0.456f, 0.406f},
                               im_std[3] = {0.229f, 0.224f, 0.225f};
            mean[c] = channels == 3 ? im_mean[c] : 0.449f;
            stdv[c] = channels == 3 ? im_std[c] : 0.226f;
            continue;
        }
        stdv[c] = o->nstd ? o->std[o->nstd == 1 ? 0 : c] : 0.5f;
    }
}

static int setup_model(run_ctx *r, errbuf *e)
{
    const options *o = r->o;
    if (o->loader_only)
        return RUN_OK;
    int nclasses = (int)r->f.train.nclasses;
    for (int k = 0; k < 2; k++) {
        int n = k ? o->nstd : o->nmean;
        if (n > 1 && n != r->f.ss.channels)
            return fail(e, RUN_BAD_INPUT,
                        "--%s has %d values but the input has %d channel%s%s: give 1 value (for "
                        "every "
                        "channel) or %d",
                        k ? "std" : "mean", n, r->f.ss.channels, r->f.ss.channels == 1 ? "" : "s",
                        o->channels ? " (--channels)" : "", r->f.ss.channels);
    }
    if (check_model_memory(r, nclasses, e) != 0)
        return RUN_BAD_INPUT;
    if (model_create(&r->m, r->model_name, r->f.ss.channels, r->f.ss.out_h, r->f.ss.out_w, nclasses,
                     r->f.batch, r->be, e) != 0)
        return RUN_BAD_INPUT;
    r->model_made = 1;
    const char *unpinned = model_results_unpinned(&r->m);
    if (unpinned)
        fprintf(stderr,
                "train: warning: the step results' buffer is not page-locked (%s): every step "
                "waits for its own read-back\n",
                unpinned);
    float mean[MODEL_MAX_CHANNELS], stdv[MODEL_MAX_CHANNELS];
    run_norm_values(o, r->f.ss.channels, mean, stdv);
    if (model_set_norm(&r->m, mean, stdv, e) != 0)
        return RUN_BAD_INPUT;
    r->class_names = xcalloc((size_t)nclasses, sizeof(char *));
    for (int c = 0; c < nclasses; c++) {
        char buf[16];
        r->class_names[c] = xstrdup(dataset_class_name(&r->f.train, (uint32_t)c, buf, sizeof buf));
    }
    if (o->resume) {
        ckpt_state ck;
        if (checkpoint_load(o->resume, &r->m, (const char *const *)r->class_names, &ck, e) != 0)
            return RUN_BAD_INPUT;
        int rc = check_resume_data(r, &ck, e); /* after the model's and classes' checks */
        if (rc != RUN_OK)
            return rc;
        r->start_epoch = (int)ck.epoch;
        r->steps = (long)ck.step;
        if (ck.seed != o->seed)
            fprintf(stderr,
                    "train: note: resuming with --seed %llu; the checkpoint was trained with "
                    "seed %llu, so the data order differs from an uninterrupted run\n",
                    (unsigned long long)o->seed, (unsigned long long)ck.seed);
        if (ck.batch > 0 && ck.batch != r->f.batch)
            fprintf(stderr,
                    "train: note: resuming with --batch %d; the checkpoint was trained with "
                    "--batch %d, so an epoch has another number of steps and the learning-rate "
                    "schedule continues from step %lld at the new pace\n",
                    r->f.batch, (int)ck.batch, (long long)ck.step);
        if (r->start_epoch >= o->epochs)
            return fail(e, RUN_BAD_INPUT,
                        "%s: already trained %d epochs; ask for more with --epochs", o->resume,
                        r->start_epoch);
    } else {
        model_init_params(&r->m, o->seed);
    }
    return RUN_OK;
}

/* ---------------------------------------------------------------- warm-up */

/* A GPU's first epoch is not comparable: CUDA loads kernel modules
 * lazily, cuDNN plans each batch size and the workspace grows (with device
 * waits) at its first steps. So a GPU run with two or more epochs to run
 * leaves its first out of the summaries unless --warmup-epochs says
 * otherwise, and the plans and workspace of every batch size a pass will
 * see (the full batch, the short last one of training and validation) are
 * made before the first epoch. With several ranks each rank's slices
 * differ and are planned at their first steps, as before. */
static void prepare_warmup(run_ctx *r)
{
    const options *o = r->o;
    int gpu = r->dev.kind == DEVICE_CUDA && !o->loader_only;
    r->warmup_epochs = o->warmup_epochs >= 0                    ? o->warmup_epochs
                       : gpu && o->epochs - r->start_epoch >= 2 ? 1
                                                                : 0;
    if (!gpu || !r->model_made || r->dist.size > 1)
        return;
    int sizes[4], n = 0;
    uint32_t B = (uint32_t)r->f.batch;
    sizes[n++] = (int)B;
    if (!o->drop_last && o->max_batches == 0 && r->f.train.n % B)
        sizes[n++] = (int)(r->f.train.n % B);
    if (r->f.have_val && r->f.val.n % B)
        sizes[n++] = (int)(r->f.val.n % B);
    model_prepare_batches(&r->m, sizes, n);
}

/* ---------------------------------------------------------------- the run */

static void print_first_line(run_ctx *r)
{
    const options *o = r->o;
    char csv[ESC_MAX];
    esc_path(o->csv, csv, sizeof csv);
    printf("%s\n", r->dev.line);
    if (r->activity_line[0])
        printf("%s\n", r->activity_line);
    if (o->loader_only) {
        printf("loader only (no model): %s, %u samples of %dx%dx%d, batch %d, workers %d, prefetch "
               "%d, "
               "mode %s\n",
               csv, r->f.train.n, r->f.ss.channels, r->f.ss.out_h, r->f.ss.out_w, r->f.batch,
               r->c.workers, r->c.prefetch, mode_name(r->c.mode));
    } else {
        printf("model %s: %zu parameters, %.1f MFLOP/sample forward; input %dx%dx%d, %u classes; "
               "%s threads %d; lr %g momentum %g wd %g schedule %s%s\n",
               r->model_name, r->m.nparams_used, r->m.flops / 1e6, r->f.ss.channels, r->f.ss.out_h,
               r->f.ss.out_w, r->f.train.nclasses, r->dev.kind == DEVICE_CUDA ? "host" : "compute",
               r->threads, r->hp.lr, r->hp.momentum, r->hp.wd, lr_schedule_name(r->hp.schedule),
               model_results_unpinned(&r->m) ? "; results unpinned (every step waits)" : "");
        printf("data %s: %u samples%s; batch %d, workers %d, prefetch %d, mode %s, seed %llu\n",
               csv, r->f.train.n, r->f.have_val ? " (+ validation)" : "", r->f.batch, r->c.workers,
               r->c.prefetch, mode_name(r->c.mode), (unsigned long long)o->seed);
    }
    if (r->dist.size > 1) {
        char tree[160] = "", ks[96] = "";
        for (int k = 1, at = 0; r->chunks && k <= r->chunks && at < 80; k *= 2)
            at += snprintf(ks + at, sizeof ks - (size_t)at, "%s%d", k > 1 ? ", " : "", k);
        if (r->chunks)
            snprintf(tree, sizeof tree,
                     " as a fixed tree of %d chunks (the same bits for %s ranks)", r->chunks, ks);
        if (r->dist.nccl_buckets > 1 && !r->chunks) /* chunk trees sum once, after */
            snprintf(tree, sizeof tree, " in %d buckets, during backward", r->dist.nccl_buckets);
        printf("ranks %d (%d on this node): each loads its slice of every global batch of %d "
               "(%d-%d samples); gradients summed with %s%s\n",
               r->dist.size, r->dist.local_size, r->f.batch, r->f.batch / r->dist.size,
               (r->f.batch + r->dist.size - 1) / r->dist.size,
               r->dev.kind == DEVICE_CUDA ? "NCCL" : "MPI", tree);
    }
    dataset_print_classes(&r->f.train, stdout);
    if (r->f.use_cache && (r->o->cache || r->f.node_cache))
        printf("preload: %s\n", r->f.cache.note);
    fflush(stdout);
}

static void cleanup(run_ctx *r)
{
    stager_free(r->stager);
    device_monitor_free(r->monitor);
    if (r->model_made)
        model_free(&r->m);
    g_loader = NULL;
    loader_destroy(r->f.ldr); /* stops and reaps every loader process */
    r->f.ldr = NULL;
    dist_stop(&r->dist); /* NCCL's communicator before the backend's streams go */
    free(r->per_rank);
    if (r->be)
        r->be->ops->destroy(r->be);
    if (r->class_names)
        for (uint32_t c = 0; c < r->f.train.nclasses; c++)
            free(r->class_names[c]);
    free(r->class_names);
    free(r->passes);
    free(r->acc);
    free(r->recs);
    feed_close(&r->f); /* the cache and the data sets (the loader is gone) */
    if (r->json)
        fclose(r->json); /* after a failure only: run_one closes it, checked */
    if (r->dump)
        fclose(r->dump);
    errbuf te;
    if (r->trace && trace_close(r->trace, &te) != 0)
        fprintf(stderr, "train: warning: %s\n", te.msg);
    r->trace = NULL;
}

void run_json_wrote(run_ctx *r, int err)
{
    if (r->json_err)
        return; /* nothing after a failure counts as whole */
    if (!err) {
        off_t at = ftello(r->json);
        if (at >= 0)
            r->json_good = (long long)at;
        return;
    }
    r->json_err = err;
    fprintf(stderr, "train: %s: cannot write the JSON report: %s; the run goes on without it\n",
            r->o->json, strerror(err));
}

/* --json's end: flushed and closed, each checked. A report that could not
 * be written whole keeps its complete records and loses the partial one:
 * the file is cut back to the last record written whole, or removed when
 * that is none and this run made the file (a sweep's parent made it for
 * every configuration: it stays, with the earlier ones' records). Returns
 * rc, or RUN_INTERNAL for a run that was otherwise fine (as for a
 * checkpoint that cannot be written). */
static int close_json(run_ctx *r, int rc)
{
    FILE *f = r->json;
    if (!f)
        return rc;
    r->json = NULL;
    errno = 0;
    if (fflush(f) != 0)
        run_json_wrote(r, errno ? errno : EIO);
    errno = 0;
    if (fclose(f) != 0)
        run_json_wrote(r, errno ? errno : EIO);
    if (!r->json_err)
        return rc;
    const char *path = r->o->json;
    if (r->json_good == 0 && !r->o->sweep_child) {
        if (unlink(path) != 0)
            fprintf(stderr, "train: %s: cannot remove the incomplete JSON report: %s\n", path,
                    strerror(errno));
        else
            fprintf(stderr, "train: %s: removed (no record was written whole)\n", path);
    } else if (truncate(path, (off_t)r->json_good) != 0) {
        fprintf(stderr, "train: %s: cannot cut the incomplete JSON report back: %s\n", path,
                strerror(errno));
    } else {
        fprintf(stderr, "train: %s: cut back to the records written whole (%lld bytes)\n", path,
                r->json_good);
    }
    return rc == RUN_OK ? RUN_INTERNAL : rc;
}

/* Under a launcher, ranks other than 0 write nothing: no table, no
 * --json, --save, --trace or summary (rank 0 writes them for the job).
 * Their messages reach rank 0 through dist_end. */
static const options *quiet_rank(const options *o, options *copy, const dist *d)
{
    if (d->rank == 0)
        return o;
    *copy = *o;
    copy->json = copy->save = copy->trace = copy->summary_out = NULL;
    copy->progress = 0;
    if (!freopen("/dev/null", "w", stdout))
        fclose(stdout);
    return copy;
}

/* What this rank's run ends with, said once for the job: the message (by
 * rank 0: the first failing rank's, naming it) and the job's status. */
static int say_end(run_ctx *r, int rc, const char *msg)
{
    char out[ERR_MAX + 2 * DIST_HOST_MAX], esc[ESC_MAX];
    rc = dist_end(&r->dist, rc, r->dist_follow ? "" : msg, out, sizeof out);
    if (out[0]) /* paths in it: control bytes escaped */
        fprintf(stderr, "%s%s\n", strncmp(out, "train:", 6) ? "train: " : "",
                esc_path(out, esc, sizeof esc));
    /* (--skip-bad does not go with --mode preload, which refuses it) */
    if (out[0] && r->f.bad_sample && !r->o->csv_o.skip_bad && r->f.mode != MODE_PRELOAD)
        fprintf(stderr, "train: --skip-bad goes on past such files (naming each); "
                        "--check=decode lists them all without training\n");
    return rc;
}

int run_one(const options *o, const run_choice *c)
{
    run_ctx r;
    memset(&r, 0, sizeof r);
    options quiet;
    errbuf de;
    if (dist_from_env(&r.dist, &de) != 0) {
        fprintf(stderr, "train: %s\n", de.msg);
        return RUN_BAD_INPUT;
    }
    o = quiet_rank(o, &quiet, &r.dist);
    r.o = o;
    r.c = *c;
    r.progress = o->progress < 0 ? isatty(2) : o->progress;
    machine_info_read(&r.mi);
    errbuf e = {{0}};
    ckpt_info ck;
    memset(&ck, 0, sizeof ck);
    char note[600] = "";
    int rc = open_outputs(&r, &e);
    feed_init(&r.f, o, c, FEED_FORK, r.dist.rank, r.dist.size, &r.dist);
    if (rc == RUN_OK)
        rc = feed_data(&r.f, &e);
    if (rc == RUN_OK)
        r.data_fp = dataset_fingerprint(&r.f.train, o->csv_o.root);
    if (rc == RUN_OK)
        rc = setup_model_choice(&r, &ck, &e);
    if (rc == RUN_OK)
        rc = feed_cache(&r.f, &e);
    if (r.json) /* the command line and data, even for a run that stops here */
        run_write_header(&r);
    if (rc == RUN_OK)
        rc = feed_loader(&r.f, NULL, &e); /* forks: nothing threaded before this */
    g_loader = r.f.ldr;
    if (rc == RUN_OK && dist_start(&r.dist, &e) != 0) /* MPI: after the fork */
        rc = RUN_INTERNAL;
    if (rc == RUN_OK) /* the ranks run one job: else they would meet in different collectives */
        rc = ranks_check_same(&r, o->resume ? &ck.state : NULL, &e);
    if (rc == RUN_OK)
        rc = setup_device(&r, note, sizeof note, &e);
    rc = ranks_check_gpus(&r, rc, &e); /* NCCL takes one GPU per rank: say so before it */
    if (rc == RUN_OK)
        rc = setup_model(&r, &e);
    if (rc == RUN_OK)
        rc = ranks_check_chunks(&r, &e);
    if (rc == RUN_OK)
        prepare_warmup(&r);
    if (r.dist.active) { /* every rank set up, or none goes on */
        int mine = rc;
        rc = dist_agree(&r.dist, rc);
        if (r.f.node_cache) /* every rank of the node has mapped it (before MPI): unnamed now */
            cache_node_unlink(&r.f.cache);
        r.dist_follow = r.dist_follow || (mine == RUN_OK && rc != RUN_OK);
        if (rc == RUN_OK && !o->loader_only && dist_attach(&r.dist, &r.m, &e) != 0)
            rc = RUN_INTERNAL; /* the same parameters everywhere, the gradient sum hooked */
    }
    if (r.dev.kind == DEVICE_CUDA)
        snprintf(r.mi.gpu, sizeof r.mi.gpu, "%.120s", r.dev.line);
    if (rc == RUN_OK) {
        print_first_line(&r);
        if (note[0] && !sweep_note_said(o, note)) /* said once per sweep */
            fprintf(stderr, "train: %s\n", note);
        rc = ranks_node_cache(&r, &e); /* the node's cache complete, before any pass */
    }
    if (rc == RUN_OK) {
        run_post_passes(&r);
        rc = o->diag_phase == DIAG_REFEED ? run_refeed_loop(&r, &e) : run_train_loop(&r, &e);
        if (rc == RUN_OK)
            ranks_verdict(&r);
    }
    if (rc != RUN_OK && (rc == LOADER_INTERRUPTED || g_signal) && !r.dist_follow) {
        int sig = g_signal ? g_signal : SIGINT;
        snprintf(e.msg, sizeof e.msg, "interrupted by %s; loader stopped",
                 sig == SIGINT    ? "SIGINT (Ctrl-C)"
                 : sig == SIGTERM ? "SIGTERM"
                                  : strsignal(sig));
        rc = 128 + sig;
    }
    rc = say_end(&r, rc, e.msg);
    if (r.trace) { /* closed before the summary: a trace not written fails the run */
        errbuf te;
        trace *t = r.trace;
        r.trace = NULL;
        if (trace_close(t, &te) != 0) {
            fprintf(stderr, "train: %s\n", te.msg);
            if (rc == RUN_OK) {
                rc = RUN_INTERNAL;
                snprintf(e.msg, sizeof e.msg, "%s", te.msg);
            }
        }
    }
    summary_rec s;
    report_summarise(r.recs, r.nrecs, r.f.use_cache ? r.f.build_s : NAN, &s);
    s.status = rc;
    s.note = note[0] ? note : NULL;
    if (rc != RUN_OK)
        s.reason = rc > 128 ? strsignal(rc - 128) : e.msg;
    if (r.nrecs == 0) {
        s.cfg = run_config_of(&r.c, r.f.batch ? r.f.batch : c->batch, run_ctx_device(&r),
                              r.model_name ? r.model_name : "?");
    }
    if (r.json) /* on every exit path: a failed run says why */
        run_json_wrote(&r, report_summary_json(r.json, &s, &r.mi));
    rc = s.status = close_json(&r, rc);
    if (o->summary_out) {
        FILE *f = fopen(o->summary_out, "w");
        if (f) {
            report_summary_json(f, &s, &r.mi);
            fclose(f);
        }
    }
    if (o->resume)
        ckpt_info_free(&ck);
    cleanup(&r);
    return rc;
}
