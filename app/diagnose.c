/* diagnose.c — see diagnose.h. */
#define _GNU_SOURCE
#include "app/diagnose.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/reexec.h"
#include "app/report.h"

#define DIAG_BATCHES 200  /* per phase, unless --diagnose-batches */
#define DIAG_SECONDS 15.0 /* per phase, unless --diagnose-seconds */
#define AUTO_BATCHES 30
/* --diagnose's I/O verdict advises bigger shards below this many bytes
 * per request */
#define IO_SMALL_REQUEST (16.0 * 1024 * 1024)

diag_verdict diagnose_verdict(const diag_rates *r, char *text, size_t len)
{
    if (isnan(r->full) || isnan(r->loader) || isnan(r->model)) {
        snprintf(text, len, "unknown: a phase failed, see above");
        return VERDICT_UNKNOWN;
    }
    if (r->full >= 0.85 * r->model || r->loader >= 1.15 * r->model) {
        snprintf(text, len,
                 "compute-bound: the model consumes %.0f img/s and the loader delivers %.0f img/s; "
                 "the full pipeline runs at %.0f img/s -> more loader workers will not help: use a "
                 "faster device, more --threads, a larger --batch or a smaller model",
                 r->model, r->loader, r->full);
        return VERDICT_COMPUTE_BOUND;
    }
    int w = r->workers > 0 ? r->workers : 1;
    int need = (int)ceil((double)w * r->model / r->loader);
    char advice[160];
    if (need <= r->cores)
        snprintf(advice, sizeof advice, "try --workers %d or --mode preload", need);
    else
        snprintf(advice, sizeof advice,
                 "--workers %d would be needed but there are %d cores: use --mode preload", need,
                 r->cores);
    if (r->remote && r->fill_s > 0 && r->io_wait_s >= 0.5 * r->fill_s) {
        /* the workers wait for downloads, not the CPU: workers past the
         * core count still help (latency hiding), so no cap here */
        char more[96] = "";
        double per_req = r->io_requests > 0 ? r->io_bytes / r->io_requests : 0;
        if (r->io_requests > 0 && per_req < IO_SMALL_REQUEST)
            snprintf(more, sizeof more,
                     ", or bigger shards (%.2f MB per request now; aim for 100 MB)",
                     per_req / (1024.0 * 1024.0));
        snprintf(text, len,
                 "I/O-bound: the loader delivers %.0f img/s, the model consumes %.0f img/s; the "
                 "loader spent %.0f%% of its fill time waiting for shards from %s: %.2f MB/s over "
                 "%.0f requests -> more workers (--workers %d: downloads run in parallel, one per "
                 "worker), a shard cache on local disk kept across runs (--shard-cache DIR), "
                 "--mode preload%s",
                 r->loader, r->model, 100.0 * r->io_wait_s / r->fill_s,
                 r->host ? r->host : "the server", r->io_mb_s, r->io_requests,
                 need > 2 * w ? need : 2 * w, more);
        return VERDICT_IO_BOUND;
    }
    if (!isnan(r->read_only) && r->read_only <= 1.3 * r->loader) {
        double read_pct = 100.0 * r->loader / r->read_only;
        snprintf(text, len,
                 "storage-bound: the loader delivers %.0f img/s, the model consumes %.0f img/s; "
                 "reading the files alone runs at %.0f img/s (%.0f%% of loader time) -> faster "
                 "storage, --mode preload with --cache on a fast disk, or %s",
                 r->loader, r->model, r->read_only, read_pct > 100 ? 100 : read_pct, advice);
        return VERDICT_STORAGE_BOUND;
    }
    double decode_pct = isnan(r->read_only) ? NAN : 100.0 * (1.0 - r->loader / r->read_only);
    snprintf(text, len,
             "data-bound: the loader delivers %.0f img/s, the model consumes %.0f img/s; decode "
             "is %.0f%% of loader time -> %s",
             r->loader, r->model, decode_pct, advice);
    return VERDICT_DECODE_BOUND;
}

/* A child gets the command line without the options a sweep varies:
 * their first values back, as --prefetch, --batch and --mode options
 * (32 bytes each) */
static void first_values(const options *o, char *pf, char *bt, char *md)
{
    snprintf(pf, 32, "--prefetch=%d", o->prefetch.v[0]);
    if (o->batch.v[0])
        snprintf(bt, 32, "--batch=%d", o->batch.v[0]);
    else /* the model's default batch: nothing to pass */
        snprintf(bt, 32, "--no-progress");
    snprintf(md, 32, "--mode=%s", mode_name(o->mode.v[0]));
}

/* One measured phase; NaN when it failed. *images gets the images it
 * read, when images is not NULL (and *batch the batch size, when batch
 * is not NULL; *got its summary, when got is not NULL). */
static double phase_sum(const options *o, const char *what, char *const extra[], int *status,
                        double *images, int *batch, summary_rec *got)
{
    summary_rec s;
    char strs[256];
    printf("  %-22s ", what);
    fflush(stdout);
    int rc = reexec_run(o, extra, 1, &s, strs, sizeof strs, status);
    if (rc != 0 || *status != 0) {
        printf("failed (status %d)\n", *status);
        return NAN;
    }
    double n = round(s.images_per_s * s.epoch_s_median); /* both to 6 digits */
    printf("%8.0f img/s  (%.0f images in %.1f s)\n", s.images_per_s, n, s.epoch_s_median);
    if (images)
        *images = n;
    if (batch)
        *batch = s.cfg.batch;
    if (got) { /* its numbers: its strings lie in strs, gone on return */
        *got = s;
        got->cfg.device = got->cfg.model = got->cfg.mode = got->note = NULL;
    }
    fflush(stdout);
    return s.images_per_s;
}

static double phase(const options *o, const char *what, char *const extra[], int *status,
                    double *images, int *batch)
{
    return phase_sum(o, what, extra, status, images, batch, NULL);
}

/* scheme://host of a URL (the host of the training set's shards) */
static void url_host(const char *url, char *out, size_t len)
{
    const char *p = strstr(url, "://");
    size_t n = p ? (size_t)(strcspn(p + 3, "/{") + (size_t)(p + 3 - url)) : strlen(url);
    snprintf(out, len, "%.*s", (int)n, url);
}

int diagnose_run(const options *o)
{
    reexec_install_signals();
    char batches[32], secs[48];
    int nb = o->diag_batches ? o->diag_batches : o->max_batches ? o->max_batches : DIAG_BATCHES;
    double limit = isnan(o->diag_seconds) ? DIAG_SECONDS : o->diag_seconds;
    snprintf(batches, sizeof batches, "--max-batches=%d", nb);
    if (limit > 0)
        snprintf(secs, sizeof secs, "--max-seconds=%g", limit);
    else /* no limit: the hidden option left out (a flag the phases pass anyway in its place) */
        snprintf(secs, sizeof secs, "--no-progress");
    diag_rates r = {.full = NAN,
                    .loader = NAN,
                    .read_only = NAN,
                    .model = NAN,
                    .workers = o->workers.v[0] < 0 ? 0 : o->workers.v[0],
                    .cores = cores_online()};
    /* a child gets the command line without the options a sweep varies:
     * give it their first values back (the model phase keeps workers 0) */
    char wk[32], pf[32], bt[32], md[32], pin[32], nbl[32];
    snprintf(wk, sizeof wk, "--workers=%d", r.workers);
    first_values(o, pf, bt, md);
    snprintf(pin, sizeof pin, "--pin=%s", o->pin.v[0] ? "on" : "off");
    snprintf(nbl, sizeof nbl, "--non-blocking=%s", o->non_blocking.v[0] ? "on" : "off");
    char bound[64];
    if (limit > 0)
        snprintf(bound, sizeof bound, "up to %d batches or %g s", nb, limit);
    else
        snprintf(bound, sizeof bound, "up to %d batches", nb);
    printf("diagnosis: 4 phases of %s each (--diagnose-batches, --diagnose-seconds), "
           "workers %d, %d cores\n",
           bound, r.workers, r.cores);
    int status = 0;
#define PHASE_ARGS                                                                                 \
    batches, secs, pf, bt, md, pin, nbl, "--epochs=1", "--warmup-epochs=0", "--no-progress"
    char *full[] = {PHASE_ARGS, wk, NULL};
    char *loader[] = {PHASE_ARGS, wk, "--loader-only", NULL};
    char *reads[] = {PHASE_ARGS, wk, "--loader-only", "--diag-phase=read-only", NULL};
    char *model[] = {PHASE_ARGS, "--workers=0", "--diag-phase=refeed", NULL};
#undef PHASE_ARGS
    r.full = phase(o, "(a) full pipeline", full, &status, NULL, NULL);
    if (status == 2 || reexec_signal_received())
        return reexec_signal_received() ? 128 + reexec_signal_received() : status;
    summary_rec ls;
    char host[160];
    r.loader = phase_sum(o, "(b) loader only", loader, &status, NULL, NULL, &ls);
    if (!isnan(r.loader) && ls.io_remote) {
        url_host(o->csv, host, sizeof host);
        r.remote = 1;
        r.host = host;
        r.io_wait_s = ls.io_wait_s;
        r.fill_s = ls.fill_s;
        r.io_bytes = (double)ls.io_bytes;
        r.io_requests = (double)ls.io_requests;
        r.io_mb_s = ls.epoch_s_median > 0 ? r.io_bytes / (1024.0 * 1024.0) / ls.epoch_s_median : 0;
    }
    r.read_only = phase(o, "(c) loader, read only", reads, &status, NULL, NULL);
    r.model = phase(o, "(d) model only", model, &status, NULL, NULL);
    if (reexec_signal_received())
        return 128 + reexec_signal_received();
    char text[512];
    diag_verdict v = diagnose_verdict(&r, text, sizeof text);
    printf("verdict: %s\n", text);
    return v == VERDICT_UNKNOWN ? 1 : 0;
}

int autotune_workers(const options *o)
{
    reexec_install_signals();
    int cores = cores_online();
    char batches[32], pf[32], bt[32], md[32];
    snprintf(batches, sizeof batches, "--max-batches=%d", AUTO_BATCHES);
    first_values(o, pf, bt, md); /* the batches the run will read */
    /* a set of fewer batches than that is read once, whole: said below
     * with the count that was read */
    printf("workers auto: loader throughput per worker count, on up to %d batches (one epoch at "
           "most; %d cores)\n",
           AUTO_BATCHES, cores);
    double rate[65] = {0}; /* [1, maxw] filled by the probes below */
    int status = 0, maxw = cores < 64 ? cores : 64;
    double best = 0, images = NAN;
    int batch = 0;
    for (int w = 1; w <= maxw; w++) {
        char wk[32], label[32];
        snprintf(wk, sizeof wk, "--workers=%d", w);
        snprintf(label, sizeof label, "%d worker%s", w, w == 1 ? "" : "s");
        char *extra[] = {batches,         wk,  pf, bt, md, "--epochs=1", "--warmup-epochs=0",
                         "--loader-only", NULL};
        rate[w] = phase(o, label, extra, &status, isnan(images) ? &images : NULL, &batch);
        if (status == 2 || reexec_signal_received())
            return -1;
        if (rate[w] > best)
            best = rate[w];
    }
    double model = NAN;
    if (!o->loader_only) {
        char *extra[] = {batches,
                         "--workers=0",
                         pf,
                         bt,
                         md,
                         "--epochs=1",
                         "--warmup-epochs=0",
                         "--diag-phase=refeed",
                         NULL};
        model = phase(o, "model consumes", extra, &status, NULL, NULL);
    }
    if (!(best > 0)) {
        fprintf(stderr, "train: --workers auto: every probe failed\n");
        return -1;
    }
    int pick = maxw;
    for (int w = 1; w <= maxw; w++)
        if (rate[w] >= 0.95 * best || (!isnan(model) && rate[w] >= model)) {
            pick = w;
            break;
        }
    char tail[64] = "", read[96] = "";
    if (!isnan(model))
        snprintf(tail, sizeof tail, "; the model consumes %.0f img/s", model);
    if (batch > 0 && images > 0) { /* the batches each count really read */
        long nb = (long)ceil(images / batch);
        snprintf(read, sizeof read, "; each count read %ld batch%s of %d%s", nb,
                 nb == 1 ? "" : "es", batch, nb < AUTO_BATCHES ? ", the whole epoch" : "");
    }
    printf("workers auto: chose %d (%.0f img/s; best %.0f img/s%s%s)\n", pick, rate[pick], best,
           tail, read);
    fflush(stdout);
    return pick;
}
