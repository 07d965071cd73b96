/* test_dist_nccl_fail.c — what NCCL refuses or fails on, with 2 ranks under
 * a real mpirun on the fake CUDA runtime (each process a fake device of
 * its own unless FAKECUDA_DEVICE_ID puts them on one; the fake NCCL sums
 * over MPI and can fail on demand, FAKECUDA_NCCL_FAIL), and comm% against
 * the fake's clock (the link engine that runs the sums):
 *
 *   - two ranks of a node on one GPU are refused up front, on every rank,
 *     exit 2, naming the node, the ranks and the GPU; with the up-front
 *     check turned off the fake NCCL refuses them itself, as NCCL does;
 *   - a sum that fails asynchronously (a peer gone: ncclRemoteError, the
 *     stream never completes) ends every rank with a message naming the
 *     rank, step, bucket and NCCL's error, leaving no process behind;
 *   - a sum that never ends without any error ends at TRAIN_NCCL_TIMEOUT;
 *   - comm% is the NCCL stream's time: what the fake's link engine ran.
 *
 * The fake binary only: a real run needs two GPUs and a dying peer. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/gpu.h"
#include "tests/support/helpers.h"
#include "tests/support/mpirun.h"

#ifdef TRAIN_FAKECUDA /* the fake's knobs; nothing for build/cuda/tests/run-gpu */
static char *dir, *fm_train, *bin;

static void setup(void)
{
    if (!mpi_available())
        cr_skip_test("built without MPI or no mpirun");
    mpi_test_env();
    dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, 193);
    fm_train = path_join(fm, "train.csv");
    free(fm);
    bin = path_join(source_root(), "build/fakecuda/train");
}

static void teardown(void)
{
    if (dir)
        tmpdir_remove(dir);
    free(fm_train);
    free(bin);
}

TestSuite(gpu_nccl, .init = setup, .fini = teardown);

/* one epoch: 4 steps of 2 buckets (LeNet: [fc2 fc1], [conv2 conv1]) */
static void run2(run_result *r, const char *json)
{
    char *out = json ? NULL : path_join(dir, "run.json");
    run_mpi(r, 2, bin, "--device", "cuda", "--epochs", "1", "--batch", "64", "--lr", "0.005",
            "--channels", "1", "--json", json ? json : out, fm_train, NULL);
    free(out);
    cr_log_info("status %d after %.1f s; stderr:\n%s", r->status, r->secs, r->err);
}

/* processes still running whose command line names this test's data */
static int leftovers(void)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char path[300], buf[4096];
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i < len; i++)
            buf[i] = buf[i] ? buf[i] : ' ';
        buf[len] = '\0';
        if (strstr(buf, fm_train)) {
            cr_log_warn("left over: pid %s: %s", de->d_name, buf);
            n++;
        }
    }
    if (d)
        closedir(d);
    return n;
}

Test(gpu_nccl, two_ranks_on_one_gpu_are_refused_up_front)
{
    setenv("FAKECUDA_DEVICE_ID", "3", 1); /* both processes: the same GPU */
    run_result r;
    run2(&r, NULL);
    cr_assert_eq(r.status, 2, "status %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "ranks 0 and 1 on node "), "%s", r.err);
    cr_assert(strstr(r.err, "share GPU cuda:0 (PCI 00000003:01:00.0)"), "%s", r.err);
    cr_assert(strstr(r.err, "Duplicate GPU detected"), "%s", r.err);
    cr_assert_null(strstr(r.err, "ncclCommInitRank"), "refused before NCCL: %s", r.err);
    cr_assert_null(strstr(r.err, "fakecuda:"), "the fake saw misuse:\n%s", r.err);
    run_free(&r);
    unsetenv("FAKECUDA_DEVICE_ID");
}

Test(gpu_nccl, fake_nccl_refuses_two_ranks_on_one_gpu_as_nccl_does)
{
    setenv("FAKECUDA_DEVICE_ID", "3", 1);
    setenv("TRAIN_NCCL_GPU_CHECK", "0", 1); /* leave it to NCCL */
    setenv("NCCL_DEBUG", "WARN", 1);
    run_result r;
    run2(&r, NULL);
    cr_assert_neq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.err, "NCCL: ncclCommInitRank: invalid usage"), "%s", r.err);
    cr_assert(strstr(r.err, "NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA "
                            "device 00000003:01:00.0"),
              "%s", r.err);
    run_free(&r);
    unsetenv("NCCL_DEBUG");
    unsetenv("TRAIN_NCCL_GPU_CHECK");
    unsetenv("FAKECUDA_DEVICE_ID");
}

/* LeNet gets 2 buckets a step: the 6th sum is step 3's conv bucket */
Test(gpu_nccl, a_failed_sum_ends_every_rank_with_its_error)
{
    setenv("FAKECUDA_NCCL_FAIL", "after:5", 1);
    run_result r;
    run2(&r, NULL);
    cr_assert_eq(r.status, 1, "status %d: %s", r.status, r.err);
    cr_assert_lt(r.secs, 60, "%.1f s: not ended promptly", r.secs);
    for (int k = 0; k < 2; k++) {
        char want[128];
        snprintf(want, sizeof want, "train: rank %d (", k);
        const char *m = strstr(r.err, want);
        while (m && !strstr(m, "NCCL failed in the gradient sum"))
            m = strstr(m + 1, want);
        cr_assert(m, "rank %d said nothing about NCCL: %s", k, r.err);
    }
    cr_assert(strstr(r.err, "NCCL failed in the gradient sum of step 3, bucket 2 of 2: remote "
                            "process exited or there was a network error"),
              "%s", r.err);
    cr_assert(strstr(r.err, "(ncclRemoteError); aborting the communicator"), "%s", r.err);
    cr_assert_eq(leftovers(), 0, "processes outlived the job");
    run_free(&r);
    unsetenv("FAKECUDA_NCCL_FAIL");
}

Test(gpu_nccl, a_sum_that_never_ends_ends_at_the_bound)
{
    setenv("FAKECUDA_NCCL_FAIL", "hang:5", 1);
    setenv("TRAIN_NCCL_TIMEOUT", "3", 1);
    run_result r;
    run2(&r, NULL);
    cr_assert_eq(r.status, 1, "status %d: %s", r.status, r.err);
    cr_assert_lt(r.secs, 60, "%.1f s: not ended near the bound", r.secs);
    cr_assert(strstr(r.err, "the gradient sum of step 3, bucket 2 of 2 has not ended after 3 s "
                            "(TRAIN_NCCL_TIMEOUT=3)"),
              "%s", r.err);
    cr_assert_eq(leftovers(), 0, "processes outlived the job");
    run_free(&r);
    unsetenv("TRAIN_NCCL_TIMEOUT");
    unsetenv("FAKECUDA_NCCL_FAIL");
}

/* the fake's link engine (rank 0's clock file) is the truth: with a slow
 * link the sums take seconds of simulated time, and comm% of the epoch
 * (a share of the ranks' epochs, which last about as long) must carry
 * them; the host's time to enqueue them is microseconds */
Test(gpu_nccl, comm_is_the_nccl_streams_time)
{
    char *clock = path_join(dir, "clock.txt"), *json = path_join(dir, "comm.json");
    setenv("FAKECUDA_CLOCK", clock, 1);
    setenv("FAKECUDA_COST", "link_gbps=0.01", 1);
    run_result r;
    run2(&r, json);
    cr_assert_eq(r.status, 0, "%s", r.err);
    unsetenv("FAKECUDA_COST");
    unsetenv("FAKECUDA_CLOCK");
    FILE *f = fopen(clock, "r");
    cr_assert(f, "no clock file");
    char key[32];
    double v, link_ms = 0;
    while (fscanf(f, "%31s %lf", key, &v) == 2)
        if (!strcmp(key, "link_ms"))
            link_ms = v;
    fclose(f);
    char pct[1][JSON_VALUE_MAX], secs[1][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(json, "comm_pct", pct, 1), 1);
    cr_assert_eq(json_epoch_values(json, "epoch_s", secs, 1), 1);
    double comm_s = strtod(pct[0], NULL) / 100 * strtod(secs[0], NULL);
    cr_log_info("link %.3f s (rank 0), comm%% x epoch %.3f s", link_ms / 1000, comm_s);
    cr_assert_gt(link_ms, 500, "the link should take seconds: %.3f ms", link_ms);
    cr_assert(fabs(comm_s - link_ms / 1000) < 0.1 * link_ms / 1000,
              "comm %.3f s vs the link engine's %.3f s", comm_s, link_ms / 1000);
    run_free(&r);
    free(clock);
    free(json);
}
#endif
