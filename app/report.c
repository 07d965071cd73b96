/* report.c — see report.h. */
#define _POSIX_C_SOURCE 200809L
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

static const char *onoff(int v) { return v ? "on" : "off"; }

void report_header(FILE *f)
{
    fprintf(f, "%-5s %-7s %-7s %2s %2s %3s %3s %5s | %3s %8s %8s %5s %5s %5s %9s %5s %7s %6s %6s "
               "%7s %7s %6s %4s %s\n",
            "dev", "model", "mode", "wk", "pf", "pin", "nb", "batch", "ep", "time_s", "img/s",
            "wait%", "copy%", "comp%", "gpu%avg/mx", "busy%", "loss", "acc", "val", "rss_MB",
            "pss_MB", "pin_MB", "skip", "cache");
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

void report_epoch_line(FILE *f, const epoch_rec *r)
{
    char wait[16], copy[16], comp[16], gpu[24], busy[16], loss[16], acc[16], val[16];
    fmt_num(wait, sizeof wait, "%.1f", r->data_wait_pct, "n/a");
    fmt_num(busy, sizeof busy, "%.1f", r->gpu_busy_pct, "n/a");
    fmt_num(copy, sizeof copy, "%.1f", r->copy_pct, "n/a");
    fmt_num(comp, sizeof comp, "%.1f", r->compute_pct, "n/a");
    if (isnan(r->gpu_util_avg))
        snprintf(gpu, sizeof gpu, "n/a");
    else
        snprintf(gpu, sizeof gpu, "%.0f/%.0f", r->gpu_util_avg, r->gpu_util_max);
    fmt_num(loss, sizeof loss, "%.4f", r->loss, "n/a");
    fmt_num(acc, sizeof acc, "%.3f", r->train_acc, "n/a");
    fmt_num(val, sizeof val, "%.3f", r->val_acc, "n/a");
    fprintf(f, "%-5s %-7s %-7s %2d %2d %3s %3s %5d | %2d%s %8.2f %8.0f %5s %5s %5s %9s %5s %7s %6s "
               "%6s %7.1f %7.1f %6.1f %4llu %s\n",
            r->cfg.device, r->cfg.model, r->cfg.mode, r->cfg.workers, r->cfg.prefetch,
            onoff(r->cfg.pin), onoff(r->cfg.non_blocking), r->cfg.batch, r->epoch,
            r->warmup ? "w" : " ", r->epoch_s, r->images_per_s, wait, copy, comp, gpu, busy, loss,
            acc, val, r->rss_mb, r->pss_mb, r->pinned_mb, (unsigned long long)r->skipped, r->cache);
    fflush(f);
}

static void json_str(FILE *f, const char *key, const char *v)
{
    fprintf(f, "\"%s\":", key);
    if (!v) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
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

void report_epoch_json(FILE *f, const epoch_rec *r, const machine_info *m)
{
    fputs("{\"record\":\"epoch\",", f);
    json_config(f, &r->cfg);
    fprintf(f, ",\"epoch\":%d,\"warmup\":%s,\"images\":%llu", r->epoch, r->warmup ? "true" : "false",
            (unsigned long long)r->images);
    json_num(f, "epoch_s", r->epoch_s);
    json_num(f, "images_per_s", r->images_per_s);
    json_num(f, "data_wait_pct", r->data_wait_pct);
    json_num(f, "copy_pct", r->copy_pct);
    json_num(f, "compute_pct", r->compute_pct);
    json_num(f, "gpu_util_avg", r->gpu_util_avg);
    json_num(f, "gpu_util_max", r->gpu_util_max);
    json_num(f, "gpu_busy_pct", r->gpu_busy_pct);
    json_num(f, "gpu_mem_mb", r->gpu_mem_mb);
    json_exact(f, "loss", r->loss);
    json_num(f, "train_acc", r->train_acc);
    json_exact(f, "val_loss", r->val_loss);
    json_num(f, "val_acc", r->val_acc);
    json_num(f, "lr", r->lr);
    json_num(f, "rss_mb", r->rss_mb);
    json_num(f, "pss_mb", r->pss_mb);
    json_num(f, "pinned_mb", r->pinned_mb);
    fprintf(f, ",\"procs\":%d,\"skipped\":%llu,", r->procs, (unsigned long long)r->skipped);
    json_str(f, "cache", r->cache);
    json_machine(f, m);
    fputs("}\n", f);
    fflush(f);
}

void report_summary_json(FILE *f, const summary_rec *s, const machine_info *m)
{
    fputs("{\"record\":\"summary\",", f);
    json_config(f, &s->cfg);
    fprintf(f, ",\"epochs\":%d,\"status\":%d,", s->epochs, s->status);
    json_str(f, "error", s->reason);
    json_num(f, "epoch_s_median", s->epoch_s_median);
    json_num(f, "images_per_s", s->images_per_s);
    json_num(f, "data_wait_pct", s->data_wait_pct);
    json_num(f, "copy_pct", s->copy_pct);
    json_num(f, "compute_pct", s->compute_pct);
    json_num(f, "gpu_util_avg", s->gpu_util_avg);
    json_num(f, "final_loss", s->final_loss);
    json_num(f, "final_train_acc", s->final_train_acc);
    json_num(f, "final_val_acc", s->final_val_acc);
    json_num(f, "pss_mb_max", s->pss_mb_max);
    json_num(f, "preload_build_s", s->preload_build_s);
    json_machine(f, m);
    fputs("}\n", f);
    fflush(f);
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
    s->data_wait_pct = s->copy_pct = s->compute_pct = NAN;
    s->final_loss = s->final_train_acc = s->final_val_acc = NAN;
    if (n > 0)
        s->cfg = recs[0].cfg;
    double *t = xmalloc(sizeof(double) * (size_t)(n ? n : 1));
    double secs = 0, images = 0, wait = 0, copy = 0, comp = 0, gpu = 0;
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
        t[m++] = r->epoch_s;
        secs += r->epoch_s;
        images += (double)r->images;
        wait += r->data_wait_pct * r->epoch_s;
        copy += r->copy_pct * r->epoch_s;
        comp += r->compute_pct * r->epoch_s;
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
    s->gpu_util_avg = json_get_num(line, "gpu_util_avg");
    s->final_loss = json_get_num(line, "final_loss");
    s->final_train_acc = json_get_num(line, "final_train_acc");
    s->final_val_acc = json_get_num(line, "final_val_acc");
    s->pss_mb_max = json_get_num(line, "pss_mb_max");
    s->preload_build_s = json_get_num(line, "preload_build_s");
    return 0;
}

void report_sweep_table(FILE *f, const summary_rec *s, int n)
{
    fprintf(f, "\nsummary (median epoch time of counted epochs; speed-up against the first row):\n");
    fprintf(f, "%-5s %-7s %2s %2s %3s %3s %5s | %8s %8s %5s %5s %5s %6s %7s %6s %7s %8s\n", "dev",
            "mode", "wk", "pf", "pin", "nb", "batch", "epoch_s", "img/s", "wait%", "copy%",
            "comp%", "gpu%", "pss_MB", "val", "build_s", "speed-up");
    double base = n > 0 ? s[0].epoch_s_median : NAN;
    for (int i = 0; i < n; i++) {
        const summary_rec *r = &s[i];
        char gpu[16], val[16], build[16], up[16];
        fmt_num(gpu, sizeof gpu, "%.1f", r->gpu_util_avg, "n/a");
        fmt_num(val, sizeof val, "%.3f", r->final_val_acc, "n/a");
        fmt_num(build, sizeof build, "%.2f", r->preload_build_s, "-");
        if (r->status != 0)
            snprintf(up, sizeof up, "failed(%d)", r->status);
        else if (isnan(base) || isnan(r->epoch_s_median) || r->epoch_s_median <= 0)
            snprintf(up, sizeof up, "n/a");
        else
            snprintf(up, sizeof up, "%.2fx", base / r->epoch_s_median);
        fprintf(f, "%-5s %-7s %2d %2d %3s %3s %5d | %8.2f %8.0f %5.1f %5.1f %5.1f %6s %7.1f %6s %7s %8s\n",
                r->cfg.device, r->cfg.mode, r->cfg.workers, r->cfg.prefetch, onoff(r->cfg.pin),
                onoff(r->cfg.non_blocking), r->cfg.batch, r->epoch_s_median, r->images_per_s,
                r->data_wait_pct, r->copy_pct, r->compute_pct, gpu, r->pss_mb_max, val, build, up);
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
