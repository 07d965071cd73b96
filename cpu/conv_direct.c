/* conv_direct.c — a direct AVX-512 kernel for conv.c's stride-1 tap
 * convolutions and its stride-2 3x3s (see conv_direct.h; the stride-2
 * layout is described above dk2_wq).
 *
 * The input is padded into xp with rows of Wq = W + pad floats: a row's
 * right padding is the next row's left padding (both zeros), so each row
 * carries pad junk floats, not 2 pad. Output (oh, ow) sits at position
 * i = oh * Wq + ow of the "wide" grid (OH x Wq; columns ow >= OW are junk,
 * never stored), and tap (r, q) of input channel c reads xp[c][i + r * Wq
 * + q]: a plain run of floats for any run of positions.
 *
 * A tile is CONV_DIRECT_KB (8) output channels x 1-3 vectors of 16
 * positions, 8-24 accumulators held in registers over all C input
 * channels and R*S taps (per step: one load per vector, one broadcast
 * weight per channel, 8 x NV FMAs), then stored once: + bias, the valid
 * lanes compressed (vcompressps) and written with a masked store, since
 * the valid positions of the wide grid are, in order, the consecutive
 * outputs y[oh * OW + ow]. K is padded to a multiple of 8 by zero weights
 * (the extra channels are computed, never stored); positions run in tiles
 * of 48, the last tile with as many vectors as it needs.
 *
 * The weight gradient of a 3x3 (conv_direct_dw) runs the other way
 * round: dw[k][c][t] sums over positions, so the lanes hold 16 output
 * channels (dy transposed to position-major, dyT) and each of 27
 * accumulators (3 input channels x 9 taps) takes one broadcast input per
 * position; only the valid positions are visited, and the sums land in
 * dw^T's rows (c, t), where K is contiguous, as the GEMM path's did.
 *
 * Each output is summed in one fixed order (channels, then taps; or
 * positions) whatever the thread count; it differs from the GEMM path's
 * order in the last bits.
 *
 * xp has slack past its last plane (zeros) so that every vector load
 * stays inside it: the last tile reads up to 15 positions past the grid.
 * Only the padding and the slack are zeroed, not the whole buffer.
 */
#define _POSIX_C_SOURCE 200809L
#include "cpu/conv_direct.h"

#include "cpu/internal.h" /* cpu_vcopy, cpu_vfill: no libc call per short row */

#define KB CONV_DIRECT_KB
#define DK_SLACK(s) ((size_t)(s)->S + 16)

static size_t dk_plane(const conv_shape *s)
{
    return (size_t)(s->H + 2 * s->pad) * (size_t)(s->W + s->pad);
}

size_t conv_direct_xpad_n(const conv_shape *s) { return (size_t)s->C * dk_plane(s) + DK_SLACK(s); }

size_t conv_direct_w_n(const conv_shape *s)
{
    return (size_t)(s->K + KB - 1) / KB * KB * (size_t)s->C * (size_t)(s->R * s->S);
}

void conv_direct_weights(float *wd, const float *w, const conv_shape *s)
{
    int K = s->K, C = s->C, RS = s->R * s->S;
    for (int kb = 0; kb < K; kb += KB)
        for (int c = 0; c < C; c++)
            for (int t = 0; t < RS; t++)
                for (int k = kb; k < kb + KB; k++)
                    *wd++ = k < K ? w[((size_t)k * C + c) * RS + t] : 0.0f;
}

void conv_direct_weights_flip(float *wd, const float *w, const conv_shape *s)
{
    /* ts: channels in = s->K (k), out = s->C (c) */
    int K = s->K, C = s->C, RS = s->R * s->S;
    for (int cb = 0; cb < C; cb += KB)
        for (int k = 0; k < K; k++)
            for (int t = 0; t < RS; t++)
                for (int c = cb; c < cb + KB; c++)
                    *wd++ = c < C ? w[((size_t)k * C + c) * RS + (RS - 1 - t)] : 0.0f;
}

/* output channels rounded up to whole vectors: dyT's row pitch */
static int dk_k16(const conv_shape *s) { return (s->K + 15) / 16 * 16; }

size_t conv_direct_dyw_n(const conv_shape *s) { return (size_t)s->OH * s->OW * (size_t)dk_k16(s); }

/* ---- stride 2, 3x3, pad 1 (the resnets' downsampling convs): the
 * padded input split into its 4 even/odd phases, ph[c][a][b][i][j] =
 * xpad[c][2i + a][2j + b], planes of (OH + 1) x (OW + 1) (Wq = OW + 1):
 * tap (r, q) of output (oh, ow) reads phase (r & 1, q & 1) at (oh + r / 2,
 * ow + q / 2), so on the wide grid (pitch Wq) it is a plain run again.
 * The input gradient is 4 stride-1 convolutions of dout (padded by a zero
 * row and column at the bottom and right, same planes), one per phase
 * (a, b) of din: din[c][2i + a][2j + b] takes the taps r = 1 (a = 0) or
 * r = 0, 2 (a = 1) at dout row i + (a + 1 - r) / 2, likewise for columns;
 * the phases go to scratch and are interleaved into din. */

static int dk2_wq(const conv_shape *s) { return s->OW + 1; }
static size_t dk2_pp(const conv_shape *s) { return (size_t)(s->OH + 1) * (size_t)dk2_wq(s); }
#define DK2_SLACK(s) ((size_t)dk2_wq(s) + 32)

size_t conv_direct_s2_scratch_n(const conv_shape *s)
{
    size_t fwd = (size_t)s->C * 4 * dk2_pp(s) + DK2_SLACK(s);
    size_t din =
        ((size_t)s->K * dk2_pp(s) + DK2_SLACK(s) + 15) / 16 * 16 + (size_t)s->C * s->H * s->W;
    return fwd > din ? fwd : din;
}

size_t conv_direct_s2_wf_n(const conv_shape *s)
{
    return (size_t)(s->C + KB - 1) / KB * KB * (size_t)s->K * 9;
}

/* din phase ph = 2a + b: its taps (r, q) in order, and where its weights
 * start in conv_direct_s2_weights_flip's layout */
static int dk2_nt(int ph) { return ((ph >> 1) + 1) * ((ph & 1) + 1); }
static int dk2_tap_r(int ph, int t) { return ph >> 1 ? 2 * (t / ((ph & 1) + 1)) : 1; }
static int dk2_tap_q(int ph, int t) { return ph & 1 ? 2 * (t % 2) : 1; }
static size_t dk2_wf_at(const conv_shape *s, int ph)
{
    static const int before[4] = {0, 1, 3, 5};
    return (size_t)(s->C + KB - 1) / KB * KB * (size_t)s->K * (size_t)before[ph];
}

void conv_direct_s2_weights_flip(float *wd, const float *w, const conv_shape *s)
{
    int K = s->K, C = s->C;
    for (int ph = 0; ph < 4; ph++)
        for (int cb = 0; cb < C; cb += KB)
            for (int k = 0; k < K; k++)
                for (int t = 0; t < dk2_nt(ph); t++) {
                    int tap = dk2_tap_r(ph, t) * 3 + dk2_tap_q(ph, t);
                    for (int c = cb; c < cb + KB; c++)
                        *wd++ = c < C ? w[((size_t)k * C + c) * 9 + tap] : 0.0f;
                }
}

/* dy (K x OH x OW) into planes of (OH + 1) x Wq with zeros in the last
 * row and column, then zeroed slack */
static void dk2_pad_dy(float *restrict dp, const float *restrict dy, const conv_shape *s)
{
    int OH = s->OH, OW = s->OW, Wq = dk2_wq(s);
    for (int k = 0; k < s->K; k++) {
        for (int i = 0; i < OH; i++, dp += Wq, dy += OW) {
            cpu_vcopy(dp, dy, (size_t)OW);
            dp[OW] = 0.0f;
        }
        cpu_vfill(dp, 0.0f, (size_t)Wq);
        dp += Wq;
    }
    cpu_vfill(dp, 0.0f, DK2_SLACK(s));
}

#if defined(__x86_64__) || defined(__i386__)
#include "cpu/x86_512.h"

int conv_direct_available(void) { return __builtin_cpu_supports("avx512f") != 0; }

#define DK_AVX512 __attribute__((target("avx512f")))

/* x (C x H x W) into xp (C x (H + 2 pad) x (W + pad), see the top): the
 * top padding, then each row's W floats and its pad zeros (the next
 * row's left padding) as one run of masked loads and stores, then zeros
 * to the plane's end; zeros in the slack */
DK_AVX512 static void dk_pad(float *restrict xp, const float *restrict x, const conv_shape *s)
{
    int H = s->H, W = s->W, pad = s->pad, Wq = W + pad;
    size_t plane = dk_plane(s), top = (size_t)pad * Wq + pad;
    for (int c = 0; c < s->C; c++, xp += plane) {
        cpu_vfill(xp, 0.0f, top);
        float *o = xp + top;
        for (int h = 0; h < H; h++, o += Wq, x += W)
            for (int m = 0; m < Wq; m += 16)
                _mm512_mask_storeu_ps(o + m, x512_mask(Wq - m),
                                      _mm512_maskz_loadu_ps(x512_mask(W - m), x + m));
        /* o is past the last row's (and the first bottom row's) left padding */
        cpu_vfill(o, 0.0f, plane - (size_t)(o - xp));
    }
    cpu_vfill(xp, 0.0f, DK_SLACK(s));
}

/* dyT (P x K16) = dy (K x P) transposed, zeros past K: 16 x 16 blocks,
 * masked loads past P */
DK_AVX512 static void dk_transpose(float *restrict dyT, const float *restrict dy,
                                   const conv_shape *s)
{
    int K = s->K, K16 = dk_k16(s), P = s->OH * s->OW;
    for (int i0 = 0; i0 < P; i0 += 16) {
        __mmask16 pm = x512_mask(P - i0);
        int np = P - i0 < 16 ? P - i0 : 16;
        for (int k0 = 0; k0 < K16; k0 += 16) {
            __m512 r[16];
#pragma GCC unroll 16
            for (int l = 0; l < 16; l++)
                r[l] = k0 + l < K ? _mm512_maskz_loadu_ps(pm, dy + (size_t)(k0 + l) * P + i0)
                                  : _mm512_setzero_ps();
            x512_tr16(r);
#pragma GCC unroll 16
            for (int l = 0; l < 16; l++)
                if (l < np)
                    _mm512_storeu_ps(dyT + (size_t)(i0 + l) * K16 + k0, r[l]);
        }
    }
}

/* out (cols x rows) = in (rows x cols) transposed, 16 x 16 blocks in
 * registers, masked at the edges */
DK_AVX512 void conv_direct_transpose(float *restrict out, const float *restrict in, int rows,
                                     int cols)
{
    for (int i0 = 0; i0 < rows; i0 += 16) {
        int ni = rows - i0 < 16 ? rows - i0 : 16;
        __mmask16 im = x512_mask(rows - i0);
        for (int k0 = 0; k0 < cols; k0 += 16) {
            int nk = cols - k0 < 16 ? cols - k0 : 16;
            __mmask16 km = x512_mask(cols - k0);
            __m512 r[16];
#pragma GCC unroll 16
            for (int l = 0; l < 16; l++)
                r[l] = l < ni ? _mm512_maskz_loadu_ps(km, in + (size_t)(i0 + l) * cols + k0)
                              : _mm512_setzero_ps();
            x512_tr16(r);
#pragma GCC unroll 16
            for (int l = 0; l < 16; l++)
                if (l < nk)
                    _mm512_mask_storeu_ps(out + (size_t)(k0 + l) * rows + i0, im, r[l]);
        }
    }
}

/* x (C x H x W) into its 4 phases (see above), then zeroed slack: each
 * input row h = 2i + a - 1 gives row i of phases (a, 0) and (a, 1), its
 * odd and even columns, 32 floats at a time (masked loads: zeros past W,
 * the right padding); phase (a, 0) starts with the left padding */
DK_AVX512 static void dk2_phase(float *restrict xp, const float *restrict x, const conv_shape *s)
{
    int H = s->H, W = s->W, Wq = dk2_wq(s), Hq = s->OH + 1;
    size_t pp = dk2_pp(s);
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int c = 0; c < s->C; c++, x += (size_t)H * W)
        for (int a = 0; a < 2; a++)
            for (int i = 0; i < Hq; i++) {
                float *o0 = xp + ((size_t)(4 * c + 2 * a) * Hq + i) * Wq, *o1 = o0 + pp;
                int h = 2 * i + a - 1;
                if (h < 0 || h >= H) {
                    cpu_vfill(o0, 0.0f, (size_t)Wq);
                    cpu_vfill(o1, 0.0f, (size_t)Wq);
                    continue;
                }
                const float *row = x + (size_t)h * W;
                o0[0] = 0.0f;
                for (int m = 0; m < Wq; m += 16) {
                    int n = W - 2 * m;
                    __m512 lo = _mm512_maskz_loadu_ps(x512_mask(n), row + 2 * m);
                    __m512 hi = _mm512_maskz_loadu_ps(x512_mask(n - 16), row + 2 * m + 16);
                    _mm512_mask_storeu_ps(o1 + m, x512_mask(Wq - m),
                                          _mm512_permutex2var_ps(lo, ev, hi));
                    _mm512_mask_storeu_ps(o0 + m + 1, x512_mask(Wq - m - 1),
                                          _mm512_permutex2var_ps(lo, od, hi));
                }
            }
    cpu_vfill(xp + (size_t)s->C * 4 * pp, 0.0f, DK2_SLACK(s));
}

typedef struct dk_geom {
    int C, K, RS, S, Wq, OH, OW, PW;
    size_t plane, P, pp; /* pp: a phase's plane (stride 2) */
} dk_geom;

/* MODE: 0 any R x S, 1 a 3x3 (taps unrolled), 2 the stride-2 3x3 on
 * the phases, 3 + ph the input gradient's phase ph of a stride-2 3x3.
 * dk_off: where tap t of modes 2-6 reads, from the position's own place
 * (a constant once unrolled). */
static inline __attribute__((always_inline)) size_t dk_off(const int MODE, int t, int Wq, size_t pp)
{
    if (MODE == 2) {
        int r = t / 3, q = t % 3;
        return (size_t)((r & 1) * 2 + (q & 1)) * pp + (size_t)(r >> 1) * Wq + (size_t)(q >> 1);
    }
    int ph = MODE - 3, r = dk2_tap_r(ph, t), q = dk2_tap_q(ph, t);
    return (size_t)(r == 0) * Wq + (size_t)(q == 0);
}

/* Output channels [k0, k0 + KB) (w: their block of weights) x positions
 * [p0, p0 + 16 NV) of the wide grid into y (+ bias). */
DK_AVX512 static inline __attribute__((always_inline)) void
dk_tile(float *restrict y, const float *restrict xp, const float *restrict w,
        const float *restrict bias, const dk_geom *g, int k0, int p0, const int NV, const int MODE)
{
    const int S3 = MODE == 1;
    __m512 acc[KB][3];
#pragma GCC unroll 8
    for (int k = 0; k < KB; k++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            acc[k][v] = _mm512_setzero_ps();
    const float *xc = xp + p0;
    for (int c = 0; c < g->C; c++, xc += g->plane) {
        const float *xr = xc;
        if (MODE >= 2) {
            const int NT = MODE == 2 ? 9 : dk2_nt(MODE - 3);
#pragma GCC unroll 9
            for (int t = 0; t < NT; t++, w += KB) {
                const float *xt = xc + dk_off(MODE, t, g->Wq, g->pp);
                __m512 xv[3];
#pragma GCC unroll 3
                for (int v = 0; v < NV; v++)
                    xv[v] = _mm512_loadu_ps(xt + 16 * v);
#pragma GCC unroll 8
                for (int k = 0; k < KB; k++) {
                    __m512 wv = _mm512_set1_ps(w[k]);
#pragma GCC unroll 3
                    for (int v = 0; v < NV; v++)
                        acc[k][v] = _mm512_fmadd_ps(xv[v], wv, acc[k][v]);
                }
            }
            continue;
        }
        /* S3: a 3x3 kernel with its taps unrolled, else any R x S */
        const int R = S3 ? 3 : g->RS / g->S, S = S3 ? 3 : g->S;
#pragma GCC unroll 3
        for (int r = 0; r < R; r++, xr += g->Wq)
#pragma GCC unroll 3
            for (int q = 0; q < S; q++, w += KB) {
                __m512 xv[3];
#pragma GCC unroll 3
                for (int v = 0; v < NV; v++)
                    xv[v] = _mm512_loadu_ps(xr + q + 16 * v);
#pragma GCC unroll 8
                for (int k = 0; k < KB; k++) {
                    __m512 wv = _mm512_set1_ps(w[k]);
#pragma GCC unroll 3
                    for (int v = 0; v < NV; v++)
                        acc[k][v] = _mm512_fmadd_ps(xv[v], wv, acc[k][v]);
                }
            }
    }
    int kn = g->K - k0 < KB ? g->K - k0 : KB;
#pragma GCC unroll 3
    for (int v = 0; v < NV; v++) {
        int i0 = p0 + 16 * v;
        if (i0 >= g->PW)
            break;
        int row = i0 / g->Wq, col = i0 % g->Wq;
        size_t dst = (size_t)row * g->OW + (size_t)(col < g->OW ? col : g->OW);
        /* the lanes of valid columns, a run per row the vector touches;
         * none past the grid */
        unsigned m = 0;
        for (int l = 0; l < 16;) {
            int run = col < g->OW ? g->OW - col : 0, skip = g->Wq - col - run;
            m |= (run >= 16 ? 0xffffu : (1u << run) - 1) << l;
            l += run + skip;
            col = 0;
        }
        if (g->PW - i0 < 16)
            m &= (1u << (g->PW - i0)) - 1;
        m &= 0xffffu;
        __mmask16 keep = (__mmask16)m, out = (__mmask16)((1u << __builtin_popcount(m)) - 1);
#pragma GCC unroll 8
        for (int k = 0; k < KB; k++) {
            if (k >= kn)
                break;
            __m512 o = acc[k][v];
            if (bias)
                o = _mm512_add_ps(o, _mm512_set1_ps(bias[k0 + k]));
            _mm512_mask_storeu_ps(y + (size_t)(k0 + k) * g->P + dst, out,
                                  _mm512_maskz_compress_ps(keep, o));
        }
    }
}

/* every tile: blocks of KB output channels x 48 positions, the last with
 * the vectors it needs */
DK_AVX512 static inline __attribute__((always_inline)) void dk_run(float *y, const float *xp,
                                                                   const float *wd,
                                                                   const float *bias,
                                                                   const dk_geom *g, const int MODE)
{
    for (int k0 = 0; k0 < g->K; k0 += KB) {
        const float *w = wd + (size_t)k0 * g->C * g->RS;
        int p0 = 0;
        for (; p0 + 48 <= g->PW; p0 += 48)
            dk_tile(y, xp, w, bias, g, k0, p0, 3, MODE);
        int nv = (g->PW - p0 + 15) / 16;
        if (nv == 1)
            dk_tile(y, xp, w, bias, g, k0, p0, 1, MODE);
        else if (nv == 2)
            dk_tile(y, xp, w, bias, g, k0, p0, 2, MODE);
        else if (nv == 3)
            dk_tile(y, xp, w, bias, g, k0, p0, 3, MODE);
    }
}

DK_AVX512 void conv_direct(float *y, const float *x, const float *wd, const float *bias,
                           const conv_shape *s, float *xp)
{
    dk_pad(xp, x, s);
    int Wq = s->W + s->pad;
    dk_geom g = {.C = s->C,
                 .K = s->K,
                 .RS = s->R * s->S,
                 .S = s->S,
                 .Wq = Wq,
                 .OH = s->OH,
                 .OW = s->OW,
                 .PW = s->OH * Wq,
                 .plane = dk_plane(s),
                 .P = (size_t)s->OH * s->OW};
    if (s->R == 3 && s->S == 3)
        dk_run(y, xp, wd, bias, &g, 1);
    else
        dk_run(y, xp, wd, bias, &g, 0);
}

/* The weight gradient, 3x3: 16 output channels (lanes; km masks those
 * past K) x CT (1-3) input channels x 9 taps, CT x 9 accumulators in
 * registers over every valid output position in order (no junk columns
 * are visited), per position one dy vector (dyT's row) and CT x 9
 * broadcast inputs; stored into rows (c, t) of wt, where dw^T keeps K
 * contiguous. */
DK_AVX512 static inline __attribute__((always_inline)) void
dw_tile(float *restrict wt, const float *restrict xc, size_t plane, const float *restrict dyT,
        const conv_shape *s, int c0, int k0, __mmask16 km, int first, const int CT, int Wq,
        size_t pp, const int MODE)
{
    const int K16 = dk_k16(s), OW = s->OW;
    __m512 acc[3][9];
#pragma GCC unroll 3
    for (int ct = 0; ct < CT; ct++)
#pragma GCC unroll 9
        for (int t = 0; t < 9; t++)
            acc[ct][t] = _mm512_setzero_ps();
    const float *d = dyT + k0;
    for (int oh = 0; oh < s->OH; oh++) {
        const float *xr = xc + (size_t)oh * Wq;
        for (int ow = 0; ow < OW; ow++, d += K16) {
            __m512 dv = _mm512_loadu_ps(d);
            /* one opaque pointer per input channel, the taps at r * Wq + q
             * from it: else gcc keeps the 27 offsets (or the taps shared
             * with the next position) in stack slots */
            const float *xo[3];
#pragma GCC unroll 3
            for (int ct = 0; ct < CT; ct++) {
                xo[ct] = xr + ct * plane + ow;
                __asm__("" : "+r"(xo[ct]));
            }
#pragma GCC unroll 3
            for (int ct = 0; ct < CT; ct++)
#pragma GCC unroll 3
                for (int r = 0; r < 3; r++)
#pragma GCC unroll 3
                    for (int q = 0; q < 3; q++) {
                        size_t at = MODE ? dk_off(2, r * 3 + q, Wq, pp) : (size_t)r * Wq + q;
                        __m512 xv = _mm512_set1_ps(xo[ct][at]);
                        acc[ct][r * 3 + q] = _mm512_fmadd_ps(xv, dv, acc[ct][r * 3 + q]);
                    }
        }
    }
#pragma GCC unroll 3
    for (int ct = 0; ct < CT; ct++)
#pragma GCC unroll 9
        for (int t = 0; t < 9; t++) {
            float *o = wt + ((size_t)(c0 + ct) * 9 + t) * s->K + k0;
            __m512 v = acc[ct][t];
            if (!first)
                v = _mm512_add_ps(_mm512_maskz_loadu_ps(km, o), v);
            _mm512_mask_storeu_ps(o, km, v);
        }
}

/* every dw tile: 16 output channels x 3 input channels (the last 1-2) */
DK_AVX512 static inline __attribute__((always_inline)) void
dw_run(float *wt, const float *xp, const float *dyT, const conv_shape *s, int first, size_t plane,
       int Wq, size_t pp, const int MODE)
{
    for (int k0 = 0; k0 < s->K; k0 += 16) {
        __mmask16 km = (__mmask16)(s->K - k0 >= 16 ? 0xffffu : (1u << (s->K - k0)) - 1);
        int c0 = 0;
        for (; c0 + 3 <= s->C; c0 += 3)
            dw_tile(wt, xp + c0 * plane, plane, dyT, s, c0, k0, km, first, 3, Wq, pp, MODE);
        if (s->C - c0 == 2)
            dw_tile(wt, xp + c0 * plane, plane, dyT, s, c0, k0, km, first, 2, Wq, pp, MODE);
        else if (s->C - c0 == 1)
            dw_tile(wt, xp + c0 * plane, plane, dyT, s, c0, k0, km, first, 1, Wq, pp, MODE);
    }
}

DK_AVX512 void conv_direct_dw(float *wt, const float *x, const float *dy, const conv_shape *s,
                              int first, float *xp, float *dyT)
{
    dk_pad(xp, x, s);
    dk_transpose(dyT, dy, s);
    dw_run(wt, xp, dyT, s, first, dk_plane(s), s->W + s->pad, 0, 0);
}

/* din (C x H x W) from its phases (phase ph: C x H_a x W_b, in order
 * from t): each row's even and odd columns interleaved, 16 of each at a
 * time */
DK_AVX512 static void dk2_interleave(float *restrict dx, const float *restrict t,
                                     const conv_shape *s)
{
    int H = s->H, W = s->W, Ha[2] = {(H + 1) / 2, H / 2}, Wb[2] = {(W + 1) / 2, W / 2};
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const float *ph[4];
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        ph[i] = t + at;
        at += (size_t)s->C * Ha[i >> 1] * Wb[i & 1];
    }
    for (int c = 0; c < s->C; c++)
        for (int h = 0; h < H; h++, dx += W) {
            int a = h & 1;
            const float *e = ph[2 * a] + ((size_t)c * Ha[a] + h / 2) * Wb[0];
            const float *o = ph[2 * a + 1] + ((size_t)c * Ha[a] + h / 2) * Wb[1];
            for (int m = 0; m < Wb[0]; m += 16) {
                __m512 ev = _mm512_maskz_loadu_ps(x512_mask(Wb[0] - m), e + m);
                __m512 ov = _mm512_maskz_loadu_ps(x512_mask(Wb[1] - m), o + m);
                _mm512_mask_storeu_ps(dx + 2 * m, x512_mask(W - 2 * m),
                                      _mm512_permutex2var_ps(ev, lo, ov));
                _mm512_mask_storeu_ps(dx + 2 * m + 16, x512_mask(W - 2 * m - 16),
                                      _mm512_permutex2var_ps(ev, hi, ov));
            }
        }
}

DK_AVX512 void conv_direct_s2(float *y, const float *x, const float *wd, const float *bias,
                              const conv_shape *s, float *xp)
{
    dk2_phase(xp, x, s);
    int Wq = dk2_wq(s);
    dk_geom g = {.C = s->C,
                 .K = s->K,
                 .RS = 9,
                 .S = 3,
                 .Wq = Wq,
                 .OH = s->OH,
                 .OW = s->OW,
                 .PW = s->OH * Wq,
                 .plane = 4 * dk2_pp(s),
                 .P = (size_t)s->OH * s->OW,
                 .pp = dk2_pp(s)};
    dk_run(y, xp, wd, bias, &g, 2);
}

DK_AVX512 void conv_direct_s2_dw(float *wt, const float *x, const float *dy, const conv_shape *s,
                                 int first, float *xp, float *dyT)
{
    dk2_phase(xp, x, s);
    dk_transpose(dyT, dy, s);
    dw_run(wt, xp, dyT, s, first, 4 * dk2_pp(s), dk2_wq(s), dk2_pp(s), 1);
}

DK_AVX512 void conv_direct_s2_din(float *dx, const float *dy, const float *wdf, const conv_shape *s,
                                  float *xp)
{
    dk2_pad_dy(xp, dy, s);
    float *t = xp + ((size_t)s->K * dk2_pp(s) + DK2_SLACK(s) + 15) / 16 * 16, *o = t;
    int Wq = dk2_wq(s), Ha[2] = {(s->H + 1) / 2, s->H / 2}, Wb[2] = {(s->W + 1) / 2, s->W / 2};
    for (int ph = 0; ph < 4; ph++) {
        int oh = Ha[ph >> 1], ow = Wb[ph & 1];
        dk_geom g = {.C = s->K,
                     .K = s->C,
                     .RS = dk2_nt(ph),
                     .S = 1,
                     .Wq = Wq,
                     .OH = oh,
                     .OW = ow,
                     .PW = oh * Wq,
                     .plane = dk2_pp(s),
                     .P = (size_t)oh * ow,
                     .pp = dk2_pp(s)};
        const float *w = wdf + dk2_wf_at(s, ph);
        if (ph == 0)
            dk_run(o, xp, w, NULL, &g, 3);
        else if (ph == 1)
            dk_run(o, xp, w, NULL, &g, 4);
        else if (ph == 2)
            dk_run(o, xp, w, NULL, &g, 5);
        else
            dk_run(o, xp, w, NULL, &g, 6);
        o += (size_t)s->C * oh * ow;
    }
    dk2_interleave(dx, t, s);
}

#else

int conv_direct_available(void) { return 0; }

void conv_direct_transpose(float *out, const float *in, int rows, int cols)
{
    (void)out, (void)in, (void)rows, (void)cols;
}

void conv_direct_s2(float *y, const float *x, const float *wd, const float *bias,
                    const conv_shape *s, float *xp)
{
    (void)y, (void)x, (void)wd, (void)bias, (void)s, (void)xp;
    (void)dk2_pad_dy, (void)dk2_wf_at;
}

void conv_direct_s2_dw(float *wt, const float *x, const float *dy, const conv_shape *s, int first,
                       float *xp, float *dyT)
{
    (void)wt, (void)x, (void)dy, (void)s, (void)first, (void)xp, (void)dyT;
}

void conv_direct_s2_din(float *dx, const float *dy, const float *wdf, const conv_shape *s,
                        float *xp)
{
    (void)dx, (void)dy, (void)wdf, (void)s, (void)xp;
}

void conv_direct_dw(float *wt, const float *x, const float *dy, const conv_shape *s, int first,
                    float *xp, float *dyT)
{
    (void)wt, (void)x, (void)dy, (void)s, (void)first, (void)xp, (void)dyT;
}

void conv_direct(float *y, const float *x, const float *wd, const float *bias, const conv_shape *s,
                 float *xp)
{
    (void)y, (void)x, (void)wd, (void)bias, (void)s, (void)xp;
}

#endif
