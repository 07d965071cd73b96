/* conv_wino.c — Winograd F(2x2, 3x3) (Lavin and Gray, 2015) for 3x3,
 * stride-1, pad-1 convolutions on AVX-512 (see conv_wino.h).
 *
 * The output is cut into 2x2 tiles, TH x TW per sample (TH = ceil(H / 2),
 * TW = ceil(W / 2)); tile (th, tw) reads the 4x4 input patch at rows
 * 2 th - 1 .. 2 th + 2, columns 2 tw - 1 .. 2 tw + 2 (zeros outside: the
 * padding, and past an odd edge). With the matrices of F(2, 3)
 *
 *   B^T = | 1  0 -1  0 |   G = | 1    0    0  |   A^T = | 1 1  1  0 |
 *         | 0  1  1  0 |       | 1/2  1/2  1/2 |         | 0 1 -1 -1 |
 *         | 0 -1  1  0 |       | 1/2 -1/2  1/2 |
 *         | 0  1  0 -1 |       | 0    0    1  |
 *
 * a tile's outputs of channel k are A^T [sum over c of U_kc (.) V_c] A,
 * with U_kc = G g_kc G^T (the weights, once per call) and V_c = B^T d_c B
 * (the input patch): 16 products per (k, c) instead of 36. Over a block
 * of tiles that is 16 independent GEMMs, M[xi] (K x T) = U[xi] (K x C) .
 * V[xi] (C x T), xi = 4 i + j the element of the 4x4.
 *
 * A block is a run of whole tile rows, taken across the samples of the
 * call (a 7x7 sample has only 16 tiles: the GEMMs want more columns), in
 * slots of whole vectors (wino_slot: a 14x14 sample's 7-tile rows two to
 * a vector, 7x7's four), as many as keep V within WINO_BUDGET floats (L2),
 * or one slot when a slot's V and M fit L1 (16 channels). Per block:
 *  - input transform: per channel, 16 tiles of a row at a time (one
 *    vector per element of the patch: each input row's 32 floats
 *    deinterleaved into even and odd columns, the neighbours shifted in
 *    with valignd, the patch's last two rows kept for the next tile row;
 *    rows of at most 8 tiles spread onto their lanes with masked
 *    permutes); masked loads are the padding (no padded copy);
 *  - per unit of up to 3 vectors of tiles (wino_unit), the GEMMs: 8
 *    output channels (broadcast U) x 1-3 vectors of 16 tiles, up to 24
 *    accumulators over every input channel, into M (K x the unit, in L1
 *    at small K); then the output transform: per output channel and tile
 *    row, the two output rows' even and odd columns interleaved and
 *    stored with masks (an odd H or W leaves the last tile half outside),
 *    + bias.
 *
 * Each output is summed in one fixed order (input channels in the GEMM,
 * then the transforms), whatever the block or the thread count. It
 * differs from direct summation by more than rounding order: the
 * transforms add and subtract neighbouring inputs and weights before the
 * products, so an output's error grows with |x| |w| over its whole 4x4
 * patch and all 9 taps rather than its own terms: measured at most 1.6
 * eps times its own sum of |x| |w| (tests/test_conv_wino.c), several times
 * the direct kernel's.
 */
#define _POSIX_C_SOURCE 200809L
#include "cpu/conv_wino.h"

/* floats of V per block: 128 KB, in L2 between the input transform and
 * the GEMMs (measured on resnet20's shapes with backward chunks of 8
 * samples: 10-15% faster than 1 MB blocks) */
#define WINO_BUDGET (32 * 1024)
/* floats of V and M of one slot that fit L1 with room to spare (40 KB) */
#define WINO_L1 (10 * 1024)

static int wino_k8(const conv_shape *s) { return (s->K + 7) / 8 * 8; }
static int wino_th(const conv_shape *s) { return (s->H + 1) / 2; }
static int wino_tw(const conv_shape *s) { return (s->W + 1) / 2; }
static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* A slot is a run of whole vectors of tiles (columns of V and M) that
 * holds wino_r tile rows: rows of at most 8 tiles share one vector (R =
 * 16 / TW of them, lane r TW + tw), longer ones take round16(TW) lanes
 * each. Slots start on whole vectors: aligned, full stores and loads
 * (unaligned masked ones cost the input transform 15%, measured); the
 * unused lanes hold finite values (zeros or neighbours), never used. */
static int wino_r(const conv_shape *s) { return wino_tw(s) <= 8 ? 16 / wino_tw(s) : 1; }
static size_t wino_slot(const conv_shape *s)
{
    return wino_tw(s) <= 8 ? 16 : round16((size_t)wino_tw(s));
}

/* Whether a slot's V and M fit L1 (resnet20's 16 channels): then a
 * block is one slot, consumed by the GEMMs right away, rather than a
 * unit of 3 vectors in L2 (at 28x28, 16 channels: 20 against 23 us per
 * sample, measured; at 32 and 64 channels the wider unit wins, 15 against
 * 17 us at 7x7) */
static int wino_small(const conv_shape *s)
{
    return (size_t)16 * (size_t)(s->C + wino_k8(s)) * wino_slot(s) <= WINO_L1;
}

/* columns of a unit (the GEMMs' and the output transform's step): whole
 * slots, as many as fit in 3 vectors, at least one; one slot when small */
static size_t wino_unit(const conv_shape *s)
{
    size_t slot = wino_slot(s), n = wino_small(s) ? 1 : 48 / slot;
    return (n < 1 ? 1 : n) * slot;
}

/* tile rows per block: whole slots, at least a unit */
static int wino_rows(const conv_shape *s)
{
    size_t per = (size_t)16 * (size_t)s->C * wino_slot(s), n = WINO_BUDGET / per;
    size_t u = wino_unit(s) / wino_slot(s);
    return (int)(n < u || wino_small(s) ? u : n) * wino_r(s);
}

/* columns of V and M for tile rows [g0, g1), g1 - g0 <= wino_rows */
static size_t wino_cols(const conv_shape *s, int g0, int g1)
{
    return (size_t)((g1 - g0 + wino_r(s) - 1) / wino_r(s)) * wino_slot(s);
}

size_t conv_wino_scratch_n(const conv_shape *s)
{
    return (size_t)16 * s->C * wino_cols(s, 0, wino_rows(s)) +
           (size_t)16 * wino_k8(s) * wino_unit(s);
}

int conv_wino_group(const conv_shape *s)
{
    int t = wino_th(s) * wino_tw(s), g = (64 + t - 1) / t;
    return g > 8 ? 8 : g;
}

size_t conv_wino_w_n(const conv_shape *s) { return (size_t)16 * wino_k8(s) * (size_t)s->C; }

#if defined(__x86_64__) || defined(__i386__)
#include "cpu/x86_512.h"

#define WN_AVX512 __attribute__((target("avx512f")))
#define WN_INLINE inline __attribute__((always_inline))

/* u[xi][ko / 8][ci][ko % 8] = G g G^T of the 3x3 g of (ko, ci) for Ko
 * outputs x Ci inputs, g at w + (ko * ks + ci * cs) * 9 (its taps t = 3 r
 * + q, or 8 - t when flipped), zeros past Ko; in double, a block of 8 ko
 * per vector (gathered), rounded to float once at the end */
WN_AVX512 static void wn_weights(float *u, const float *w, int Ko, int Ci, size_t ks, size_t cs,
                                 int flip)
{
    const int K8 = (Ko + 7) / 8 * 8;
    const size_t xs = (size_t)K8 * Ci;
    const __m512d half = _mm512_set1_pd(0.5);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int kb = 0; kb < K8; kb += 8) {
        const __m256i at = _mm256_mullo_epi32(_mm256_add_epi32(lane, _mm256_set1_epi32(kb)),
                                              _mm256_set1_epi32((int)(ks * 9)));
        const __m256 valid =
            _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(Ko - kb), lane));
        for (int ci = 0; ci < Ci; ci++) {
            const float *base = w + (size_t)ci * cs * 9;
            __m512d r[9];
#pragma GCC unroll 9
            for (int t = 0; t < 9; t++)
                r[t] = _mm512_cvtps_pd(_mm256_mask_i32gather_ps(
                    _mm256_setzero_ps(), base + (flip ? 8 - t : t), at, valid, 4));
            /* G g: rows i = 0..3, columns q */
            __m512d a[4][3];
#pragma GCC unroll 3
            for (int q = 0; q < 3; q++) {
                __m512d g0 = r[q], g1 = r[3 + q], g2 = r[6 + q];
                a[0][q] = g0;
                a[1][q] = _mm512_mul_pd(half, _mm512_add_pd(_mm512_add_pd(g0, g1), g2));
                a[2][q] = _mm512_mul_pd(half, _mm512_add_pd(_mm512_sub_pd(g0, g1), g2));
                a[3][q] = g2;
            }
            /* (G g) G^T */
            float *o = u + (size_t)kb * Ci + (size_t)ci * 8;
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                __m512d x0 = a[i][0], x1 = a[i][1], x2 = a[i][2];
                __m512d v[4] = {x0, _mm512_mul_pd(half, _mm512_add_pd(_mm512_add_pd(x0, x1), x2)),
                                _mm512_mul_pd(half, _mm512_add_pd(_mm512_sub_pd(x0, x1), x2)), x2};
#pragma GCC unroll 4
                for (int j = 0; j < 4; j++)
                    _mm256_storeu_ps(o + (size_t)(4 * i + j) * xs, _mm512_cvtpd_ps(v[j]));
            }
        }
    }
}

void conv_wino_weights(float *u, const float *w, const conv_shape *s)
{
    wn_weights(u, w, s->K, s->C, (size_t)s->C, 1, 0);
}

void conv_wino_weights_flip(float *u, const float *w, const conv_shape *s)
{
    /* outputs are s's input channels c, inputs its outputs k: w[k][c] */
    wn_weights(u, w, s->C, s->K, 1, (size_t)s->C, 1);
}

/* a run of 16 tiles of a row from column col0 = 2 tw0: the masks of its
 * two loads, whether the columns before and after it are inside */
typedef struct wn_run {
    __mmask16 lo, hi;
    int col0, prev, next;
} wn_run;

static inline wn_run wn_run_at(int W, int col0)
{
    return (wn_run){x512_mask(W - col0), x512_mask(W - col0 - 16), col0, col0 > 0, col0 + 32 < W};
}

/* One input row's columns 2 tw - 1 + j (j = 0..3) of the run's 16 tiles,
 * zeros outside [0, W) */
WN_AVX512 static WN_INLINE void wn_row(__m512 d[4], const float *row, const wn_run *k)
{
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    row += k->col0;
    __m512 lo = _mm512_maskz_loadu_ps(k->lo, row), hi = _mm512_maskz_loadu_ps(k->hi, row + 16);
    __m512 e = _mm512_permutex2var_ps(lo, ev, hi), o = _mm512_permutex2var_ps(lo, od, hi);
    float prev = k->prev ? row[-1] : 0.0f, next = k->next ? row[32] : 0.0f;
    /* [prev, o0 .. o14] and [e1 .. e15, next] */
    d[0] = _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(o), _mm512_castps_si512(_mm512_set1_ps(prev)), 15));
    d[1] = e;
    d[2] = o;
    d[3] = _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(_mm512_set1_ps(next)), _mm512_castps_si512(e), 1));
}

/* e = d B of one patch row (its 4 columns) */
WN_AVX512 static WN_INLINE void wn_h(__m512 e[4], const __m512 d[4])
{
    e[0] = _mm512_sub_ps(d[0], d[2]);
    e[1] = _mm512_add_ps(d[1], d[2]);
    e[2] = _mm512_sub_ps(d[2], d[1]);
    e[3] = _mm512_sub_ps(d[1], d[3]);
}

/* V's 16 rows xi at o (xi's xs apart; aligned when the scratch is) = B^T (e's rows) */
WN_AVX512 static WN_INLINE void wn_v(float *o, size_t xs, __m512 e[4][4])
{
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        _mm512_storeu_ps(o + (size_t)j * xs, _mm512_sub_ps(e[0][j], e[2][j]));
        _mm512_storeu_ps(o + (size_t)(4 + j) * xs, _mm512_add_ps(e[1][j], e[2][j]));
        _mm512_storeu_ps(o + (size_t)(8 + j) * xs, _mm512_sub_ps(e[2][j], e[1][j]));
        _mm512_storeu_ps(o + (size_t)(12 + j) * xs, _mm512_sub_ps(e[1][j], e[3][j]));
    }
}

/* e = d B of input row h's patch columns for the run's 16 tiles (zeros
 * outside the input) */
WN_AVX512 static WN_INLINE void wn_erow(__m512 e[4], const float *pl, int h, int H, int W,
                                        const wn_run *k)
{
    __m512 d[4];
    if (h < 0 || h >= H)
        d[0] = d[1] = d[2] = d[3] = _mm512_setzero_ps();
    else
        wn_row(d, pl + (size_t)h * W, k);
    wn_h(e, d);
}

/* rows of more than 8 tiles: per channel, 16 tiles of a row at a time,
 * down the tile rows; the next tile row of the same sample reuses the
 * last two patch rows (d B) of this one */
WN_AVX512 static void wn_in_wide(float *restrict V, const float *restrict x, const conv_shape *s,
                                 int g0, int g1, size_t T16)
{
    const int C = s->C, H = s->H, W = s->W, TH = wino_th(s), TW = wino_tw(s);
    const size_t xs = (size_t)C * T16, plane = (size_t)H * W, slot = wino_slot(s);
    for (int c = 0; c < C; c++)
        for (int tw0 = 0; tw0 < TW; tw0 += 16) {
            const wn_run k = wn_run_at(W, 2 * tw0);
            __m512 e[4][4];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) /* rows 0-1 are set before use: for gcc */
                e[i / 4][i % 4] = _mm512_setzero_ps();
            /* (b, th) of g, stepped rather than divided (an idiv per row
             * was 5% of this function) */
            int b = g0 / TH, th = g0 % TH;
            float *vo = V + (size_t)c * T16 + tw0;
            for (int g = g0; g < g1; g++, vo += slot) {
                const float *pl = x + ((size_t)b * C + c) * plane;
                if (g > g0 && th > 0) {
#pragma GCC unroll 4
                    for (int j = 0; j < 4; j++)
                        e[0][j] = e[2][j], e[1][j] = e[3][j];
                } else {
                    wn_erow(e[0], pl, 2 * th - 1, H, W, &k);
                    wn_erow(e[1], pl, 2 * th, H, W, &k);
                }
                wn_erow(e[2], pl, 2 * th + 1, H, W, &k);
                wn_erow(e[3], pl, 2 * th + 2, H, W, &k);
                wn_v(vo, xs, e);
                if (++th == TH)
                    th = 0, b++;
            }
        }
}

/* rows of at most 8 tiles: R = 16 / TW tile rows per vector (lane l: tile
 * l % TW of row l / TW), each input row (W <= 16 floats, one load) spread
 * onto its row's lanes by a masked permute per patch column */
WN_AVX512 static void wn_in_narrow(float *restrict V, const float *restrict x, const conv_shape *s,
                                   int g0, int g1, size_t T16)
{
    const int C = s->C, H = s->H, W = s->W, TH = wino_th(s), TW = wino_tw(s), R = 16 / TW;
    const size_t xs = (size_t)C * T16, plane = (size_t)H * W;
    /* idx[j] lane l: column 2 (l % TW) - 1 + j; mk[r][j]: the lanes of row
     * r whose column is inside the input */
    __m512i idx[4];
    __mmask16 mk[16][4];
    for (int j = 0; j < 4; j++) {
        int v[16];
        for (int l = 0; l < 16; l++)
            v[l] = 2 * (l % TW) - 1 + j;
        idx[j] = _mm512_loadu_si512(v);
        for (int r = 0; r < R; r++) {
            unsigned m = 0;
            for (int l = r * TW; l < (r + 1) * TW; l++)
                m |= (v[l] >= 0 && v[l] < W) << l;
            mk[r][j] = (__mmask16)m;
        }
    }
    const __mmask16 wm = x512_mask(W);
    for (int g = g0; g < g1; g += R) {
        int nr = g1 - g < R ? g1 - g : R;
        const float *rp[16]; /* row r's plane of channel 0, at its tile row's patch top */
        int top[16];
        for (int r = 0; r < nr; r++) {
            int b = (g + r) / TH, th = (g + r) % TH;
            top[r] = 2 * th - 1;
            rp[r] = x + (size_t)b * C * plane;
        }
        float *vo = V + (size_t)(g - g0) / R * 16;
        for (int c = 0; c < C; c++, vo += T16) {
            __m512 e[4][4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                __m512 d[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                               _mm512_setzero_ps()};
                for (int r = 0; r < nr; r++) {
                    int h = top[r] + i;
                    if (h < 0 || h >= H)
                        continue;
                    __m512 rv =
                        _mm512_maskz_loadu_ps(wm, rp[r] + (size_t)c * plane + (size_t)h * W);
#pragma GCC unroll 4
                    for (int j = 0; j < 4; j++)
                        d[j] = _mm512_mask_permutexvar_ps(d[j], mk[r][j], idx[j], rv);
                }
                wn_h(e[i], d);
            }
            wn_v(vo, xs, e);
        }
    }
}

/* V[xi][c][t] (pitch T16, xi's at C x T16) = B^T d B of the tiles of tile
 * rows [g0, g1) (g = b * TH + th), in slots (wino_slot) */
WN_AVX512 static void wn_in(float *restrict V, const float *restrict x, const conv_shape *s, int g0,
                            int g1, size_t T16)
{
    if (wino_tw(s) <= 8)
        wn_in_narrow(V, x, s, g0, g1, T16);
    else
        wn_in_wide(V, x, s, g0, g1, T16);
}

/* M rows [k0, k0 + 8) x 16 NV tiles (m: their first, pitch mp) = U[xi]'s
 * block (u: [C][8]) . V[xi]'s columns (v: their first, pitch vp) */
WN_AVX512 static WN_INLINE void wn_tile(float *restrict m, size_t mp, const float *restrict v,
                                        size_t vp, const float *restrict u, int C, const int NV)
{
    __m512 acc[8][3];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
#pragma GCC unroll 3
        for (int n = 0; n < NV; n++)
            acc[k][n] = _mm512_setzero_ps();
    for (int c = 0; c < C; c++, v += vp, u += 8) {
        __m512 xv[3];
#pragma GCC unroll 3
        for (int n = 0; n < NV; n++)
            xv[n] = _mm512_loadu_ps(v + 16 * n);
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            __m512 wv = _mm512_set1_ps(u[k]);
#pragma GCC unroll 3
            for (int n = 0; n < NV; n++)
                acc[k][n] = _mm512_fmadd_ps(xv[n], wv, acc[k][n]);
        }
    }
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
#pragma GCC unroll 3
        for (int n = 0; n < NV; n++)
            _mm512_storeu_ps(m + (size_t)k * mp + 16 * n, acc[k][n]);
}

/* M[xi] (K8 x n, pitch mp) = U[xi] . V[xi]'s n columns from V (pitch
 * vp) for the 16 xi: strips of 3 vectors of tiles (2 + 2 rather than 3 +
 * 1 at the end), every block of 8 output channels per strip while the
 * strip's V stays in L1 */
WN_AVX512 static void wn_gemm(float *restrict M, size_t mp, const float *restrict V, size_t vp,
                              const float *restrict u, const conv_shape *s, size_t n)
{
    const int C = s->C, K8 = wino_k8(s), nvec = (int)(n / 16);
    for (int xi = 0; xi < 16; xi++) {
        const float *ux = u + (size_t)xi * K8 * C, *vx = V + (size_t)xi * C * vp;
        float *mx = M + (size_t)xi * K8 * mp;
        for (int v0 = 0, nv; v0 < nvec; v0 += nv) {
            int rem = nvec - v0;
            nv = rem == 4 ? 2 : rem >= 3 ? 3 : rem;
            for (int k0 = 0; k0 < K8; k0 += 8) {
                float *mo = mx + (size_t)k0 * mp + 16 * v0;
                const float *vi = vx + 16 * v0, *ui = ux + (size_t)k0 * C;
                if (nv == 3)
                    wn_tile(mo, mp, vi, vp, ui, C, 3);
                else if (nv == 2)
                    wn_tile(mo, mp, vi, vp, ui, C, 2);
                else
                    wn_tile(mo, mp, vi, vp, ui, C, 1);
            }
        }
    }
}

/* A^T M A of 16 tiles (m: M's row at their first, whole vectors, xi's
 * xs apart): the 2x2 outputs y[r][q], + bias */
WN_AVX512 static WN_INLINE void wn_a(__m512 y[2][2], const float *m, size_t xs, const float *bias)
{
    __m512 mv[16];
#pragma GCC unroll 16
    for (int xi = 0; xi < 16; xi++)
        mv[xi] = _mm512_loadu_ps(m + (size_t)xi * xs);
    __m512 a[4], c[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        __m512 m1 = mv[4 * i + 1], m2 = mv[4 * i + 2];
        a[i] = _mm512_add_ps(_mm512_add_ps(mv[4 * i], m1), m2);
        c[i] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), mv[4 * i + 3]);
    }
    y[0][0] = _mm512_add_ps(_mm512_add_ps(a[0], a[1]), a[2]);
    y[0][1] = _mm512_add_ps(_mm512_add_ps(c[0], c[1]), c[2]);
    y[1][0] = _mm512_sub_ps(_mm512_sub_ps(a[1], a[2]), a[3]);
    y[1][1] = _mm512_sub_ps(_mm512_sub_ps(c[1], c[2]), c[3]);
    if (bias) {
        __m512 bv = _mm512_set1_ps(*bias);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            y[i / 2][i % 2] = _mm512_add_ps(y[i / 2][i % 2], bv);
    }
}

/* y's tiles of tile rows [g0, g1) = A^T M A (+ bias), per output channel:
 * each output row's even (a tile's first column) and odd columns
 * interleaved, stored with masks that cut what falls past H or W; rows
 * of more than 8 tiles 16 tiles at a time, shorter ones R = 16 / TW rows
 * per vector as wn_in_narrow lays them out */
WN_AVX512 static void wn_out(float *restrict y, const float *restrict M, const float *restrict bias,
                             const conv_shape *s, int g0, int g1, size_t T16)
{
    const int K = s->K, H = s->H, W = s->W, TH = wino_th(s), TW = wino_tw(s);
    const size_t xs = (size_t)wino_k8(s) * T16, P = (size_t)H * W;
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    if (TW <= 8) {
        const int R = 16 / TW;
        const __mmask16 wm = x512_mask(W);
        for (int g = g0; g < g1; g += R) {
            int nr = g1 - g < R ? g1 - g : R;
            size_t at[16];
            int two[16];
            for (int r = 0; r < nr; r++) {
                int b = (g + r) / TH, th = (g + r) % TH;
                at[r] = (size_t)b * K * P + (size_t)(2 * th) * W;
                two[r] = 2 * th + 1 < H;
            }
            const float *mg = M + (size_t)(g - g0) / R * 16;
            for (int k = 0; k < K; k++) {
                __m512 yv[2][2];
                wn_a(yv, mg + (size_t)k * T16, xs, bias ? bias + k : NULL);
                for (int r = 0; r < nr; r++) {
                    float *yk = y + at[r] + (size_t)k * P;
                    __m512i ix = _mm512_add_epi32(lo, _mm512_set1_epi32(r * TW));
                    _mm512_mask_storeu_ps(yk, wm, _mm512_permutex2var_ps(yv[0][0], ix, yv[0][1]));
                    if (two[r])
                        _mm512_mask_storeu_ps(yk + W, wm,
                                              _mm512_permutex2var_ps(yv[1][0], ix, yv[1][1]));
                }
            }
        }
        return;
    }
    for (int g = g0; g < g1; g++) {
        int b = g / TH, th = g % TH, two = 2 * th + 1 < H;
        size_t tb = (size_t)(g - g0) * wino_slot(s);
        for (int k = 0; k < K; k++) {
            float *yk = y + ((size_t)b * K + k) * P + (size_t)(2 * th) * W;
            const float *mk = M + (size_t)k * T16 + tb;
            for (int tw0 = 0; tw0 < TW; tw0 += 16) {
                __m512 yv[2][2];
                wn_a(yv, mk + tw0, xs, bias ? bias + k : NULL);
                int col0 = 2 * tw0;
                __mmask16 m0 = x512_mask(W - col0), m1 = x512_mask(W - col0 - 16);
                _mm512_mask_storeu_ps(yk + col0, m0,
                                      _mm512_permutex2var_ps(yv[0][0], lo, yv[0][1]));
                _mm512_mask_storeu_ps(yk + col0 + 16, m1,
                                      _mm512_permutex2var_ps(yv[0][0], hi, yv[0][1]));
                if (two) {
                    _mm512_mask_storeu_ps(yk + W + col0, m0,
                                          _mm512_permutex2var_ps(yv[1][0], lo, yv[1][1]));
                    _mm512_mask_storeu_ps(yk + W + col0 + 16, m1,
                                          _mm512_permutex2var_ps(yv[1][0], hi, yv[1][1]));
                }
            }
        }
    }
}

WN_AVX512 void conv_wino(float *y, const float *x, int nb, const float *u, const float *bias,
                         const conv_shape *s, float *scratch)
{
    const int rows = wino_rows(s), nr = nb * wino_th(s), R = wino_r(s);
    const size_t slot = wino_slot(s), unit = wino_unit(s);
    for (int g0 = 0; g0 < nr; g0 += rows) {
        int g1 = g0 + rows < nr ? g0 + rows : nr;
        size_t T16 = wino_cols(s, g0, g1);
        float *V = scratch, *M = scratch + (size_t)16 * s->C * T16;
        wn_in(V, x, s, g0, g1, T16);
        /* the GEMMs and the output transform a unit at a time: its M
         * stays in L1 (small K) or L2 */
        for (size_t c0 = 0; c0 < T16; c0 += unit) {
            size_t n = T16 - c0 < unit ? T16 - c0 : unit;
            int ga = g0 + (int)(c0 / slot) * R, gb = ga + (int)(n / slot) * R;
            wn_gemm(M, n, V + c0, T16, u, s, n);
            wn_out(y, M, bias, s, ga, gb < g1 ? gb : g1, n);
        }
    }
}

#else

void conv_wino_weights(float *u, const float *w, const conv_shape *s) { (void)u, (void)w, (void)s; }

void conv_wino_weights_flip(float *u, const float *w, const conv_shape *s)
{
    (void)u, (void)w, (void)s;
}

void conv_wino(float *y, const float *x, int nb, const float *u, const float *bias,
               const conv_shape *s, float *scratch)
{
    (void)y, (void)x, (void)nb, (void)u, (void)bias, (void)s, (void)scratch;
}

#endif
