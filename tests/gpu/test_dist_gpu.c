/* test_dist_gpu.c — the GPU backend as 2 data-parallel ranks under a real
 * mpirun: its gradients go through the real NCCL calls of dist/nccl.c (on
 * the fake CUDA runtime, the fake NCCL of tests/fakecuda/nccl.c, which
 * runs the sum on MPI), and the job must train as the CPU backend's 2-rank
 * job does. On real hardware it needs two GPUs (NCCL refuses two ranks on
 * one device) and skips otherwise. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/gpu.h"
#include "tests/support/helpers.h"
#include "tests/support/mpirun.h"

#ifdef TRAIN_FAKECUDA
#define GPU_BIN "build/fakecuda/train"
#else
#define GPU_BIN "build/cuda/train"
#endif

static char *dir, *fm_train, *fm_val;

static void setup(void)
{
    gpu_info g;
    gpu_probe(0, &g);
    if (g.status != GPU_OK)
        cr_skip_test("no CUDA device (%s)", g.reason);
#ifndef TRAIN_FAKECUDA /* each rank has a fake device of its own */
    if (g.count < 2)
        cr_skip_test("one CUDA device: NCCL needs a device per rank");
#endif
    if (!mpi_available())
        cr_skip_test("built without MPI or no mpirun");
    mpi_test_env();
    dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, 193); /* the last batch of 64 holds one sample */
    fm_train = path_join(fm, "train.csv");
    fm_val = path_join(fm, "test.csv");
    free(fm);
}

static void teardown(void)
{
    if (dir)
        tmpdir_remove(dir);
    free(fm_train);
    free(fm_val);
}

TestSuite(gpu_dist, .init = setup, .fini = teardown);

Test(gpu_dist, two_gpu_ranks_sum_with_nccl_and_train_as_two_cpu_ranks)
{
    char gpu_bin[1024], *jg = path_join(dir, "gpu.json"), *jc = path_join(dir, "cpu.json");
    snprintf(gpu_bin, sizeof gpu_bin, "%s/%s", source_root(), GPU_BIN);
    run_result r;
    run_mpi(&r, 2, gpu_bin, "--device", "cuda", "--epochs", "2", "--batch", "64", "--lr", "0.005",
            "--channels", "1", "--val", fm_val, "--json", jg, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "gradients summed with NCCL"), "%s", r.out);
    cr_assert_null(strstr(r.err, "fakecuda:"), "the fake saw misuse:\n%s", r.err);
    run_free(&r);
    run_mpi(&r, 2, train_bin(), "--device", "cpu", "--epochs", "2", "--batch", "64", "--lr",
            "0.005", "--channels", "1", "--val", fm_val, "--json", jc, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "gradients summed with MPI"), "%s", r.out);
    run_free(&r);
    char lg[2][JSON_VALUE_MAX], lc[2][JSON_VALUE_MAX], vg[2][JSON_VALUE_MAX], vc[2][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(jg, "loss", lg, 2), 2);
    cr_assert_eq(json_epoch_values(jc, "loss", lc, 2), 2);
    json_epoch_values(jg, "val_acc", vg, 2);
    json_epoch_values(jc, "val_acc", vc, 2);
    for (int e = 0; e < 2; e++) {
        double a = strtod(lg[e], NULL), b = strtod(lc[e], NULL);
        /* the fake computes in double, the CPU backend in float */
        cr_assert(fabs(a - b) <= 1e-5 * fabs(b), "epoch %d: loss %.9g (GPU) vs %.9g (CPU)", e + 1,
                  a, b);
        cr_assert_str_eq(vg[e], vc[e], "epoch %d: validation accuracy", e + 1);
    }
    free(jg);
    free(jc);
}
