/* hostref.c — see hostref.h. */
#define _POSIX_C_SOURCE 200809L
#include "tests/support/hostref.h"

#include <math.h>
#include <string.h>

void href_normalize_u8(float *out, const uint8_t *in, int B, int C, int HW, const float *mean,
                       const float *std)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < HW; i++) {
                size_t k = ((size_t)b * C + c) * HW + i;
                out[k] = (float)(((double)in[k] / 255.0 - mean[c]) / std[c]);
            }
}

/* in[b][c][y][x], zero outside the image */
static double at(const float *in, const conv_shape *s, int b, int c, int y, int x)
{
    if (y < 0 || y >= s->H || x < 0 || x >= s->W)
        return 0.0;
    return in[(((size_t)b * s->C + c) * s->H + y) * s->W + x];
}

void href_conv_forward(float *out, const float *in, const float *w, const float *bias,
                       const conv_shape *s)
{
    for (int b = 0; b < s->B; b++)
        for (int k = 0; k < s->K; k++)
            for (int oy = 0; oy < s->OH; oy++)
                for (int ox = 0; ox < s->OW; ox++) {
                    double acc = bias[k];
                    for (int c = 0; c < s->C; c++)
                        for (int r = 0; r < s->R; r++)
                            for (int q = 0; q < s->S; q++)
                                acc += at(in, s, b, c, oy * s->stride - s->pad + r,
                                          ox * s->stride - s->pad + q) *
                                       w[(((size_t)k * s->C + c) * s->R + r) * s->S + q];
                    out[(((size_t)b * s->K + k) * s->OH + oy) * s->OW + ox] = (float)acc;
                }
}

void href_conv_backward(float *din, float *dw, float *dbias, const float *dout, const float *in,
                        const float *w, const conv_shape *s)
{
    /* dbias[k] = sum dout[b][k][.][.] */
    for (int k = 0; k < s->K; k++) {
        double acc = 0.0;
        for (int b = 0; b < s->B; b++)
            for (int i = 0; i < s->OH * s->OW; i++)
                acc += dout[((size_t)b * s->K + k) * s->OH * s->OW + i];
        dbias[k] = (float)acc;
    }
    /* dw[k][c][r][q] = sum over b, oy, ox of dout * the input it multiplied */
    for (int k = 0; k < s->K; k++)
        for (int c = 0; c < s->C; c++)
            for (int r = 0; r < s->R; r++)
                for (int q = 0; q < s->S; q++) {
                    double acc = 0.0;
                    for (int b = 0; b < s->B; b++)
                        for (int oy = 0; oy < s->OH; oy++)
                            for (int ox = 0; ox < s->OW; ox++)
                                acc += dout[(((size_t)b * s->K + k) * s->OH + oy) * s->OW + ox] *
                                       at(in, s, b, c, oy * s->stride - s->pad + r,
                                          ox * s->stride - s->pad + q);
                    dw[(((size_t)k * s->C + c) * s->R + r) * s->S + q] = (float)acc;
                }
    if (!din)
        return;
    /* din[b][c][y][x] = sum over the outputs whose window covered (y, x) */
    for (int b = 0; b < s->B; b++)
        for (int c = 0; c < s->C; c++)
            for (int y = 0; y < s->H; y++)
                for (int x = 0; x < s->W; x++) {
                    double acc = 0.0;
                    for (int k = 0; k < s->K; k++)
                        for (int r = 0; r < s->R; r++)
                            for (int q = 0; q < s->S; q++) {
                                int ty = y + s->pad - r, tx = x + s->pad - q;
                                if (ty < 0 || tx < 0 || ty % s->stride || tx % s->stride)
                                    continue;
                                int oy = ty / s->stride, ox = tx / s->stride;
                                if (oy >= s->OH || ox >= s->OW)
                                    continue;
                                acc += dout[(((size_t)b * s->K + k) * s->OH + oy) * s->OW + ox] *
                                       w[(((size_t)k * s->C + c) * s->R + r) * s->S + q];
                            }
                    din[(((size_t)b * s->C + c) * s->H + y) * s->W + x] = (float)acc;
                }
}

void href_relu_forward(float *out, const float *in, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

void href_relu_backward(float *din, const float *dout, const float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        din[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

/* index (within in) of the first maximum of window (b, c, oy, ox) */
static size_t maxpool_argmax(const float *in, const maxpool_shape *s, int b, int c, int oy, int ox)
{
    size_t best = 0;
    int first = 1;
    for (int dy = 0; dy < 2; dy++)
        for (int dx = 0; dx < 2; dx++) {
            size_t k = (((size_t)b * s->C + c) * s->H + 2 * oy + dy) * s->W + 2 * ox + dx;
            if (first || in[k] > in[best]) {
                best = k;
                first = 0;
            }
        }
    return best;
}

void href_maxpool_forward(float *out, const float *in, const maxpool_shape *s)
{
    for (int b = 0; b < s->B; b++)
        for (int c = 0; c < s->C; c++)
            for (int oy = 0; oy < s->OH; oy++)
                for (int ox = 0; ox < s->OW; ox++)
                    out[(((size_t)b * s->C + c) * s->OH + oy) * s->OW + ox] =
                        in[maxpool_argmax(in, s, b, c, oy, ox)];
}

void href_maxpool_backward(float *din, const float *dout, const float *in, const maxpool_shape *s)
{
    memset(din, 0, sizeof(float) * (size_t)s->B * s->C * s->H * s->W);
    for (int b = 0; b < s->B; b++)
        for (int c = 0; c < s->C; c++)
            for (int oy = 0; oy < s->OH; oy++)
                for (int ox = 0; ox < s->OW; ox++)
                    din[maxpool_argmax(in, s, b, c, oy, ox)] +=
                        dout[(((size_t)b * s->C + c) * s->OH + oy) * s->OW + ox];
}

void href_fc_forward(float *out, const float *in, const float *w, const float *bias, int B, int M,
                     int N)
{
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            double acc = bias[n];
            for (int m = 0; m < M; m++)
                acc += (double)in[(size_t)b * M + m] * w[(size_t)n * M + m];
            out[(size_t)b * N + n] = (float)acc;
        }
}

void href_fc_backward(float *din, float *dw, float *dbias, const float *dout, const float *in,
                      const float *w, int B, int M, int N)
{
    for (int n = 0; n < N; n++) {
        double acc = 0.0;
        for (int b = 0; b < B; b++)
            acc += dout[(size_t)b * N + n];
        dbias[n] = (float)acc;
        for (int m = 0; m < M; m++) {
            double a = 0.0;
            for (int b = 0; b < B; b++)
                a += (double)dout[(size_t)b * N + n] * in[(size_t)b * M + m];
            dw[(size_t)n * M + m] = (float)a;
        }
    }
    if (!din)
        return;
    for (int b = 0; b < B; b++)
        for (int m = 0; m < M; m++) {
            double acc = 0.0;
            for (int n = 0; n < N; n++)
                acc += (double)dout[(size_t)b * N + n] * w[(size_t)n * M + m];
            din[(size_t)b * M + m] = (float)acc;
        }
}

void href_gap_forward(float *out, const float *in, int B, int C, int HW)
{
    for (size_t j = 0; j < (size_t)B * C; j++) {
        double acc = 0.0;
        for (int i = 0; i < HW; i++)
            acc += in[j * HW + i];
        out[j] = (float)(acc / HW);
    }
}

void href_gap_backward(float *din, const float *dout, int B, int C, int HW)
{
    for (size_t j = 0; j < (size_t)B * C; j++)
        for (int i = 0; i < HW; i++)
            din[j * HW + i] = (float)((double)dout[j] / HW);
}

void href_softmax_xent(float *dlogits, float *loss, int32_t *pred, const float *logits,
                       const int32_t *labels, int B, int K, float scale)
{
    for (int b = 0; b < B; b++) {
        const float *z = logits + (size_t)b * K;
        int arg = 0;
        for (int k = 1; k < K; k++)
            if (z[k] > z[arg])
                arg = k;
        double sum = 0.0;
        for (int k = 0; k < K; k++)
            sum += exp((double)z[k] - z[arg]);
        for (int k = 0; k < K; k++) {
            double p = exp((double)z[k] - z[arg]) / sum;
            dlogits[(size_t)b * K + k] = (float)((p - (k == labels[b])) * scale);
        }
        /* K >= 1: sum >= exp(0) = 1 (the largest logit's term) */
        // cppcheck-suppress invalidFunctionArg
        loss[b] = (float)(log(sum) - ((double)z[labels[b]] - z[arg]));
        pred[b] = arg;
    }
}

void href_sgd(float *w, float *v, const float *g, size_t n, float lr, float momentum, float wd)
{
    for (size_t i = 0; i < n; i++) {
        double gd = (double)g[i] + (double)wd * w[i];
        double vn = (double)momentum * v[i] + gd;
        v[i] = (float)vn;
        w[i] = (float)((double)w[i] - (double)lr * vn);
    }
}
