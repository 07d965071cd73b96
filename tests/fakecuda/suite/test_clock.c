/* test_clock.c — the fake's virtual clock (clock.c) on its own: a copy on
 * one stream and compute on another overlap; on one stream they add up; a
 * copy from pageable memory holds the host until it ends; event times are
 * simulated times; freeing memory that enqueued work still uses is misuse
 * (cudaFree only may synchronise); waits on events without
 * cudaEventBlockingSync are counted as spinning.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fakecuda/runtime/fake.h"

static void setup(void)
{
    fake_reset();
    cr_assert_eq(fake_set_cost("launch_us", 0.0), 0);
    cr_assert_eq(fake_set_cost("kernel_us", 1000.0), 0); /* 1 ms a compute op */
    cr_assert_eq(fake_set_cost("h2d_gbps", 0.001), 0);   /* 1 MB/s: 1000 bytes = 1 ms */
}

TestSuite(clock, .init = setup);

enum { NB = 1000 };

static void clk(fake_clock_stats *c) { fake_clock(c); }

Test(clock, unknown_cost_keys_are_refused)
{
    cr_expect_eq(fake_set_cost("warp_speed", 1.0), -1);
    cr_expect_eq(fake_set_cost("kernel_us", 0.0), -1);
}

/* `same`: copy and compute on one stream; else on two */
static double copy_and_compute(int same, unsigned event_flags, int *spins)
{
    cudaStream_t a, b;
    cr_assert_eq(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
    cr_assert_eq(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
    if (same)
        b = a;
    void *h = malloc(NB), *d, *d2;
    memset(h, 1, NB);
    cr_assert_eq(cudaHostRegister(h, NB, 0), cudaSuccess);
    cr_assert_eq(cudaMalloc(&d, NB), cudaSuccess);
    cr_assert_eq(cudaMalloc(&d2, NB), cudaSuccess);
    cudaEvent_t e;
    cr_assert_eq(cudaEventCreateWithFlags(&e, event_flags), cudaSuccess);
    cr_assert_eq(cudaMemcpyAsync(d, h, NB, cudaMemcpyHostToDevice, a), cudaSuccess);
    cr_assert_eq(cudaMemsetAsync(d2, 0, 16, b), cudaSuccess); /* compute engine: ~1 ms */
    cr_assert_eq(cudaEventRecord(e, b), cudaSuccess);
    cr_assert_eq(cudaEventSynchronize(e), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(a), cudaSuccess);
    fake_clock_stats c;
    clk(&c);
    *spins = c.spin_waits;
    cr_assert_eq(cudaHostUnregister(h), cudaSuccess);
    cudaFree(d), cudaFree(d2);
    cudaEventDestroy(e);
    cudaStreamDestroy(a);
    if (!same)
        cudaStreamDestroy(b);
    free(h);
    return c.host_ms;
}

Test(clock, two_streams_overlap_one_stream_adds_up)
{
    int spins;
    double two = copy_and_compute(0, cudaEventBlockingSync, &spins);
    cr_expect(fabs(two - 1.0) < 0.05, "copy and compute on two streams: %.3f ms, not ~1", two);
    cr_expect_eq(spins, 0, "a blocking-sync event sleeps");
    fake_reset();
    setup();
    double one = copy_and_compute(1, cudaEventDisableTiming, &spins);
    cr_expect(fabs(one - 2.0) < 0.05, "on one stream: %.3f ms, not ~2", one);
    cr_expect_eq(spins, 1, "a wait on an event without cudaEventBlockingSync spins");
    cr_expect_eq(fake_violations(), 0, "%s", fake_last_violation());
}

Test(clock, a_pageable_copy_holds_the_host)
{
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    char *h = malloc(NB);
    memset(h, 2, NB);
    void *d;
    cr_assert_eq(cudaMalloc(&d, NB), cudaSuccess);
    cr_assert_eq(cudaMemcpyAsync(d, h, NB, cudaMemcpyHostToDevice, s), cudaSuccess);
    fake_clock_stats c;
    clk(&c);
    cr_expect(c.host_ms >= 1.99, "pageable: half the bandwidth and the host waits: %.3f ms",
              c.host_ms);
    cr_expect_eq(c.host_syncs, 1);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cudaFree(d);
    cudaStreamDestroy(s);
    free(h);
}

Test(clock, event_times_are_simulated)
{
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    cudaEvent_t a, b;
    cr_assert_eq(cudaEventCreate(&a), cudaSuccess);
    cr_assert_eq(cudaEventCreate(&b), cudaSuccess);
    void *d;
    cr_assert_eq(cudaMalloc(&d, 64), cudaSuccess);
    cr_assert_eq(cudaEventRecord(a, s), cudaSuccess);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(cudaMemsetAsync(d, 0, 64, s), cudaSuccess);
    cr_assert_eq(cudaEventRecord(b, s), cudaSuccess);
    cr_assert_eq(cudaEventSynchronize(b), cudaSuccess);
    float ms = 0;
    cr_assert_eq(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
    cr_expect(fabs(ms - 3.0) < 0.05, "three 1 ms operations: %.3f ms", (double)ms);
    fake_clock_stats c;
    clk(&c);
    cr_expect(fabs(c.compute_ms - 3.0) < 0.05, "compute engine busy %.3f ms", c.compute_ms);
    cudaFree(d);
    cudaEventDestroy(a), cudaEventDestroy(b);
    cudaStreamDestroy(s);
}

Test(clock, freeing_memory_that_queued_work_uses_is_misuse)
{
    fake_set_quiet(1);
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    void *d, *other;
    cr_assert_eq(cudaMalloc(&d, 64), cudaSuccess);
    cr_assert_eq(cudaMalloc(&other, 64), cudaSuccess);
    cr_assert_eq(cudaMemsetAsync(d, 0, 64, s), cudaSuccess);
    cudaFree(other); /* nothing uses it: fine */
    cr_expect_eq(fake_violations(), 0, "%s", fake_last_violation());
    cudaFree(d); /* the memset ends 1 ms later on the clock */
    cr_expect_eq(fake_violations(), 1);
    cr_expect(strstr(fake_last_violation(), "may return before the device is done"), "%s",
              fake_last_violation());
    cudaStreamDestroy(s);
}

Test(clock, freeing_after_a_stream_sync_is_fine)
{
    cudaStream_t s;
    cr_assert_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    void *d;
    cr_assert_eq(cudaMalloc(&d, 64), cudaSuccess);
    cr_assert_eq(cudaMemsetAsync(d, 0, 64, s), cudaSuccess);
    cr_assert_eq(cudaStreamSynchronize(s), cudaSuccess);
    cudaFree(d);
    cr_expect_eq(fake_violations(), 0, "%s", fake_last_violation());
    cudaStreamDestroy(s);
}
