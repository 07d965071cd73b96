/* report.c — see report.h. */
#define _POSIX_C_SOURCE 200809L
#include "app/report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"

static const char *onoff(int v) { return v ? "on" : "off"; }

double report_hit_pct(uint64_t hits, uint64_t downloads)
{
    return hits + downloads ? 100.0 * (double)hits / (double)(hits + downloads) : NAN;
}

double report_other_pct(double wait, double copy, double compute, double comm)
{
    if (isnan(wait))
        return NAN;
    double sum = wait;
    const double more[] = {copy, compute, comm};
    for (int i = 0; i < 3; i++)
        if (!isnan(more[i]))
            sum += more[i];
    return sum < 100 ? 100 - sum : 0; /* clock reads a hair apart: never below 0 */
}

/* ---------------------------------------------------------------- the epoch table */

/* The columns, in order; a line is its cells, each padded to the width
 * (negative: left-aligned), separated by one space. */
enum col {
    C_DEV,
    C_MODEL,
    C_MODE,
    C_WK,
    C_PF,
    C_PIN,
    C_NB,
    C_BATCH,
    C_BAR,
    C_EP,
    C_TIME,
    C_RATE,
    C_WAIT,
    C_COPY,
    C_COMP,
    C_COMM,
    C_OTHER,
    C_RKWAIT,
    C_IOMB,
    C_IORATE,
    C_IOREQ,
    C_IORETRY,
    C_IOHIT,
    C_GPU,
    C_BUSY,
    C_H2D,
    C_OVL,
    C_SM,
    C_LOSS,
    C_ACC,
    C_VAL,
    C_RSS,
    C_PSS,
    C_PINMB,
    C_GPUMB,
    C_SKIP,
    C_CACHE,
    NCOLS
};
/* the columns to hide are one uint64_t's bits */
_Static_assert(NCOLS <= 64, "more columns than bits in the hide mask");
#define COL(c) ((uint64_t)1 << (c))

static const struct {
    const char *name;
    int width;
} cols[NCOLS] = {
    {"dev", -5},  {"model", -8}, {"mode", -7},  {"wk", 2},      {"pf", 2},     {"pin", 3},
    {"nb", 3},    {"batch", 5},  {"|", 1},      {"ep", 3},      {"time_s", 8}, {"img/s", 8},
    {"wait%", 5}, {"copy%", 5},  {"comp%", 5},  {"comm%", 5},   {"other%", 6}, {"wmax%@rk", 8},
    {"io_MB", 7}, {"MB/s", 6},   {"req", 5},    {"retry", 5},   {"hit%", 5},   {"gpu%avg/mx", 10},
    {"busy%", 5}, {"h2d%", 5},   {"ovl%", 5},   {"sm%/occ", 7}, {"loss", 7},   {"acc", 6},
    {"val", 6},   {"rss_MB", 7}, {"pss_MB", 7}, {"pin_MB", 6},  {"gpu_MB", 6}, {"skip", 4},
    {"cache", 0},
};

/* h2d% and ovl% exist only with the device's activity records */
static int from_activity(const epoch_rec *r)
{
    return r->gpu_busy_from && !strcmp(r->gpu_busy_from, "activity");
}

static void print_cells(FILE *f, char cell[NCOLS][32], uint64_t hide)
{
    int first = 1;
    for (int c = 0; c < NCOLS; c++) {
        if (hide >> c & 1)
            continue;
        fprintf(f, "%s%*s", first ? "" : " ", cols[c].width, cell[c]);
        first = 0;
    }
    fputc('\n', f);
}

/* v formatted with fmt, or `na` when it does not apply (NaN) */
static const char *fmt_num(char *b, size_t n, const char *fmt, double v, const char *na)
{
    if (isnan(v))
        snprintf(b, n, "%s", na);
    else
        snprintf(b, n, fmt, v);
    return b;
}

/* v in at most `width` characters: %.4f where that fits and is not a
 * tiny value rounded to 0.0000, else the most significant digits %g
 * fits (a loss blown up by a large --lr: 7.9e+28); the JSON keeps every
 * digit */
static const char *fmt_fit(char *b, size_t n, double v, int width, const char *na)
{
    if (isnan(v)) {
        snprintf(b, n, "%s", na);
        return b;
    }
    if (snprintf(b, n, "%.4f", v) <= width && (v == 0 || fabs(v) >= 1e-3))
        return b;
    for (int digits = width; digits > 1; digits--)
        if (snprintf(b, n, "%.*g", digits, v) <= width)
            return b;
    snprintf(b, n, "%.1g", v);
    return b;
}

static void epoch_cells(const epoch_rec *r, char cell[NCOLS][32])
{
    const size_t n = 32;
    snprintf(cell[C_DEV], n, "%s", r->cfg.device);
    snprintf(cell[C_MODEL], n, "%.31s", r->cfg.model);
    snprintf(cell[C_MODE], n, "%s", r->cfg.mode);
    snprintf(cell[C_WK], n, "%d", r->cfg.workers);
    snprintf(cell[C_PF], n, "%d", r->cfg.prefetch);
    snprintf(cell[C_PIN], n, "%s", onoff(r->cfg.pin));
    snprintf(cell[C_NB], n, "%s", onoff(r->cfg.non_blocking));
    snprintf(cell[C_BATCH], n, "%d", r->cfg.batch);
    snprintf(cell[C_BAR], n, "|");
    snprintf(cell[C_EP], n, "%2d%s", r->epoch, r->warmup ? "w" : " ");
    snprintf(cell[C_TIME], n, "%.2f", r->epoch_s);
    snprintf(cell[C_RATE], n, "%.0f", r->images_per_s);
    fmt_num(cell[C_WAIT], n, "%.1f", r->data_wait_pct, "n/a");
    fmt_num(cell[C_COPY], n, "%.1f", r->copy_pct, "n/a");
    fmt_num(cell[C_COMP], n, "%.1f", r->compute_pct, "n/a");
    fmt_num(cell[C_COMM], n, "%.1f", r->comm_pct, "n/a");
    fmt_num(cell[C_OTHER], n, "%.1f",
            report_other_pct(r->data_wait_pct, r->copy_pct, r->compute_pct,
                             r->ranks > 1 ? r->comm_pct : NAN),
            "n/a");
    if (r->ranks > 1)
        snprintf(cell[C_RKWAIT], n, "%.1f@%d", r->wait_max_pct, r->wait_max_rank);
    else
        snprintf(cell[C_RKWAIT], n, "n/a");
    snprintf(cell[C_IOMB], n, "%.1f", (double)r->io_bytes / (1024.0 * 1024.0));
    snprintf(cell[C_IORATE], n, "%.1f", r->io_mb_s);
    snprintf(cell[C_IOREQ], n, "%llu", (unsigned long long)r->io_requests);
    snprintf(cell[C_IORETRY], n, "%llu", (unsigned long long)r->io_retries);
    fmt_num(cell[C_IOHIT], n, "%.1f", report_hit_pct(r->cache_hits, r->cache_downloads), "n/a");
    if (isnan(r->gpu_util_avg))
        snprintf(cell[C_GPU], n, "n/a");
    else
        snprintf(cell[C_GPU], n, "%.0f/%.0f", r->gpu_util_avg, r->gpu_util_max);
    fmt_num(cell[C_BUSY], n, "%.1f", r->gpu_busy_pct, "n/a");
    fmt_num(cell[C_H2D], n, "%.1f", from_activity(r) ? r->gpu_h2d_pct : NAN, "n/a");
    fmt_num(cell[C_OVL], n, "%.1f", from_activity(r) ? r->gpu_overlap_pct : NAN, "n/a");
    if (isnan(r->gpu_sm_pct))
        snprintf(cell[C_SM], n, "n/a");
    else
        snprintf(cell[C_SM], n, "%.0f/%.0f", r->gpu_sm_pct, r->gpu_occ_pct);
    fmt_fit(cell[C_LOSS], n, r->loss, cols[C_LOSS].width, "n/a");
    fmt_num(cell[C_ACC], n, "%.3f", r->train_acc, "n/a");
    fmt_num(cell[C_VAL], n, "%.3f", r->val_acc, "n/a");
    snprintf(cell[C_RSS], n, "%.1f", r->rss_mb);
    snprintf(cell[C_PSS], n, "%.1f", r->pss_mb);
    snprintf(cell[C_PINMB], n, "%.1f", r->pinned_mb);
    fmt_num(cell[C_GPUMB], n, "%.0f", r->gpu_proc_mb, "n/a");
    snprintf(cell[C_SKIP], n, "%llu", (unsigned long long)r->skipped);
    snprintf(cell[C_CACHE], n, "%s", r->cache);
}

int report_width(FILE *f)
{
    struct winsize ws;
    if (isatty(fileno(f)) && ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *c = getenv("COLUMNS");
    long long v;
    if (c && parse_i64(c, &v) == 0 && v > 0 && v < 100000)
        return (int)v;
    return 0;
}

static int table_width(const epoch_rec *r, uint64_t hide)
{
    char cell[NCOLS][32];
    epoch_cells(r, cell);
    int w = -1;
    for (int c = 0; c < NCOLS; c++)
        if (!(hide >> c & 1))
            w += 1 + (int)(abs(cols[c].width) > (int)strlen(cell[c]) ? abs(cols[c].width)
                                                                     : strlen(cell[c]));
    return w;
}

uint64_t report_columns(const epoch_rec *first, int width)
{
    /* one process: the ranks' columns do not exist; local data: the I/O's */
    uint64_t solo = first->ranks > 1 ? 0 : COL(C_COMM) | COL(C_RKWAIT);
    if (!first->io_remote)
        solo |= COL(C_IOMB) | COL(C_IORATE) | COL(C_IOREQ) | COL(C_IORETRY) | COL(C_IOHIT);
    if (width <= 0 || table_width(first, solo) <= width)
        return solo;
    uint64_t hide = solo;
    if (!strcmp(first->cfg.device, "cpu")) /* GPU staging: nothing to pin, copy or overlap */
        hide |= COL(C_PIN) | COL(C_NB) | COL(C_COPY) | COL(C_PINMB);
    /* n/a in the first epoch stays n/a: no NVML, no device timing, no
     * model (--loader-only), no validation set */
    const struct {
        enum col c;
        double v;
    } na[] = {{C_GPU, first->gpu_util_avg}, {C_BUSY, first->gpu_busy_pct},
              {C_SM, first->gpu_sm_pct},    {C_GPUMB, first->gpu_proc_mb},
              {C_COMP, first->compute_pct}, {C_LOSS, first->loss},
              {C_ACC, first->train_acc},    {C_VAL, first->val_acc}};
    for (size_t i = 0; i < sizeof na / sizeof na[0]; i++)
        if (isnan(na[i].v))
            hide |= COL(na[i].c);
    if (!from_activity(first)) /* copy engines and overlap: activity records only */
        hide |= COL(C_H2D) | COL(C_OVL);
    return hide;
}

void report_header(FILE *f, uint64_t hide)
{
    char cell[NCOLS][32];
    for (int c = 0; c < NCOLS; c++)
        snprintf(cell[c], sizeof cell[c], "%s", cols[c].name);
    print_cells(f, cell, hide);
}

void report_epoch_line(FILE *f, const epoch_rec *r, uint64_t hide)
{
    char cell[NCOLS][32];
    epoch_cells(r, cell);
    print_cells(f, cell, hide);
    fflush(f);
}

/* v's characters escaped for a JSON string (bytes >= 0x80 pass: UTF-8) */
static void json_chars(FILE *f, const char *v)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
}

static void json_str(FILE *f, const char *key, const char *v)
{
    fprintf(f, "\"%s\":", key);
    if (!v) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    json_chars(f, v);
    fputc('"', f);
}

static void json_num(FILE *f, const char *key, double v)
{
    if (isnan(v) || isinf(v))
        fprintf(f, ",\"%s\":null", key);
    else
        fprintf(f, ",\"%s\":%.6g", key, v);
}

/* every bit of a double, so runs can be compared exactly */
static void json_exact(FILE *f, const char *key, double v)
{
    if (isnan(v) || isinf(v))
        fprintf(f, ",\"%s\":null", key);
    else
        fprintf(f, ",\"%s\":%.17g", key, v);
}

static void json_config(FILE *f, const run_config *c)
{
    json_str(f, "device", c->device);
    fputc(',', f);
    json_str(f, "model", c->model);
    fputc(',', f);
    json_str(f, "mode", c->mode);
    fprintf(f, ",\"workers\":%d,\"prefetch\":%d,\"pin\":%s,\"non_blocking\":%s,\"batch\":%d",
            c->workers, c->prefetch, c->pin ? "true" : "false", c->non_blocking ? "true" : "false",
            c->batch);
}

static void json_machine(FILE *f, const machine_info *m)
{
    fprintf(f, ",\"cores\":%d,", m->cores);
    json_str(f, "cpu_model", m->cpu);
    fputc(',', f);
    json_str(f, "gpu_name", m->gpu[0] ? m->gpu : NULL);
}

static void json_size(FILE *f, const char *key, int h, int w)
{
    if (h > 0 && w > 0)
        fprintf(f, ",\"%s\":[%d,%d]", key, h, w);
    else
        fprintf(f, ",\"%s\":null", key);
}

/* ,"key":["a","b",...] */
static void json_argv(FILE *f, const char *key, int argc, char *const *argv)
{
    fprintf(f, ",\"%s\":[", key);
    for (int i = 0; i < argc; i++) {
        fputs(i ? ",\"" : "\"", f);
        json_chars(f, argv[i]);
        fputc('"', f);
    }
    fputc(']', f);
}

static void json_floats(FILE *f, const char *key, const float *v, int n)
{
    fprintf(f, ",\"%s\":[", key);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%.6g", i ? "," : "", (double)v[i]);
    fputc(']', f);
}

static const char *decode_name(int d)
{
    return d == IMG_DECODE_EXACT ? "exact" : d == IMG_DECODE_FAST ? "fast" : "auto";
}

/* Every transform and setting that changes the batches the model sees.
 * resize, resize_short and crop are the Resize + CenterCrop: training's,
 * and validation's too; with the random-resized crop, which cuts
 * training's samples instead, validation's (the --resize and --crop). */
static void json_transforms(FILE *f, const run_header *h)
{
    const img_params *p = h->img, *v = h->eval ? h->eval : h->img;
    json_size(f, "resize", v->resize_h, v->resize_w);
    if (v->resize_short > 0)
        fprintf(f, ",\"resize_short\":%d", v->resize_short);
    else
        fputs(",\"resize_short\":null", f);
    json_size(f, "crop", v->crop_h, v->crop_w);
    if (p->rrc) {
        /* 0 0: torchvision's defaults (image.h) */
        float s0 = p->rrc_scale[0], s1 = p->rrc_scale[1], r0 = p->rrc_ratio[0],
              r1 = p->rrc_ratio[1];
        if (s0 == 0 && s1 == 0)
            s0 = 0.08f, s1 = 1;
        if (r0 == 0 && r1 == 0)
            r0 = 3.0f / 4, r1 = 4.0f / 3;
        fprintf(f,
                ",\"random_resized_crop\":{\"size\":[%d,%d],\"scale\":[%.6g,%.6g],"
                "\"ratio\":[%.6g,%.6g]}",
                p->crop_h, p->crop_w, (double)s0, (double)s1, (double)r0, (double)r1);
    } else {
        fputs(",\"random_resized_crop\":null", f);
    }
    fprintf(f, ",\"random_crop\":%s,\"pad\":%s", p->random_crop ? "true" : "false",
            p->pad ? "true" : "false");
    json_num(f, "hflip", p->hflip);
    if (p->jitter[0] > 0 || p->jitter[1] > 0 || p->jitter[2] > 0)
        json_floats(f, "color_jitter", p->jitter, 3);
    else
        fputs(",\"color_jitter\":null", f);
    fputs(",\"normalize\":{", f);
    json_str(f, "preset", h->normalize_imagenet ? "imagenet" : NULL);
    if (h->mean && h->std) {
        json_floats(f, "mean", h->mean, h->channels);
        json_floats(f, "std", h->std, h->channels);
    }
    fputc('}', f);
    fprintf(f, ",\"decode\":\"%s\",\"exif\":%s,\"shuffle\":%s,\"drop_last\":%s",
            decode_name(p->decode), p->exif ? "true" : "false", h->shuffle ? "true" : "false",
            h->drop_last ? "true" : "false");
}

/* 0, or the errno of the first write that failed (EIO when none was set):
 * the caller says so and keeps no partial file */
static int json_done(FILE *f)
{
    int err = errno;
    if (fflush(f) != 0 && !err)
        err = errno;
    return ferror(f) ? (err ? err : EIO) : 0;
}

int report_run_json(FILE *f, const run_header *h, const machine_info *m)
{
    errno = 0;
    char when[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    fputs("{\"record\":\"run\",", f);
    json_str(f, "version", h->version);
    fputc(',', f);
    json_str(f, "time", when);
    if (h->sweep_argv) { /* the user's; this configuration's after it */
        fprintf(f, ",\"argv\":%s", h->sweep_argv);
        json_argv(f, "run_argv", h->argc, h->argv);
    } else {
        json_argv(f, "argv", h->argc, h->argv);
    }
    fputc(',', f);
    json_str(f, "data", h->data);
    fputc(',', f);
    json_str(f, "val", h->val);
    fprintf(f, ",\"samples\":%u,\"val_samples\":%u,\"classes\":%u", h->samples, h->val_samples,
            h->classes);
    json_size(f, "first_image", h->first_h, h->first_w);
    fprintf(f, ",\"input\":[%d,%d,%d]", h->channels, h->out_h, h->out_w);
    json_transforms(f, h);
    fprintf(f, ",\"seed\":%llu,\"epochs\":%d,", (unsigned long long)h->seed, h->epochs);
    json_config(f, &h->cfg);
    json_machine(f, m);
    fputs("}\n", f);
    return json_done(f);
}

/* ,"ranks":K,"comm_pct":..,"rank_images_per_s":[..],"rank_wait_pct":[..],... */
static void json_ranks(FILE *f, const epoch_rec *r)
{
    fprintf(f, ",\"ranks\":%d", r->ranks);
    json_num(f, "comm_pct", r->comm_pct);
    fprintf(f, ",\"reduced_bytes_per_step\":%llu", (unsigned long long)r->reduced_bytes);
    json_num(f, "wait_max_pct", r->wait_max_pct);
    fprintf(f, ",\"wait_max_rank\":%d,", r->wait_max_rank);
    json_str(f, "wait_max_host", r->wait_max_host);
    for (int k = 0; k < 2 && r->per_rank; k++) {
        fprintf(f, ",\"%s\":[", k ? "rank_wait_pct" : "rank_images_per_s");
        for (int i = 0; i < r->ranks; i++)
            fprintf(f, "%s%.6g", i ? "," : "", r->per_rank[2 * i + k]);
        fputc(']', f);
    }
}

int report_epoch_json(FILE *f, const epoch_rec *r, const machine_info *m)
{
    errno = 0;
    fputs("{\"record\":\"epoch\",", f);
    json_config(f, &r->cfg);
    fprintf(f, ",\"epoch\":%d,\"warmup\":%s,\"images\":%llu", r->epoch,
            r->warmup ? "true" : "false", (unsigned long long)r->images);
    json_num(f, "epoch_s", r->epoch_s);
    json_num(f, "images_per_s", r->images_per_s);
    json_num(f, "data_wait_pct", r->data_wait_pct);
    json_num(f, "copy_pct", r->copy_pct);
    json_num(f, "compute_pct", r->compute_pct);
    json_num(f, "other_pct",
             report_other_pct(r->data_wait_pct, r->copy_pct, r->compute_pct,
                              r->ranks > 1 ? r->comm_pct : NAN));
    json_num(f, "gpu_util_avg", r->gpu_util_avg);
    json_num(f, "gpu_util_max", r->gpu_util_max);
    json_num(f, "gpu_busy_pct", r->gpu_busy_pct);
    json_num(f, "gpu_util_samples", r->gpu_util_n);
    json_num(f, "gpu_sm_pct", r->gpu_sm_pct);
    json_num(f, "gpu_occupancy_pct", r->gpu_occ_pct);
    json_num(f, "gpu_proc_mb", r->gpu_proc_mb);
    json_num(f, "gpu_dev_mem_mb", r->gpu_dev_mem_mb);
    fputc(',', f);
    json_str(f, "gpu_busy_from", r->gpu_busy_from);
    json_num(f, "gpu_span_pct", r->gpu_busy_from ? r->gpu_span_pct : NAN);
    json_num(f, "gpu_h2d_pct", from_activity(r) ? r->gpu_h2d_pct : NAN);
    json_num(f, "gpu_d2h_pct", from_activity(r) ? r->gpu_d2h_pct : NAN);
    json_num(f, "gpu_overlap_pct", from_activity(r) ? r->gpu_overlap_pct : NAN);
    if (from_activity(r))
        fprintf(f, ",\"gpu_activity_dropped\":%lu", r->gpu_act_dropped);
    json_exact(f, "loss", r->loss);
    json_num(f, "train_acc", r->train_acc);
    json_exact(f, "val_loss", r->val_loss);
    json_num(f, "val_acc", r->val_acc);
    json_num(f, "lr", r->lr);
    json_num(f, "rss_mb", r->rss_mb);
    json_num(f, "pss_mb", r->pss_mb);
    json_num(f, "pinned_mb", r->pinned_mb);
    if (r->ranks > 1)
        json_ranks(f, r);
    fprintf(f,
            ",\"io_bytes\":%llu,\"io_requests\":%llu,\"io_retries\":%llu,\"cache_hits\":%llu,"
            "\"cache_downloads\":%llu",
            (unsigned long long)r->io_bytes, (unsigned long long)r->io_requests,
            (unsigned long long)r->io_retries, (unsigned long long)r->cache_hits,
            (unsigned long long)r->cache_downloads);
    json_num(f, "io_mb_s", r->io_mb_s);
    json_num(f, "io_wait_s", r->io_wait_s);
    json_num(f, "fill_s", r->fill_s);
    fprintf(f, ",\"procs\":%d,\"skipped\":%llu,", r->procs, (unsigned long long)r->skipped);
    json_str(f, "cache", r->cache);
    json_machine(f, m);
    fputs("}\n", f);
    return json_done(f);
}

int report_summary_json(FILE *f, const summary_rec *s, const machine_info *m)
{
    errno = 0;
    fputs("{\"record\":\"summary\",", f);
    json_config(f, &s->cfg);
    fprintf(f, ",\"epochs\":%d,\"status\":%d,", s->epochs, s->status);
    json_str(f, "error", s->reason);
    if (s->note) {
        fputc(',', f);
        json_str(f, "note", s->note);
    }
    json_num(f, "epoch_s_median", s->epoch_s_median);
    json_num(f, "images_per_s", s->images_per_s);
    json_num(f, "data_wait_pct", s->data_wait_pct);
    json_num(f, "copy_pct", s->copy_pct);
    json_num(f, "compute_pct", s->compute_pct);
    if (!isnan(s->comm_pct))
        json_num(f, "comm_pct", s->comm_pct);
    json_num(f, "other_pct",
             report_other_pct(s->data_wait_pct, s->copy_pct, s->compute_pct, s->comm_pct));
    json_num(f, "gpu_util_avg", s->gpu_util_avg);
    json_num(f, "final_loss", s->final_loss);
    json_num(f, "final_train_acc", s->final_train_acc);
    json_num(f, "final_val_acc", s->final_val_acc);
    json_num(f, "pss_mb_max", s->pss_mb_max);
    json_num(f, "preload_build_s", s->preload_build_s);
    fprintf(f, ",\"io_remote\":%s,\"io_bytes\":%llu,\"io_requests\":%llu",
            s->io_remote ? "true" : "false", (unsigned long long)s->io_bytes,
            (unsigned long long)s->io_requests);
    json_num(f, "io_wait_s", s->io_wait_s);
    json_num(f, "fill_s", s->fill_s);
    json_machine(f, m);
    fputs("}\n", f);
    return json_done(f);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void report_summarise(const epoch_rec *recs, int n, double build_s, summary_rec *s)
{
    memset(s, 0, sizeof *s);
    s->preload_build_s = build_s;
    s->epoch_s_median = s->images_per_s = s->gpu_util_avg = NAN;
    s->data_wait_pct = s->copy_pct = s->compute_pct = s->comm_pct = NAN;
    s->final_loss = s->final_train_acc = s->final_val_acc = NAN;
    if (n > 0)
        s->cfg = recs[0].cfg;
    double *t = xmalloc(sizeof(double) * (size_t)(n ? n : 1));
    double secs = 0, images = 0, wait = 0, copy = 0, comp = 0, comm = 0, gpu = 0;
    int m = 0, ngpu = 0;
    for (int i = 0; i < n; i++) {
        const epoch_rec *r = &recs[i];
        if (r->pss_mb > s->pss_mb_max)
            s->pss_mb_max = r->pss_mb;
        s->final_loss = r->loss;
        s->final_train_acc = r->train_acc;
        s->final_val_acc = r->val_acc;
        if (r->warmup)
            continue;
        s->io_remote = r->io_remote;
        s->io_bytes += r->io_bytes;
        s->io_requests += r->io_requests;
        s->io_wait_s += r->io_wait_s;
        s->fill_s += r->fill_s;
        t[m++] = r->epoch_s;
        secs += r->epoch_s;
        images += (double)r->images;
        wait += r->data_wait_pct * r->epoch_s;
        copy += r->copy_pct * r->epoch_s;
        comp += r->compute_pct * r->epoch_s;
        comm += r->ranks > 1 ? r->comm_pct * r->epoch_s : NAN;
        if (!isnan(r->gpu_util_avg)) {
            gpu += r->gpu_util_avg;
            ngpu++;
        }
    }
    s->epochs = m;
    if (m > 0) {
        qsort(t, (size_t)m, sizeof *t, cmp_double);
        s->epoch_s_median = m % 2 ? t[m / 2] : (t[m / 2 - 1] + t[m / 2]) / 2;
        s->images_per_s = secs > 0 ? images / secs : NAN;
        s->data_wait_pct = wait / secs;
        s->copy_pct = copy / secs;
        s->compute_pct = comp / secs;
        s->comm_pct = comm / secs;
        if (ngpu)
            s->gpu_util_avg = gpu / ngpu;
    }
    free(t);
}

/* Minimal reader for the records we write ourselves. */
static const char *json_find(const char *line, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    return p ? p + strlen(pat) : NULL;
}

static double json_get_num(const char *line, const char *key)
{
    const char *p = json_find(line, key);
    if (!p || !strncmp(p, "null", 4))
        return NAN;
    if (!strncmp(p, "true", 4))
        return 1;
    if (!strncmp(p, "false", 5))
        return 0;
    return strtod(p, NULL);
}

/* a count: 0 when absent (a record from before it existed) */
static uint64_t json_get_u64(const char *line, const char *key)
{
    const char *p = json_find(line, key);
    return p && *p >= '0' && *p <= '9' ? strtoull(p, NULL, 10) : 0;
}

static const char *json_get_str(const char *line, const char *key, char **buf, size_t *left)
{
    const char *p = json_find(line, key);
    if (!p || *p != '"')
        return "?";
    p++;
    char *out = *buf;
    size_t n = 0;
    while (*p && *p != '"' && n + 1 < *left) {
        if (*p == '\\' && p[1])
            p++;
        out[n++] = *p++;
    }
    out[n++] = '\0';
    *buf += n;
    *left -= n;
    return out;
}

int report_parse_summary(const char *line, summary_rec *s, char *strbuf, size_t len)
{
    if (!strstr(line, "\"record\":\"summary\""))
        return -1;
    memset(s, 0, sizeof *s);
    s->cfg.device = json_get_str(line, "device", &strbuf, &len);
    s->cfg.model = json_get_str(line, "model", &strbuf, &len);
    s->cfg.mode = json_get_str(line, "mode", &strbuf, &len);
    s->cfg.workers = (int)json_get_num(line, "workers");
    s->cfg.prefetch = (int)json_get_num(line, "prefetch");
    s->cfg.pin = (int)json_get_num(line, "pin");
    s->cfg.non_blocking = (int)json_get_num(line, "non_blocking");
    s->cfg.batch = (int)json_get_num(line, "batch");
    s->epochs = (int)json_get_num(line, "epochs");
    s->status = (int)json_get_num(line, "status");
    s->epoch_s_median = json_get_num(line, "epoch_s_median");
    s->images_per_s = json_get_num(line, "images_per_s");
    s->data_wait_pct = json_get_num(line, "data_wait_pct");
    s->copy_pct = json_get_num(line, "copy_pct");
    s->compute_pct = json_get_num(line, "compute_pct");
    s->comm_pct = json_get_num(line, "comm_pct");
    s->gpu_util_avg = json_get_num(line, "gpu_util_avg");
    s->final_loss = json_get_num(line, "final_loss");
    s->final_train_acc = json_get_num(line, "final_train_acc");
    s->final_val_acc = json_get_num(line, "final_val_acc");
    s->pss_mb_max = json_get_num(line, "pss_mb_max");
    s->preload_build_s = json_get_num(line, "preload_build_s");
    s->io_remote = json_get_num(line, "io_remote") == 1;
    s->io_bytes = json_get_u64(line, "io_bytes");
    s->io_requests = json_get_u64(line, "io_requests");
    s->io_wait_s = json_get_num(line, "io_wait_s");
    s->fill_s = json_get_num(line, "fill_s");
    s->note = json_find(line, "note") ? json_get_str(line, "note", &strbuf, &len) : NULL;
    s->asked_pin = s->asked_nb = -1;
    return 0;
}

/* "on", "off", or "on->off" when the sweep asked for one and the run did
 * the other (--pin on the CPU runs unpinned) */
static const char *asked_ran(char *b, size_t n, int asked, int ran)
{
    if (asked < 0 || !asked == !ran)
        snprintf(b, n, "%s", onoff(ran));
    else
        snprintf(b, n, "%s->%s", onoff(asked), onoff(ran));
    return b;
}

void report_sweep_table(FILE *f, const summary_rec *s, int n)
{
    int wpin = 3, wnb = 3; /* wider where a row shows asked->ran */
    for (int i = 0; i < n; i++) {
        char b[16];
        int lp = (int)strlen(asked_ran(b, sizeof b, s[i].asked_pin, s[i].cfg.pin)),
            ln = (int)strlen(asked_ran(b, sizeof b, s[i].asked_nb, s[i].cfg.non_blocking));
        wpin = lp > wpin ? lp : wpin;
        wnb = ln > wnb ? ln : wnb;
    }
    fprintf(f,
            "\nsummary (median epoch time of counted epochs; speed-up against the first row "
            "that ran%s):\n",
            wpin > 3 || wnb > 3 ? "; pin, nb: asked->ran" : "");
    fprintf(f, "%-5s %-7s %2s %2s %*s %*s %5s | %8s %8s %5s %5s %5s %6s %6s %7s %6s %7s %8s\n",
            "dev", "mode", "wk", "pf", wpin, "pin", wnb, "nb", "batch", "epoch_s", "img/s", "wait%",
            "copy%", "comp%", "other%", "gpu%", "pss_MB", "val", "build_s", "speed-up");
    double base = NAN; /* a failed first configuration is no baseline */
    for (int i = 0; i < n && isnan(base); i++)
        if (s[i].status == 0 && s[i].epoch_s_median > 0)
            base = s[i].epoch_s_median;
    for (int i = 0; i < n; i++) {
        const summary_rec *r = &s[i];
        char gpu[16], val[16], build[16], up[16], pin[16], nb[16], other[16];
        fmt_num(gpu, sizeof gpu, "%.1f", r->gpu_util_avg, "n/a");
        fmt_num(val, sizeof val, "%.3f", r->final_val_acc, "n/a");
        fmt_num(build, sizeof build, "%.2f", r->preload_build_s, "-");
        fmt_num(other, sizeof other, "%.1f",
                report_other_pct(r->data_wait_pct, r->copy_pct, r->compute_pct, r->comm_pct),
                "n/a");
        if (r->status != 0)
            snprintf(up, sizeof up, "failed(%d)", r->status);
        else if (isnan(base) || isnan(r->epoch_s_median) || r->epoch_s_median <= 0)
            snprintf(up, sizeof up, "n/a");
        else
            snprintf(up, sizeof up, "%.2fx", base / r->epoch_s_median);
        fprintf(f,
                "%-5s %-7s %2d %2d %*s %*s %5d | %8.2f %8.0f %5.1f %5.1f %5.1f %6s %6s %7.1f %6s "
                "%7s %8s\n",
                r->cfg.device, r->cfg.mode, r->cfg.workers, r->cfg.prefetch, wpin,
                asked_ran(pin, sizeof pin, r->asked_pin, r->cfg.pin), wnb,
                asked_ran(nb, sizeof nb, r->asked_nb, r->cfg.non_blocking), r->cfg.batch,
                r->epoch_s_median, r->images_per_s, r->data_wait_pct, r->copy_pct, r->compute_pct,
                other, gpu, r->pss_mb_max, val, build, up);
    }
    fflush(f);
}

void report_progress(int enabled, const char *what, uint64_t done, uint64_t total, double elapsed,
                     uint64_t images)
{
    if (!enabled || total == 0)
        return;
    int width = 30, fill = (int)((double)done / (double)total * width);
    char bar[32];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    double rate = elapsed > 0 ? (double)images / elapsed : 0;
    double eta = done > 0 ? elapsed * (double)(total - done) / (double)done : 0;
    fprintf(stderr, "\r%-10s [%s] %llu/%llu  %.0f img/s  ETA %.0f s   ", what, bar,
            (unsigned long long)done, (unsigned long long)total, rate, eta);
    fflush(stderr);
}

void report_progress_end(int enabled)
{
    if (enabled)
        fprintf(stderr, "\r%100s\r", "");
}
