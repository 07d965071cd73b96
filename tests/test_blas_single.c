/* test_blas_single.c — cpu_blas_single() stops OpenBLAS's thread pool
 * (cpu/cpu.h): the pthread OpenBLAS starts one thread per core when the
 * library loads, and they spin before sleeping; main() and the loader's
 * supervisor call this first, so the process they fork workers from has
 * one thread and no spinning neighbour. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>

#include <cblas.h>

#include "cpu/cpu.h"

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    cr_assert(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(blas_single, stops_openblas_pool_and_blas_still_works)
{
    int pool = openblas_get_num_threads(), before = threads_now();
    cpu_blas_single();
    int after = threads_now();
    cr_assert_eq(openblas_get_num_threads(), 1);
    /* the pool's pool - 1 helper threads are gone (none on a 1-core
     * machine or with OPENBLAS_NUM_THREADS=1) */
    cr_assert_eq(after, before - (pool - 1), "threads %d -> %d with an OpenBLAS pool of %d", before,
                 after, pool);
    /* and a GEMM large enough for OpenBLAS to want threads runs in this one */
    enum { N = 256 };
    float *a = calloc(N * N, sizeof *a), *b = calloc(N * N, sizeof *b), *c = calloc(N * N, 4);
    for (int i = 0; i < N; i++)
        a[i * N + i] = 2.0f, b[i * N + (N - 1 - i)] = 1.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    for (int i = 0; i < N; i++)
        cr_assert_eq(c[i * N + (N - 1 - i)], 2.0f);
    cr_assert_eq(threads_now(), after, "the GEMM started threads again");
    free(a), free(b), free(c);
    /* nor does the CPU backend (its pool of 1 is the calling thread):
     * OpenBLAS 0.3.21's openblas_set_num_threads re-creates a stopped pool */
    errbuf e = {{0}};
    backend *be = backend_cpu_create(1, &e);
    cr_assert(be, "%s", e.msg);
    cr_assert_eq(threads_now(), after, "creating the CPU backend started OpenBLAS's pool again");
    be->ops->destroy(be);
}
