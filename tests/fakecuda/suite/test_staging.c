/* test_staging.c — the optional staging/timing block of the GPU backend on
 * the fake's lazily-run streams: a batch pinned, copied on the copy stream,
 * waited for by compute, released, and the buffer reused; the ring slot is
 * free only once its copy has run; pin failure falls back cleanly; busy
 * time adds up. The fake flags a host buffer changed before its copy ran
 * and device data read before it was written, so an ordering bug in the
 * backend shows up as a violation or a wrong value here.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cuda/gpu.h"
#include "tests/fakecuda/runtime/fake.h"
#include "tests/fakecuda/suite/forked.h"
#include "tests/support/gpu_test.h"
#include "tests/support/hostref.h"

static void setup(void) { fake_reset(); }

TestSuite(staging, .init = setup);

enum { B = 2, C = 3, HW = 50, N = B * C * HW };
static const float mean[C] = {0.5f, 0.4f, 0.3f}, sd[C] = {0.25f, 0.5f, 1.0f};

static void fill(uint8_t *h, int seed)
{
    for (int i = 0; i < N; i++)
        h[i] = (uint8_t)(i * 13 + seed * 71);
}

static void expect_normalized(backend *be, const float *d_out, const uint8_t *h, const char *what)
{
    float ref[N];
    href_normalize_u8(ref, h, B, C, HW, mean, sd);
    gt_expect_dev(be, what, d_out, ref, N);
}

Test(staging, pinned_batch_through_the_copy_stream)
{
    backend *be = gt_backend();
    const backend_ops *o = be->ops;
    uint8_t *host = malloc(N);
    fill(host, 1);
    errbuf e;
    cr_assert_eq(o->host_pin(be, host, N, &e), 0, "%s", e.msg);
    uint8_t *d_in = o->alloc(be, N);
    float *d_out = o->alloc(be, N * sizeof(float));
    cr_assert_eq(fake_set_cost("h2d_gbps", 1e-6), 0); /* a byte a millisecond */
    o->stage_copy(be, 0, d_in, host, N);
    cr_expect_eq(o->stage_done(be, 0, 0), 0, "the copy has not ended by the host's clock");
    cr_expect_eq(o->stage_done(be, 0, 0), 0, "asking again does not move the clock");
    cr_expect_eq(o->stage_done(be, 0, 1), 1, "waiting does");
    cr_expect_eq(o->stage_done(be, 0, 0), 1, "and then it has ended");
    o->stage_wait(be, 0);
    o->normalize_u8(be, d_out, d_in, B, C, HW, mean, sd);
    o->stage_release(be, 0);
    expect_normalized(be, d_out, host, "normalised batch");
    o->host_unpin(be, host);
    o->free(be, d_in), o->free(be, d_out);
    free(host);
    gt_done(be);
}

/* Two batches through one device buffer. The second copy is forced to
 * complete (stage_done wait) before compute on the first has been asked
 * to run: only the release event keeps it from overwriting batch 1. */
Test(staging, reused_buffer_waits_for_compute_to_release_it)
{
    backend *be = gt_backend();
    const backend_ops *o = be->ops;
    uint8_t *h1 = malloc(N), *h2 = malloc(N);
    fill(h1, 1), fill(h2, 2);
    uint8_t *d_in = o->alloc(be, N);
    float *out1 = o->alloc(be, N * sizeof(float)), *out2 = o->alloc(be, N * sizeof(float));
    o->stage_copy(be, 0, d_in, h1, N);
    o->stage_wait(be, 0);
    o->normalize_u8(be, out1, d_in, B, C, HW, mean, sd);
    o->stage_release(be, 0);
    o->stage_copy(be, 0, d_in, h2, N);
    cr_expect_eq(o->stage_done(be, 0, 1), 1);
    o->stage_wait(be, 0);
    o->normalize_u8(be, out2, d_in, B, C, HW, mean, sd);
    o->stage_release(be, 0);
    expect_normalized(be, out1, h1, "first batch");
    expect_normalized(be, out2, h2, "second batch");
    o->free(be, d_in), o->free(be, out1), o->free(be, out2);
    free(h1), free(h2);
    gt_done(be);
}

/* A ring of 3 host slots feeding 2 device buffers for 7 batches, the way
 * the training loop will: a slot goes back to the ring only when
 * stage_done says the copy that read it completed. The fake flags any slot
 * rewritten while its copy is still queued, and the results show any copy
 * that overtook the compute still reading its buffer. */
Test(staging, ring_slots_released_only_after_their_copy)
{
    backend *be = gt_backend();
    const backend_ops *o = be->ops;
    enum { SLOTS = 3, BUFS = 2, BATCHES = 7 };
    uint8_t *ring = malloc((size_t)SLOTS * N);
    errbuf e;
    cr_assert_eq(o->host_pin(be, ring, (size_t)SLOTS * N, &e), 0, "%s", e.msg);
    int busy[SLOTS] = {0}, held[BUFS] = {-1, -1};
    uint8_t *dbuf[BUFS];
    float *out[BATCHES];
    for (int b = 0; b < BUFS; b++)
        dbuf[b] = o->alloc(be, N);
    for (int i = 0; i < BATCHES; i++) /* alloc synchronises: all before the loop */
        out[i] = o->alloc(be, N * sizeof(float));
    for (int i = 0; i < BATCHES; i++) {
        int b = i % BUFS;
        /* poll: slots whose copies completed go back to the ring */
        for (int k = 0; k < BUFS; k++)
            if (held[k] >= 0 && o->stage_done(be, k, 0))
                busy[held[k]] = 0, held[k] = -1;
        /* b's previous copy must complete before b's event is reused */
        if (held[b] >= 0) {
            cr_assert_eq(o->stage_done(be, b, 1), 1);
            busy[held[b]] = 0, held[b] = -1;
        }
        int s = 0;
        while (busy[s])
            s++;
        cr_assert_lt(s, SLOTS);
        fill(ring + (size_t)s * N, i); /* the worker writes the slot */
        busy[s] = 1;
        o->stage_copy(be, b, dbuf[b], ring + (size_t)s * N, N);
        held[b] = s;
        o->stage_wait(be, b);
        o->normalize_u8(be, out[i], dbuf[b], B, C, HW, mean, sd);
        o->stage_release(be, b);
    }
    for (int i = 0; i < BATCHES; i++) {
        uint8_t h[N];
        fill(h, i);
        expect_normalized(be, out[i], h, "batch");
        o->free(be, out[i]);
    }
    o->host_unpin(be, ring);
    for (int b = 0; b < BUFS; b++)
        o->free(be, dbuf[b]);
    free(ring);
    gt_done(be);
}

Test(staging, pin_refused_falls_back_and_later_launches_still_work)
{
    backend *be = gt_backend();
    const backend_ops *o = be->ops;
    uint8_t *host = malloc(N);
    fill(host, 3);
    fake_fail_next("cudaHostRegister", cudaErrorNotSupported);
    errbuf e = {{0}};
    cr_expect_eq(o->host_pin(be, host, N, &e), -1);
    cr_expect(strstr(e.msg, "cudaHostRegister failed") && strstr(e.msg, "cudaErrorNotSupported"),
              "%s", e.msg);
    /* pageable memory through the same path: a kernel launch after the
     * refused call must not inherit its error */
    uint8_t *d_in = o->alloc(be, N);
    float *d_out = o->alloc(be, N * sizeof(float));
    o->stage_copy(be, 1, d_in, host, N);
    o->stage_wait(be, 1);
    o->normalize_u8(be, d_out, d_in, B, C, HW, mean, sd);
    o->stage_release(be, 1);
    expect_normalized(be, d_out, host, "pageable batch");
    o->free(be, d_in), o->free(be, d_out);
    free(host);
    gt_done(be);
}

Test(staging, busy_time_adds_up_over_many_steps)
{
    backend *be = gt_backend();
    const backend_ops *o = be->ops;
    float *d = o->alloc(be, 1000 * sizeof(float)), *v = o->alloc(be, 1000 * sizeof(float));
    cr_expect_eq(o->busy_take(be), 0.0, "nothing measured yet");
    for (int step = 0; step < 150; step++) { /* more steps than the event ring holds */
        o->busy_begin(be);
        o->sgd_update(be, d, v, d, 1000, 0.1f, 0.9f, 0.0f);
        o->busy_end(be);
    }
    double t = o->busy_take(be);
    cr_expect_gt(t, 0.0);
    cr_expect_eq(o->busy_take(be), 0.0, "taken: the next epoch starts from zero");
    o->free(be, d), o->free(be, v);
    gt_done(be);
}

static void double_begin(void *arg)
{
    (void)arg;
    fake_reset();
    errbuf e;
    backend *be = backend_cuda_create(0, &e);
    be->ops->busy_begin(be);
    be->ops->busy_begin(be);
}

static void bad_buffer(void *arg)
{
    (void)arg;
    fake_reset();
    errbuf e;
    backend *be = backend_cuda_create(0, &e);
    be->ops->stage_wait(be, BACKEND_STAGE_MAX);
}

static void wait_without_copy(void *arg)
{
    (void)arg;
    fake_reset();
    errbuf e;
    backend *be = backend_cuda_create(0, &e);
    be->ops->stage_wait(be, 2);
}

Test(staging, misuse_of_the_staging_calls_is_fatal_and_named)
{
    forked r;
    run_forked(double_begin, NULL, &r);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "busy_begin twice"), "%s", r.err);
    free(r.err);
    run_forked(bad_buffer, NULL, &r);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "staging buffer 16 out of range"), "%s", r.err);
    free(r.err);
    run_forked(wait_without_copy, NULL, &r);
    cr_expect_eq(r.status, 1);
    cr_expect(strstr(r.err, "nothing was copied into staging buffer 2"), "%s", r.err);
    free(r.err);
}

/* busy time is device work only: the compute stream's wait for a slow copy
 * comes before busy_begin (as the loop orders it), so the copy's time is
 * not busy, and the busy time equals the compute engine's on the clock */
Test(staging, busy_time_is_the_compute_engines_time_not_the_copy_wait)
{
    cr_assert_eq(fake_set_cost("kernel_us", 1000.0), 0); /* 1 ms a kernel */
    cr_assert_eq(fake_set_cost("h2d_gbps", 0.0001), 0);  /* 300 bytes: 3 ms */
    backend *be = gt_backend();
    const backend_ops *o = be->ops;
    uint8_t *host = malloc(N);
    fill(host, 2);
    errbuf e;
    cr_assert_eq(o->host_pin(be, host, N, &e), 0, "%s", e.msg);
    uint8_t *d_in = o->alloc(be, N);
    float *d_out = o->alloc(be, N * sizeof(float));
    fake_clock_stats c0, c1;
    fake_clock(&c0);
    o->stage_copy(be, 0, d_in, host, N);
    o->stage_wait(be, 0);
    o->busy_begin(be);
    o->normalize_u8(be, d_out, d_in, B, C, HW, mean, sd);
    o->busy_end(be);
    o->stage_release(be, 0);
    double busy = o->busy_take(be);
    fake_clock(&c1);
    double compute_s = (c1.compute_ms - c0.compute_ms) / 1000.0;
    cr_expect(fabs(busy - 0.001) < 1e-4, "busy %.4f s: one 1 ms kernel, not the 3 ms copy", busy);
    cr_expect(fabs(busy - compute_s) < 1e-4, "busy %.4f s, compute engine %.4f s", busy, compute_s);
    expect_normalized(be, d_out, host, "normalised batch");
    o->host_unpin(be, host);
    o->free(be, d_in), o->free(be, d_out);
    free(host);
    gt_done(be);
}
