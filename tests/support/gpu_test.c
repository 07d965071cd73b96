/* gpu_test.c — see gpu_test.h. */
#define _POSIX_C_SOURCE 200809L
#include "tests/support/gpu_test.h"

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu/cpu.h"
#include "cuda/gpu.h"
#include "nn/twin.h"
#ifdef TRAIN_FAKECUDA
#include "tests/fakecuda/runtime/fake.h"
#endif

backend *gt_backend(void)
{
    gpu_info g;
    gpu_probe(0, &g);
    if (g.status != GPU_OK)
        cr_skip_test("no CUDA device (%s)", g.reason);
    errbuf e = {{0}};
    backend *be = backend_cuda_create(0, &e);
    cr_assert_not_null(be, "backend_cuda_create: %s", e.msg);
    cr_assert_str_eq(be->ops->name, "cuda");
    return be;
}

void gt_done(backend *be)
{
    be->ops->destroy(be);
#ifdef TRAIN_FAKECUDA
    cr_expect_eq(fake_violations(), 0, "the fake saw misuse: %s", fake_last_violation());
    cr_expect_eq(fake_live_allocations(), 0, "device allocations leaked");
    cr_expect_eq(fake_live_objects(), 0, "streams, events, handles or registrations leaked");
#endif
}

float *gt_rand(rng *r, size_t n, float lo, float hi)
{
    float *h = malloc(n * sizeof *h);
    cr_assert_not_null(h);
    for (size_t i = 0; i < n; i++)
        h[i] = lo + (hi - lo) * rng_uniform(r);
    return h;
}

void *gt_to_dev(backend *be, const void *h, size_t bytes)
{
    void *d = be->ops->alloc(be, bytes);
    be->ops->upload(be, d, h, bytes);
    return d;
}

float *gt_from_dev(backend *be, const void *d, size_t n)
{
    float *h = malloc(n * sizeof *h);
    cr_assert_not_null(h);
    be->ops->download(be, h, d, n * sizeof *h);
    return h;
}

void gt_expect_host(const char *what, const float *got, const float *want, size_t n)
{
    size_t worst = 0;
    double r = twin_compare(got, want, n, GT_RTOL, &worst);
    cr_expect(r <= 1.0, "%s: element %zu of %zu: got %.9g, want %.9g (%.3g x the tolerance)", what,
              worst, n, (double)got[worst], (double)want[worst], r);
}

void gt_expect_dev(backend *be, const char *what, const void *got_dev, const float *want, size_t n)
{
    float *got = gt_from_dev(be, got_dev, n);
    gt_expect_host(what, got, want, n);
    free(got);
}

static void twin_expect(void *arg, const twin_check *c)
{
    size_t i = 0;
    double r = twin_judge(c, &i);
    cr_expect(r <= 1.0, "%s: %.3g x the tolerance %.0e%s; element %zu of %zu: gpu %.9g, cpu %.9g",
              c->what, r, c->rtol, c->measure == TWIN_NORM ? " (L2 norm)" : "", i, c->n,
              (double)c->dev[i], (double)c->ref[i]);
    ++*(int *)arg;
}

twin gt_twin(backend *be, uint64_t key, int *checks)
{
    errbuf e = {{0}};
    backend *cpu = backend_cpu_create(1, &e);
    cr_assert_not_null(cpu, "backend_cpu_create: %s", e.msg);
    *checks = 0;
    twin t = {.dev = be,
              .ref = cpu,
              .r = rng_keyed(42, RNG_TOOL, key, 0),
              .report = twin_expect,
              .arg = checks};
    return t;
}

void gt_twin_done(twin *t)
{
    t->ref->ops->destroy(t->ref);
    t->ref = NULL;
}

#ifndef TRAIN_FAKECUDA
/* Say plainly, once, when the suite skipped and why (Criterion only lists
 * skips with --verbose): "no CUDA device" only when there is none, since on
 * a one-GPU machine the two-rank NCCL tests skip for another reason. On the
 * fake every test has its device: nothing to say. */
ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    if (!stats->tests_skipped)
        return;
    gpu_info g;
    gpu_probe(0, &g);
    fprintf(stderr, "gpu tests: %zu of %zu skipped: %s\n", stats->tests_skipped, stats->nb_tests,
            g.status != GPU_OK ? "no CUDA device"
                               : "each names its reason (--verbose); none lacked a device");
}
#endif
