/* conv_choice.h — which algorithm the CPU backend runs for each pass of a
 * convolution (forward, input gradient, weight gradient), decided in one
 * place: conv_choose (conv_choice.c) holds every threshold, each beside
 * the measurement that set it. A plan (conv.c) keeps the choice and
 * switches on it; nothing else decides.
 *
 * What may run is a conv_caps: the CPU's (conv_caps_cpu) in a backend,
 * or one a test builds to force a path (cpu_conv_plan_caps, internal.h).
 * The choice depends on the shape (not its batch size) and the caps only:
 * never on the thread count, so the results are the same bits for any
 * number of threads.
 */
#ifndef TRAIN_CPU_CONV_CHOICE_H
#define TRAIN_CPU_CONV_CHOICE_H

#include <stddef.h>

#include "nn/backend.h"

/* Forward. */
typedef enum conv_fwd_algo {
    CONV_FWD_GEMM,      /* per sample, im2col then one GEMM w . col (a 1x1 stride-1
                           unpadded conv's col is its input: no im2col) */
    CONV_FWD_TAP,       /* R*S GEMMs straight on the padded input, tap by tap (conv.c tap_conv) */
    CONV_FWD_DIRECT,    /* the AVX-512 direct kernel (conv_direct.c) */
    CONV_FWD_WINO,      /* Winograd F(2x2, 3x3), AVX-512 (conv_wino.c), a few samples per task */
    CONV_FWD_DIRECT_S2, /* the AVX-512 stride-2 3x3 kernel on the input's 4 phases */
} conv_fwd_algo;

/* Input gradient. */
typedef enum conv_din_algo {
    CONV_DIN_GEMM,      /* per sample, w^T . dout then col2im (a 1x1: straight into din) */
    CONV_DIN_TAP,       /* dout's tap GEMMs with the flipped, transposed weights (tap_conv) */
    CONV_DIN_DIRECT,    /* the direct kernel on dout, flipped and transposed weights */
    CONV_DIN_WINO,      /* Winograd on dout, a backward chunk's samples at once */
    CONV_DIN_DIRECT_S2, /* the stride-2 kernel, per phase of din */
} conv_din_algo;

/* Weight gradient (summed over a backward chunk's samples). */
typedef enum conv_dw_algo {
    CONV_DW_GEMM,      /* dw += dout . col^T per sample */
    CONV_DW_GEMM_T,    /* dw^T += col . dout^T per sample, transposed at the chunk's end */
    CONV_DW_TAP,       /* per tap, a GEMM of the padded input with dout spread onto its grid */
    CONV_DW_DIRECT,    /* conv_direct_dw (3x3), transposed at the chunk's end */
    CONV_DW_WINO,      /* Winograd over the chunk's samples (conv_wino_dw.c), transposed */
    CONV_DW_DIRECT_S2, /* conv_direct_s2_dw, transposed */
} conv_dw_algo;

typedef struct conv_choice {
    conv_fwd_algo fwd;
    conv_din_algo din;
    conv_dw_algo dw;
} conv_choice;

/* Which kernels a plan may use (each 0 or 1); with none, every pass is
 * im2col + GEMM (the reference the tests compare the others with). */
typedef struct conv_caps {
    int tap;     /* the tap-by-tap GEMMs on the padded grid (no im2col) */
    int direct;  /* the AVX-512 kernels: conv_direct.c, and under it the two below */
    int wino;    /* Winograd forward and input gradient (conv_wino.c) */
    int wino_dw; /* Winograd weight gradient (conv_wino_dw.c) */
    /* Winograd forward and input gradient wherever the kernel takes the
     * shape, also where it does not pay (the kernel's own tests: their
     * shapes are small). Never set in production. */
    int wino_small;
} conv_caps;

/* What this CPU (and this build) runs: the tap GEMMs, and every AVX-512
 * kernel with AVX-512F (the OS saving its state), none without (other
 * CPUs, valgrind). */
conv_caps conv_caps_cpu(void);
/* caps without what the CPU cannot run: a test may ask for any caps on
 * any machine and gets the GEMM path where it has no AVX-512 */
conv_caps conv_caps_and_cpu(const conv_caps *caps);

/* The algorithm of each pass for shape s (its batch size aside) under
 * caps. Pure: the same answer for the same arguments. */
conv_choice conv_choose(const conv_shape *s, const conv_caps *caps);

/* "gemm", "gemm-t", "tap", "direct", "wino", "direct-s2" */
const char *conv_fwd_name(conv_fwd_algo a);
const char *conv_din_name(conv_din_algo a);
const char *conv_dw_name(conv_dw_algo a);
/* "fwd/din/dw" into buf (len bytes), e.g. "wino/wino/direct"; returns buf */
const char *conv_choice_name(const conv_choice *c, char *buf, size_t len);

#endif
