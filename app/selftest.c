/* selftest.c — `train --selftest`: does this GPU compute what the CPU
 * computes? (see selftest.h)
 *
 * Every op of the GPU backend on a tiny net's shapes with random inputs,
 * compared with the CPU backend — the twin users already trust — on the
 * same inputs (twin.h) at rtol 1e-4; the staging path training with --pin
 * --non-blocking uses (page-locked buffer, copy stream, events, busy
 * timing); then lenet trained a few steps on both from the same start,
 * per-step loss and final parameters at rtol 1e-3. One line per check,
 * then a verdict.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "app/selftest.h"

#include "common/rng.h"
#include "cpu/cpu.h"
#include "image/image.h"
#include "nn/provider.h"
#include "nn/twin.h"

typedef struct selftest_tally {
    FILE *out;
    int checks, fails;
} selftest_tally;

static void line_ok(selftest_tally *s, const char *what, const char *how)
{
    s->checks++;
    fprintf(s->out, "selftest: %-44s ok    (%s)\n", what, how);
}

static void report(void *arg, const twin_check *c)
{
    selftest_tally *s = arg;
    size_t worst = 0;
    double r = twin_judge(c, &worst);
    if (r <= 1.0) {
        char how[64];
        const char *kind = c->measure == TWIN_ELEMENTWISE ? "worst error"
                           : c->n > 1                     ? "norm error"
                                                          : "error";
        snprintf(how, sizeof how, "%s %.2g of tolerance", kind, r);
        line_ok(s, c->what, how);
        return;
    }
    s->checks++;
    s->fails++;
    fprintf(s->out,
            "selftest: %-44s FAIL  %.3g x the tolerance; element %zu of %zu: gpu %.9g, cpu %.9g\n",
            c->what, r, worst, c->n, (double)c->dev[worst], (double)c->ref[worst]);
}

static void check_staging(twin *t, selftest_tally *s)
{
    double busy;
    char note[256];
    if (twin_staging(t, 4, 3, 64, &busy, note, sizeof note) != 0)
        return;
    if (note[0])
        fprintf(s->out, "selftest: note: %s; the staging check ran on pageable memory\n", note);
    if (busy >= 0.0) {
        char how[64];
        snprintf(how, sizeof how, "%.3f ms", busy * 1e3);
        line_ok(s, "compute-busy timing from events", how);
    } else {
        s->checks++;
        s->fails++;
        fprintf(s->out, "selftest: %-44s FAIL  negative time %g s\n",
                "compute-busy timing from events", busy);
    }
}

/* lenet on 28x28 noise: the ops composed by the real model code, with the
 * updates feeding back, on both backends */
static void check_training(twin *t, selftest_tally *s)
{
    enum { N = 24, B = 8, STEPS = 5 };
    twin_data d = {.n = N, .C = 1, .H = 28, .W = 28, .nclasses = 10};
    uint8_t *x = xmalloc((size_t)N * 28 * 28);
    int32_t *y = xmalloc(N * sizeof *y);
    rng r = rng_keyed(20240611, RNG_TOOL, 8, 0);
    for (size_t i = 0; i < (size_t)N * 28 * 28; i++)
        x[i] = (uint8_t)rng_below(&r, 256);
    for (int i = 0; i < N; i++)
        y[i] = (int32_t)rng_below(&r, 10);
    d.x = x;
    d.labels = y;
    errbuf e;
    if (twin_train(t, "lenet", &d, B, STEPS, 1, &e) != 0) {
        s->checks++;
        s->fails++;
        fprintf(s->out, "selftest: lenet training FAIL  %s\n", e.msg);
    }
    free(x);
    free(y);
}

int selftest_run(backend *be, FILE *out)
{
    errbuf e;
    backend *cpu = backend_cpu_create(1, &e);
    if (!cpu) {
        fprintf(out, "selftest: cannot start the CPU backend: %s\n", e.msg);
        return 2;
    }
    selftest_tally s = {.out = out};
    twin t = {.dev = be,
              .ref = cpu,
              .r = rng_keyed(20240611, RNG_TOOL, 7, 0),
              .report = report,
              .arg = &s};
    fprintf(out,
            "selftest: each GPU op against the CPU backend on the same random inputs (rtol %.0e), "
            "then lenet trained on both (rtol %.0e)\n",
            TWIN_RTOL_OP, TWIN_RTOL_TRAIN);
    twin_normalize(&t, 4, 3, 50);
    twin_conv(&t, 3, 2, 8, 8, 4, 3, 3, 1, 1, 1);
    twin_conv(&t, 2, 3, 11, 9, 5, 5, 5, 2, 0, 1);
    twin_conv(&t, 4, 1, 28, 28, 20, 5, 5, 1, 0, 0);
    twin_relu(&t, 1000);
    twin_maxpool(&t, 3, 4, 9, 10, 0);
    twin_maxpool(&t, 2, 3, 8, 8, 1);
    twin_fc(&t, 6, 50, 10, 1);
    twin_fc(&t, 4, 800, 33, 0);
    twin_gap(&t, 5, 3, 7);
    twin_maxpool_k(&t, 2, 3, 9, 9, 3, 2, 1);
    twin_bn(&t, 4, 3, 25);
    twin_add(&t, 1000);
    twin_softmax_xent(&t, 5, 10, 80.0f);
    twin_sgd(&t, 1000, 2, 0.1f, 0.9f, 5e-4f);
    check_staging(&t, &s);
    check_training(&t, &s);
    cpu->ops->destroy(cpu);
    if (s.fails)
        fprintf(out,
                "selftest: FAIL: %d of %d checks differ from the CPU backend; this GPU setup "
                "computes wrong results\n",
                s.fails, s.checks);
    else
        fprintf(out, "selftest: PASS: %d checks, the GPU matches the CPU backend\n", s.checks);
    return s.fails ? 1 : 0;
}

int selftest_main(FILE *out)
{
    const backend_provider *p = backend_provider_find("cuda");
    if (!p) {
        fprintf(out, "selftest: this train was built without CUDA; nothing to test\n");
        return 2;
    }
    provider_device d;
    errbuf e;
    if (p->probe(0, &d, &e) != 0) {
        fprintf(out, "selftest: no usable GPU: %s\n", e.msg);
        return 2;
    }
    fprintf(out, "selftest: device 0: %s\n", d.desc);
    fprintf(out, "selftest: images: %s\n", img_decoder_versions());
    backend *be = p->create(&d, &e);
    if (!be) {
        fprintf(out, "selftest: cannot start the GPU backend: %s\n", e.msg);
        return 2;
    }
    int rc = selftest_run(be, out);
    be->ops->destroy(be);
    return rc;
}
