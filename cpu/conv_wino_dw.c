/* conv_wino_dw.c — the weight gradient of a 3x3, stride-1, pad-1 convolution
 * by Winograd's F(2x2, 3x3) (Lavin and Gray, 2015), AVX-512.
 *
 * The forward pass of a 2x2 output tile is y = A^T [(G g G^T) . (B^T d
 * B)] A, with d the tile's 4x4 input patch (zeros in the padding), g the
 * 3x3 weights and . the element-wise product. Its gradient with respect
 * to g is therefore
 *
 *   dg = G^T [ sum over tiles (A dy A^T) . (B^T d B) ] G
 *
 * so per sample: transform every input patch (V = B^T d B, 16 values
 * per tile and input channel) and every output-gradient tile (D = A dy
 * A^T, 16 per tile and output channel), then for each of the 16
 * positions xi of the 4x4 transformed tile a product summed over the
 * tiles, X[xi][c][k] += sum_t V[xi][t][c] D[xi][t][k]. X sums over the
 * samples of a chunk; wino_dw_finish applies G^T . G once. That is 16
 * multiplies per tile (4 outputs) per (c, k) where the direct kernel
 * does 36, plus the transforms, which are per channel only.
 *
 * Lanes hold channels: x and dy are first transposed to position-major
 * rows of 16 channels (zeros past C or K, and in the padding), so the
 * transforms are plain vector adds and the product broadcasts one V
 * value against a vector of 16 D values (k), as conv_direct_dw does.
 * Odd H or W leave a last half tile: its missing outputs have dy = 0,
 * which is what the zeroed rows give.
 *
 * Every sum runs in a fixed order (tiles in order, samples in order),
 * whatever the thread count; the result differs from the direct
 * kernel's in the last bits.
 */
#define _POSIX_C_SOURCE 200809L
#include "cpu/conv_wino_dw.h"

#include "cpu/internal.h" /* cpu_vfill */

static int r16(int n) { return (n + 15) / 16 * 16; }
static size_t a16(size_t n) { return (n + 15) / 16 * 16; }

/* the pieces of the scratch, in floats */
typedef struct wd_geom {
    int C, K, H, W, C16, K16, TH, TW, T, HP, WP;
    size_t xt_n, v_n, dt_n, d_n;
} wd_geom;

static wd_geom wd_geom_of(const conv_shape *s)
{
    wd_geom g = {.C = s->C, .K = s->K, .H = s->H, .W = s->W, .C16 = r16(s->C), .K16 = r16(s->K)};
    g.TH = (s->H + 1) / 2;
    g.TW = (s->W + 1) / 2;
    g.T = g.TH * g.TW;
    g.HP = 2 * g.TH + 2;
    g.WP = 2 * g.TW + 2;
    g.xt_n = a16((size_t)g.HP * g.WP * g.C16);
    g.v_n = (size_t)16 * g.T * g.C16;
    g.dt_n = (size_t)4 * g.T * g.K16;
    g.d_n = (size_t)16 * g.T * g.K16;
    return g;
}

size_t wino_dw_scratch_n(const conv_shape *s)
{
    wd_geom g = wd_geom_of(s);
    return g.xt_n + g.v_n + g.dt_n + g.d_n;
}

size_t wino_dw_acc_n(const conv_shape *s) { return (size_t)16 * r16(s->C) * r16(s->K); }

#if defined(__x86_64__) && defined(__GNUC__)
#include "cpu/x86_512.h"

int wino_dw_available(void) { return __builtin_cpu_supports("avx512f") != 0; }

#define WD_AVX512 __attribute__((target("avx512f")))

/* dst[((h + off) * dw + w + off) * N16 + n] = src[(n * H + h) * W + w]
 * for n < N (zeros for N <= n < N16): a plane-major tensor (N x H x W)
 * to position-major rows of N16 floats, placed at (off, off) in a grid
 * of rows dw wide; the grid's other cells are left alone. */
WD_AVX512 static void wd_transpose(float *restrict dst, const float *restrict src, int N, int N16,
                                   int H, int W, int dw, int off)
{
    size_t plane = (size_t)H * W;
    for (int h = 0; h < H; h++)
        for (int w0 = 0; w0 < W; w0 += 16) {
            __mmask16 m = x512_mask(W - w0);
            int nw = W - w0 < 16 ? W - w0 : 16;
            float *o = dst + ((size_t)(h + off) * dw + w0 + off) * N16;
            for (int n0 = 0; n0 < N16; n0 += 16) {
                __m512 r[16];
                const float *in = src + (size_t)n0 * plane + (size_t)h * W + w0;
#pragma GCC unroll 16
                for (int l = 0; l < 16; l++)
                    r[l] = n0 + l < N ? _mm512_maskz_loadu_ps(m, in + (size_t)l * plane)
                                      : _mm512_setzero_ps();
                x512_tr16(r);
#pragma GCC unroll 16
                for (int l = 0; l < 16; l++)
                    if (l < nw)
                        _mm512_storeu_ps(o + (size_t)l * N16 + n0, r[l]);
            }
        }
}

/* zero rows [h0, h1) of a grid of rows dw wide, N16 floats a cell; and
 * columns [w0, w1) of rows [0, h0) */
static void wd_zero_rows(float *g, int h0, int h1, int dw, int N16)
{
    if (h1 > h0)
        cpu_vfill(g + (size_t)h0 * dw * N16, 0.0f, (size_t)(h1 - h0) * dw * N16);
}
static void wd_zero_cols(float *g, int rows, int w0, int w1, int dw, int N16)
{
    if (w1 > w0)
        for (int h = 0; h < rows; h++)
            cpu_vfill(g + ((size_t)h * dw + w0) * N16, 0.0f, (size_t)(w1 - w0) * N16);
}

/* V[xi][t][C16] = (B^T d B)[xi] of every tile t = (i, j), d the 4x4
 * patch of xT at (2i, 2j); B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1] */
WD_AVX512 static void wd_input(float *restrict V, const float *restrict xT, const wd_geom *g)
{
    size_t cell = (size_t)g->C16, row = (size_t)g->WP * cell, vstep = (size_t)g->T * g->C16;
    for (int i = 0; i < g->TH; i++)
        for (int j = 0; j < g->TW; j++) {
            int t = i * g->TW + j;
            const float *p = xT + (size_t)(2 * i) * row + (size_t)(2 * j) * cell;
            float *o = V + (size_t)t * g->C16;
            for (int c = 0; c < g->C16; c += 16) {
                __m512 u[4][4];
#pragma GCC unroll 4
                for (int b = 0; b < 4; b++) {
                    __m512 d0 = _mm512_loadu_ps(p + b * cell + c);
                    __m512 d1 = _mm512_loadu_ps(p + row + b * cell + c);
                    __m512 d2 = _mm512_loadu_ps(p + 2 * row + b * cell + c);
                    __m512 d3 = _mm512_loadu_ps(p + 3 * row + b * cell + c);
                    u[0][b] = _mm512_sub_ps(d0, d2);
                    u[1][b] = _mm512_add_ps(d1, d2);
                    u[2][b] = _mm512_sub_ps(d2, d1);
                    u[3][b] = _mm512_sub_ps(d1, d3);
                }
#pragma GCC unroll 4
                for (int a = 0; a < 4; a++) {
                    float *q = o + (size_t)(4 * a) * vstep + c;
                    _mm512_storeu_ps(q, _mm512_sub_ps(u[a][0], u[a][2]));
                    _mm512_storeu_ps(q + vstep, _mm512_add_ps(u[a][1], u[a][2]));
                    _mm512_storeu_ps(q + 2 * vstep, _mm512_sub_ps(u[a][2], u[a][1]));
                    _mm512_storeu_ps(q + 3 * vstep, _mm512_sub_ps(u[a][1], u[a][3]));
                }
            }
        }
}

/* D[xi][t][K16] = (A dy A^T)[xi] of every tile t = (i, j), dy the 2x2 at
 * (2i, 2j) of dT (rows 2 TW cells wide); A = [1 0; 1 1; 1 -1; 0 -1] */
WD_AVX512 static void wd_grad(float *restrict D, const float *restrict dT, const wd_geom *g)
{
    size_t cell = (size_t)g->K16, row = (size_t)(2 * g->TW) * cell, dstep = (size_t)g->T * g->K16;
    const __m512 zero = _mm512_setzero_ps();
    for (int i = 0; i < g->TH; i++)
        for (int j = 0; j < g->TW; j++) {
            int t = i * g->TW + j;
            const float *p = dT + (size_t)(2 * i) * row + (size_t)(2 * j) * cell;
            float *o = D + (size_t)t * g->K16;
            for (int k = 0; k < g->K16; k += 16) {
                __m512 e = _mm512_loadu_ps(p + k), f = _mm512_loadu_ps(p + cell + k);
                __m512 gg = _mm512_loadu_ps(p + row + k), h = _mm512_loadu_ps(p + row + cell + k);
                __m512 pr[4] = {e, _mm512_add_ps(e, gg), _mm512_sub_ps(e, gg),
                                _mm512_sub_ps(zero, gg)};
                __m512 qr[4] = {f, _mm512_add_ps(f, h), _mm512_sub_ps(f, h),
                                _mm512_sub_ps(zero, h)};
#pragma GCC unroll 4
                for (int a = 0; a < 4; a++) {
                    float *q = o + (size_t)(4 * a) * dstep + k;
                    _mm512_storeu_ps(q, pr[a]);
                    _mm512_storeu_ps(q + dstep, _mm512_add_ps(pr[a], qr[a]));
                    _mm512_storeu_ps(q + 2 * dstep, _mm512_sub_ps(pr[a], qr[a]));
                    _mm512_storeu_ps(q + 3 * dstep, _mm512_sub_ps(zero, qr[a]));
                }
            }
        }
}

/* X[c0 + ct][k0 + 16 kv] (+)= sum_t V[t][c0 + ct] D[t][k0 + 16 kv], one
 * xi: CB x KV accumulators held over all tiles */
WD_AVX512 static inline __attribute__((always_inline)) void
wd_tile(float *restrict X, const float *restrict V, const float *restrict D, const wd_geom *g,
        int c0, int k0, int first, const int CB, const int KV)
{
    __m512 acc[16][2];
#pragma GCC unroll 16
    for (int ct = 0; ct < CB; ct++)
#pragma GCC unroll 2
        for (int kv = 0; kv < KV; kv++)
            acc[ct][kv] = first ? _mm512_setzero_ps()
                                : _mm512_loadu_ps(X + (size_t)(c0 + ct) * g->K16 + k0 + 16 * kv);
    const float *v = V + c0, *d = D + k0;
    for (int t = 0; t < g->T; t++, v += g->C16, d += g->K16) {
        __m512 dv[2];
#pragma GCC unroll 2
        for (int kv = 0; kv < KV; kv++)
            dv[kv] = _mm512_loadu_ps(d + 16 * kv);
#pragma GCC unroll 16
        for (int ct = 0; ct < CB; ct++) {
            __m512 b = _mm512_set1_ps(v[ct]);
#pragma GCC unroll 2
            for (int kv = 0; kv < KV; kv++)
                acc[ct][kv] = _mm512_fmadd_ps(b, dv[kv], acc[ct][kv]);
        }
    }
#pragma GCC unroll 16
    for (int ct = 0; ct < CB; ct++)
#pragma GCC unroll 2
        for (int kv = 0; kv < KV; kv++)
            _mm512_storeu_ps(X + (size_t)(c0 + ct) * g->K16 + k0 + 16 * kv, acc[ct][kv]);
}

WD_AVX512 static void wd_product(float *restrict acc, const float *restrict V,
                                 const float *restrict D, const wd_geom *g, int first)
{
    size_t vstep = (size_t)g->T * g->C16, dstep = (size_t)g->T * g->K16;
    size_t xstep = (size_t)g->C16 * g->K16;
    for (int xi = 0; xi < 16; xi++) {
        float *X = acc + xi * xstep;
        const float *v = V + xi * vstep, *d = D + xi * dstep;
        int k0 = 0;
        for (; k0 + 32 <= g->K16; k0 += 32)
            for (int c0 = 0; c0 < g->C16; c0 += 8)
                wd_tile(X, v, d, g, c0, k0, first, 8, 2);
        if (k0 < g->K16)
            for (int c0 = 0; c0 < g->C16; c0 += 16)
                wd_tile(X, v, d, g, c0, k0, first, 16, 1);
    }
}

WD_AVX512 void wino_dw_samples(float *acc, const float *x, const float *dy, const conv_shape *s,
                               int nb, float *scratch)
{
    wd_geom g = wd_geom_of(s);
    float *xT = scratch, *V = xT + g.xt_n, *dT = V + g.v_n, *D = dT + g.dt_n;
    /* x at (1, 1) of the HP x WP grid: zeros above, below, left, right;
     * dy at (0, 0) of the 2 TH x 2 TW grid: zeros in an odd size's last
     * row or column. The transposes write only the rest. */
    wd_zero_rows(xT, 0, 1, g.WP, g.C16);
    wd_zero_rows(xT, g.H + 1, g.HP, g.WP, g.C16);
    wd_zero_cols(xT + (size_t)g.WP * g.C16, g.H, 0, 1, g.WP, g.C16);
    wd_zero_cols(xT + (size_t)g.WP * g.C16, g.H, g.W + 1, g.WP, g.WP, g.C16);
    wd_zero_rows(dT, g.H, 2 * g.TH, 2 * g.TW, g.K16);
    wd_zero_cols(dT, g.H, g.W, 2 * g.TW, 2 * g.TW, g.K16);
    /* one sample at a time: taking several small images' tiles into one
     * product was no faster at 7x7 and slower at 14x14 (V and D out of
     * L2) */
    for (int b = 0; b < nb; b++) {
        wd_transpose(xT, x + (size_t)b * g.C * g.H * g.W, g.C, g.C16, g.H, g.W, g.WP, 1);
        wd_transpose(dT, dy + (size_t)b * g.K * g.H * g.W, g.K, g.K16, g.H, g.W, 2 * g.TW, 0);
        wd_input(V, xT, &g);
        wd_grad(D, dT, &g);
        wd_product(acc, V, D, &g, b == 0);
    }
}

/* dg = G^T X G, G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1], per (c,
 * 16 k's): rows (c, r*3 + q) of wt */
WD_AVX512 void wino_dw_finish(float *wt, const float *acc, const conv_shape *s)
{
    int C16 = r16(s->C), K16 = r16(s->K), K = s->K;
    size_t xstep = (size_t)C16 * K16;
    const __m512 half = _mm512_set1_ps(0.5f);
    for (int c = 0; c < s->C; c++)
        for (int k = 0; k < K; k += 16) {
            __mmask16 m = x512_mask(K - k);
            __m512 y[4][3];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                const float *p = acc + (size_t)(4 * i) * xstep + (size_t)c * K16 + k;
                __m512 x0 = _mm512_loadu_ps(p), x1 = _mm512_loadu_ps(p + xstep);
                __m512 x2 = _mm512_loadu_ps(p + 2 * xstep), x3 = _mm512_loadu_ps(p + 3 * xstep);
                __m512 sp = _mm512_mul_ps(half, _mm512_add_ps(x1, x2));
                y[i][0] = _mm512_add_ps(x0, sp);
                y[i][1] = _mm512_mul_ps(half, _mm512_sub_ps(x1, x2));
                y[i][2] = _mm512_add_ps(sp, x3);
            }
#pragma GCC unroll 3
            for (int q = 0; q < 3; q++) {
                __m512 sp = _mm512_mul_ps(half, _mm512_add_ps(y[1][q], y[2][q]));
                __m512 r0 = _mm512_add_ps(y[0][q], sp);
                __m512 r1 = _mm512_mul_ps(half, _mm512_sub_ps(y[1][q], y[2][q]));
                __m512 r2 = _mm512_add_ps(sp, y[3][q]);
                float *o = wt + (size_t)c * 9 * K + (size_t)q * K + k;
                _mm512_mask_storeu_ps(o, m, r0);
                _mm512_mask_storeu_ps(o + (size_t)3 * K, m, r1);
                _mm512_mask_storeu_ps(o + (size_t)6 * K, m, r2);
            }
        }
}

#else /* no AVX-512 build: never on */

int wino_dw_available(void) { return 0; }

void wino_dw_samples(float *acc, const float *x, const float *dy, const conv_shape *s, int nb,
                     float *scratch)
{
    (void)acc, (void)x, (void)dy, (void)s, (void)nb, (void)scratch;
}

void wino_dw_finish(float *wt, const float *acc, const conv_shape *s)
{
    (void)wt, (void)acc, (void)s;
}

#endif
