/* conv.c — 2-D convolution on the CPU: im2col + OpenBLAS sgemm, and the
 * plans that run the other algorithms instead.
 *
 * Per sample b (P = OH*OW output pixels, CRS = C*R*S taps), the GEMM path:
 *   forward   col_b (CRS x P) = im2col(in_b);  out_b (K x P) = w (K x CRS) . col_b + bias
 *   backward  dw     += dout_b (K x P) . col_b^T             (CONV_DW_GEMM), or
 *             dw^T   += col_b (CRS x P) . dout_b^T           (CONV_DW_GEMM_T: transposed
 *                        at the end of each chunk)
 *             dbias  += dout_b . ones(P)
 *             din_b   = col2im(w^T (CRS x K) . dout_b)  (when din is wanted)
 *
 * Which algorithm each pass runs is conv_choose's (conv_choice.c: every
 * threshold, with its measurement); a plan keeps the choice (p->algo) and
 * the code here switches on it. The others:
 * - tap by tap (CONV_*_TAP: stride 1, 3x3 or 2x2, tap_conv below): each
 *   of the R*S taps is a GEMM straight on the padded input, computed on
 *   the padded grid, with no col; din is the same kind of convolution of
 *   dout (padded by R-1-pad) with the flipped, transposed weights (p->ts),
 *   and dw^T is R*S GEMMs of the padded input against dout spread onto
 *   that grid. These GEMMs are small enough that OpenBLAS runs them
 *   without packing.
 * - the AVX-512 direct kernel (CONV_*_DIRECT, conv_direct.c) in place of
 *   those GEMMs, and its stride-2 3x3 pad-1 version (CONV_*_DIRECT_S2:
 *   the resnets' downsampling) on the padded input's 4 even/odd phases;
 * - Winograd F(2x2, 3x3) (CONV_FWD_WINO, CONV_DIN_WINO: conv_wino.c, 16
 *   multiplies per 2x2 outputs instead of 36), the forward a few samples
 *   per task, din a backward chunk's samples at once; and its weight
 *   gradient (CONV_DW_WINO, conv_wino_dw.c) over a chunk's samples.
 *
 * Why per sample rather than one GEMM over the whole batch: the shapes of
 * the nets here are small (lenet's second conv is 50 x 64 x 500 per
 * sample), and a per-sample col of at most a few hundred KB stays in the
 * core's L2 between im2col and the GEMM that consumes it; the output lands
 * in NCHW directly, with no transpose. docs/BENCH-NN.md has the numbers.
 *
 * Backward recomputes each sample's col rather than keeping the forward's:
 * a stride-1 im2col costs a few µs per sample into per-thread scratch that
 * stays in L2, while keeping a whole batch of cols (12 MB for lenet at batch
 * 64) costs more in memory traffic than it saves (measured: 12.2 vs 13.3 ms
 * per lenet step, one thread). It also keeps backward independent of what
 * ran before it.
 *
 * Threads: forward runs one task per sample. Backward cuts the batch into
 * chunks whose size depends only on B (about CONV_CHUNK samples each, at
 * most CONV_MAX_CHUNKS chunks); each chunk sums its samples' weight and bias
 * gradients in sample order into its own partial, and the partials are
 * added in chunk order — the same numbers for any thread count. With
 * groups (backend_ops.batch_groups) each group is cut the same way by its
 * own size, its chunks' partials are added in order into the group's sum,
 * and the group sums are added as a balanced tree: a group's sum depends on
 * its samples alone, so the canonical sums cost next to nothing here.
 *
 * Scratch: every plan's im2col buffers, padded inputs and weight-gradient
 * partials live in one arena of the backend (cpu_ctx.conv_scratch) as
 * large as the largest plan needs, not one set per plan: a resnet18 keeps
 * three plans (batch sizes) for each of 20 convolutions, and the partials
 * of a 512-channel 3x3 conv alone are 150 MB (measured: 2.7 GB resident
 * for resnet18 at 64 px, batch 32, before; 0.75 GB after, same results).
 *
 * A 1x1, stride 1, unpadded convolution skips im2col (col_b is in_b:
 * p->col_is_in). A NULL bias (and dbias) is a convolution without one
 * (before batch norm).
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "cpu/conv_choice.h"
#include "cpu/conv_direct.h"
#include "cpu/conv_wino.h"
#include "cpu/conv_wino_dw.h"
#include "cpu/internal.h"

#define CONV_CHUNK 8
#define CONV_MAX_CHUNKS 16
#define CONV_MAX_PIECES (BACKEND_GROUPS_MAX * CONV_MAX_CHUNKS)
#define REDUCE_BLOCK 16384

/* samples per backward chunk: a function of B alone */
static int conv_chunk(int B)
{
    int n = (B + CONV_CHUNK - 1) / CONV_CHUNK;
    if (n > CONV_MAX_CHUNKS)
        n = CONV_MAX_CHUNKS;
    return (B + n - 1) / n;
}

typedef struct conv_plan_cpu {
    conv_shape s;
    int P, CRS;
    /* the algorithm of each pass (conv_choice.c) */
    conv_choice algo;
    /* a 1x1, stride 1, unpadded conv: the col is the input itself (no
     * im2col; the same GEMMs, the same bits) */
    int col_is_in;
    /* the transposes of the weight gradient in AVX-512 registers
     * (conv_caps.direct; the same bits as transpose_block) */
    int avx512;
    /* the input gradient as a stride-1 convolution of dout (pad R-1-pad)
     * with the flipped, transposed weights (C x K*R*S): CONV_DIN_TAP,
     * _DIRECT and _WINO, and the tap-by-tap forwards' plans */
    conv_shape ts; /* that convolution's shape (B unused) */
    /* the plan's own: w for the forward and the flipped, transposed
     * weights for din, in their algorithms' layouts (tap: R*S x K x C
     * each; the direct, Winograd and stride-2 kernels' own) */
    float *wtap, *wftap;
    int threads;
    int nchunks; /* partials (room for) */
    /* in the backend's shared scratch (cpu_ctx.conv_scratch), set from
     * the offsets below at the start of each operation */
    float *col;  /* threads x CRS x P im2col scratch */
    float *dcol; /* threads x dcol_n: CRS x P (CONV_DIN_GEMM) */
    size_t dcol_n;
    /* tap-by-tap plans (tap_conv): wide_n floats per thread for a K x
     * OH*Wp product (or dout spread onto that grid); the direct and
     * Winograd weight gradients' scratch (wino_dw's per-chunk sums at the
     * end) */
    float *wide;
    size_t col_n, wide_n;
    float *xpad; /* padded stride-1 convs: threads x C x (H+2pad) x (W+2pad) */
    size_t xpad_n;
    float *wt;     /* threads x CRS x K: a chunk's weight gradient, transposed */
    float *part_w; /* nchunks x K x CRS */
    float *part_b; /* nchunks x K */
    size_t off_col, off_dcol, off_xpad, off_wide, off_wt, off_part_w, off_part_b;
    float *ones; /* P ones: bias gradients as a GEMV (the plan's own) */
} conv_plan_cpu;

/* n floats at *at, 16-float aligned; returns where they start */
static size_t carve(size_t *at, size_t n)
{
    size_t o = *at;
    *at += (n + 15) / 16 * 16;
    return o;
}

/* The plan's place in the shared arena with room for n partials; grows
 * the arena (between operations: nothing in it is live). */
static void plan_partials(backend *be, conv_plan_cpu *p, int n)
{
    const conv_shape *s = &p->s;
    size_t at = 0;
    p->nchunks = n;
    p->off_col = carve(&at, p->col_n * p->threads);
    p->off_dcol = carve(&at, p->dcol_n * p->threads);
    p->off_xpad = carve(&at, p->xpad_n * p->threads);
    p->off_wide = carve(&at, p->wide_n * p->threads);
    p->off_wt = carve(&at, (size_t)s->K * p->CRS * p->threads);
    p->off_part_w = carve(&at, (size_t)n * s->K * p->CRS);
    p->off_part_b = carve(&at, (size_t)n * s->K);
    cpu_ctx *c = cpu_ctx_of(be);
    if (at > c->conv_scratch_n) {
        cpu_free(be, c->conv_scratch);
        c->conv_scratch = cpu_alloc(be, at * sizeof(float));
        c->conv_scratch_n = at;
    }
}

static void tap_sizes(const conv_shape *s, size_t *xpad_n, size_t *wide_n);
static void tap_weights(float *restrict wtap, float *restrict wftap, const float *restrict w,
                        const conv_shape *s);

/* the forward on the padded grid (tap_conv, conv_direct, conv_wino) */
static int fwd_on_taps(conv_fwd_algo a)
{
    return a == CONV_FWD_TAP || a == CONV_FWD_DIRECT || a == CONV_FWD_WINO;
}

/* the weight gradient on the padded grid, sample by sample or by chunk */
static int dw_on_taps(conv_dw_algo a)
{
    return a == CONV_DW_TAP || a == CONV_DW_DIRECT || a == CONV_DW_WINO;
}

/* the scratch and weights of a plan whose forward runs on the padded
 * grid, and ts, din's shape as a convolution of dout */
static void plan_taps(backend *be, conv_plan_cpu *p)
{
    const conv_shape *s = &p->s;
    conv_shape_init(&p->ts, s->B, s->K, s->OH, s->OW, s->C, s->R, s->S, 1, s->R - 1 - s->pad);
    p->col_n = p->dcol_n = p->xpad_n = p->wide_n = 0;
    tap_sizes(&p->s, &p->xpad_n, &p->wide_n);
    tap_sizes(&p->ts, &p->xpad_n, &p->wide_n);
    size_t nwt = (size_t)s->K * p->CRS, nwf = nwt;
    if (p->algo.fwd != CONV_FWD_TAP) { /* the direct kernel's layouts, or Winograd's */
        nwt = conv_direct_w_n(&p->s), nwf = conv_direct_w_n(&p->ts);
        size_t x = conv_direct_xpad_n(&p->s), xt = conv_direct_xpad_n(&p->ts);
        p->xpad_n = x > p->xpad_n ? x : p->xpad_n;
        p->xpad_n = xt > p->xpad_n ? xt : p->xpad_n;
        size_t d = conv_direct_dyw_n(&p->s);
        p->wide_n = d > p->wide_n ? d : p->wide_n;
        if (p->algo.dw == CONV_DW_WINO) {
            d = wino_dw_scratch_n(s) + wino_dw_acc_n(s);
            p->wide_n = d > p->wide_n ? d : p->wide_n;
        }
    }
    if (p->algo.fwd == CONV_FWD_WINO) {
        size_t x = conv_wino_scratch_n(&p->s), xt = conv_wino_scratch_n(&p->ts);
        p->xpad_n = x > p->xpad_n ? x : p->xpad_n;
        p->xpad_n = xt > p->xpad_n ? xt : p->xpad_n;
        nwt = conv_wino_w_n(&p->s), nwf = conv_wino_w_n(&p->ts);
        /* each thread's scratch on whole cache lines (conv_wino's
         * vectors are, within it) */
        p->xpad_n = (p->xpad_n + 15) / 16 * 16;
    }
    p->wtap = cpu_alloc(be, nwt * sizeof(float));
    p->wftap = cpu_alloc(be, nwf * sizeof(float));
    if (!dw_on_taps(p->algo.dw)) /* the backward's col and dcol */
        p->col_n = p->dcol_n = (size_t)p->CRS * p->P;
}

/* the stride-2 kernel's scratch and weights */
static void plan_s2(backend *be, conv_plan_cpu *p)
{
    const conv_shape *s = &p->s;
    p->col_n = p->dcol_n = 0;
    p->xpad_n = conv_direct_s2_scratch_n(s);
    p->wide_n = conv_direct_dyw_n(s);
    p->wtap = cpu_alloc(be, conv_direct_w_n(s) * sizeof(float));
    p->wftap = cpu_alloc(be, conv_direct_s2_wf_n(s) * sizeof(float));
}

void *cpu_conv_plan_caps(backend *be, const conv_shape *s, const conv_caps *caps)
{
    conv_plan_cpu *p = xcalloc(1, sizeof *p);
    conv_caps can = conv_caps_and_cpu(caps);
    p->s = *s;
    p->P = s->OH * s->OW;
    p->CRS = s->C * s->R * s->S;
    p->algo = conv_choose(s, &can);
    p->col_is_in = s->R == 1 && s->S == 1 && s->stride == 1 && s->pad == 0;
    p->avx512 = can.direct;
    p->threads = cpu_ctx_of(be)->threads;
    if (s->stride == 1 && s->pad > 0)
        p->xpad_n = (size_t)s->C * (s->H + 2 * s->pad) * (s->W + 2 * s->pad);
    p->col_n = p->col_is_in ? 0 : (size_t)p->CRS * p->P;
    p->dcol_n = (size_t)p->CRS * p->P;
    if (fwd_on_taps(p->algo.fwd))
        plan_taps(be, p);
    else if (p->algo.fwd == CONV_FWD_DIRECT_S2)
        plan_s2(be, p);
    /* enough partials for this B or any smaller one (groups may ask for
     * more: plan_partials) */
    plan_partials(be, p, s->B < CONV_MAX_CHUNKS ? s->B : CONV_MAX_CHUNKS);
    p->ones = cpu_alloc(be, (size_t)p->P * sizeof(float));
    cpu_vfill(p->ones, 1.0f, (size_t)p->P);
    return p;
}

void *cpu_conv_plan(backend *be, const conv_shape *s)
{
    return cpu_conv_plan_caps(be, s, &cpu_ctx_of(be)->conv_caps);
}

conv_choice cpu_conv_plan_choice(const void *plan) { return ((const conv_plan_cpu *)plan)->algo; }

void cpu_conv_describe(backend *be, const conv_shape *s, char *buf, size_t len)
{
    conv_caps can = conv_caps_and_cpu(&cpu_ctx_of(be)->conv_caps);
    conv_choice c = conv_choose(s, &can);
    conv_choice_name(&c, buf, len);
}

/* The plan's scratch pointers into the shared arena, for one operation. */
static void bind_scratch(backend *be, conv_plan_cpu *p)
{
    float *base = cpu_ctx_of(be)->conv_scratch;
    p->col = p->col_is_in ? NULL : base + p->off_col;
    p->dcol = base + p->off_dcol;
    p->wide = base + p->off_wide;
    p->xpad = p->xpad_n ? base + p->off_xpad : NULL;
    p->wt = base + p->off_wt;
    p->part_w = base + p->off_part_w;
    p->part_b = base + p->off_part_b;
}

void cpu_conv_plan_free(backend *be, void *plan)
{
    conv_plan_cpu *p = plan;
    if (!p)
        return;
    cpu_free(be, p->ones);
    cpu_free(be, p->wtap);
    cpu_free(be, p->wftap);
    free(p);
}

/* Output positions [*lo, *hi) whose input coordinate o*stride - pad + tap
 * falls inside [0, n). */
static void valid_range(int tap, int pad, int stride, int n, int out, int *lo, int *hi)
{
    int a = pad - tap > 0 ? (pad - tap + stride - 1) / stride : 0;
    int e = n - 1 + pad - tap;
    int b = e < 0 ? 0 : e / stride + 1;
    if (b > out)
        b = out;
    if (a > b)
        a = b;
    *lo = a;
    *hi = b;
}

/* ---- stride 1: the common case, kept tight (no per-row range logic) */

/* rows x n floats from x (row pitch xpitch) to o (row pitch n) */
static void rows_copy(float *restrict o, const float *restrict x, int rows, int n, size_t xpitch)
{
    int n4 = n & ~3;
    for (int r = 0; r < rows; r++, o += n, x += xpitch) {
        int i = 0;
        for (; i < n4; i += 4) {
            cpu_f4 v = *(const cpu_f4 *)(x + i);
            CPU_OPAQUE(v);
            *(cpu_f4 *)(o + i) = v;
        }
        for (; i < n; i++) {
            float t = x[i];
            CPU_OPAQUE(t);
            o[i] = t;
        }
    }
}

/* d (row pitch dpitch) += rows x n floats of o (row pitch n) */
static void rows_add(float *restrict d, const float *restrict o, int rows, int n, size_t dpitch)
{
    int n4 = n & ~3;
    for (int r = 0; r < rows; r++, o += n, d += dpitch) {
        int i = 0;
        for (; i < n4; i += 4)
            *(cpu_f4 *)(d + i) += *(const cpu_f4 *)(o + i);
        for (; i < n; i++)
            d[i] += o[i];
    }
}

/* x (C x H x W) into the middle of xp (C x (H+2pad) x (W+2pad)), zero
 * border: only the border is written with zeros (a row's right padding
 * and the next row's left padding are one run) */
static void pad_copy(float *restrict xp, const float *restrict x, int C, int H, int W, int pad)
{
    size_t Wp = (size_t)W + 2 * pad, plane = ((size_t)H + 2 * pad) * Wp;
    size_t top = pad * Wp + pad, bottom = pad * Wp - pad;
    for (int c = 0; c < C; c++, xp += plane) {
        float *o = xp;
        cpu_vfill(o, 0.0f, top);
        o += top;
        for (int h = 0; h < H; h++, o += Wp, x += W) {
            cpu_vcopy(o, x, (size_t)W);
            cpu_vfill(o + W, 0.0f, 2 * (size_t)pad);
        }
        cpu_vfill(o, 0.0f, bottom);
    }
}

/* ---- stride 1 on the padded grid, tap by tap (CONV_*_TAP): with the
 * input padded to Hp x Wp (plane = Hp * Wp), tap (r, q)'s rows of the col
 * are the channels' runs of OH * Wp floats starting at (r, q): a C x
 * OH*Wp matrix inside the padded input itself, row pitch plane. So the
 * convolution is R*S GEMMs, wide (K x OH*Wp) += w_rq (K x C) . that
 * matrix, with no im2col at all; row oh of the product has the OW
 * outputs then Wp - OW junk columns (7% more GEMM columns at 28x28, 29%
 * at 7x7). The last tap's last row runs S - 1 floats past the padded
 * input (into junk columns), so the padded buffer has S floats of slack.
 * OpenBLAS packs each tap's matrix as it would have packed the col. */

/* per-thread floats a tap convolution of shape s needs: raised to it */
static void tap_sizes(const conv_shape *s, size_t *xpad_n, size_t *wide_n)
{
    size_t Hp = (size_t)s->H + 2 * s->pad, Wp = (size_t)s->W + 2 * s->pad;
    size_t x = (size_t)s->C * Hp * Wp + (size_t)s->S, w = (size_t)s->K * s->OH * Wp;
    *xpad_n = x > *xpad_n ? x : *xpad_n;
    *wide_n = w > *wide_n ? w : *wide_n;
}

/* x (C x H x W) padded into xp, with zeroed slack */
static void tap_pad(float *xp, const float *x, const conv_shape *s)
{
    size_t plane = (size_t)(s->H + 2 * s->pad) * (s->W + 2 * s->pad);
    pad_copy(xp, x, s->C, s->H, s->W, s->pad);
    cpu_vfill(xp + (size_t)s->C * plane, 0.0f, (size_t)s->S);
}

/* y (K x OH x OW) = the convolution of x with wtap (R*S x K x C: tap
 * major), + bias; xp and wide are the caller's scratch */
static void tap_conv(float *y, const float *x, const float *wtap, const float *bias,
                     const conv_shape *s, float *xp, float *wide)
{
    int Wp = s->W + 2 * s->pad, PW = s->OH * Wp, plane = (s->H + 2 * s->pad) * Wp;
    tap_pad(xp, x, s);
    for (int r = 0; r < s->R; r++)
        for (int q = 0; q < s->S; q++) {
            int t = r * s->S + q;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->K, PW, s->C, 1.0f,
                        wtap + (size_t)t * s->K * s->C, s->C, xp + (size_t)r * Wp + q, plane,
                        t ? 1.0f : 0.0f, wide, PW);
        }
    /* the outputs out of the grid, + bias (explicit vectors: gcc does
     * not vectorise this nest at -O2) */
    for (int k = 0; k < s->K; k++) {
        float b = bias ? bias[k] : 0.0f;
        cpu_f4 bv = {b, b, b, b};
        const float *src = wide + (size_t)k * PW;
        float *dst = y + (size_t)k * s->OH * s->OW;
        for (int oh = 0; oh < s->OH; oh++, src += Wp, dst += s->OW) {
            int ow = 0;
            for (; ow + 4 <= s->OW; ow += 4)
                *(cpu_f4 *)(dst + ow) = *(const cpu_f4 *)(src + ow) + bv;
            for (; ow < s->OW; ow++)
                dst[ow] = src[ow] + b;
        }
    }
}

/* dy (K x OH x OW) onto the wide grid (K x OH x Wp), zeros in the junk */
static void tap_spread(float *restrict wide, const float *restrict dy, const conv_shape *s)
{
    int Wp = s->W + 2 * s->pad;
    for (int k = 0; k < s->K; k++)
        for (int oh = 0; oh < s->OH; oh++, wide += Wp, dy += s->OW) {
            cpu_vcopy(wide, dy, (size_t)s->OW);
            cpu_vfill(wide + s->OW, 0.0f, (size_t)(Wp - s->OW));
        }
}

/* unpadded, stride 1: row (c, r, q) of col is the OH x OW window of
 * channel c at offset (r, q) */
static void im2col_s1(float *restrict col, const float *restrict x, int C, int H, int W, int R,
                      int S, int OH, int OW)
{
    size_t P = (size_t)OH * OW;
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
            for (int q = 0; q < S; q++, col += P)
                rows_copy(col, x + ((size_t)c * H + r) * W + q, OH, OW, (size_t)W);
}

static void col2im_s1(float *restrict dx, const float *restrict col, int C, int H, int W, int R,
                      int S, int OH, int OW)
{
    size_t P = (size_t)OH * OW;
    cpu_vfill(dx, 0.0f, (size_t)C * H * W);
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
            for (int q = 0; q < S; q++, col += P)
                rows_add(dx + ((size_t)c * H + r) * W + q, col, OH, OW, (size_t)W);
}

/* ---- any stride: the general loops */

/* col (CRS x P) from one sample x (C x H x W); zeros where the window
 * reaches into the padding. Tap-major, so the valid ranges (and their
 * divisions) are worked out once per tap, not once per channel. */
static void im2col_any(float *restrict col, const float *restrict x, const conv_shape *s)
{
    const int C = s->C, H = s->H, W = s->W, R = s->R, S = s->S, st = s->stride, pad = s->pad;
    const int OH = s->OH, OW = s->OW;
    const size_t P = (size_t)OH * OW, plane = (size_t)H * W, rowstep = (size_t)R * S * P;
    for (int r = 0; r < R; r++) {
        int oh0, oh1;
        valid_range(r, pad, st, H, OH, &oh0, &oh1);
        for (int q = 0; q < S; q++) {
            int ow0, ow1;
            valid_range(q, pad, st, W, OW, &ow0, &ow1);
            int ix0 = ow0 * st - pad + q; /* >= 0 */
            float *row = col + (size_t)(r * S + q) * P;
            const float *xc = x + (size_t)(oh0 * st - pad + r) * W + ix0;
            for (int c = 0; c < C; c++, row += rowstep, xc += plane) {
                cpu_vfill(row, 0.0f, (size_t)oh0 * OW);
                float *o = row + (size_t)oh0 * OW;
                const float *xr = xc;
                for (int oh = oh0; oh < oh1; oh++, o += OW, xr += (size_t)st * W) {
                    for (int ow = 0; ow < OW; ow++)
                        o[ow] = ow < ow0 || ow >= ow1 ? 0.0f : xr[(size_t)(ow - ow0) * st];
                }
                cpu_vfill(o, 0.0f, (size_t)(OH - oh1) * OW);
            }
        }
    }
}

/* dx (C x H x W, zeroed first) = sum of col's taps back onto the input */
static void col2im_any(float *restrict dx, const float *restrict col, const conv_shape *s)
{
    const int C = s->C, H = s->H, W = s->W, R = s->R, S = s->S, st = s->stride, pad = s->pad;
    const int OH = s->OH, OW = s->OW;
    const size_t P = (size_t)OH * OW, plane = (size_t)H * W, rowstep = (size_t)R * S * P;
    cpu_vfill(dx, 0.0f, (size_t)C * plane);
    for (int r = 0; r < R; r++) {
        int oh0, oh1;
        valid_range(r, pad, st, H, OH, &oh0, &oh1);
        for (int q = 0; q < S; q++) {
            int ow0, ow1;
            valid_range(q, pad, st, W, OW, &ow0, &ow1);
            int ix0 = ow0 * st - pad + q;
            const float *row = col + (size_t)(r * S + q) * P + (size_t)oh0 * OW + ow0;
            float *xc = dx + (size_t)(oh0 * st - pad + r) * W + ix0;
            for (int c = 0; c < C; c++, row += rowstep, xc += plane) {
                const float *o = row;
                float *xr = xc;
                for (int oh = oh0; oh < oh1; oh++, o += OW, xr += (size_t)st * W)
                    for (int ow = 0; ow < ow1 - ow0; ow++)
                        xr[(size_t)ow * st] += o[ow];
            }
        }
    }
}

/* im2col of one sample; a padded stride-1 conv pads into xpad (the plan's
 * per-thread scratch) and takes the tight path */
static void im2col(float *col, const float *x, const conv_shape *s, float *xpad)
{
    if (s->stride != 1) {
        im2col_any(col, x, s);
        return;
    }
    int H = s->H, W = s->W;
    if (s->pad) {
        pad_copy(xpad, x, s->C, H, W, s->pad);
        x = xpad;
        H += 2 * s->pad;
        W += 2 * s->pad;
    }
    im2col_s1(col, x, s->C, H, W, s->R, s->S, s->OH, s->OW);
}

/* dx = col2im(col); a padded stride-1 conv accumulates in xpad and copies
 * the middle out */
static void col2im(float *dx, const float *col, const conv_shape *s, float *xpad)
{
    if (s->stride != 1) {
        col2im_any(dx, col, s);
        return;
    }
    if (!s->pad) {
        col2im_s1(dx, col, s->C, s->H, s->W, s->R, s->S, s->OH, s->OW);
        return;
    }
    int Hp = s->H + 2 * s->pad, Wp = s->W + 2 * s->pad;
    col2im_s1(xpad, col, s->C, Hp, Wp, s->R, s->S, s->OH, s->OW);
    for (int c = 0; c < s->C; c++)
        rows_copy(dx + (size_t)c * s->H * s->W, xpad + ((size_t)c * Hp + s->pad) * Wp + s->pad,
                  s->H, s->W, (size_t)Wp);
}

/* a plan serves its own shape, or the same layer at a smaller batch */
static void check_shape(const conv_plan_cpu *p, const conv_shape *s, const char *op)
{
    const conv_shape *q = &p->s;
    if (s->B > q->B || s->C != q->C || s->H != q->H || s->W != q->W || s->K != q->K ||
        s->R != q->R || s->S != q->S || s->stride != q->stride || s->pad != q->pad) {
        fprintf(stderr, "train: %s: shape does not match the plan (internal error)\n", op);
        exit(1);
    }
}

typedef struct conv_job {
    conv_plan_cpu *p;
    const conv_shape *s;
    /* backward: chunk c holds samples [b0[c], b1[c]) (maybe none) and has
     * partial c; group g's chunks are [first[g], first[g + 1]) */
    int nchunks, ngroups;
    int b0[CONV_MAX_PIECES], b1[CONV_MAX_PIECES];
    int first[BACKEND_GROUPS_MAX + 1];
    float *out, *din, *dw, *dbias;
    const float *in, *w, *bias, *dout;
} conv_job;

static float *xpad_of(conv_plan_cpu *p, int thread)
{
    return p->xpad ? p->xpad + (size_t)thread * p->xpad_n : NULL;
}

/* the col of one sample (x is its input), in this thread's scratch */
static const float *sample_col(conv_plan_cpu *p, const float *x, int thread)
{
    if (p->col_is_in)
        return x;
    float *col = p->col + (size_t)thread * p->col_n;
    im2col(col, x, &p->s, xpad_of(p, thread));
    return col;
}

static void conv_fwd_task(void *arg, int b, int thread)
{
    conv_job *j = arg;
    conv_plan_cpu *p = j->p;
    const conv_shape *s = j->s;
    const float *x = j->in + (size_t)b * s->C * s->H * s->W;
    float *y = j->out + (size_t)b * s->K * p->P;
    switch (p->algo.fwd) {
    case CONV_FWD_DIRECT: conv_direct(y, x, p->wtap, j->bias, s, xpad_of(p, thread)); return;
    case CONV_FWD_DIRECT_S2: conv_direct_s2(y, x, p->wtap, j->bias, s, xpad_of(p, thread)); return;
    case CONV_FWD_TAP:
        tap_conv(y, x, p->wtap, j->bias, s, xpad_of(p, thread),
                 p->wide + (size_t)thread * p->wide_n);
        return;
    case CONV_FWD_GEMM:
    case CONV_FWD_WINO: /* conv_wino_task */ break;
    }
    const float *col = sample_col(p, x, thread);
    for (int k = 0; k < s->K; k++)
        cpu_vfill(y + (size_t)k * p->P, j->bias ? j->bias[k] : 0.0f, (size_t)p->P);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->K, p->P, p->CRS, 1.0f, j->w, p->CRS,
                col, p->P, 1.0f, y, p->P);
}

/* Winograd: task t takes conv_wino_group samples from t times that */
static void conv_wino_task(void *arg, int t, int thread)
{
    conv_job *j = arg;
    conv_plan_cpu *p = j->p;
    const conv_shape *s = j->s;
    int g = conv_wino_group(s), b = t * g, nb = s->B - b < g ? s->B - b : g;
    conv_wino(j->out + (size_t)b * s->K * p->P, j->in + (size_t)b * s->C * s->H * s->W, nb, p->wtap,
              j->bias, s, xpad_of(p, thread));
}

void cpu_conv_forward(backend *be, void *plan, float *out, const float *in, const float *w,
                      const float *bias, const conv_shape *s)
{
    conv_plan_cpu *p = plan;
    check_shape(p, s, "conv_forward");
    bind_scratch(be, p);
    conv_job j = {.p = p, .s = s, .out = out, .in = in, .w = w, .bias = bias};
    switch (p->algo.fwd) {
    case CONV_FWD_WINO:
        conv_wino_weights(p->wtap, w, s);
        cpu_run(be, cpu_ntasks((size_t)s->B, (size_t)conv_wino_group(s)), conv_wino_task, &j);
        return;
    case CONV_FWD_DIRECT:
    case CONV_FWD_DIRECT_S2: conv_direct_weights(p->wtap, w, s); break;
    case CONV_FWD_TAP: tap_weights(p->wtap, NULL, w, s); break;
    case CONV_FWD_GEMM: break;
    }
    cpu_run(be, s->B, conv_fwd_task, &j);
}

/* One sample's part of the chunk's weight gradient, into wt (transposed:
 * every algorithm but CONV_DW_GEMM) or pw; first: the chunk's first sample
 * (overwrite, not add). CONV_DW_TAP: for each tap, rows (c, tap) of dw^T
 * (+)= the tap's C x OH*Wp matrix of padded x . wide dy^T (dy's junk
 * columns are zeros). CONV_DW_WINO does the whole chunk at once
 * (conv_bwd_chunk_task). */
static void dw_sample(const conv_job *j, const float *x, const float *dy, int first, float *wt,
                      float *pw, int thread)
{
    conv_plan_cpu *p = j->p;
    const conv_shape *s = j->s;
    float *xp = xpad_of(p, thread), *wide = p->wide + (size_t)thread * p->wide_n;
    int Wp = s->W + 2 * s->pad, PW = s->OH * Wp, plane = (s->H + 2 * s->pad) * Wp;
    int RS = s->R * s->S;
    const float *col;
    switch (p->algo.dw) {
    case CONV_DW_WINO: return;
    case CONV_DW_DIRECT: conv_direct_dw(wt, x, dy, s, first, xp, wide); return;
    case CONV_DW_DIRECT_S2: conv_direct_s2_dw(wt, x, dy, s, first, xp, wide); return;
    case CONV_DW_TAP:
        tap_pad(xp, x, s);
        tap_spread(wide, dy, s);
        for (int r = 0; r < s->R; r++)
            for (int q = 0; q < s->S; q++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->C, s->K, PW, 1.0f,
                            xp + (size_t)r * Wp + q, plane, wide, PW, first ? 0.0f : 1.0f,
                            wt + (size_t)(r * s->S + q) * s->K, RS * s->K);
        return;
    case CONV_DW_GEMM_T: /* dw^T (CRS x K) += col . dy^T */
        col = sample_col(p, x, thread);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->CRS, s->K, p->P, 1.0f, col, p->P,
                    dy, p->P, first ? 0.0f : 1.0f, wt, s->K);
        return;
    case CONV_DW_GEMM: /* dw (K x CRS) += dy . col^T */
        col = sample_col(p, x, thread);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->K, p->CRS, p->P, 1.0f, dy, p->P,
                    col, p->P, first ? 0.0f : 1.0f, pw, p->CRS);
        return;
    }
}

/* One sample's input gradient dx from dy. CONV_DIN_WINO does the
 * chunk's samples at once (conv_bwd_chunk_task). */
static void din_sample(const conv_job *j, float *dx, const float *dy, int thread)
{
    conv_plan_cpu *p = j->p;
    const conv_shape *s = j->s;
    float *xp = xpad_of(p, thread);
    switch (p->algo.din) {
    case CONV_DIN_WINO: return;
    case CONV_DIN_DIRECT: conv_direct(dx, dy, p->wftap, NULL, &p->ts, xp); return;
    case CONV_DIN_TAP:
        tap_conv(dx, dy, p->wftap, NULL, &p->ts, xp, p->wide + (size_t)thread * p->wide_n);
        return;
    case CONV_DIN_DIRECT_S2: conv_direct_s2_din(dx, dy, p->wftap, s, xp); return;
    case CONV_DIN_GEMM: {
        float *dcol = p->dcol + (size_t)thread * p->dcol_n;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p->CRS, p->P, s->K, 1.0f, j->w, p->CRS,
                    dy, p->P, 0.0f, p->col_is_in ? dx : dcol, p->P);
        if (!p->col_is_in)
            col2im(dx, dcol, s, xp);
        return;
    }
    }
}

/* out (cols x rows) = in (rows x cols) transposed, 16 rows of in at a
 * time: their cache lines stay in L1 while every column's 16 floats are
 * written (the plain column walk missed L1 on every read: 1.8% of a
 * resnet20 step) */
static void transpose_block(float *restrict out, const float *restrict in, int rows, int cols)
{
    for (int i0 = 0; i0 < rows; i0 += 16) {
        int i1 = i0 + 16 < rows ? i0 + 16 : rows;
        for (int k = 0; k < cols; k++)
            for (int i = i0; i < i1; i++)
                out[(size_t)k * rows + i] = in[(size_t)i * cols + k];
    }
}

static void conv_bwd_chunk_task(void *arg, int c, int thread)
{
    conv_job *j = arg;
    conv_plan_cpu *p = j->p;
    const conv_shape *s = j->s;
    float *pw = p->part_w + (size_t)c * s->K * p->CRS, *pb = p->part_b + (size_t)c * s->K;
    /* the chunk's weight gradient: transposed in this thread's wt, or
     * straight into the partial */
    float *wt = p->algo.dw != CONV_DW_GEMM ? p->wt + (size_t)thread * s->K * p->CRS : NULL;
    int b0 = j->b0[c], b1 = j->b1[c];
    memset(pb, 0, (size_t)s->K * sizeof(float));
    if (b0 == b1) /* an empty group */
        cpu_vfill(wt ? wt : pw, 0.0f, (size_t)s->K * p->CRS);
    if (p->algo.dw == CONV_DW_WINO && b1 > b0) { /* sums in wide past its scratch; then wt */
        float *wide = p->wide + (size_t)thread * p->wide_n, *acc = wide + wino_dw_scratch_n(s);
        wino_dw_samples(acc, j->in + (size_t)b0 * s->C * s->H * s->W,
                        j->dout + (size_t)b0 * s->K * p->P, s, b1 - b0, wide);
        wino_dw_finish(wt, acc, s);
    }
    for (int b = b0; b < b1; b++) {
        const float *x = j->in + (size_t)b * s->C * s->H * s->W;
        const float *dy = j->dout + (size_t)b * s->K * p->P;
        dw_sample(j, x, dy, b == b0, wt, pw, thread);
        if (j->dbias)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, s->K, p->P, 1.0f, dy, p->P, p->ones, 1, 1.0f,
                        pb, 1);
        if (j->din)
            din_sample(j, j->din + (size_t)b * s->C * s->H * s->W, dy, thread);
    }
    if (j->din && p->algo.din == CONV_DIN_WINO && b1 > b0)
        conv_wino(j->din + (size_t)b0 * s->C * s->H * s->W, j->dout + (size_t)b0 * s->K * p->P,
                  b1 - b0, p->wftap, NULL, &p->ts, xpad_of(p, thread));
    if (wt && p->avx512) /* in registers: the scalar walk was 1.5% of a step */
        conv_direct_transpose(pw, wt, p->CRS, s->K);
    else if (wt)
        transpose_block(pw, wt, p->CRS, s->K);
}

/* out = the sum of partials part (n floats at stride each, elements
 * [a, a + len)): each group's chunks added in chunk order into its first
 * partial, then the groups' sums as a balanced tree (left += right) */
static void reduce_partials(const conv_job *j, float *out, float *part, size_t stride, size_t a,
                            size_t len)
{
    for (int g = 0; g < j->ngroups; g++)
        for (int c = j->first[g] + 1; c < j->first[g + 1]; c++)
            cpu_vadd(part + (size_t)j->first[g] * stride + a, part + (size_t)c * stride + a, len);
    for (int step = 1; step < j->ngroups; step *= 2)
        for (int g = 0; g + step < j->ngroups; g += 2 * step)
            cpu_vadd(part + (size_t)j->first[g] * stride + a,
                     part + (size_t)j->first[g + step] * stride + a, len);
    cpu_vcopy(out + a, part + a, len);
}

/* dw/dbias element ranges */
static void conv_reduce_task(void *arg, int t, int thread)
{
    (void)thread;
    conv_job *j = arg;
    conv_plan_cpu *p = j->p;
    size_t nw = (size_t)j->s->K * p->CRS;
    size_t a = (size_t)t * REDUCE_BLOCK, n = a + REDUCE_BLOCK < nw ? REDUCE_BLOCK : nw - a;
    reduce_partials(j, j->dw, p->part_w, nw, a, n);
    if (t == 0 && j->dbias)
        reduce_partials(j, j->dbias, p->part_b, (size_t)j->s->K, 0, (size_t)j->s->K);
}

/* wtap[t][k][c] = w[k][c][t] (t = r*S + q), and the flipped, transposed
 * weights of din as a convolution of dout, wftap[t][c][k] =
 * w[k][c][R*S-1-t] (either may be NULL) */
static void tap_weights(float *restrict wtap, float *restrict wftap, const float *restrict w,
                        const conv_shape *s)
{
    int RS = s->R * s->S, K = s->K, C = s->C;
    for (int k = 0; k < K; k++)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < RS; t++) {
                float v = w[((size_t)k * C + c) * RS + t];
                if (wtap)
                    wtap[((size_t)t * K + k) * C + c] = v;
                if (wftap)
                    wftap[((size_t)(RS - 1 - t) * C + c) * K + k] = v;
            }
}

/* The chunks of every group (one group without batch_groups) */
static void plan_chunks(backend *be, conv_job *j, int B)
{
    int size[BACKEND_GROUPS_MAX];
    j->ngroups = cpu_groups(be, B, size, "conv_backward");
    j->nchunks = 0;
    for (int g = 0, at = 0; g < j->ngroups; at += size[g], g++) {
        j->first[g] = j->nchunks;
        int chunk = size[g] ? conv_chunk(size[g]) : 1;
        for (int b = at; b < at + size[g] || b == at; b += chunk, j->nchunks++) {
            j->b0[j->nchunks] = b;
            j->b1[j->nchunks] = b + chunk < at + size[g] ? b + chunk : at + size[g];
        }
    }
    j->first[j->ngroups] = j->nchunks;
}

/* wftap: the weights of din as a convolution of dout, in its kernel's
 * layout (CONV_DIN_GEMM reads w itself) */
static void din_weights(conv_plan_cpu *p, const float *w, const conv_shape *s)
{
    switch (p->algo.din) {
    case CONV_DIN_WINO: conv_wino_weights_flip(p->wftap, w, s); break;
    case CONV_DIN_DIRECT: conv_direct_weights_flip(p->wftap, w, s); break;
    case CONV_DIN_DIRECT_S2: conv_direct_s2_weights_flip(p->wftap, w, s); break;
    case CONV_DIN_TAP: tap_weights(NULL, p->wftap, w, s); break;
    case CONV_DIN_GEMM: break;
    }
}

void cpu_conv_backward(backend *be, void *plan, float *din, float *dw, float *dbias,
                       const float *dout, const float *in, const float *w, const conv_shape *s)
{
    conv_plan_cpu *p = plan;
    check_shape(p, s, "conv_backward");
    conv_job *j = xmalloc(sizeof *j); /* 16 KB of chunk bounds: not on a thread's stack */
    *j = (conv_job){
        .p = p, .s = s, .din = din, .dw = dw, .dbias = dbias, .dout = dout, .in = in, .w = w};
    plan_chunks(be, j, s->B);
    if (j->nchunks > p->nchunks)
        plan_partials(be, p, j->nchunks);
    if (din)
        din_weights(p, w, s);
    bind_scratch(be, p);
    cpu_run(be, j->nchunks, conv_bwd_chunk_task, j);
    cpu_run(be, cpu_ntasks((size_t)s->K * p->CRS, REDUCE_BLOCK), conv_reduce_task, j);
    free(j);
}
