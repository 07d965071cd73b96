/* test_versions.c — issue 27 on the fake: the GPU libraries' versions as
 * loaded (cuda/versions.c, comm/nccl_version.c), with a warning when one
 * is older than the headers built with, in --version and on the device
 * line; and the --pin guard of a real run measuring the ring against the
 * memory cgroup's room ($TRAIN_CGROUP_ROOT) rather than MemAvailable alone.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cublas_v2.h>
#include <cudnn.h>

#include "cuda/gpu.h"
#include "tests/support/helpers.h"

Test(versions, older_is_major_then_minor)
{
    cr_expect(gpu_version_older(9, 1, 9, 19));
    cr_expect(gpu_version_older(8, 99, 9, 0));
    cr_expect_not(gpu_version_older(9, 19, 9, 19), "the same major.minor is fine");
    cr_expect_not(gpu_version_older(10, 0, 9, 19), "newer is fine");
}

Test(versions, an_older_library_is_warned_about)
{
    gpu_lib_version v[3] = {
        {"cuDNN", 9, 1, 2, 9, 19}, {"cuBLAS", 13, 1, 0, 13, 1}, {"cuFOO", -1, 0, 0, 1, 0}};
    char buf[200], warn[400];
    gpu_versions_format(v, 3, buf, sizeof buf, warn, sizeof warn);
    cr_expect_str_eq(buf, "cuDNN 9.1.2, cuBLAS 13.1.0, cuFOO not loaded");
    cr_expect_str_eq(
        warn, "cuDNN 9.1.2 is loaded, older than the 9.19 headers this train was built with");
    v[0].minor = 19;
    gpu_versions_format(v, 3, buf, sizeof buf, warn, sizeof warn);
    cr_expect_str_eq(warn, "");
}

Test(versions, what_this_process_loaded)
{
    gpu_lib_version v[4];
    cr_assert_eq(gpu_library_versions(v, 4), 2);
    size_t c = cudnnGetVersion();
    cr_expect_str_eq(v[0].name, "cuDNN");
    cr_expect_eq(v[0].major * 10000 + v[0].minor * 100 + v[0].patch, (int)c);
    cr_expect_eq(v[0].hdr_major, CUDNN_MAJOR);
    cr_expect_str_eq(v[1].name, "cuBLAS");
    cr_expect_eq(v[1].major, CUBLAS_VER_MAJOR, "the fake cuBLAS is its header's version");
    cr_expect_eq(v[1].minor, CUBLAS_VER_MINOR);
}

static char gpu_bin[1024];

static int run_gpu(run_result *r, char *const *env, const char *a1, const char *a2, const char *a3,
                   const char *a4, const char *a5, const char *a6)
{
    snprintf(gpu_bin, sizeof gpu_bin, "%s/build/fakecuda/train", source_root());
    char *argv[] = {gpu_bin,    (char *)a1, (char *)a2, (char *)a3,
                    (char *)a4, (char *)a5, (char *)a6, NULL};
    return run_argv(argv, env, 120, r);
}

Test(versions, version_and_device_line_name_them)
{
    run_result r;
    run_gpu(&r, NULL, "--version", NULL, NULL, NULL, NULL, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "gpu libraries: cuDNN ") && strstr(r.out, ", cuBLAS ") &&
                  strstr(r.out, "(loaded)"),
              "%s", r.out);
#ifdef TRAIN_MPI
    cr_expect(strstr(r.out, "nccl: NCCL "), "%s", r.out);
#endif
    run_free(&r);
    char *dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, 64);
    char *csv = path_join(fm, "train.csv");
    run_gpu(&r, NULL, "--batch", "32", "--epochs", "1", csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(!strncmp(r.out, "device: cuda:0 ", 15) && strstr(r.out, "; cuDNN ") &&
                  strstr(r.out, ", cuBLAS "),
              "the device line names the libraries loaded: %.300s", r.out);
    run_free(&r);
    free(csv);
    free(fm);
    tmpdir_remove(dir);
}

/* the ring of 2 workers x prefetch 2 x batch 32 of 3x28x28 is about
 * 300 KB: fine against MemAvailable, refused against a cgroup with 400 KB
 * of room, said naming the cgroup */
Test(versions, pin_guard_reads_the_cgroup)
{
    char *dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, 64);
    char *csv = path_join(fm, "train.csv");
    char *cg = path_join(dir, "cgroup");
    cr_assert_eq(mkdir(cg, 0755), 0);
    free(write_text(cg, "memory.max", "1000000000\n"));
    free(write_text(cg, "memory.current", "999600000\n"));
    char env0[1200];
    snprintf(env0, sizeof env0, "TRAIN_CGROUP_ROOT=%s", cg);
    char *env[] = {env0, NULL};
    run_result r;
    run_gpu(&r, env, "--pin", "--workers", "2", "--batch", "32", csv);
    cr_expect_eq(r.status, 2, "refused: status %d\n%s", r.status, r.err);
    cr_expect(strstr(r.err, "of the memory cgroup's room") && strstr(r.err, cg), "%s", r.err);
    run_free(&r);
    free(write_text(cg, "memory.current", "0\n"));
    run_gpu(&r, env, "--pin", "--workers", "2", "--batch", "32", csv);
    cr_expect_eq(r.status, 0, "room enough: %s", r.err);
    run_free(&r);
    free(cg);
    free(csv);
    free(fm);
    tmpdir_remove(dir);
}
