/* test_label_check.c — the loss's shared arithmetic (nn/kernels.h, the
 * CPU backend's and the CUDA kernel's) with a label outside 0..K-1: it
 * reads no logit at the label (the logits are a heap block of exactly K,
 * so ASan sees any read past it), gives no gradient, and returns the label
 * with *pred = K_BAD_LABEL so the caller can name it; in range, the usual
 * loss.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "nn/kernels.h"

enum { K = 5 };

static float *logits_block(void)
{
    float *l = malloc(K * sizeof(float));
    for (int k = 0; k < K; k++)
        l[k] = 0.5f * (float)k - 1.0f;
    return l;
}

Test(label_check, in_range_is_the_loss)
{
    float *l = logits_block(), dl[K];
    int32_t pred = -1;
    float loss = k_softmax_xent_row(dl, &pred, l, 2, K, 1.0f);
    double sum = 0;
    for (int k = 0; k < K; k++)
        sum += exp((double)l[k] - (double)l[K - 1]);
    cr_expect_float_eq(loss, (float)(log(sum) - ((double)l[2] - (double)l[K - 1])), 1e-5);
    cr_expect_eq(pred, K - 1);
    cr_expect_lt(dl[2], 0.0f, "the true class's gradient is negative");
    free(l);
}

Test(label_check, out_of_range_reads_nothing_and_is_named)
{
    const int32_t bad[] = {K, K + 1000, -1, -7};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        float *l = logits_block(), dl[K];
        int32_t pred = 0;
        float got = k_softmax_xent_row(dl, &pred, l, bad[i], K, 1.0f);
        cr_expect_eq(pred, K_BAD_LABEL, "label %d", bad[i]);
        cr_expect_eq(got, (float)bad[i], "label %d comes back in place of the loss", bad[i]);
        for (int k = 0; k < K; k++)
            cr_expect_eq(dl[k], 0.0f, "label %d: no gradient", bad[i]);
        free(l);
    }
}
