/* selftest.h — `train --selftest`: every op of the GPU backend against
 * the CPU backend on a tiny net's shapes with random inputs (nn/twin.h, at
 * TWIN_RTOL_OP), the staging path --pin --non-blocking uses, then lenet
 * trained a few steps on both from the same start (TWIN_RTOL_TRAIN). One
 * line per check to `out`, then a verdict. The GPU comes from the
 * registry (nn/provider.h), so this compiles in every build.
 */
#ifndef TRAIN_SELFTEST_H
#define TRAIN_SELFTEST_H

#include <stdio.h>

#include "nn/backend.h"

/* On device 0 of the "cuda" provider. Returns 0 when every check passes,
 * 1 on a mismatch, 2 when there is no usable GPU or the build has none
 * (the reason printed). */
int selftest_main(FILE *out);
/* The checks on an existing backend be (for tests): 0 pass, 1 mismatch,
 * 2 when the CPU backend cannot start. */
int selftest_run(backend *be, FILE *out);

#endif
