/* bench_nn.c — compute-only training speed of the CPU backend.
 *
 *   bench_nn [--model lenet] [--threads 1,2] [--runs 3] [--epochs 1]
 *            [--batch 64] [--limit N] [--lr X --momentum X --wd X
 *            --schedule const|step|cosine] [--seed S] [--eval] [--ops] [--src DIR]
 *            [--synthetic CxHxW] [--grad-chunks U]
 *
 * Reads Fashion-MNIST from Debian's IDX files into memory, then trains
 * `--model` (default lenet, with its default hyper-parameters) for
 * `--epochs` epochs per run and times model_train_step alone: the batch is
 * assembled from memory outside the timed region, so this is the compute
 * step, nothing else. For each thread count prints every run's seconds per
 * epoch, the median, images/s, and a hash of the final parameters: the
 * hashes must agree across thread counts (the CPU backend's determinism).
 * --eval also reports test-set loss and accuracy after each epoch of the
 * first run. --synthetic CxHxW trains on --limit (default 10000) random
 * images of that shape instead (speed only: e.g. convnet on 3x64x64).
 * --ops times every backend operation (through a wrapper ops
 * table, per layer shape) and prints where a step's time goes.
 * --grad-chunks U sums each step's gradient as train --grad-chunks U does
 * with one process (U chunks, a fixed tree): what canonical sums cost.
 * TRAIN_FUSE=0 in the environment runs batch norm, add and relu as
 * separate ops (model_set_fusion): the params hash must not change.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/util.h"
#include "cpu/cpu.h"
#include "nn/model.h"
#include "tools/idx.h"

/* ---------------------------------------------------------------- --ops */
/* A backend whose ops call the CPU backend's and add up their time per
 * label ("conv2 fwd 20x12x12->50"). Every op is synchronous on the CPU. */
#define OPS_MAX 32
static struct {
    char label[48];
    double secs;
    long calls;
} op_times[OPS_MAX];
static int op_n;
static const backend_ops *real_ops;
static backend *real_be;

static void op_add(const char *label, double secs)
{
    int i = 0;
    while (i < op_n && strcmp(op_times[i].label, label) != 0)
        i++;
    if (i == op_n) {
        if (op_n == OPS_MAX)
            return;
        snprintf(op_times[op_n++].label, sizeof op_times[0].label, "%s", label);
    }
    op_times[i].secs += secs;
    op_times[i].calls++;
}

#define TIMED(label, call)                                                                         \
    do {                                                                                           \
        double t0_ = now_sec();                                                                    \
        call;                                                                                      \
        op_add(label, now_sec() - t0_);                                                            \
    } while (0)

static void *w_alloc(backend *be, size_t n)
{
    (void)be;
    return real_ops->alloc(real_be, n);
}
static void w_free(backend *be, void *p)
{
    (void)be;
    real_ops->free(real_be, p);
}
static void w_copy(backend *be, void *d, const void *s, size_t n)
{
    (void)be;
    real_ops->upload(real_be, d, s, n);
}
static void w_sync(backend *be) { (void)be; }
static void w_norm(backend *be, float *o, const uint8_t *i, int B, int C, int HW, const float *m,
                   const float *sd)
{
    (void)be;
    TIMED("normalize", real_ops->normalize_u8(real_be, o, i, B, C, HW, m, sd));
}
static void *w_plan(backend *be, const conv_shape *s)
{
    (void)be;
    return real_ops->conv_plan(real_be, s);
}
static void w_plan_free(backend *be, void *p)
{
    (void)be;
    real_ops->conv_plan_free(real_be, p);
}
static void w_conv_f(backend *be, void *p, float *o, const float *i, const float *w, const float *b,
                     const conv_shape *s)
{
    (void)be;
    char l[48];
    snprintf(l, sizeof l, "conv fwd %dx%dx%d->%d", s->C, s->H, s->W, s->K);
    TIMED(l, real_ops->conv_forward(real_be, p, o, i, w, b, s));
}
static void w_conv_b(backend *be, void *p, float *di, float *dw, float *db, const float *g,
                     const float *i, const float *w, const conv_shape *s)
{
    (void)be;
    char l[48];
    snprintf(l, sizeof l, "conv bwd %dx%dx%d->%d%s", s->C, s->H, s->W, s->K, di ? "" : " (no din)");
    TIMED(l, real_ops->conv_backward(real_be, p, di, dw, db, g, i, w, s));
}
static void w_relu_f(backend *be, float *o, const float *i, size_t n)
{
    (void)be;
    TIMED("relu fwd", real_ops->relu_forward(real_be, o, i, n));
}
static void w_relu_b(backend *be, float *di, const float *g, const float *o, size_t n)
{
    (void)be;
    TIMED("relu bwd", real_ops->relu_backward(real_be, di, g, o, n));
}
static void w_pool_f(backend *be, float *o, const float *i, const maxpool_shape *s)
{
    (void)be;
    TIMED("maxpool fwd", real_ops->maxpool_forward(real_be, o, i, s));
}
static void w_pool_b(backend *be, float *di, const float *g, const float *o, const float *i,
                     const maxpool_shape *s)
{
    (void)be;
    TIMED("maxpool bwd", real_ops->maxpool_backward(real_be, di, g, o, i, s));
}
static void w_fc_f(backend *be, float *o, const float *i, const float *w, const float *b, int B,
                   int M, int N)
{
    (void)be;
    char l[48];
    snprintf(l, sizeof l, "fc fwd %d->%d", M, N);
    TIMED(l, real_ops->fc_forward(real_be, o, i, w, b, B, M, N));
}
static void w_fc_b(backend *be, float *di, float *dw, float *db, const float *g, const float *i,
                   const float *w, int B, int M, int N)
{
    (void)be;
    char l[48];
    snprintf(l, sizeof l, "fc bwd %d->%d", M, N);
    TIMED(l, real_ops->fc_backward(real_be, di, dw, db, g, i, w, B, M, N));
}
static void w_gap_f(backend *be, float *o, const float *i, int B, int C, int HW)
{
    (void)be;
    TIMED("gap fwd", real_ops->gap_forward(real_be, o, i, B, C, HW));
}
static void w_gap_b(backend *be, float *di, const float *g, int B, int C, int HW)
{
    (void)be;
    TIMED("gap bwd", real_ops->gap_backward(real_be, di, g, B, C, HW));
}
static void w_xent(backend *be, float *dl, float *l, int32_t *p, const float *lg, const int32_t *y,
                   int B, int K, float sc)
{
    (void)be;
    TIMED("softmax xent", real_ops->softmax_xent(real_be, dl, l, p, lg, y, B, K, sc));
}
static void w_sgd(backend *be, float *w, float *v, const float *g, size_t n, float lr, float m,
                  float wd)
{
    (void)be;
    TIMED("sgd", real_ops->sgd_update(real_be, w, v, g, n, lr, m, wd));
}
static void w_bn_t(backend *be, float *y, float *sm, float *si, float *rm, float *rv,
                   const float *x, const float *sc, const float *sh, int B, int C, int HW,
                   float mom, float eps)
{
    (void)be;
    TIMED("bn fwd",
          real_ops->bn_forward_train(real_be, y, sm, si, rm, rv, x, sc, sh, B, C, HW, mom, eps));
}
static void w_bn_i(backend *be, float *y, const float *x, const float *sc, const float *sh,
                   const float *rm, const float *rv, int B, int C, int HW, float eps)
{
    (void)be;
    TIMED("bn fwd (eval)",
          real_ops->bn_forward_infer(real_be, y, x, sc, sh, rm, rv, B, C, HW, eps));
}
static void w_bn_b(backend *be, float *dx, float *ds, float *dh, const float *dy, const float *x,
                   const float *sc, const float *sm, const float *si, int B, int C, int HW)
{
    (void)be;
    TIMED("bn bwd", real_ops->bn_backward(real_be, dx, ds, dh, dy, x, sc, sm, si, B, C, HW));
}
/* the fused ops (the model calls them only when the table has them) */
static void w_bnr_t(backend *be, float *y, float *sm, float *si, float *rm, float *rv,
                    const float *x, const float *res, const float *sc, const float *sh, int B,
                    int C, int HW, float mom, float eps)
{
    (void)be;
    TIMED(res ? "bn+add+relu fwd" : "bn+relu fwd",
          real_ops->bn_relu_forward_train(real_be, y, sm, si, rm, rv, x, res, sc, sh, B, C, HW, mom,
                                          eps));
}
static void w_bnr_i(backend *be, float *y, const float *x, const float *res, const float *sc,
                    const float *sh, const float *rm, const float *rv, int B, int C, int HW,
                    float eps)
{
    (void)be;
    TIMED(res ? "bn+add+relu fwd (eval)" : "bn+relu fwd (eval)",
          real_ops->bn_relu_forward_infer(real_be, y, x, res, sc, sh, rm, rv, B, C, HW, eps));
}
static void w_bnr_b(backend *be, float *dx, float *ds, float *dh, float *dyo, const float *g,
                    const float *yr, const float *x, const float *sc, const float *sm,
                    const float *si, int B, int C, int HW)
{
    (void)be;
    TIMED(dyo ? "bn+add+relu bwd" : "bn+relu bwd",
          real_ops->bn_relu_backward(real_be, dx, ds, dh, dyo, g, yr, x, sc, sm, si, B, C, HW));
}
static void w_add(backend *be, float *o, const float *a, const float *b, size_t n)
{
    (void)be;
    TIMED("add", real_ops->add(real_be, o, a, b, n));
}
static void w_copyf(backend *be, float *d, const float *s, size_t n)
{
    (void)be;
    TIMED("copy", real_ops->copy(real_be, d, s, n));
}
static void w_destroy(backend *be)
{
    real_ops->destroy(real_be);
    free(be);
}

static const backend_ops timed_ops = {
    .name = "cpu (timed)",
    .destroy = w_destroy,
    .alloc = w_alloc,
    .free = w_free,
    .upload = w_copy,
    .download = w_copy,
    .synchronize = w_sync,
    .normalize_u8 = w_norm,
    .conv_plan = w_plan,
    .conv_plan_free = w_plan_free,
    .conv_forward = w_conv_f,
    .conv_backward = w_conv_b,
    .relu_forward = w_relu_f,
    .relu_backward = w_relu_b,
    .maxpool_forward = w_pool_f,
    .maxpool_backward = w_pool_b,
    .fc_forward = w_fc_f,
    .fc_backward = w_fc_b,
    .gap_forward = w_gap_f,
    .gap_backward = w_gap_b,
    .bn_forward_train = w_bn_t,
    .bn_forward_infer = w_bn_i,
    .bn_backward = w_bn_b,
    .bn_relu_forward_train = w_bnr_t,
    .bn_relu_forward_infer = w_bnr_i,
    .bn_relu_backward = w_bnr_b,
    .add = w_add,
    .copy = w_copyf,
    .softmax_xent = w_xent,
    .sgd_update = w_sgd,
};

static backend *timed_backend(backend *inner)
{
    real_be = inner;
    real_ops = inner->ops;
    backend *be = xcalloc(1, sizeof *be);
    be->ops = &timed_ops;
    be->host_visible = 1;
    return be;
}

static void ops_report(int threads, long steps, double step_secs)
{
    double sum = 0;
    printf("threads %d: time per step by operation (%ld steps; mean ms per step):\n", threads,
           steps);
    for (int i = 0; i < op_n; i++) {
        printf("  %-32s %8.3f ms %5.1f%%\n", op_times[i].label, op_times[i].secs / steps * 1e3,
               100 * op_times[i].secs / step_secs);
        sum += op_times[i].secs;
    }
    printf("  %-32s %8.3f ms (step %.3f ms)\n", "all operations", sum / steps * 1e3,
           step_secs / steps * 1e3);
    memset(op_times, 0, sizeof op_times);
    op_n = 0;
}

typedef struct set {
    int n, C, H, W;
    uint8_t *x; /* n x C x H x W */
    int32_t *y;
} set;

static size_t set_px(const set *s) { return (size_t)s->C * s->H * s->W; }

/* --synthetic CxHxW: n random images and labels (speed only) */
static int synthetic(const char *shape, long n, set *s)
{
    if (sscanf(shape, "%dx%dx%d", &s->C, &s->H, &s->W) != 3 || s->C < 1 || s->H < 1 || s->W < 1) {
        fprintf(stderr, "bench_nn: --synthetic %s: expected CxHxW, e.g. 3x64x64\n", shape);
        return -1;
    }
    s->n = n > 0 ? (int)n : 10000;
    s->x = xmalloc((size_t)s->n * set_px(s));
    s->y = xmalloc((size_t)s->n * sizeof(int32_t));
    rng r = rng_keyed(1, RNG_TOOL, 0, 0);
    for (size_t i = 0; i < (size_t)s->n * set_px(s); i++)
        s->x[i] = (uint8_t)rng_below(&r, 256);
    for (int i = 0; i < s->n; i++)
        s->y[i] = (int32_t)rng_below(&r, 10);
    return 0;
}

static int load(const char *src, const char *prefix, long limit, set *s)
{
    char ip[4096], lp[4096];
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte.gz", src, prefix);
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte.gz", src, prefix);
    idx_set im, lab;
    if (idx_read(ip, &im) != 0)
        return -1;
    if (idx_read(lp, &lab) != 0 || lab.n != im.n || im.rows != 28 || im.cols != 28) {
        fprintf(stderr, "%s: unexpected contents\n", lp);
        free(im.data);
        free(lab.data);
        return -1;
    }
    s->n = limit > 0 && limit < (long)im.n ? (int)limit : (int)im.n;
    s->C = 1;
    s->H = s->W = 28;
    s->x = im.data;
    s->y = xmalloc((size_t)s->n * sizeof(int32_t));
    for (int i = 0; i < s->n; i++)
        s->y[i] = lab.data[i];
    free(lab.data);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void evaluate(model *m, const set *t, int batch, uint8_t *xb, int32_t *yb, double *loss,
                     double *acc)
{
    step_stats tot = {0};
    for (int i = 0; i < t->n; i += batch) {
        int B = t->n - i < batch ? t->n - i : batch;
        memcpy(xb, t->x + (size_t)i * set_px(t), (size_t)B * set_px(t));
        memcpy(yb, t->y + i, (size_t)B * sizeof(int32_t));
        step_stats st;
        model_eval_step(m, xb, yb, B, &st);
        step_stats_add(&tot, &st);
    }
    *loss = tot.loss_sum / (double)tot.n;
    *acc = (double)tot.correct / (double)tot.n;
}

int main(int argc, char **argv)
{
    const char *src = fashion_mnist_dir(), *model_name = "lenet", *threads_arg = "1,2";
    int runs = 3, epochs = 1, batch = 64, do_eval = 0, do_ops = 0, chunks = 0;
    long limit = 0;
    uint64_t seed = 1;
    model_hparams hp;
    double lr = -1, mom = -1, wd = -1;
    const char *sched = NULL, *synth = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--eval")) {
            do_eval = 1;
            continue;
        }
        if (!strcmp(a, "--ops")) {
            do_ops = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "bench_nn: %s needs a value (see the top of tools/bench_nn.c)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--src"))
            src = v;
        else if (!strcmp(a, "--model"))
            model_name = v;
        else if (!strcmp(a, "--threads"))
            threads_arg = v;
        else if (!strcmp(a, "--runs"))
            runs = atoi(v);
        else if (!strcmp(a, "--epochs"))
            epochs = atoi(v);
        else if (!strcmp(a, "--batch"))
            batch = atoi(v);
        else if (!strcmp(a, "--limit"))
            limit = atol(v);
        else if (!strcmp(a, "--seed"))
            seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--lr"))
            lr = atof(v);
        else if (!strcmp(a, "--momentum"))
            mom = atof(v);
        else if (!strcmp(a, "--wd"))
            wd = atof(v);
        else if (!strcmp(a, "--schedule"))
            sched = v;
        else if (!strcmp(a, "--synthetic"))
            synth = v;
        else if (!strcmp(a, "--grad-chunks"))
            chunks = atoi(v);
        else {
            fprintf(stderr, "bench_nn: unknown option %s\n", a);
            return 2;
        }
    }
    if (model_defaults(model_name, &hp) != 0) {
        fprintf(stderr, "bench_nn: unknown model %s\n", model_name);
        return 2;
    }
    if (lr >= 0)
        hp.lr = lr;
    if (mom >= 0)
        hp.momentum = mom;
    if (wd >= 0)
        hp.wd = wd;
    if (sched && lr_schedule_parse(sched, &hp.schedule) != 0) {
        fprintf(stderr, "bench_nn: --schedule %s: const, step or cosine\n", sched);
        return 2;
    }
    if (runs < 1 || epochs < 1 || batch < 1) {
        fprintf(stderr, "bench_nn: --runs, --epochs and --batch must be positive\n");
        return 2;
    }
    if (chunks < 0 || chunks > MODEL_MAX_CHUNKS || (chunks & (chunks - 1))) {
        fprintf(stderr, "bench_nn: --grad-chunks: a power of 2 up to %d\n", MODEL_MAX_CHUNKS);
        return 2;
    }
    set tr = {0}, te = {0};
    if (synth ? synthetic(synth, limit, &tr) != 0
              : load(src, "train", limit, &tr) != 0 || (do_eval && load(src, "t10k", 0, &te) != 0))
        return 1;
    if (synth)
        do_eval = 0;
    size_t px = set_px(&tr);
    printf("bench_nn: %s on %s, %d training images, batch %d, %d epoch(s), lr %g momentum %g wd %g "
           "%s, seed %llu, grad chunks %d\n",
           model_name, synth ? "random images" : "Fashion-MNIST", tr.n, batch, epochs, hp.lr,
           hp.momentum, hp.wd, lr_schedule_name(hp.schedule), (unsigned long long)seed, chunks);

    uint8_t *xb = xmalloc((size_t)batch * px);
    int32_t *yb = xmalloc((size_t)batch * sizeof(int32_t));
    int *perm = xmalloc((size_t)tr.n * sizeof(int));
    long steps = (tr.n + batch - 1) / batch;
    double *secs = xmalloc((size_t)runs * sizeof(double));
    uint64_t first_hash = 0;
    int mismatch = 0, first = 1;

    char *targ = xstrdup(threads_arg);
    for (char *tok = strtok(targ, ","); tok; tok = strtok(NULL, ",")) {
        int threads = atoi(tok);
        errbuf e;
        backend *be = backend_cpu_create(threads, &e);
        if (!be) {
            fprintf(stderr, "bench_nn: %s\n", e.msg);
            return 2;
        }
        if (do_ops)
            be = timed_backend(be);
        uint64_t h = 0;
        double last_loss = 0, total_compute = 0;
        for (int r = 0; r < runs; r++) {
            model m;
            if (model_create(&m, model_name, tr.C, tr.H, tr.W, 10, batch, be, &e) != 0) {
                fprintf(stderr, "bench_nn: %s\n", e.msg);
                return 2;
            }
            model_init_params(&m, seed);
            double compute = 0;
            long step = 0;
            for (int ep = 0; ep < epochs; ep++) {
                for (int i = 0; i < tr.n; i++)
                    perm[i] = i;
                rng rg = rng_keyed(seed, RNG_SHUFFLE, (uint64_t)ep, 0);
                for (int i = tr.n - 1; i > 0; i--) {
                    int k = (int)rng_below(&rg, (uint32_t)i + 1), t = perm[i];
                    perm[i] = perm[k];
                    perm[k] = t;
                }
                step_stats tot = {0};
                for (long s = 0; s < steps; s++, step++) {
                    int b0 = (int)(s * batch), B = tr.n - b0 < batch ? tr.n - b0 : batch;
                    for (int b = 0; b < B; b++) {
                        memcpy(xb + (size_t)b * px, tr.x + (size_t)perm[b0 + b] * px, px);
                        yb[b] = tr.y[perm[b0 + b]];
                    }
                    model_batch mb = {.x = xb, .labels = yb, .B = B};
                    mb.split.global_batch = chunks ? B : 0; /* the loss of the whole batch */
                    mb.split.nchunks = chunks; /* the chunks of B (sampler_slice's cut) */
                    for (int j = 0; j < chunks; j++)
                        mb.split.chunk[j] =
                            (int)((long)(j + 1) * B / chunks - (long)j * B / chunks);
                    float cur = (float)lr_at(hp.schedule, hp.lr, ep, epochs, s, steps);
                    step_stats st;
                    double t0 = now_sec();
                    int rc = model_train_batch(&m, &mb, cur, (float)hp.momentum, (float)hp.wd, &st);
                    compute += now_sec() - t0;
                    if (rc) {
                        char msg[128];
                        fprintf(stderr, "bench_nn: %s\n",
                                model_nonfinite_msg(msg, sizeof msg, ep + 1, s, st.loss_sum, cur));
                        return 4;
                    }
                    step_stats_add(&tot, &st);
                }
                last_loss = tot.loss_sum / (double)tot.n;
                if (do_eval && r == 0) {
                    double tl, ta;
                    evaluate(&m, &te, batch, xb, yb, &tl, &ta);
                    printf("  threads %d epoch %d: train loss %.4f acc %.4f  test loss %.4f acc "
                           "%.4f\n",
                           threads, ep + 1, last_loss, (double)tot.correct / (double)tot.n, tl, ta);
                }
            }
            secs[r] = compute / epochs;
            total_compute += compute;
            float *p = xmalloc(m.nparams * sizeof(float));
            be->ops->download(be, p, m.params, m.nparams * sizeof(float));
            h = hash64(p, m.nparams * sizeof(float), 0);
            free(p);
            model_free(&m);
            printf(
                "  threads %d run %d: %.2f s/epoch compute (%.0f images/s), last epoch loss %.6f\n",
                threads, r + 1, secs[r], tr.n / secs[r], last_loss);
            fflush(stdout);
        }
        if (do_ops)
            ops_report(threads, steps * epochs * runs, total_compute);
        qsort(secs, (size_t)runs, sizeof(double), cmp_double);
        double med = secs[runs / 2];
        printf("threads %d: median %.2f s/epoch, %.0f images/s, params hash %016llx\n", threads,
               med, tr.n / med, (unsigned long long)h);
        if (first)
            first_hash = h;
        else if (h != first_hash)
            mismatch = 1;
        first = 0;
        be->ops->destroy(be);
    }
    if (mismatch)
        printf("WARNING: parameters differ between thread counts (determinism broken)\n");
    free(targ);
    free(secs);
    free(perm);
    free(xb);
    free(yb);
    free(tr.x);
    free(tr.y);
    free(te.x);
    free(te.y);
    return mismatch ? 1 : 0;
}
