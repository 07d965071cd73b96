/* shapes.c — output sizes of the shaped layers (see backend.h). */
#include "nn/backend.h"

int conv_shape_init(conv_shape *s, int B, int C, int H, int W, int K, int R, int S, int stride,
                    int pad)
{
    s->B = B;
    s->C = C;
    s->H = H;
    s->W = W;
    s->K = K;
    s->R = R;
    s->S = S;
    s->stride = stride;
    s->pad = pad;
    if (B < 1 || C < 1 || K < 1 || R < 1 || S < 1 || stride < 1 || pad < 0) {
        s->OH = s->OW = 0;
        return -1;
    }
    int eh = H + 2 * pad - R, ew = W + 2 * pad - S;
    s->OH = eh < 0 ? 0 : eh / stride + 1;
    s->OW = ew < 0 ? 0 : ew / stride + 1;
    return s->OH > 0 && s->OW > 0 ? 0 : -1;
}

int maxpool_shape_init_k(maxpool_shape *s, int B, int C, int H, int W, int k, int stride, int pad)
{
    s->B = B;
    s->C = C;
    s->H = H;
    s->W = W;
    s->k = k;
    s->stride = stride;
    s->pad = pad;
    s->OH = s->OW = 0;
    /* pad <= k / 2 (PyTorch's rule) keeps a real element in every window */
    if (B < 1 || C < 1 || k < 1 || stride < 1 || pad < 0 || 2 * pad > k)
        return -1;
    int eh = H + 2 * pad - k, ew = W + 2 * pad - k;
    s->OH = eh < 0 ? 0 : eh / stride + 1;
    s->OW = ew < 0 ? 0 : ew / stride + 1;
    return s->OH > 0 && s->OW > 0 ? 0 : -1;
}

int maxpool_shape_init(maxpool_shape *s, int B, int C, int H, int W)
{
    return maxpool_shape_init_k(s, B, C, H, W, 2, 2, 0);
}
