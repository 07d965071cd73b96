/* twin.c — see twin.h. Each op allocates its operands on both backends,
 * runs, downloads and reports, then frees everything: no state between
 * calls but the rng.
 */
#define _POSIX_C_SOURCE 200809L
#include "nn/twin.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"

double twin_compare(const float *dev, const float *ref, size_t n, double rtol, size_t *worst)
{
    double mean = 0.0;
    for (size_t i = 0; i < n; i++)
        mean += fabs((double)ref[i]);
    mean = n ? mean / (double)n : 0.0;
    double bad = 0.0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double allowed = rtol * (fabs((double)ref[i]) + mean);
        double err = fabs((double)dev[i] - (double)ref[i]);
        double r;
        if (isnan(dev[i]) || isnan(ref[i]))
            r = INFINITY;
        else if (allowed > 0.0)
            r = err / allowed;
        else
            r = err > 0.0 ? INFINITY : 0.0;
        if (r > bad) {
            bad = r;
            wi = i;
        }
    }
    if (worst)
        *worst = wi;
    return bad;
}

double twin_judge(const twin_check *c, size_t *worst)
{
    if (c->measure == TWIN_ELEMENTWISE)
        return twin_compare(c->dev, c->ref, c->n, c->rtol, worst);
    double d2 = 0.0, r2 = 0.0, big = -1.0;
    size_t wi = 0;
    for (size_t i = 0; i < c->n; i++) {
        double d = (double)c->dev[i] - (double)c->ref[i];
        if (isnan(d))
            d = INFINITY;
        d2 += d * d;
        r2 += (double)c->ref[i] * c->ref[i];
        if (fabs(d) > big) {
            big = fabs(d);
            wi = i;
        }
    }
    if (worst)
        *worst = wi;
    double allowed = c->rtol * sqrt(r2);
    if (!isfinite(d2) || !isfinite(r2)) /* a NaN or infinity on either side */
        return INFINITY;
    return allowed > 0.0 ? sqrt(d2) / allowed : (d2 > 0.0 ? INFINITY : 0.0);
}

/* ---------------------------------------------------------------- operands on both backends */

typedef struct pair {
    void *dev, *ref;
} pair;

static pair pair_alloc(twin *t, size_t bytes)
{
    pair p = {t->dev->ops->alloc(t->dev, bytes), t->ref->ops->alloc(t->ref, bytes)};
    return p;
}

static pair pair_put(twin *t, const void *host, size_t bytes)
{
    pair p = pair_alloc(t, bytes);
    t->dev->ops->upload(t->dev, p.dev, host, bytes);
    t->ref->ops->upload(t->ref, p.ref, host, bytes);
    return p;
}

/* an output: NaN in every element until the op writes it */
static pair pair_nan(twin *t, size_t bytes)
{
    unsigned char *h = xmalloc(bytes ? bytes : 1);
    memset(h, 0xff, bytes);
    pair p = pair_put(t, h, bytes);
    free(h);
    return p;
}

static void pair_free(twin *t, pair *p)
{
    t->dev->ops->free(t->dev, p->dev);
    t->ref->ops->free(t->ref, p->ref);
    p->dev = p->ref = NULL;
}

static void report_host(twin *t, const char *what, const float *d, const float *r, size_t n,
                        double rtol)
{
    twin_check c = {what, d, r, n, rtol, TWIN_ELEMENTWISE};
    t->report(t->arg, &c);
}

/* download n floats of both sides and report them */
static void pair_report(twin *t, const char *what, const pair *p, size_t n, double rtol)
{
    float *d = xmalloc(n * sizeof *d + 1), *r = xmalloc(n * sizeof *r + 1);
    t->dev->ops->download(t->dev, d, p->dev, n * sizeof *d);
    t->ref->ops->download(t->ref, r, p->ref, n * sizeof *r);
    report_host(t, what, d, r, n, rtol);
    free(d);
    free(r);
}

static float *rand_floats(twin *t, size_t n, float lo, float hi)
{
    float *h = xmalloc(n * sizeof *h + 1);
    for (size_t i = 0; i < n; i++)
        h[i] = lo + (hi - lo) * rng_uniform(&t->r);
    return h;
}

static uint8_t *rand_bytes(twin *t, size_t n)
{
    uint8_t *h = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++)
        h[i] = (uint8_t)rng_below(&t->r, 256);
    return h;
}

static const float norm_mean[4] = {0.485f, 0.456f, 0.406f, 0.5f};
static const float norm_std[4] = {0.229f, 0.224f, 0.225f, 0.5f};

/* ---------------------------------------------------------------- ops */

void twin_normalize(twin *t, int B, int C, int HW)
{
    if (C > 4)
        C = 4;
    size_t n = (size_t)B * C * HW;
    uint8_t *h = rand_bytes(t, n);
    pair in = pair_put(t, h, n), out = pair_nan(t, n * sizeof(float));
    t->dev->ops->normalize_u8(t->dev, out.dev, in.dev, B, C, HW, norm_mean, norm_std);
    t->ref->ops->normalize_u8(t->ref, out.ref, in.ref, B, C, HW, norm_mean, norm_std);
    char what[64];
    snprintf(what, sizeof what, "normalize u8 %dx%dx%d", B, C, HW);
    pair_report(t, what, &out, n, TWIN_RTOL_OP);
    pair_free(t, &in), pair_free(t, &out);
    free(h);
}

void twin_conv(twin *t, int B, int C, int H, int W, int K, int R, int S, int stride, int pad,
               int with_din)
{
    conv_shape s;
    if (conv_shape_init(&s, B, C, H, W, K, R, S, stride, pad) != 0)
        return;
    size_t nin = (size_t)B * C * H * W, nw = (size_t)K * C * R * S,
           nout = (size_t)B * K * s.OH * s.OW, f = sizeof(float);
    float *h_in = rand_floats(t, nin, -1, 1), *h_w = rand_floats(t, nw, -0.5f, 0.5f);
    float *h_b = rand_floats(t, (size_t)K, -0.5f, 0.5f), *h_dout = rand_floats(t, nout, -1, 1);
    pair in = pair_put(t, h_in, nin * f), w = pair_put(t, h_w, nw * f);
    pair bias = pair_put(t, h_b, K * f), dout = pair_put(t, h_dout, nout * f);
    pair out = pair_nan(t, nout * f), din = pair_nan(t, nin * f), dw = pair_nan(t, nw * f),
         db = pair_nan(t, K * f);
    void *pd = backend_conv_plan(t->dev, &s), *pr = backend_conv_plan(t->ref, &s);
    t->dev->ops->conv_forward(t->dev, pd, out.dev, in.dev, w.dev, bias.dev, &s);
    t->ref->ops->conv_forward(t->ref, pr, out.ref, in.ref, w.ref, bias.ref, &s);
    t->dev->ops->conv_backward(t->dev, pd, with_din ? din.dev : NULL, dw.dev, db.dev, dout.dev,
                               in.dev, w.dev, &s);
    t->ref->ops->conv_backward(t->ref, pr, with_din ? din.ref : NULL, dw.ref, db.ref, dout.ref,
                               in.ref, w.ref, &s);
    char name[48], what[64];
    snprintf(name, sizeof name, "conv %dx%dx%dx%d k%d %dx%d s%d p%d", B, C, H, W, K, R, S, stride,
             pad);
    snprintf(what, sizeof what, "%s fwd", name);
    pair_report(t, what, &out, nout, TWIN_RTOL_OP);
    if (with_din) {
        snprintf(what, sizeof what, "%s dx", name);
        pair_report(t, what, &din, nin, TWIN_RTOL_OP);
    }
    snprintf(what, sizeof what, "%s dw", name);
    pair_report(t, what, &dw, nw, TWIN_RTOL_OP);
    snprintf(what, sizeof what, "%s db", name);
    pair_report(t, what, &db, (size_t)K, TWIN_RTOL_OP);
    backend_conv_plan_free(t->dev, pd);
    backend_conv_plan_free(t->ref, pr);
    pair *all[] = {&in, &w, &bias, &dout, &out, &din, &dw, &db};
    // NOLINTNEXTLINE(bugprone-sizeof-expression): all is an array of pointers; this is its length
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        pair_free(t, all[i]);
    free(h_in), free(h_w), free(h_b), free(h_dout);
}

void twin_relu(twin *t, size_t n)
{
    float *h_in = rand_floats(t, n, -1, 1), *h_dout = rand_floats(t, n, -1, 1);
    h_in[0] = 0.0f; /* the kink */
    size_t f = sizeof(float);
    pair in = pair_put(t, h_in, n * f), dout = pair_put(t, h_dout, n * f);
    pair out = pair_nan(t, n * f), din = pair_nan(t, n * f);
    t->dev->ops->relu_forward(t->dev, out.dev, in.dev, n);
    t->ref->ops->relu_forward(t->ref, out.ref, in.ref, n);
    t->dev->ops->relu_backward(t->dev, din.dev, dout.dev, out.dev, n);
    t->ref->ops->relu_backward(t->ref, din.ref, dout.ref, out.ref, n);
    char what[64];
    snprintf(what, sizeof what, "relu %zu fwd", n);
    pair_report(t, what, &out, n, TWIN_RTOL_OP);
    snprintf(what, sizeof what, "relu %zu bwd", n);
    pair_report(t, what, &din, n, TWIN_RTOL_OP);
    pair_free(t, &in), pair_free(t, &dout), pair_free(t, &out), pair_free(t, &din);
    free(h_in), free(h_dout);
}

/* Max-pool's gradient, whatever the tie order: cuDNN documents none, so
 * in each 2x2 window the gradient must land on exactly ONE element, whose
 * input equals the window's maximum, with the window's dout as its value;
 * elements outside every window get nothing. Reported per window: the
 * device's gradient where that holds (NaN where it does not) against
 * dout. */
static void maxpool_bwd_report(twin *t, const char *what, const maxpool_shape *s, const float *in,
                               const float *dout, const pair *din)
{
    size_t nin = (size_t)s->B * s->C * s->H * s->W, nout = (size_t)s->B * s->C * s->OH * s->OW;
    float *g = xmalloc(nin * sizeof *g + 1), *got = xmalloc(nout * sizeof *got + 1);
    t->dev->ops->download(t->dev, g, din->dev, nin * sizeof *g);
    size_t stray = 0;
    for (size_t i = 0; i < nin; i++) { /* outside every window (odd H or W) */
        int x = (int)(i % (size_t)s->W), y = (int)(i / (size_t)s->W % (size_t)s->H);
        stray += (y >= 2 * s->OH || x >= 2 * s->OW) && g[i] != 0.0f;
    }
    for (size_t o = 0; o < nout; o++) {
        int ox = (int)(o % (size_t)s->OW), oy = (int)(o / (size_t)s->OW % (size_t)s->OH);
        size_t plane = o / ((size_t)s->OW * s->OH) * (size_t)s->H * s->W;
        float mx = -INFINITY;
        for (int k = 0; k < 4; k++) {
            size_t i = plane + (size_t)(2 * oy + k / 2) * s->W + (size_t)(2 * ox + k % 2);
            mx = in[i] > mx ? in[i] : mx;
        }
        int hits = 0, on_max = 1;
        float val = 0.0f;
        for (int k = 0; k < 4; k++) {
            size_t i = plane + (size_t)(2 * oy + k / 2) * s->W + (size_t)(2 * ox + k % 2);
            if (g[i] != 0.0f) {
                hits++;
                val = g[i];
                on_max &= in[i] == mx;
            }
        }
        got[o] = (hits == 1 && on_max) || (hits == 0 && dout[o] == 0.0f) ? val : NAN;
    }
    if (stray)
        got[0] = NAN;
    report_host(t, what, got, dout, nout, TWIN_RTOL_OP);
    free(g);
    free(got);
}

/* Max pool forward and backward on both backends over random inputs
 * (rounded to four values with ties, so most windows tie). per_window:
 * judge the gradient window by window, whichever tied element it lands on
 * (non-overlapping windows); else element by element (no ties). */
static void maxpool_pair(twin *t, const maxpool_shape *s, int ties, int per_window,
                         const char *name)
{
    size_t nin = (size_t)s->B * s->C * s->H * s->W, nout = (size_t)s->B * s->C * s->OH * s->OW,
           f = sizeof(float);
    float *h_in = rand_floats(t, nin, -1, 1), *h_dout = rand_floats(t, nout, -1, 1);
    if (ties)
        for (size_t i = 0; i < nin; i++)
            h_in[i] = floorf(h_in[i] * 2.0f) / 2.0f;
    pair in = pair_put(t, h_in, nin * f), dout = pair_put(t, h_dout, nout * f);
    pair out = pair_nan(t, nout * f), din = pair_nan(t, nin * f);
    t->dev->ops->maxpool_forward(t->dev, out.dev, in.dev, s);
    t->ref->ops->maxpool_forward(t->ref, out.ref, in.ref, s);
    t->dev->ops->maxpool_backward(t->dev, din.dev, dout.dev, out.dev, in.dev, s);
    t->ref->ops->maxpool_backward(t->ref, din.ref, dout.ref, out.ref, in.ref, s);
    char what[112];
    snprintf(what, sizeof what, "%s fwd", name);
    pair_report(t, what, &out, nout, TWIN_RTOL_OP);
    snprintf(what, sizeof what, "%s bwd%s", name, per_window ? ", per window" : "");
    if (per_window)
        maxpool_bwd_report(t, what, s, h_in, h_dout, &din);
    else
        pair_report(t, what, &din, nin, TWIN_RTOL_OP);
    pair_free(t, &in), pair_free(t, &dout), pair_free(t, &out), pair_free(t, &din);
    free(h_in), free(h_dout);
}

void twin_maxpool(twin *t, int B, int C, int H, int W, int ties)
{
    maxpool_shape s;
    if (maxpool_shape_init(&s, B, C, H, W) != 0)
        return;
    char name[48];
    snprintf(name, sizeof name, "maxpool %dx%dx%dx%d%s", B, C, H, W, ties ? " ties" : "");
    maxpool_pair(t, &s, ties, 1, name);
}

void twin_fc(twin *t, int B, int M, int N, int with_din)
{
    size_t ni = (size_t)B * M, nw = (size_t)N * M, no = (size_t)B * N, f = sizeof(float);
    float *h_in = rand_floats(t, ni, -1, 1), *h_w = rand_floats(t, nw, -0.3f, 0.3f);
    float *h_b = rand_floats(t, (size_t)N, -1, 1), *h_dout = rand_floats(t, no, -1, 1);
    pair in = pair_put(t, h_in, ni * f), w = pair_put(t, h_w, nw * f), b = pair_put(t, h_b, N * f);
    pair dout = pair_put(t, h_dout, no * f), out = pair_nan(t, no * f), din = pair_nan(t, ni * f);
    pair dw = pair_nan(t, nw * f), db = pair_nan(t, N * f);
    t->dev->ops->fc_forward(t->dev, out.dev, in.dev, w.dev, b.dev, B, M, N);
    t->ref->ops->fc_forward(t->ref, out.ref, in.ref, w.ref, b.ref, B, M, N);
    t->dev->ops->fc_backward(t->dev, with_din ? din.dev : NULL, dw.dev, db.dev, dout.dev, in.dev,
                             w.dev, B, M, N);
    t->ref->ops->fc_backward(t->ref, with_din ? din.ref : NULL, dw.ref, db.ref, dout.ref, in.ref,
                             w.ref, B, M, N);
    char name[48], what[64];
    snprintf(name, sizeof name, "fc %dx%d -> %d", B, M, N);
    snprintf(what, sizeof what, "%s fwd", name);
    pair_report(t, what, &out, no, TWIN_RTOL_OP);
    if (with_din) {
        snprintf(what, sizeof what, "%s dx", name);
        pair_report(t, what, &din, ni, TWIN_RTOL_OP);
    }
    snprintf(what, sizeof what, "%s dw", name);
    pair_report(t, what, &dw, nw, TWIN_RTOL_OP);
    snprintf(what, sizeof what, "%s db", name);
    pair_report(t, what, &db, (size_t)N, TWIN_RTOL_OP);
    pair *all[] = {&in, &w, &b, &dout, &out, &din, &dw, &db};
    // NOLINTNEXTLINE(bugprone-sizeof-expression): all is an array of pointers; this is its length
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        pair_free(t, all[i]);
    free(h_in), free(h_w), free(h_b), free(h_dout);
}

void twin_maxpool_k(twin *t, int B, int C, int H, int W, int k, int stride, int pad)
{
    maxpool_shape s;
    if (maxpool_shape_init_k(&s, B, C, H, W, k, stride, pad) != 0)
        return;
    char name[64];
    snprintf(name, sizeof name, "maxpool %dx%dx%dx%d %dx%d/%d p%d", B, C, H, W, k, k, stride, pad);
    maxpool_pair(t, &s, 0, 0, name);
}

void twin_bn(twin *t, int B, int C, int HW)
{
    size_t n = (size_t)B * C * HW, f = sizeof(float);
    /* a large mean per channel: a one-pass variance would lose digits */
    float *h_x = rand_floats(t, n, -1, 1), *h_dy = rand_floats(t, n, -1, 1);
    for (size_t i = 0; i < n; i++)
        h_x[i] = h_x[i] * 2.0f + (float)((i / (size_t)HW) % (size_t)C);
    float *h_sc = rand_floats(t, (size_t)C, 0.5f, 1.5f), *h_sh = rand_floats(t, (size_t)C, -1, 1);
    float *h_rm = rand_floats(t, (size_t)C, -1, 1), *h_rv = rand_floats(t, (size_t)C, 0.5f, 2);
    pair x = pair_put(t, h_x, n * f), dy = pair_put(t, h_dy, n * f);
    pair sc = pair_put(t, h_sc, C * f), sh = pair_put(t, h_sh, C * f);
    pair rm = pair_put(t, h_rm, C * f), rv = pair_put(t, h_rv, C * f);
    pair y = pair_nan(t, n * f), yi = pair_nan(t, n * f), dx = pair_nan(t, n * f);
    pair sm = pair_nan(t, C * f), si = pair_nan(t, C * f), dsc = pair_nan(t, C * f),
         dsh = pair_nan(t, C * f);
    backend *bs[2] = {t->dev, t->ref};
    for (int k = 0; k < 2; k++) {
        backend *b = bs[k];
#define P(p) (k ? (p).ref : (p).dev)
        b->ops->bn_forward_train(b, P(y), P(sm), P(si), P(rm), P(rv), P(x), P(sc), P(sh), B, C, HW,
                                 0.1f, 1e-5f);
        b->ops->bn_forward_infer(b, P(yi), P(x), P(sc), P(sh), P(rm), P(rv), B, C, HW, 1e-5f);
        b->ops->bn_backward(b, P(dx), P(dsc), P(dsh), P(dy), P(x), P(sc), P(sm), P(si), B, C, HW);
#undef P
    }
    char name[48], what[80];
    snprintf(name, sizeof name, "batch norm %dx%dx%d", B, C, HW);
    struct {
        const char *o;
        pair *p;
        size_t n;
    } outs[] = {{"train y", &y, n},
                {"save_mean", &sm, (size_t)C},
                {"save_invstd", &si, (size_t)C},
                {"run_mean", &rm, (size_t)C},
                {"run_var", &rv, (size_t)C},
                {"infer y", &yi, n},
                {"dx", &dx, n},
                {"dscale", &dsc, (size_t)C},
                {"dshift", &dsh, (size_t)C}};
    for (size_t i = 0; i < sizeof outs / sizeof *outs; i++) {
        snprintf(what, sizeof what, "%s %s", name, outs[i].o);
        pair_report(t, what, outs[i].p, outs[i].n, TWIN_RTOL_OP);
    }
    pair *all[] = {&x, &dy, &sc, &sh, &rm, &rv, &y, &yi, &dx, &sm, &si, &dsc, &dsh};
    // NOLINTNEXTLINE(bugprone-sizeof-expression): all is an array of pointers; this is its length
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        pair_free(t, all[i]);
    free(h_x), free(h_dy), free(h_sc), free(h_sh), free(h_rm), free(h_rv);
}

void twin_add(twin *t, size_t n)
{
    size_t f = sizeof(float);
    float *h_a = rand_floats(t, n, -1, 1), *h_b = rand_floats(t, n, -1, 1);
    pair a = pair_put(t, h_a, n * f), b = pair_put(t, h_b, n * f), out = pair_nan(t, n * f),
         cp = pair_nan(t, n * f);
    t->dev->ops->add(t->dev, out.dev, a.dev, b.dev, n);
    t->ref->ops->add(t->ref, out.ref, a.ref, b.ref, n);
    char what[64];
    snprintf(what, sizeof what, "add %zu", n);
    pair_report(t, what, &out, n, TWIN_RTOL_OP);
    t->dev->ops->add(t->dev, a.dev, a.dev, b.dev, n);
    t->ref->ops->add(t->ref, a.ref, a.ref, b.ref, n);
    snprintf(what, sizeof what, "add %zu in place", n);
    pair_report(t, what, &a, n, TWIN_RTOL_OP);
    t->dev->ops->copy(t->dev, cp.dev, b.dev, n);
    t->ref->ops->copy(t->ref, cp.ref, b.ref, n);
    snprintf(what, sizeof what, "copy %zu", n);
    pair_report(t, what, &cp, n, TWIN_RTOL_OP);
    pair_free(t, &a), pair_free(t, &b), pair_free(t, &out), pair_free(t, &cp);
    free(h_a), free(h_b);
}

void twin_gap(twin *t, int B, int C, int HW)
{
    size_t n = (size_t)B * C * HW, no = (size_t)B * C, f = sizeof(float);
    float *h_in = rand_floats(t, n, -1, 1), *h_dout = rand_floats(t, no, -1, 1);
    pair in = pair_put(t, h_in, n * f), dout = pair_put(t, h_dout, no * f);
    pair out = pair_nan(t, no * f), din = pair_nan(t, n * f);
    t->dev->ops->gap_forward(t->dev, out.dev, in.dev, B, C, HW);
    t->ref->ops->gap_forward(t->ref, out.ref, in.ref, B, C, HW);
    t->dev->ops->gap_backward(t->dev, din.dev, dout.dev, B, C, HW);
    t->ref->ops->gap_backward(t->ref, din.ref, dout.ref, B, C, HW);
    char what[64];
    snprintf(what, sizeof what, "global avg pool %dx%dx%d fwd", B, C, HW);
    pair_report(t, what, &out, no, TWIN_RTOL_OP);
    snprintf(what, sizeof what, "global avg pool %dx%dx%d bwd", B, C, HW);
    pair_report(t, what, &din, n, TWIN_RTOL_OP);
    pair_free(t, &in), pair_free(t, &dout), pair_free(t, &out), pair_free(t, &din);
    free(h_in), free(h_dout);
}

void twin_softmax_xent(twin *t, int B, int K, float shift)
{
    size_t n = (size_t)B * K, f = sizeof(float);
    float *h = rand_floats(t, n, -4, 4);
    for (int k = 0; k < K && B > 2; k++) {
        h[K + k] += shift;
        h[2 * K + k] -= shift;
    }
    int32_t *lab = xmalloc((size_t)B * sizeof *lab);
    for (int b = 0; b < B; b++)
        lab[b] = (int32_t)rng_below(&t->r, (uint32_t)K);
    float scale = 1.0f / (float)B;
    pair logits = pair_put(t, h, n * f), labels = pair_put(t, lab, (size_t)B * sizeof *lab);
    pair dl = pair_nan(t, n * f), loss = pair_nan(t, (size_t)B * f),
         pred = pair_nan(t, (size_t)B * sizeof(int32_t));
    t->dev->ops->softmax_xent(t->dev, dl.dev, loss.dev, pred.dev, logits.dev, labels.dev, B, K,
                              scale);
    t->ref->ops->softmax_xent(t->ref, dl.ref, loss.ref, pred.ref, logits.ref, labels.ref, B, K,
                              scale);
    char name[48], what[64];
    snprintf(name, sizeof name, "softmax xent %dx%d", B, K);
    snprintf(what, sizeof what, "%s dlogits", name);
    pair_report(t, what, &dl, n, TWIN_RTOL_OP);
    snprintf(what, sizeof what, "%s loss", name);
    pair_report(t, what, &loss, (size_t)B, TWIN_RTOL_OP);
    /* argmax: compared exactly, as floats */
    int32_t *pd = xmalloc((size_t)B * sizeof *pd), *pr = xmalloc((size_t)B * sizeof *pr);
    t->dev->ops->download(t->dev, pd, pred.dev, (size_t)B * sizeof *pd);
    t->ref->ops->download(t->ref, pr, pred.ref, (size_t)B * sizeof *pr);
    float *fd = xmalloc((size_t)B * f), *fr = xmalloc((size_t)B * f);
    for (int b = 0; b < B; b++)
        fd[b] = (float)pd[b], fr[b] = (float)pr[b];
    snprintf(what, sizeof what, "%s argmax", name);
    report_host(t, what, fd, fr, (size_t)B, 0.0);
    pair *all[] = {&logits, &labels, &dl, &loss, &pred};
    // NOLINTNEXTLINE(bugprone-sizeof-expression): all is an array of pointers; this is its length
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        pair_free(t, all[i]);
    free(h), free(lab), free(pd), free(pr), free(fd), free(fr);
}

void twin_sgd(twin *t, size_t n, int steps, float lr, float momentum, float wd)
{
    size_t f = sizeof(float);
    float *h_w = rand_floats(t, n, -1, 1), *h_v = rand_floats(t, n, -0.1f, 0.1f),
          *h_g = rand_floats(t, n, -1, 1);
    pair w = pair_put(t, h_w, n * f), v = pair_put(t, h_v, n * f), g = pair_put(t, h_g, n * f);
    for (int s = 0; s < steps; s++) {
        t->dev->ops->sgd_update(t->dev, w.dev, v.dev, g.dev, n, lr, momentum, wd);
        t->ref->ops->sgd_update(t->ref, w.ref, v.ref, g.ref, n, lr, momentum, wd);
    }
    char what[64];
    snprintf(what, sizeof what, "sgd %zu x%d weights", n, steps);
    pair_report(t, what, &w, n, TWIN_RTOL_OP);
    snprintf(what, sizeof what, "sgd %zu x%d velocity", n, steps);
    pair_report(t, what, &v, n, TWIN_RTOL_OP);
    pair_free(t, &w), pair_free(t, &v), pair_free(t, &g);
    free(h_w), free(h_v), free(h_g);
}

int twin_staging(twin *t, int B, int C, int HW, double *busy_s, char *pin_note, size_t note_len)
{
    const backend_ops *o = t->dev->ops;
    pin_note[0] = '\0';
    *busy_s = 0.0;
    if (!backend_has_staging(t->dev))
        return -1;
    if (C > 4)
        C = 4;
    size_t n = (size_t)B * C * HW, f = sizeof(float);
    uint8_t *host = rand_bytes(t, 2 * n); /* two batches, as two ring slots */
    errbuf e;
    int pinned = o->host_pin(t->dev, host, 2 * n, &e) == 0;
    if (!pinned)
        snprintf(pin_note, note_len, "%s", e.msg);
    uint8_t *d_in = o->alloc(t->dev, n);
    pair out[2] = {pair_nan(t, n * f), pair_nan(t, n * f)};
    pair in = pair_alloc(t, n);
    o->busy_take(t->dev); /* start from zero */
    for (int k = 0; k < 2; k++) {
        o->stage_copy(t->dev, 0, d_in, host + (size_t)k * n, n);
        o->stage_wait(t->dev, 0);
        o->busy_begin(t->dev);
        o->normalize_u8(t->dev, out[k].dev, d_in, B, C, HW, norm_mean, norm_std);
        o->busy_end(t->dev);
        o->stage_release(t->dev, 0);
        t->ref->ops->upload(t->ref, in.ref, host + (size_t)k * n, n);
        t->ref->ops->normalize_u8(t->ref, out[k].ref, in.ref, B, C, HW, norm_mean, norm_std);
    }
    o->stage_done(t->dev, 0, 1);
    for (int k = 0; k < 2; k++) {
        char what[64];
        snprintf(what, sizeof what, "staged batch %d (copy stream) %dx%dx%d", k + 1, B, C, HW);
        pair_report(t, what, &out[k], n, TWIN_RTOL_OP);
    }
    *busy_s = o->busy_take(t->dev);
    if (pinned)
        o->host_unpin(t->dev, host);
    o->free(t->dev, d_in);
    pair_free(t, &out[0]), pair_free(t, &out[1]), pair_free(t, &in);
    free(host);
    return 0;
}

/* ---------------------------------------------------------------- training */

/* each parameter tensor, then its momentum, of both models */
static void report_state(twin *t, model *md, model *mr, const char *tag)
{
    size_t n = md->nparams;
    float *d = xmalloc(2 * n * sizeof *d + 1), *r = xmalloc(2 * n * sizeof *r + 1);
    t->dev->ops->download(t->dev, d, md->params, n * sizeof *d);
    t->dev->ops->download(t->dev, d + n, md->momentum, n * sizeof *d);
    t->ref->ops->download(t->ref, r, mr->params, n * sizeof *r);
    t->ref->ops->download(t->ref, r + n, mr->momentum, n * sizeof *r);
    for (int i = 0; i < md->ntensors; i++)
        for (int mom = 0; mom < 2; mom++) {
            const model_tensor *mt = &md->tensors[i];
            char what[128];
            snprintf(what, sizeof what, "%s %s%s", tag, mt->name, mom ? " momentum" : "");
            size_t off = mt->offset + (mom ? n : 0);
            twin_check c = {what, d + off, r + off, mt->n, TWIN_RTOL_TRAIN, TWIN_NORM};
            t->report(t->arg, &c);
        }
    free(d);
    free(r);
}

int twin_train(twin *t, const char *name, const twin_data *d, int B, int steps, uint64_t seed,
               errbuf *e)
{
    model md, mr;
    model_hparams hp;
    if (model_defaults(name, &hp) != 0)
        return errf(e, "twin_train: unknown model %s", name);
    if (model_create(&md, name, d->C, d->H, d->W, d->nclasses, B, t->dev, e) != 0)
        return -1;
    if (model_create(&mr, name, d->C, d->H, d->W, d->nclasses, B, t->ref, e) != 0) {
        model_free(&md);
        return -1;
    }
    model_init_params(&md, seed);
    model_init_params(&mr, seed);
    size_t px = (size_t)d->C * d->H * d->W;
    pair x = pair_alloc(t, (size_t)B * px);
    uint8_t *xb = xmalloc((size_t)B * px);
    int32_t *lb = xmalloc((size_t)B * sizeof *lb);
    char tag[64];
    snprintf(tag, sizeof tag, "%s b%d", name, B);
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < B; i++) { /* batch s: samples s*B .. s*B+B-1, wrapping */
            size_t k = ((size_t)s * B + i) % (size_t)d->n;
            memcpy(xb + i * px, d->x + k * px, px);
            lb[i] = d->labels[k];
        }
        t->dev->ops->upload(t->dev, x.dev, xb, (size_t)B * px);
        t->ref->ops->upload(t->ref, x.ref, xb, (size_t)B * px);
        step_stats sd, sr;
        model_train_step(&md, x.dev, lb, B, (float)hp.lr, (float)hp.momentum, (float)hp.wd, &sd);
        model_train_step(&mr, x.ref, lb, B, (float)hp.lr, (float)hp.momentum, (float)hp.wd, &sr);
        float ld = (float)(sd.loss_sum / (double)sd.n), lr = (float)(sr.loss_sum / (double)sr.n);
        char what[96];
        snprintf(what, sizeof what, "%s step %d loss", tag, s + 1);
        twin_check c = {what, &ld, &lr, 1, TWIN_RTOL_TRAIN, TWIN_NORM}; /* |d - r| <= rtol |r| */
        t->report(t->arg, &c);
    }
    char what[96];
    snprintf(what, sizeof what, "%s step %d", tag, steps);
    report_state(t, &md, &mr, what);
    pair_free(t, &x);
    free(xb);
    free(lb);
    model_free(&md);
    model_free(&mr);
    return 0;
}
