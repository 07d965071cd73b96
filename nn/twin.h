/* twin.h — one backend checked against another: every operation of
 * backend.h run on two backends with the same inputs, and a real model
 * trained a few steps on both from the same start. The GPU against its
 * CPU twin (`train --selftest`, the GPU suites); the CPU backend on one
 * thread against two (tests/test_twin_cpu.c).
 *
 * The CPU backend is the reference because it is what users already trust
 * (it is tested against reference loops, gradient checks and PyTorch in
 * tests/test_nn_*.c). `train --selftest` (app/selftest.c) and the GPU suites
 * (tests/gpu/test_twin.c, test_train_twin.c) call the same functions, so a
 * user's self-test checks what the suites check.
 *
 * Inputs come from the twin's rng. Outputs are pre-filled with NaN on both
 * backends, so an op that skips an element or accumulates into its output
 * fails the comparison. Each (dev, ref) output pair goes to the caller's
 * report function as a twin_check: a name, the tolerance and the measure it
 * is judged by (twin_judge); what the caller does with it (print a line,
 * assert) is its business.
 *
 * Nothing here is CUDA-specific: any two backends compare. Plain C.
 */
#ifndef TRAIN_TWIN_H
#define TRAIN_TWIN_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "common/util.h"
#include "nn/backend.h"

/* Tolerances. One op: every element within 1e-4 relative (twin_compare):
 * fp32 results that differ only in summation order. Training: per-step
 * mean losses within 1e-3 relative, and each parameter tensor and its
 * momentum after the steps within 1e-3 in relative L2 norm. Training
 * compounds those differences through the updates, and a ReLU or max-pool
 * decision that one backend takes on the other side of a near-tie moves one
 * gradient term to a neighbour, so single elements of a late gradient can
 * differ by a few 1e-3 while the tensor as a whole agrees to 1e-5 (measured
 * on the fake: docs/GPU.md); the norm judges the tensor, not the outlier. */
#define TWIN_RTOL_OP 1e-4
#define TWIN_RTOL_TRAIN 1e-3

typedef enum twin_measure {
    TWIN_ELEMENTWISE, /* every element: |dev - ref| <= rtol (|ref| + mean |ref|) */
    TWIN_NORM,        /* the whole tensor: ||dev - ref|| <= rtol ||ref|| (L2) */
} twin_measure;

/* One comparison: an output of both backends, as host arrays. */
typedef struct twin_check {
    const char *what; /* "conv 3x2x8x8 k4 3x3 s1 p1 dw", "lenet b8 step 5 conv1.weight" */
    const float *dev, *ref;
    size_t n;
    double rtol;
    twin_measure measure;
} twin_check;

typedef void (*twin_report_fn)(void *arg, const twin_check *c);

typedef struct twin {
    backend *dev; /* under test (the GPU) */
    backend *ref; /* the reference (the CPU backend) */
    rng r;
    twin_report_fn report;
    void *arg;
} twin;

/* The largest violation of |dev - ref| <= rtol * (|ref| + mean |ref|) over n
 * elements, as a multiple of the allowed error (<= 1 passes); *worst gets
 * its index (may be NULL). The tensor's mean magnitude is the floor so that
 * elements near zero by cancellation are judged on the tensor's scale. A
 * NaN on either side fails (infinity). */
double twin_compare(const float *dev, const float *ref, size_t n, double rtol, size_t *worst);

/* c's error as a multiple of its tolerance, by its measure (<= 1 passes);
 * *worst (may be NULL) gets the element with the largest absolute
 * difference (TWIN_NORM) or violation (TWIN_ELEMENTWISE). */
double twin_judge(const twin_check *c, size_t *worst);

/* Each op: random inputs, the op on both backends, every output reported
 * as "<op> <shape> <output>", e.g. "conv 3x2x8x8 k4 3x3 s1 p1 dw". */
void twin_normalize(twin *t, int B, int C, int HW);
/* forward, then backward (din only when with_din) */
void twin_conv(twin *t, int B, int C, int H, int W, int K, int R, int S, int stride, int pad,
               int with_din);
void twin_relu(twin *t, size_t n);
/* ties: inputs on a coarse grid, so windows hold equal maxima and both
 * backends must route the gradient to the same (first) one */
void twin_maxpool(twin *t, int B, int C, int H, int W, int ties);
/* k x k window, stride, pad (resnet18's 3x3/2 pad 1): continuous random
 * inputs (no ties), forward and din compared element-wise */
void twin_maxpool_k(twin *t, int B, int C, int H, int W, int k, int stride, int pad);
void twin_fc(twin *t, int B, int M, int N, int with_din);
/* batch norm: training forward (y, save_mean, save_invstd, run_mean,
 * run_var), inference forward (y), backward (dx, dscale, dshift): 9 checks */
void twin_bn(twin *t, int B, int C, int HW);
/* add out of place and in place (out = a), then copy: 3 checks */
void twin_add(twin *t, size_t n);
void twin_gap(twin *t, int B, int C, int HW);
/* some rows shifted by +-shift, where exp would overflow without care */
void twin_softmax_xent(twin *t, int B, int K, float shift);
/* `steps` updates of the same weights, velocity and gradient */
void twin_sgd(twin *t, size_t n, int steps, float lr, float momentum, float wd);
/* A u8 batch through dev's staging path (host_pin, stage_copy on the copy
 * stream, stage_wait, normalize, stage_release, stage_done), twice through
 * one buffer so the second copy must wait for the first batch's compute,
 * each against ref's normalize. *busy_s gets the compute-busy seconds
 * busy_take measured around the two normalisations (>= 0 when right);
 * pin_note the reason when page-locking failed and the check ran on
 * pageable memory (else ""). Returns -1 (nothing run) when dev has no
 * staging block, else 0. */
int twin_staging(twin *t, int B, int C, int HW, double *busy_s, char *pin_note, size_t note_len);

/* ---- training: `model` (model_zoo.c) made on both backends for inputs
 * C x H x W and nclasses classes at batch B, the same parameters from
 * model_init_params(seed), then `steps` model_train_step calls on the
 * consecutive batches of x/labels (wrapping around n samples) with the
 * model's default learning rate (held constant), momentum and weight
 * decay. Reports each step's mean loss ("lenet b8 step 3 loss"), then
 * after the last step each parameter tensor and its momentum ("lenet b8
 * step 20 conv1.weight", "... conv1.weight momentum"), at TWIN_RTOL_TRAIN.
 * Returns -1 with e when a model cannot be made. */
typedef struct twin_data {
    int n, C, H, W, nclasses;
    const uint8_t *x;      /* host, n x C x H x W */
    const int32_t *labels; /* host, n */
} twin_data;
int twin_train(twin *t, const char *model, const twin_data *d, int B, int steps, uint64_t seed,
               errbuf *e);

#endif
