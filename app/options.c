/* options.c — see options.h. One table drives parsing and --help. */
#define _GNU_SOURCE
#include "app/options.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "loader/cache.h"
#include "loader/dataset.h"
#include "nn/checkpoint.h"
#include "nn/model.h"

/* the option ids and the option table are tables: one entry per line */
/* clang-format off */
enum opt_id {
    O_HEADER, O_NO_HEADER, O_PATH_COL, O_LABEL_COL, O_ROOT, O_SKIP_BAD, O_CHECK, O_VAL,
    O_CHANNELS, O_RESIZE, O_CROP, O_RANDOM_CROP, O_PAD, O_HFLIP, O_RRC, O_DECODE, O_JITTER, O_EXIF,
    O_WORKERS, O_PREFETCH, O_BATCH, O_SHUFFLE, O_NO_SHUFFLE, O_ORDER, O_SHUFFLE_BUFFER, O_SEED, O_DROP_LAST, O_TIMEOUT,
    O_RESPAWN, O_MODE, O_CACHE, O_COLD, O_MEM_LIMIT, O_LOADER_ONLY,
    O_MODEL, O_DEVICE, O_THREADS, O_LR, O_MOMENTUM, O_WD, O_LR_SCHEDULE, O_EPOCHS, O_SAVE,
    O_RESUME, O_RESUME_ANY_DATA, O_MEAN, O_STD, O_NORMALIZE,
    O_PIN, O_NO_PIN, O_NON_BLOCKING, O_NO_NON_BLOCKING, O_PIN_FORCE, O_GPU_ACTIVITY, O_SELFTEST, O_VERSION,
    O_JSON, O_TRACE, O_WARMUP, O_DIAGNOSE, O_PROGRESS, O_NO_PROGRESS, O_HELP,
    O_SWEEP_CHILD, O_SUMMARY_OUT, O_TEST_SLOW_LOAD, O_TEST_SLOW_RANK, O_TEST_SLOW_STEP, O_MAX_BATCHES, O_DIAG_PHASE,
    O_DIAG_BATCHES, O_DIAG_SECONDS, O_MAX_SECONDS, O_GRAD_CHUNKS, O_DUMP_BATCHES, O_SPARSE_LABELS,
    O_SHARD_CACHE, O_SHARD_CACHE_SIZE, O_IO_TIMEOUT, O_IO_RETRIES, O_S3_ENDPOINT, O_READ_AHEAD,
};
/* clang-format on */

enum arg_kind {
    ARG_NONE, /* --flag */
    ARG_REQ,  /* --flag VALUE or --flag=VALUE */
    ARG_OPT,  /* --flag or --flag=VALUE (never a separate word) */
};

typedef struct opt_spec {
    const char *name;
    enum arg_kind kind;
    enum opt_id id;
    const char *meta;
    const char *help; /* NULL: hidden */
    int sweep;        /* accepts a comma list that a sweep varies */
} opt_spec;

/* clang-format off */
/* a section heading in --help: no name, the title as help */
#define SECTION(title) {NULL, ARG_NONE, 0, NULL, title, 0}
static const opt_spec table[] = {
    SECTION("Data (a CSV with a path column and a label column, a folder of class folders, or "
            "WebDataset tar shards)"),
    {"header", ARG_NONE, O_HEADER, NULL, "first row is a header (default: detect)", 0},
    {"no-header", ARG_NONE, O_NO_HEADER, NULL, "first row is data", 0},
    {"path-col", ARG_REQ, O_PATH_COL, "COL", "path column: name or 0-based number (path / 0)", 0},
    {"label-col", ARG_REQ, O_LABEL_COL, "COL", "label column: name or number (label / 1)", 0},
    {"root", ARG_REQ, O_ROOT, "DIR",
     "relative paths in the CSVs (training and --val) start here (default: each CSV's folder)",
     0},
    {"sparse-labels", ARG_NONE, O_SPARSE_LABELS, NULL,
     "accept integer labels whose largest is an outlier making over 1000 mostly unused classes "
     "(a warning, not exit 2)", 0},
    {"skip-bad", ARG_NONE, O_SKIP_BAD, NULL,
     "drop bad CSV rows and replace unreadable images, counted", 0},
    {"check", ARG_OPT, O_CHECK, "[=headers|decode]",
     "check the CSV and every image, then exit: headers (bare --check) proves each file exists and is "
     "a format and size train reads; decode decodes each in full (--workers threads) and lists every "
     "file training would refuse",
     0},
    {"val", ARG_REQ, O_VAL, "CSV|FOLDER|SHARDS", "validation set, evaluated after every epoch", 0},
    SECTION("Shards behind URLs (http://, https://, s3://bucket/key or s3://bucket/prefix/)"),
    {"shard-cache", ARG_REQ, O_SHARD_CACHE, "DIR",
     "keep downloaded shards here, shared by the node's processes and runs; %h: the host's name "
     "(default: a temporary folder, removed at exit)", 0},
    {"shard-cache-size", ARG_REQ, O_SHARD_CACHE_SIZE, "BYTES",
     "evict least recently used shards past this (default: half the folder's free space)", 0},
    {"read-ahead", ARG_REQ, O_READ_AHEAD, "N", "shards a fetcher process downloads ahead of the "
     "workers, in the order they will be read (default 2; 0: none)", 0},
    {"io-timeout", ARG_REQ, O_IO_TIMEOUT, "SEC", "a request with no byte for this long fails its try "
     "(default 30)", 0},
    {"io-retries", ARG_REQ, O_IO_RETRIES, "N", "tries after a timeout, a cut or refused connection, "
     "HTTP 5xx or 429, with backoff (default 5)", 0},
    {"s3-endpoint", ARG_REQ, O_S3_ENDPOINT, "URL", "an S3-compatible store (default: "
     "AWS_ENDPOINT_URL, else AWS; keys from AWS_ACCESS_KEY_ID/..., or ~/.aws/credentials)", 0},
    SECTION("Images"),
    {"channels", ARG_REQ, O_CHANNELS, "1|3|auto", "output channels (default 3; auto: the first image's)", 0},
    {"resize", ARG_REQ, O_RESIZE, "HxW|N", "resize to HxW, or the shorter side to N (bilinear, antialiased)", 0},
    {"crop", ARG_REQ, O_CROP, "S|HxW", "centre crop (random with --random-crop)", 0},
    {"random-crop", ARG_NONE, O_RANDOM_CROP, NULL, "random crop offset for training", 0},
    {"pad", ARG_NONE, O_PAD, NULL, "pad with zeros when the crop is larger than the image", 0},
    {"hflip", ARG_REQ, O_HFLIP, "P", "horizontal flip probability for training (default 0.5)", 0},
    {"random-resized-crop", ARG_REQ, O_RRC, "S[,SMIN,SMAX[,RMIN,RMAX]]",
     "training: torchvision's RandomResizedCrop (scale 0.08-1, ratio 3/4-4/3), fused with the JPEG decode", 0},
    {"color-jitter", ARG_REQ, O_JITTER, "B,C,S",
     "training: torchvision's ColorJitter(brightness, contrast, saturation), random order", 0},
    {"exif", ARG_NONE, O_EXIF, NULL, "turn JPEGs upright by their EXIF orientation (default: as stored, as torchvision)", 0},
    {"decode", ARG_REQ, O_DECODE, "auto|exact|fast",
     "JPEG DCT scaling before resampling (auto leaves the resampler >= 2x; default auto)", 0},
    SECTION("Loader"),
    {"workers", ARG_REQ, O_WORKERS, "N[,N..]|auto", "loader processes; 0 loads in the main process (default 2)", 1},
    {"prefetch", ARG_REQ, O_PREFETCH, "K[,K..]", "batches in flight per worker (default 2)", 1},
    {"batch", ARG_REQ, O_BATCH, "B[,B..]", "batch size (default 64)", 1},
    {"mode", ARG_REQ, O_MODE, "lazy|preload[,..]", "decode per fetch, or once into memory (default lazy)", 1},
    {"shuffle", ARG_NONE, O_SHUFFLE, NULL, "shuffle the training set every epoch (default)", 0},
    {"no-shuffle", ARG_NONE, O_NO_SHUFFLE, NULL, "keep the CSV order", 0},
    {"order", ARG_REQ, O_ORDER, "global|shards|auto",
     "shuffle all rows, or shard by shard through a buffer (default auto: shards if remote)", 0},
    {"shuffle-buffer", ARG_REQ, O_SHUFFLE_BUFFER, "N",
     "--order shards: samples in the buffer (default 4 shards' worth, 4*rows/shards)", 0},
    {"seed", ARG_REQ, O_SEED, "S", "seed of shuffling, augmentation and init (default 1)", 0},
    {"drop-last", ARG_NONE, O_DROP_LAST, NULL, "drop the last partial training batch", 0},
    {"timeout", ARG_REQ, O_TIMEOUT, "SEC", "fail when a batch takes longer (default: no limit)", 0},
    {"respawn", ARG_NONE, O_RESPAWN, NULL, "replace a dead worker and redo its batch", 0},
    {"cache", ARG_REQ, O_CACHE, "FILE", "keep the preload cache in FILE and reuse it", 0},
    {"cold", ARG_NONE, O_COLD, NULL, "lazy mode: drop each file from the page cache after reading", 0},
    {"mem-limit", ARG_REQ, O_MEM_LIMIT, "BYTES", "preload budget (default 80% of MemAvailable)", 0},
    {"loader-only", ARG_NONE, O_LOADER_ONLY, NULL, "run the loader without a model", 0},
    SECTION("Model and training"),
    {"model", ARG_REQ, O_MODEL, "NAME|list", "probe, lenet, convnet, resnet8/20/18 (default: by input size)", 0},
    {"device", ARG_REQ, O_DEVICE, "auto|cpu|cuda", "compute device (default auto)", 0},
    {"threads", ARG_REQ, O_THREADS, "T", "CPU compute threads (default: every core)", 0},
    {"grad-chunks", ARG_REQ, O_GRAD_CHUNKS, "U|auto|off", "gradient of each batch in U chunks summed as a fixed tree: bit-identical for any ranks dividing U (U a power of 2); auto (default): 4, or the ranks if more, where the backend makes it cheap (the CPU, no batch norm); off: the backend's own order (docs/DISTRIBUTED.md)", 0},
    {"epochs", ARG_REQ, O_EPOCHS, "N", "passes over the training set (default 1)", 0},
    {"lr", ARG_REQ, O_LR, "X", "learning rate (default: the model's)", 0},
    {"momentum", ARG_REQ, O_MOMENTUM, "X", "SGD momentum (default: the model's)", 0},
    {"wd", ARG_REQ, O_WD, "X", "weight decay (default: the model's)", 0},
    {"lr-schedule", ARG_REQ, O_LR_SCHEDULE, "const|step|cosine", "(default: the model's)", 0},
    {"mean", ARG_REQ, O_MEAN, "M[,M,M]", "per-channel mean for normalisation (default 0.5)", 0},
    {"std", ARG_REQ, O_STD, "S[,S,S]", "per-channel std (default 0.5)", 0},
    {"normalize", ARG_REQ, O_NORMALIZE, "imagenet", "named mean/std: ImageNet's (0.485,0.456,0.406 / 0.229,0.224,0.225)", 0},
    {"save", ARG_REQ, O_SAVE, "FILE", "write a checkpoint after every epoch (atomically)", 0},
    {"resume", ARG_REQ, O_RESUME, "FILE", "continue from a checkpoint", 0},
    {"resume-any-data", ARG_NONE, O_RESUME_ANY_DATA, NULL, "--resume even when the data differs from the checkpoint's (a warning instead of exit 2)", 0},
    SECTION("GPU staging"),
    {"pin", ARG_OPT, O_PIN, "[=on|off[,..]]", "page-lock the loader ring (bare --pin means on)", 1},
    {"no-pin", ARG_NONE, O_NO_PIN, NULL, "pageable ring (default)", 0},
    {"non-blocking", ARG_OPT, O_NON_BLOCKING, "[=on|off[,..]]", "copy batches on a separate stream, overlapping compute", 1},
    {"no-non-blocking", ARG_NONE, O_NO_NON_BLOCKING, NULL, "synchronous copies (default)", 0},
    {"pin-force", ARG_NONE, O_PIN_FORCE, NULL, "pin even above half of MemAvailable (risky)", 0},
    {"gpu-activity", ARG_REQ, O_GPU_ACTIVITY, "on|off", "busy%, h2d% and ovl% from the device's activity records (CUPTI; default on): costs host time per launch (H100: 9.9 vs 4.6 us); off: busy% is each step's event span", 0},
    {"selftest", ARG_NONE, O_SELFTEST, NULL, "compare the GPU with the CPU on a tiny net, then exit", 0},
    SECTION("Report"),
    {"json", ARG_REQ, O_JSON, "FILE", "write one JSON record per epoch and a summary per configuration", 0},
    {"trace", ARG_REQ, O_TRACE, "FILE", "write a timeline (Chrome trace JSON: Perfetto, chrome://tracing)", 0},
    {"warmup-epochs", ARG_REQ, O_WARMUP, "N",
     "epochs run first and left out of summaries (default 1 on a GPU with 2 or more epochs, else 0)",
     0},
    {"diagnose", ARG_NONE, O_DIAGNOSE, NULL, "find the bottleneck: loader, storage, decode or compute", 0},
    {"diagnose-batches", ARG_REQ, O_DIAG_BATCHES, "N", "--diagnose: at most N batches per phase (default 200)", 0},
    {"diagnose-seconds", ARG_REQ, O_DIAG_SECONDS, "S", "--diagnose: end a phase after S seconds (default 15; 0: no limit)", 0},
    {"progress", ARG_NONE, O_PROGRESS, NULL, "progress bar on stderr (default: when it is a terminal)", 0},
    {"no-progress", ARG_NONE, O_NO_PROGRESS, NULL, "no progress bar", 0},
    {"version", ARG_NONE, O_VERSION, NULL, "the version, the build and the image libraries in use", 0},
    {"help", ARG_NONE, O_HELP, NULL, "this text", 0},
    /* hidden */
    {"sweep-child", ARG_NONE, O_SWEEP_CHILD, NULL, NULL, 0},
    {"summary-out", ARG_REQ, O_SUMMARY_OUT, "FILE", NULL, 0},
    {"test-slow-load", ARG_REQ, O_TEST_SLOW_LOAD, "SEC", NULL, 0},
    {"test-slow-rank", ARG_REQ, O_TEST_SLOW_RANK, "R", NULL, 0},
    {"test-slow-step", ARG_REQ, O_TEST_SLOW_STEP, "SEC", NULL, 0},
    {"max-batches", ARG_REQ, O_MAX_BATCHES, "N", NULL, 0},
    {"diag-phase", ARG_REQ, O_DIAG_PHASE, "read-only|refeed", NULL, 0},
    {"max-seconds", ARG_REQ, O_MAX_SECONDS, "S", NULL, 0},
    {"dump-batches", ARG_REQ, O_DUMP_BATCHES, "FILE", NULL, 0},
};
/* clang-format on */

const char *mode_name(int mode) { return mode == MODE_PRELOAD ? "preload" : "lazy"; }

void options_usage(FILE *f)
{
    fprintf(f, "usage: train [options] data.csv|FOLDER|SHARDS\n"
               "Trains a small conv net on the images listed in data.csv (or in FOLDER, one\n"
               "sub-folder of images per class, or in WebDataset tar SHARDS: one .tar, a\n"
               "comma list, a quoted range 'shards/train-{000000..000009}.tar', or a file\n"
               "listing them; written by build/tools/shard) and shows, per epoch,\n"
               "where the time goes: waiting for data, copying, computing.\n");
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        const opt_spec *s = &table[i];
        if (!s->name) {
            fprintf(f, "\n%s:\n", s->help);
            continue;
        }
        if (!s->help)
            continue;
        char left[64];
        if (s->kind == ARG_OPT)
            snprintf(left, sizeof left, "--%s%s", s->name, s->meta);
        else
            snprintf(left, sizeof left, "--%s%s%s", s->name, s->meta ? " " : "",
                     s->meta ? s->meta : "");
        fprintf(f, "  %-28s %s\n", left, s->help);
    }
    fprintf(
        f, "\nComma lists in --workers, --prefetch, --batch, --mode, --pin and --non-blocking run\n"
           "every combination, each in a fresh process, and end with a summary table.\n"
           "Exit status: 0 ok, 1 internal error or an output (--json, --trace, --save)\n"
           "that could not be written, 2 bad input (arguments, CSV, images), 3 a loader\n"
           "worker died or timed out, 4 the loss became NaN or infinite, 5 out of memory\n"
           "decoding an image, 130/143 interrupted (SIGINT/SIGTERM).\n"
           "On a GPU, from the device's activity records (--gpu-activity): busy%% is the\n"
           "share of the epoch a kernel of ours ran, h2d%% the host-to-device copies',\n"
           "ovl%% copies and kernels at once. From NVML:\n"
           "gpu%%avg/mx is the share of time a kernel was running,\n"
           "from the samples whose period lies within the epoch (n/a when none does);\n"
           "sm%%/occ the share of the SMs busy and the warp occupancy (GPM, Hopper and\n"
           "newer); gpu_MB this process's device memory. docs/GPU.md defines each column.\n");
}

/* options_parse_to's sink: the first message goes here, not to stderr */
static errbuf *g_sink;

static void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void complain(const char *fmt, ...)
{
    char buf[ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (!g_sink) {
        fputs(buf, stderr);
        return;
    }
    if (g_sink->msg[0])
        return;
    const char *m = strncmp(buf, "train: ", 7) ? buf : buf + 7;
    snprintf(g_sink->msg, sizeof g_sink->msg, "%.*s", (int)strcspn(m, "\n"), m);
}

static int bad(const char *opt, const char *val, const char *why)
{
    complain("train: --%s: '%s' %s (see --help)\n", opt, val, why);
    return -1;
}

static int parse_int(const char *opt, const char *v, long long lo, long long hi, int *out)
{
    long long x;
    if (parse_i64(v, &x) != 0 || x < lo || x > hi) {
        char why[96];
        snprintf(why, sizeof why, "is not an integer in %lld..%lld", lo, hi);
        return bad(opt, v, why);
    }
    *out = (int)x;
    return 0;
}

static int parse_num(const char *opt, const char *v, double lo, double hi, double *out)
{
    double x;
    if (parse_f64(v, &x) != 0 || !(x >= lo && x <= hi)) {
        char why[96];
        snprintf(why, sizeof why, "is not a number in %g..%g", lo, hi);
        return bad(opt, v, why);
    }
    *out = x;
    return 0;
}

/* Comma list of items parsed by `item`. */
static int parse_list(const char *opt, const char *v, int_list *l,
                      int (*item)(const char *opt, const char *tok, int *out))
{
    l->n = 0;
    char *copy = xstrdup(v), *save = NULL;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
        if (l->n == LIST_MAX) {
            rc = bad(opt, v, "has too many values (at most 16)");
            break;
        }
        rc = item(opt, tok, &l->v[l->n]);
        if (rc == 0)
            l->n++;
    }
    if (rc == 0 && l->n == 0)
        rc = bad(opt, v, "is empty");
    free(copy);
    return rc;
}

static int item_workers(const char *opt, const char *t, int *out)
{
    if (!strcmp(t, "auto")) {
        *out = -1;
        return 0;
    }
    return parse_int(opt, t, 0, 64, out);
}
static int item_pos(const char *opt, const char *t, int *out)
{
    return parse_int(opt, t, 1, 1 << 20, out);
}
static int item_mode(const char *opt, const char *t, int *out)
{
    if (!strcmp(t, "lazy"))
        *out = MODE_LAZY;
    else if (!strcmp(t, "preload"))
        *out = MODE_PRELOAD;
    else
        return bad(opt, t, "is not lazy or preload");
    return 0;
}
static int item_onoff(const char *opt, const char *t, int *out)
{
    if (!strcasecmp(t, "on") || !strcasecmp(t, "yes") || !strcasecmp(t, "true") || !strcmp(t, "1"))
        *out = 1;
    else if (!strcasecmp(t, "off") || !strcasecmp(t, "no") || !strcasecmp(t, "false") ||
             !strcmp(t, "0"))
        *out = 0;
    else
        return bad(opt, t, "is not on or off");
    return 0;
}

static int parse_floats(const char *opt, const char *v, float *out, int *n)
{
    *n = 0;
    char *copy = xstrdup(v), *save = NULL;
    int rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
        double x;
        if (*n == 4 || parse_f64(tok, &x) != 0)
            rc = bad(opt, v, "is not a list of up to 4 numbers");
        else
            out[(*n)++] = (float)x;
    }
    free(copy);
    return rc;
}

/* S or HxW, then optionally the scale range, then the ratio range. */
static int parse_rrc(options *o, const char *n, const char *v)
{
    char *copy = xstrdup(v), *comma = strchr(copy, ',');
    if (comma)
        *comma = '\0';
    int single, rc = 0;
    if (img_parse_size(copy, &o->rrc_h, &o->rrc_w, &single) != 0)
        rc = bad(n, v, "does not start with S or HxW (pixels, 1..16384)");
    float f[4] = {0};
    int nf = 0;
    if (rc == 0 && comma && parse_floats(n, comma + 1, f, &nf) != 0)
        rc = -1;
    if (rc == 0 && nf != 0 && nf != 2 && nf != 4)
        rc = bad(n, v, "is S, S,SMIN,SMAX or S,SMIN,SMAX,RMIN,RMAX");
    if (rc == 0 && nf >= 2 && !(f[0] > 0 && f[0] <= f[1] && f[1] <= 1))
        rc = bad(n, v, "needs a scale range 0 < SMIN <= SMAX <= 1");
    if (rc == 0 && nf == 4 && !(f[2] > 0 && f[2] <= f[3]))
        rc = bad(n, v, "needs a ratio range 0 < RMIN <= RMAX");
    if (rc == 0) {
        o->img.rrc = 1;
        o->img.rrc_scale[0] = nf >= 2 ? f[0] : 0.08f;
        o->img.rrc_scale[1] = nf >= 2 ? f[1] : 1.0f;
        o->img.rrc_ratio[0] = nf == 4 ? f[2] : 3.0f / 4.0f;
        o->img.rrc_ratio[1] = nf == 4 ? f[3] : 4.0f / 3.0f;
    }
    free(copy);
    return rc;
}

static int set(options *o, const opt_spec *s, const char *v)
{
    const char *n = s->name;
    int size_single;
    switch (s->id) {
    case O_HEADER: o->csv_o.header = 1; break;
    case O_NO_HEADER: o->csv_o.header = 0; break;
    case O_PATH_COL: o->csv_o.path_col = v; break;
    case O_LABEL_COL: o->csv_o.label_col = v; break;
    case O_ROOT: o->csv_o.root = v; break;
    case O_SKIP_BAD: o->csv_o.skip_bad = 1; break;
    case O_SPARSE_LABELS: o->csv_o.sparse_labels = 1; break;
    case O_CHECK:
        if (!v || !strcmp(v, "headers"))
            o->check = 1;
        else if (!strcmp(v, "decode"))
            o->check = 2;
        else
            return bad(n, v, "is not headers or decode");
        break;
    case O_VAL: o->val_csv = v; break;
    case O_CHANNELS:
        if (!strcmp(v, "auto"))
            o->channels = 0;
        else if (!strcmp(v, "1") || !strcmp(v, "3"))
            o->channels = v[0] - '0';
        else
            return bad(n, v, "is not 1, 3 or auto");
        break;
    case O_RESIZE:
        if (img_parse_size(v, &o->img.resize_h, &o->img.resize_w, &size_single) != 0)
            return bad(n, v, "is not HxW or N (pixels, 1..16384)");
        if (size_single) {
            o->img.resize_short = o->img.resize_h;
            o->img.resize_h = o->img.resize_w = 0;
        } else {
            o->img.resize_short = 0;
        }
        break;
    case O_CROP:
        if (img_parse_size(v, &o->img.crop_h, &o->img.crop_w, &size_single) != 0)
            return bad(n, v, "is not S or HxW (pixels, 1..16384)");
        break;
    case O_RANDOM_CROP: o->img.random_crop = 1; break;
    case O_RRC: return parse_rrc(o, n, v);
    case O_JITTER: {
        float f[4];
        int nf;
        if (parse_floats(n, v, f, &nf) != 0)
            return -1;
        if (nf != 3 || !(f[0] >= 0 && f[1] >= 0 && f[2] >= 0))
            return bad(n, v, "is not three non-negative numbers B,C,S");
        if (!(f[0] <= 100 && f[1] <= 100 && f[2] <= 100)) /* img_params_check's range */
            return bad(n, v, "is out of range: each strength must be in 0..100");
        memcpy(o->img.jitter, f, sizeof o->img.jitter);
        break;
    }
    case O_EXIF: o->img.exif = 1; break;
    case O_DECODE:
        if (!strcmp(v, "auto"))
            o->img.decode = IMG_DECODE_AUTO;
        else if (!strcmp(v, "exact"))
            o->img.decode = IMG_DECODE_EXACT;
        else if (!strcmp(v, "fast"))
            o->img.decode = IMG_DECODE_FAST;
        else
            return bad(n, v, "is not auto, exact or fast");
        break;
    case O_PAD: o->img.pad = 1; break;
    case O_HFLIP: {
        double p;
        if (parse_num(n, v, 0, 1, &p) != 0)
            return -1;
        o->img.hflip = (float)p;
        break;
    }
    case O_WORKERS: return parse_list(n, v, &o->workers, item_workers);
    case O_PREFETCH: return parse_list(n, v, &o->prefetch, item_pos);
    case O_BATCH: return parse_list(n, v, &o->batch, item_pos);
    case O_MODE: return parse_list(n, v, &o->mode, item_mode);
    case O_SHUFFLE: o->shuffle = 1; break;
    case O_NO_SHUFFLE: o->shuffle = 0; break;
    case O_ORDER:
        if (!strcmp(v, "auto"))
            o->order = ORDER_AUTO;
        else if (!strcmp(v, "global"))
            o->order = ORDER_GLOBAL;
        else if (!strcmp(v, "shards"))
            o->order = ORDER_SHARDS;
        else
            return bad(n, v, "is not global, shards or auto");
        break;
    case O_SHUFFLE_BUFFER: {
        long long x;
        if (parse_i64(v, &x) != 0 || x < 1 || x > UINT32_MAX)
            return bad(n, v, "is not a positive integer (samples)");
        o->shuffle_buffer = (uint32_t)x;
        break;
    }
    case O_SEED: {
        long long x;
        if (parse_i64(v, &x) != 0 || x < 0)
            return bad(n, v, "is not a non-negative integer");
        o->seed = (uint64_t)x;
        break;
    }
    case O_DROP_LAST: o->drop_last = 1; break;
    case O_TIMEOUT: return parse_num(n, v, 0.001, 1e7, &o->timeout);
    case O_RESPAWN: o->respawn = 1; break;
    case O_CACHE: o->cache = v; break;
    case O_COLD: o->cold = 1; break;
    case O_MEM_LIMIT:
        if (parse_bytes(v, &o->mem_limit) != 0 || o->mem_limit == 0)
            return bad(n, v, "is not a byte count such as 2G, 512M or 1000000");
        break;
    case O_LOADER_ONLY: o->loader_only = 1; break;
    case O_SHARD_CACHE: o->shard_cache = v; break;
    case O_SHARD_CACHE_SIZE:
        if (parse_bytes(v, &o->shards.limit) != 0 || o->shards.limit == 0)
            return bad(n, v, "is not a byte count such as 50G, 512M or 1000000");
        break;
    case O_IO_TIMEOUT: return parse_num(n, v, 0.001, 1e6, &o->shards.ro.timeout_s);
    case O_IO_RETRIES: {
        double r;
        if (parse_num(n, v, 0, 100, &r) != 0)
            return -1;
        if (r != (int)r)
            return bad(n, v, "is not a whole number of retries");
        o->shards.ro.retries = (int)r;
        break;
    }
    case O_S3_ENDPOINT: o->shards.ro.s3_endpoint = v; break;
    case O_READ_AHEAD: {
        double r;
        if (parse_num(n, v, 0, 1000, &r) != 0)
            return -1;
        if (r != (int)r)
            return bad(n, v, "is not a whole number of shards");
        o->read_ahead = (int)r;
        break;
    }
    case O_MODEL: o->model = v; break;
    case O_DEVICE:
        if (device_parse(v, &o->device_want, NULL) != 0)
            return bad(n, v, "is not auto, cpu or cuda");
        o->device = v;
        break;
    case O_THREADS: return parse_int(n, v, 1, CPU_MAX_THREADS, &o->threads);
    case O_GRAD_CHUNKS:
        if (!strcmp(v, "auto") || !strcmp(v, "off")) {
            o->grad_chunks = v[0] == 'a' ? GRAD_CHUNKS_AUTO : GRAD_CHUNKS_OFF;
            return 0;
        }
        if (parse_int(n, v, 1, MODEL_MAX_CHUNKS, &o->grad_chunks) != 0)
            return -1;
        return o->grad_chunks & (o->grad_chunks - 1) ? bad(n, v, "is not a power of 2") : 0;
    case O_EPOCHS: return parse_int(n, v, 1, 1000000, &o->epochs);
    case O_LR: return parse_num(n, v, 0, 1e9, &o->lr);
    case O_MOMENTUM: return parse_num(n, v, 0, 0.999999, &o->momentum);
    case O_WD: return parse_num(n, v, 0, 1, &o->wd);
    case O_LR_SCHEDULE:
        if (lr_schedule_parse(v, &o->schedule) != 0)
            return bad(n, v, "is not const, step or cosine");
        o->schedule_given = 1;
        break;
    case O_MEAN: return parse_floats(n, v, o->mean, &o->nmean);
    case O_NORMALIZE:
        if (strcasecmp(v, "imagenet"))
            return bad(n, v, "is not imagenet (or give --mean and --std)");
        o->normalize_imagenet = 1;
        break;
    case O_STD:
        if (parse_floats(n, v, o->std, &o->nstd) != 0)
            return -1;
        for (int i = 0; i < o->nstd; i++)
            if (!(o->std[i] > 0))
                return bad(n, v, "must be positive");
        break;
    case O_SAVE: o->save = v; break;
    case O_RESUME: o->resume = v; break;
    case O_RESUME_ANY_DATA: o->resume_any_data = 1; break;
    case O_PIN:
        if (!v) {
            o->pin.n = 1;
            o->pin.v[0] = 1;
            return 0;
        }
        return parse_list(n, v, &o->pin, item_onoff);
    case O_NO_PIN:
        o->pin.n = 1;
        o->pin.v[0] = 0;
        break;
    case O_NON_BLOCKING:
        if (!v) {
            o->non_blocking.n = 1;
            o->non_blocking.v[0] = 1;
            return 0;
        }
        return parse_list(n, v, &o->non_blocking, item_onoff);
    case O_NO_NON_BLOCKING:
        o->non_blocking.n = 1;
        o->non_blocking.v[0] = 0;
        break;
    case O_PIN_FORCE: o->pin_force = 1; break;
    case O_GPU_ACTIVITY: return item_onoff("--gpu-activity", v, &o->gpu_activity);
    case O_SELFTEST: o->selftest = 1; break;
    case O_VERSION: o->version = 1; break;
    case O_JSON: o->json = v; break;
    case O_TRACE: o->trace = v; break;
    case O_WARMUP: return parse_int(n, v, 0, 1000000, &o->warmup_epochs);
    case O_DIAGNOSE: o->diagnose = 1; break;
    case O_PROGRESS: o->progress = 1; break;
    case O_NO_PROGRESS: o->progress = 0; break;
    case O_HELP: options_usage(stdout); return 1;
    case O_SWEEP_CHILD: o->sweep_child = 1; break;
    case O_SUMMARY_OUT: o->summary_out = v; break;
    case O_TEST_SLOW_LOAD: return parse_num(n, v, 0, 100, &o->test_slow_load);
    case O_TEST_SLOW_RANK: return parse_int(n, v, 0, 1 << 20, &o->test_slow_rank);
    case O_TEST_SLOW_STEP: return parse_num(n, v, 0, 100, &o->test_slow_step);
    case O_MAX_BATCHES: return parse_int(n, v, 1, 1 << 30, &o->max_batches);
    case O_DIAG_BATCHES: return parse_int(n, v, 1, 1 << 30, &o->diag_batches);
    case O_DIAG_SECONDS: return parse_num(n, v, 0, 1e7, &o->diag_seconds);
    case O_MAX_SECONDS: return parse_num(n, v, 0.001, 1e7, &o->max_seconds);
    case O_DUMP_BATCHES: o->dump_batches = v; break;
    case O_DIAG_PHASE:
        if (!strcmp(v, "read-only"))
            o->diag_phase = DIAG_READ_ONLY;
        else if (!strcmp(v, "refeed"))
            o->diag_phase = DIAG_REFEED;
        else
            return bad(n, v, "is not read-only or refeed");
        break;
    }
    return 0;
}

static const opt_spec *find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (table[i].name && strlen(table[i].name) == len && !strncmp(table[i].name, name, len))
            return &table[i];
    return NULL;
}

/* The random-resized crop is the training transform; --resize and --crop
 * stay evaluation's (torchvision's Resize(256) + CenterCrop(224)). */
static int check_rrc(const options *o)
{
    if (o->img.random_crop) {
        complain(
            "train: --random-resized-crop and --random-crop are two training crops: give one\n");
        return -1;
    }
    if (o->img.crop_h && (o->img.crop_h != o->rrc_h || o->img.crop_w != o->rrc_w)) {
        complain(
            "train: --crop %dx%d (evaluation's) differs from --random-resized-crop %dx%d: a batch "
            "has one size\n",
            o->img.crop_h, o->img.crop_w, o->rrc_h, o->rrc_w);
        return -1;
    }
    for (int i = 0; i < o->mode.n; i++)
        if (o->mode.v[i] == MODE_PRELOAD) {
            complain("train: --mode preload keeps one decoded image per sample, but "
                     "--random-resized-crop cuts each sample from the file: use --mode lazy\n");
            return -1;
        }
    return 0;
}

/* A crop larger than every resized image can be: --resize HxW smaller than
 * the crop, or --resize N (the shorter side) under both of the crop's
 * sides. Known from the options alone, so refused here naming both, not at
 * the first image. With a random-resized crop, --resize and --crop are
 * validation's (the crop defaulting to the random-resized crop's size). */
static int check_resize_crop(const options *o)
{
    const img_params *p = &o->img;
    int ch = p->crop_h, cw = p->crop_w;
    if (p->rrc && !ch)
        ch = o->rrc_h, cw = o->rrc_w;
    if (p->pad || !ch || (p->rrc && !o->val_csv))
        return 0;
    const char *crop = p->crop_h ? "--crop" : "--random-resized-crop";
    if (p->resize_h > 0 && (ch > p->resize_h || cw > p->resize_w)) {
        complain("train: %s %dx%d is larger than --resize %dx%d: every image would be "
                 "smaller than the crop (crop at most the resize, or --pad)\n",
                 crop, ch, cw, p->resize_h, p->resize_w);
        return -1;
    }
    if (p->resize_short > 0 && ch > p->resize_short && cw > p->resize_short) {
        complain("train: %s %dx%d is larger than --resize %d (the shorter side): every image "
                 "would be smaller than the crop (crop at most the resize, or --pad)\n",
                 crop, ch, cw, p->resize_short);
        return -1;
    }
    return 0;
}

static void defaults(options *o)
{
    memset(o, 0, sizeof *o);
    csv_opts c = CSV_OPTS_DEFAULT;
    o->csv_o = c;
    o->csv_o.warn = stderr;
    o->shards.ro.retries = -1; /* remote.c's default */
    o->read_ahead = 2;
    o->channels = 3;
    o->img.hflip = -1;
    o->workers = (int_list){1, {2}};
    o->prefetch = (int_list){1, {2}};
    o->batch = (int_list){1, {0}};
    o->mode = (int_list){1, {MODE_LAZY}};
    o->pin = (int_list){1, {0}};
    o->non_blocking = (int_list){1, {0}};
    o->gpu_activity = 1;
    o->shuffle = 1;
    o->order = ORDER_AUTO;
    o->seed = 1;
    o->test_slow_rank = -1;
    o->device = "auto";
    o->device_want = DEVICE_AUTO;
    o->lr = o->momentum = o->wd = NAN;
    o->diag_seconds = NAN;
    o->epochs = 1;
    o->warmup_epochs = -1; /* auto: run_ctx.warmup_epochs */
    o->progress = -1;
}

/* --trace FILE for configuration k (1-based): FILE with -cfgK before its
 * extension (t.json -> t-cfg2.json), so configurations do not overwrite
 * each other's timeline */
char *options_trace_name(const char *path, int k)
{
    const char *base = strrchr(path, '/'), *dot = strrchr(path, '.');
    base = base ? base + 1 : path;
    size_t stem = dot && dot > base ? (size_t)(dot - path) : strlen(path);
    char *s;
    if (asprintf(&s, "%.*s-cfg%d%s", (int)stem, path, k, path + stem) < 0)
        abort();
    return s;
}

enum { KIND_CACHE, KIND_CKPT, KIND_JSON, KIND_TRACE };

/* What train's JSON outputs start with: a report's first record, a trace's
 * first key (app/report.c, app/trace.c) */
#define REPORT_START "{\"record\":"
#define TRACE_START "{\"displayTimeUnit\":"

static int starts(const unsigned char *b, size_t n, const char *s)
{
    size_t k = strlen(s);
    return n >= k && !memcmp(b, s, k);
}

/* What a file starting with b (n bytes) looks like: "starts with
 * TRAINCKP: a train checkpoint". */
static void describe_start(const unsigned char *b, size_t n, char *out, size_t len)
{
    size_t i = 0;
    while (i < n && strchr(" \t\r\n", b[i]))
        i++;
    const char *image = img_sniff_name(b, n);
    if (n >= 8 && !memcmp(b, CKPT_MAGIC, 8))
        snprintf(out, len, "starts with TRAINCKP: a train checkpoint");
    else if (n >= 8 && !memcmp(b, CACHE_MAGIC, 8))
        snprintf(out, len, "starts with TRAINPC: a train preload cache");
    else if (starts(b + i, n - i, REPORT_START))
        snprintf(out, len, "starts with %s: a train JSON report", REPORT_START);
    else if (starts(b + i, n - i, TRACE_START))
        snprintf(out, len, "starts with %s: a train trace", TRACE_START);
    else if (i < n && b[i] == '{')
        snprintf(out, len, "starts with '{': a JSON file, not one train wrote");
    else if (image) /* the decoder's own magic numbers */
        snprintf(out, len, "starts like a %s image", image);
    else {
        char esc[80];
        size_t o = 0;
        for (size_t j = 0; j < n && j < 16; j++) /* bytes as they are, or \xHH */
            o += (size_t)snprintf(esc + o, sizeof esc - o,
                                  b[j] >= 0x20 && b[j] < 0x7f ? "%c" : "\\x%02x", b[j]);
        snprintf(out, len, "starts with \"%s\"", esc);
    }
}

/* 0 when train may replace path as an output of this kind: absent,
 * empty, unreadable (the write says why) or already of the kind (a cache
 * or checkpoint by its magic, or as much of it as the file holds, so that
 * a truncated one is rebuilt; a report or a trace by the first key train
 * writes in it, after blanks; an empty "{}"). Else
 * -1 with what the file looks like in what. */
static int replaceable(const char *path, int kind, char *what, size_t len)
{
    errbuf e;
    int fd = open_regular(path, O_RDONLY, 0, &e);
    if (fd < 0)
        return 0;
    unsigned char b[4096];
    ssize_t got = pread(fd, b, sizeof b, 0);
    close(fd);
    if (got <= 0)
        return 0;
    size_t n = (size_t)got, i = 0, m = n < 8 ? n : 8;
    int ok;
    if (kind == KIND_CACHE)
        ok = !memcmp(b, CACHE_MAGIC, m);
    else if (kind == KIND_CKPT)
        ok = !memcmp(b, CKPT_MAGIC, m);
    else { /* a report (JSON lines) or a trace, by their first key; "{}" */
        while (i < n && strchr(" \t\r\n", b[i]))
            i++;
        size_t j = i + 1;
        while (j < n && strchr(" \t\r\n", b[j]))
            j++;
        ok = i == n || starts(b + i, n - i, kind == KIND_JSON ? REPORT_START : TRACE_START) ||
             (b[i] == '{' && j < n && b[j] == '}');
    }
    if (!ok)
        describe_start(b, n, what, len);
    return ok ? 0 : -1;
}

/* Files train replaces (--cache, --save, --json, --trace) or reads whole
 * (--resume) must be regular files: refused before any work, so that a
 * FIFO does not block, a device is not read forever nor replaced. An
 * output may not be an input (the data CSV, --val, --resume; --save may
 * be --resume: resuming into the same file is the usual way) nor another
 * output, and an existing file is replaced only by its own kind: a
 * checkpoint is not lost to a --cache or --json given the wrong name. */
static int check_paths(const options *o)
{
    const char *name[] = {"cache", "save", "json", "trace", "dump-batches", "resume"};
    /* a sweep writes FILE-cfgK for --trace FILE, never FILE (checked below) */
    const int sweep_parent = options_is_sweep(o) && !o->sweep_child;
    const char *path[] = {o->cache,        o->loader_only ? NULL : o->save,
                          o->json,         sweep_parent ? NULL : o->trace,
                          o->dump_batches, o->resume};
    enum { NOUT = 5, NPATH = 6 };
    for (int i = 0; i < NPATH; i++) {
        errbuf e;
        if (path[i] && (check_output_path(path[i], &e) != 0 ||
                        (i < NOUT && check_output_folder(path[i], &e) != 0))) {
            complain("train: --%s %s\n", name[i], e.msg);
            return -1;
        }
    }
    const char *in_name[] = {"the data CSV", "--val", "--resume"};
    const char *in[] = {o->csv, o->val_csv, o->resume};
    for (int i = 0; i < NOUT; i++) {
        if (!path[i])
            continue;
        for (int j = 0; j < 3; j++)
            if (in[j] && !(i == 1 && j == 2) && same_file(path[i], in[j])) {
                complain("train: --%s %s is the same file as %s %s: writing it would destroy "
                         "the input (choose another name)\n",
                         name[i], path[i], in_name[j], in[j]);
                return -1;
            }
        for (int j = 0; j < i; j++)
            if (path[j] && same_file(path[i], path[j])) {
                complain("train: --%s %s and --%s %s are the same file: one would overwrite the "
                         "other (choose another name)\n",
                         name[j], path[j], name[i], path[i]);
                return -1;
            }
    }
    const int kind[] = {KIND_CACHE, KIND_CKPT, KIND_JSON, KIND_TRACE};
    const char *kind_name[] = {"a train preload cache", "a train checkpoint", "a train JSON report",
                               "a train trace"};
    for (int i = 0; i < 4; i++) { /* cache, save, json, trace */
        char what[160];
        if (path[i] && replaceable(path[i], kind[i], what, sizeof what) != 0) {
            complain("train: --%s %s: %s, not %s; not replaced (remove it or choose another "
                     "name)\n",
                     name[i], path[i], what, kind_name[i]);
            return -1;
        }
    }
    if (o->trace && sweep_parent) { /* each configuration's trace */
        int total = options_sweep_size(o);
        for (int k = 1; k <= total; k++) {
            char *t = options_trace_name(o->trace, k), what[160];
            errbuf e;
            int bad = check_output_path(t, &e) != 0 || check_output_folder(t, &e) != 0;
            if (bad)
                complain("train: --trace %s (configuration %d): %s\n", o->trace, k, e.msg);
            else if (replaceable(t, KIND_TRACE, what, sizeof what) != 0) {
                complain("train: --trace %s (configuration %d): %s: %s, not a train trace; not "
                         "replaced (remove it or choose another name)\n",
                         o->trace, k, t, what);
                bad = 1;
            }
            free(t);
            if (bad)
                return -1;
        }
    }
    return 0;
}

/* A flag and its --no- twin on one command line contradict each other
 * (last-wins would hide a mistake; Python refuses header=True,
 * no_header=True alike). */
static const enum opt_id twins[][2] = {
    {O_HEADER, O_NO_HEADER},     {O_SHUFFLE, O_NO_SHUFFLE},
    {O_PIN, O_NO_PIN},           {O_NON_BLOCKING, O_NO_NON_BLOCKING},
    {O_PROGRESS, O_NO_PROGRESS},
};
#define NTWINS (sizeof twins / sizeof *twins)

static void note_twin(const char *given[][2], enum opt_id id, const char *arg)
{
    for (size_t t = 0; t < NTWINS; t++)
        for (int k = 0; k < 2; k++)
            if (twins[t][k] == id)
                given[t][k] = arg;
}

int options_parse(options *o, int argc, char **argv)
{
    defaults(o);
    o->argc = argc;
    o->argv = argv;
    o->sweep_arg = xcalloc((size_t)argc + 1, 1);
    int only_positional = 0;
    const char *twin_given[NTWINS][2] = {{NULL}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_positional || a[0] != '-' || !a[1]) {
            if (o->csv) {
                int val = o->check && (!strcmp(o->csv, "decode") || !strcmp(o->csv, "headers"));
                /* an unquoted brace range the shell expanded (into --val's too, maybe) */
                int tars = dataset_is_shards(o->csv) && dataset_is_shards(a);
                complain("train: more than one data CSV ('%s' and '%s')%s%s%s\n", o->csv, a,
                         val ? "; --check takes its value after '=': --check=" : "",
                         val ? o->csv : "",
                         tars ? "; quote a shard pattern so that the shell leaves its braces to "
                                "train ('shards/train-{000000..000009}.tar'), or join shards "
                                "with commas"
                              : "");
                return -1;
            }
            o->csv = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_positional = 1;
            continue;
        }
        if (!strcmp(a, "-h")) {
            options_usage(stdout);
            return 1;
        }
        if (a[1] != '-') {
            complain("train: unknown option '%s' (options are long: see --help)\n", a);
            return -1;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        const opt_spec *s = find(name, eq ? (size_t)(eq - name) : strlen(name));
        if (!s) {
            complain("train: unknown option '%s' (see --help)\n", a);
            return -1;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (s->kind == ARG_NONE && v) {
            complain("train: --%s takes no value\n", s->name);
            return -1;
        }
        if (s->kind == ARG_REQ && !v) {
            if (i + 1 >= argc) {
                complain("train: --%s needs a value (%s)\n", s->name, s->meta);
                return -1;
            }
            v = argv[++i];
            if (s->sweep)
                o->sweep_arg[i - 1] = 1;
        }
        if (s->sweep || s->id == O_NO_PIN || s->id == O_NO_NON_BLOCKING)
            o->sweep_arg[i] = 1;
        note_twin(twin_given, s->id, a);
        int rc = set(o, s, v);
        if (rc != 0)
            return rc;
    }
    /* a sweep's or --diagnose's child gets its configuration after the
     * user's options (--no-progress after --progress): the last wins */
    for (size_t t = 0; t < NTWINS && !o->sweep_child; t++)
        if (twin_given[t][0] && twin_given[t][1]) {
            complain("train: %s and %s contradict each other: give one of them\n", twin_given[t][0],
                     twin_given[t][1]);
            return -1;
        }
    if (!o->csv && !o->selftest && !o->version && !(o->model && !strcmp(o->model, "list"))) {
        complain("train: no data CSV, folder or shards given (usage: train [options] "
                 "data.csv|FOLDER|SHARDS; see --help)\n");
        return -1;
    }
    if (o->normalize_imagenet && (o->nmean || o->nstd)) {
        complain("train: --normalize imagenet names a mean and a std: leave out --mean/--std, or "
                 "--normalize\n");
        return -1;
    }
    if (o->nmean > 1 && o->nstd > 1 && o->nmean != o->nstd) {
        complain("train: --mean has %d values but --std has %d\n", o->nmean, o->nstd);
        return -1;
    }
    if (o->img.random_crop && !o->img.crop_h) {
        complain("train: --random-crop needs --crop\n");
        return -1;
    }
    if (o->img.rrc && check_rrc(o) != 0)
        return -1;
    if (check_resize_crop(o) != 0)
        return -1;
    for (int i = 0; i < o->mode.n && o->csv_o.skip_bad; i++)
        if (o->mode.v[i] == MODE_PRELOAD) {
            complain("train: --skip-bad does not work with --mode preload (the preload keeps "
                     "every sample): use --mode lazy, or --check to list the bad files\n");
            return -1;
        }
    if (o->diagnose && o->loader_only && !o->sweep_child) {
        complain("train: --diagnose measures the loader with and without the model: leave out "
                 "--loader-only (or leave out --diagnose for the loader alone)\n");
        return -1;
    }
    if (o->warmup_epochs >= o->epochs && o->warmup_epochs > 0) {
        complain("train: --warmup-epochs %d leaves no counted epoch of --epochs %d\n",
                 o->warmup_epochs, o->epochs);
        return -1;
    }
    return check_paths(o);
}

int options_parse_to(options *o, int argc, char **argv, errbuf *e)
{
    e->msg[0] = 0;
    g_sink = e;
    int rc = options_parse(o, argc, argv);
    g_sink = NULL;
    return rc;
}

int options_arg(const char *name)
{
    const opt_spec *s = find(name, strlen(name));
    return !s || !s->help ? -1 : s->kind == ARG_NONE ? 0 : s->kind == ARG_REQ ? 1 : 2;
}

const char *options_section(const char *name)
{
    const char *title = NULL;
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        if (!table[i].name)
            title = table[i].help;
        else if (!strcmp(table[i].name, name))
            return table[i].help ? title : NULL;
    }
    return NULL;
}

void options_free(options *o)
{
    free(o->sweep_arg);
    o->sweep_arg = NULL;
}

int options_sweep_size(const options *o)
{
    return o->mode.n * o->pin.n * o->non_blocking.n * o->batch.n * o->prefetch.n * o->workers.n;
}

int options_is_sweep(const options *o)
{
    return o->workers.n > 1 || o->prefetch.n > 1 || o->batch.n > 1 || o->mode.n > 1 ||
           o->pin.n > 1 || o->non_blocking.n > 1;
}
