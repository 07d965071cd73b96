/* gpu_test.h — what the GPU op tests share. They are built twice: into
 * run-fakecuda (the backend on the fake runtime, TRAIN_FAKECUDA defined)
 * and into run-gpu (the real libraries: every test that needs a device
 * skips with "no CUDA device" where there is none).
 */
#ifndef TRAIN_TESTS_GPU_TEST_H
#define TRAIN_TESTS_GPU_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "nn/backend.h"
#include "nn/twin.h"

#define GT_RTOL 1e-4

/* A fresh GPU backend, or skip the test when no usable device exists. */
backend *gt_backend(void);
/* Destroy it; on the fake, also assert no misuse was seen and nothing leaked. */
void gt_done(backend *be);

/* Host buffers of uniform random floats in [lo, hi) (free with free()). */
float *gt_rand(rng *r, size_t n, float lo, float hi);
/* alloc + upload; download into a new host buffer. */
void *gt_to_dev(backend *be, const void *h, size_t bytes);
float *gt_from_dev(backend *be, const void *d, size_t n);

/* Assert got (device, n floats) matches want within GT_RTOL (twin_compare's
 * measure), naming the check. */
void gt_expect_dev(backend *be, const char *what, const void *got_dev, const float *want, size_t n);
void gt_expect_host(const char *what, const float *got, const float *want, size_t n);

/* A twin (cuda/twin.h) of the GPU backend be against a fresh CPU backend,
 * whose report asserts (cr_expect) every output within its tolerance and
 * counts the comparisons in *checks. gt_twin_done destroys the CPU side. */
twin gt_twin(backend *be, uint64_t key, int *checks);
void gt_twin_done(twin *t);

#endif
