/* test_dist_gpu.c — the GPU backend as 2 data-parallel ranks under a real
 * mpirun: its gradients go through the real NCCL calls of comm/nccl.c (on
 * the fake CUDA runtime, the fake NCCL of tests/fakecuda/runtime/nccl.c, which
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

/* The 2-rank CPU job's losses and validation accuracies, per epoch. */
typedef struct job_values {
    char loss[2][JSON_VALUE_MAX], val[2][JSON_VALUE_MAX];
    char out[4096];
} job_values;

static void run_job(job_values *v, const char *bin, const char *device, const char *name)
{
    char *json = path_join(dir, name);
    run_result r;
    run_mpi(&r, 2, bin, "--device", device, "--epochs", "2", "--batch", "64", "--lr", "0.005",
            "--channels", "1", "--val", fm_val, "--json", json, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_null(strstr(r.err, "fakecuda:"), "the fake saw misuse:\n%s", r.err);
    snprintf(v->out, sizeof v->out, "%s", r.out);
    run_free(&r);
    cr_assert_eq(json_epoch_values(json, "loss", v->loss, 2), 2);
    json_epoch_values(json, "val_acc", v->val, 2);
    free(json);
}

static void gpu_job(job_values *v, const char *name)
{
    char gpu_bin[1024];
    snprintf(gpu_bin, sizeof gpu_bin, "%s/%s", source_root(), GPU_BIN);
    run_job(v, gpu_bin, "cuda", name);
    cr_assert(strstr(v->out, "gradients summed with NCCL"), "%s", v->out);
}

static void cpu_job(job_values *v)
{
    run_job(v, train_bin(), "cpu", "cpu.json");
    cr_assert(strstr(v->out, "gradients summed with MPI"), "%s", v->out);
}

static void same_training(const job_values *g, const job_values *c, const char *what)
{
    for (int e = 0; e < 2; e++) {
        double a = strtod(g->loss[e], NULL), b = strtod(c->loss[e], NULL);
        /* the fake computes in double, the CPU backend in float */
        cr_assert(fabs(a - b) <= 1e-5 * fabs(b), "%s: epoch %d: loss %.9g (GPU) vs %.9g (CPU)",
                  what, e + 1, a, b);
        cr_assert_str_eq(g->val[e], c->val[e], "%s: epoch %d: validation accuracy", what, e + 1);
    }
}

/* the fake's NCCL sums of the last run (FAKECUDA_CLOCK, one rank's) */
typedef struct nccl_sums {
    double sums, overtaking, floats, floats_overtaking;
    double host_ms, compute_ms, link_ms; /* rank 0's virtual clock */
} nccl_sums;

static void read_sums(const char *path, nccl_sums *n)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "the fake wrote nothing to %s", path);
    char key[32];
    double v;
    memset(n, 0, sizeof *n);
    while (fscanf(f, "%31s %lf", key, &v) == 2) {
        if (!strcmp(key, "nccl_sums"))
            n->sums = v;
        else if (!strcmp(key, "nccl_overtaking"))
            n->overtaking = v;
        else if (!strcmp(key, "nccl_floats"))
            n->floats = v;
        else if (!strcmp(key, "nccl_floats_overtaking"))
            n->floats_overtaking = v;
        else if (!strcmp(key, "host_ms"))
            n->host_ms = v;
        else if (!strcmp(key, "compute_ms"))
            n->compute_ms = v;
        else if (!strcmp(key, "link_ms"))
            n->link_ms = v;
    }
    fclose(f);
    cr_log_info("%.0f sums of %.0f floats; %.0f of them (%.0f floats, %.1f%%) ran while "
                "backward work was still queued beside them",
                n->sums, n->floats, n->overtaking, n->floats_overtaking,
                n->floats > 0 ? 100.0 * n->floats_overtaking / n->floats : 0.0);
    cr_log_info("rank 0 simulated %.3f ms: compute %.3f ms, NCCL link %.3f ms", n->host_ms,
                n->compute_ms, n->link_ms);
}

/* The default schedule of the fake: every stream lazy, so the NCCL stream
 * runs its buckets only when the compute stream reaches its wait for them.
 * An update not ordered after the sums (no wait on the NCCL stream's
 * event) would then read unsummed gradients. */
Test(gpu_dist, two_gpu_ranks_sum_with_nccl_and_train_as_two_cpu_ranks)
{
    job_values g, c;
    gpu_job(&g, "gpu.json");
    cr_assert(strstr(g.out, "buckets, during backward"), "%s", g.out);
    cpu_job(&c);
    same_training(&g, &c, "lazy streams");
}

/* The NCCL stream run as early as its waits allow (FAKECUDA_NCCL=early)
 * while the compute stream stays lazy: a bucket's sum runs the moment the
 * event after its last gradient completes, so a bucket not ordered after
 * the backward pass that writes it would be summed before it is written,
 * and the job would stop training like the CPU's. The same schedule shows
 * the overlap: the buckets of the last layers are summed while the backward
 * pass of the first ones is still queued. One bucket
 * (TRAIN_NCCL_BUCKETS=1): one sum on the compute stream, nothing ahead.
 * On the fake's clock (a link engine for the sums beside the compute
 * engine; costs chosen so that the fc bucket's sum takes about as long as
 * the conv layers' backward) the buckets shorten the simulated run: the
 * same link time, partly hidden. A statement about the schedule, not
 * about any GPU's speed. */
Test(gpu_dist, nccl_stream_run_early_still_trains_as_two_cpu_ranks)
{
    char *clock = path_join(dir, "clock.txt");
    setenv("FAKECUDA_CLOCK", clock, 1);
    setenv("FAKECUDA_NCCL", "early", 1);
    setenv("FAKECUDA_COST", "kernel_us=200,link_gbps=2", 1);
    job_values g, one, c;
    nccl_sums ns, ns1;
    gpu_job(&g, "gpu.json");
    read_sums(clock, &ns);
    setenv("TRAIN_NCCL_BUCKETS", "1", 1);
    remove(clock);
    gpu_job(&one, "gpu1.json");
    cr_assert_null(strstr(one.out, "buckets"), "%s", one.out);
    read_sums(clock, &ns1);
    unsetenv("FAKECUDA_CLOCK");
    cpu_job(&c);
    same_training(&g, &c, "early NCCL stream");
    same_training(&one, &c, "one bucket");
    cr_assert_gt(ns.sums, ns1.sums, "more sums with buckets than with one");
    cr_assert_gt(ns.overtaking, 0, "no bucket was summed during backward");
    cr_assert_lt(ns.overtaking, ns.sums, "the last bucket cannot overlap backward");
    cr_assert_eq(ns1.overtaking, 0, "one sum after backward overlaps nothing");
    cr_assert(ns.link_ms > 0 && fabs(ns.link_ms - ns1.link_ms) < 1e-6, "link %.6f vs %.6f ms",
              ns.link_ms, ns1.link_ms);
    cr_assert_lt(ns.host_ms, ns1.host_ms - 0.25 * ns.link_ms,
                 "simulated %.3f ms with buckets, %.3f ms with one: no sum hidden", ns.host_ms,
                 ns1.host_ms);
    free(clock);
}
