/* test_nn_model.c — the models: shapes, parameter counts and FLOPs worked
 * out by hand, He init statistics, one SGD step against the formula, lr
 * schedules, step statistics, NaN detection, thread-count independence of
 * whole training runs, and learning on a synthetic task. */
#define _GNU_SOURCE
#include <stdio.h>

#include "tests/support/nn_fixtures.h"

TestSuite(nn_model);

static void create_ok(model *m, const char *name, int C, int H, int W, int K, int B, backend *be)
{
    errbuf e = {{0}};
    cr_assert_eq(model_create(m, name, C, H, W, K, B, be, &e), 0, "%s", e.msg);
}

static const model_tensor *tensor(const model *m, const char *name)
{
    for (int i = 0; i < m->ntensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    cr_assert_fail("no tensor %s", name);
    return NULL;
}

Test(nn_model, lenet_shapes_params_flops)
{
    backend *be = cpu_backend(1);
    model m;
    create_ok(&m, "lenet", 1, 28, 28, 10, 64, be);
    /* conv1 20x1x5x5+20, conv2 50x20x5x5+50, fc1 512x800+512, fc2 10x512+10 */
    cr_assert_eq(m.nparams_used, 520 + 25050 + 410112 + 5130);
    cr_assert_eq(m.ntensors, 8);
    const model_tensor *t = tensor(&m, "conv2.weight");
    cr_assert(t->ndim == 4 && t->shape[0] == 50 && t->shape[1] == 20 && t->shape[2] == 5 &&
              t->shape[3] == 5);
    t = tensor(&m, "fc1.weight");
    cr_assert(t->ndim == 2 && t->shape[0] == 512 && t->shape[1] == 800);
    for (int i = 0; i < m.ntensors; i++) {
        cr_assert_eq(m.tensors[i].offset % 16, 0, "%s not 64-byte aligned", m.tensors[i].name);
        if (i)
            cr_assert_geq(m.tensors[i].offset, m.tensors[i - 1].offset + m.tensors[i - 1].n);
    }
    cr_assert_geq(m.nparams, m.nparams_used);
    /* 2 x MACs: 20*25*576 + 50*500*64 + 800*512 + 512*10 */
    cr_assert_eq((long)m.flops, 2L * (288000 + 1600000 + 409600 + 5120));
    /* conv pool relu (= conv relu pool, see model_zoo.c), twice; flatten, fc relu fc */
    int want[10][3] = {{20, 24, 24}, {20, 12, 12}, {20, 12, 12}, {50, 8, 8},  {50, 4, 4},
                       {50, 4, 4},   {800, 1, 1},  {512, 1, 1},  {512, 1, 1}, {10, 1, 1}};
    cr_assert_eq(m.nlayers, 10);
    for (int i = 0; i < 10; i++)
        cr_assert(m.layers[i].out_c == want[i][0] && m.layers[i].out_h == want[i][1] &&
                      m.layers[i].out_w == want[i][2],
                  "layer %d: %dx%dx%d", i, m.layers[i].out_c, m.layers[i].out_h, m.layers[i].out_w);
    model_free(&m);
    be->ops->destroy(be);
}

Test(nn_model, probe_and_convnet_shapes)
{
    backend *be = cpu_backend(1);
    model m;
    create_ok(&m, "probe", 3, 64, 64, 10, 100, be);
    /* one 3->3 3x3 conv (84), gap, fc 3->10 (40) */
    cr_assert_eq(m.nparams_used, 84 + 40);
    cr_assert_eq((long)m.flops, 2L * (3 * 27 * 4096 + 30));
    model_free(&m);
    create_ok(&m, "probe", 1, 28, 28, 10, 8, be); /* channels follow the data */
    cr_assert_eq(tensor(&m, "conv1.weight")->shape[0], 1);
    model_free(&m);
    create_ok(&m, "convnet", 3, 64, 64, 7, 100, be);
    cr_assert_eq(m.nparams_used, 896 + 18496 + 73856 + 128 * 7 + 7);
    cr_assert_eq(m.layers[m.nlayers - 2].out_c, 128); /* global average loader */
    model_free(&m);
    be->ops->destroy(be);
}

Test(nn_model, creation_errors)
{
    backend *be = cpu_backend(1);
    model m;
    errbuf e = {{0}};
    cr_assert_eq(model_create(&m, "resnet", 1, 28, 28, 10, 8, be, &e), -1);
    cr_assert_str_eq(e.msg, "--model resnet: unknown (try --model list)");
    cr_assert_eq(model_create(&m, "lenet", 1, 12, 12, 10, 8, be, &e), -1);
    cr_assert(strstr(e.msg, "input 1x12x12 is too small") != NULL, "%s", e.msg);
    cr_assert_eq(model_create(&m, "lenet", 1, 28, 28, 1, 8, be, &e), -1);
    cr_assert(strstr(e.msg, "1 classes") != NULL, "%s", e.msg);
    cr_assert_eq(model_create(&m, "convnet", 3, 64, 64, 10, 0, be, &e), -1);
    cr_assert(strstr(e.msg, "batch size 0") != NULL, "%s", e.msg);
    be->ops->destroy(be);
}

Test(nn_model, list_prints_every_model)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    model_print_list(f, 1, 28, 28, 10, NULL);
    fclose(f);
    cr_assert(strstr(buf, "probe") && strstr(buf, "convnet"), "%s", buf);
    cr_assert(strstr(buf, "lenet       440812 params      4.61 MFLOP") != NULL, "%s", buf);
    free(buf);
    f = open_memstream(&buf, &len);
    model_print_list(f, 1, 8, 8, 10, NULL); /* too small for lenet */
    fclose(f);
    cr_assert(strstr(buf, "lenet     does not fit") != NULL, "%s", buf);
    free(buf);
}

/* With a backend that names its algorithms (the CPU's), each model's line
 * is followed by its convolutions' algorithms in layer order: resnet20 at
 * 1x28x28 starts with its stem (one channel in: im2col, 784 pixels: dw
 * by col . dout^T on any CPU) and its runs add up to its conv layers. */
Test(nn_model, list_names_each_convs_algorithms)
{
    backend *be = cpu_backend(1);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    model_print_list(f, 1, 28, 28, 10, be);
    fclose(f);
    cr_assert(strstr(buf, "\n(cpu convs: ") != NULL, "%s", buf);
    const char *line = strstr(buf, "\n  resnet20 ");
    cr_assert(line, "%s", buf);
    line = strstr(line + 1, "\n            cpu convs: ");
    cr_assert(line, "%s", buf);
    line += strlen("\n            cpu convs: ");
    cr_assert_eq(strncmp(line, "gemm/gemm/gemm-t, ", 18), 0, "%.80s", line);
    int nconv = 0;
    for (const char *p = line; *p && *p != '\n';) {
        int n = 1, used = 0;
        if (sscanf(p, "%d x %n", &n, &used) == 1 && used > 0)
            p += used;
        nconv += n;
        p += strcspn(p, ",\n");
        p += *p == ',' ? 2 : 0;
    }
    model m;
    create_ok(&m, "resnet20", 1, 28, 28, 10, 1, be);
    int want = 0;
    for (int i = 0; i < m.nlayers; i++)
        want += m.layers[i].kind == LAYER_CONV;
    cr_assert_eq(nconv, want, "%d convs in the line, %d in resnet20", nconv, want);
    model_free(&m);
    free(buf);
    be->ops->destroy(be);
}

Test(nn_model, he_init_statistics)
{
    backend *be = cpu_backend(1);
    model m, m2;
    create_ok(&m, "lenet", 1, 28, 28, 10, 4, be);
    create_ok(&m2, "lenet", 1, 28, 28, 10, 4, be);
    model_init_params(&m, 7);
    model_init_params(&m2, 7);
    cr_assert_eq(memcmp(m.params, m2.params, m.nparams * 4), 0, "same seed, same parameters");
    model_init_params(&m2, 8);
    cr_assert_neq(memcmp(m.params, m2.params, m.nparams * 4), 0);
    for (int i = 0; i < m.ntensors; i++) {
        const model_tensor *t = &m.tensors[i];
        const float *p = m.params + t->offset;
        if (t->ndim == 1) {
            for (size_t j = 0; j < t->n; j++)
                cr_assert_eq(p[j], 0.0f, "%s is not zero", t->name);
            continue;
        }
        double sum = 0, sq = 0, fan_in = (double)t->n / t->shape[0], sd = sqrt(2.0 / fan_in);
        for (size_t j = 0; j < t->n; j++) {
            sum += p[j];
            sq += (double)p[j] * p[j];
        }
        double mean = sum / t->n, var = sq / t->n - mean * mean;
        /* within 5 standard errors of N(0, 2/fan_in) */
        cr_assert(fabs(mean) < 5 * sd / sqrt((double)t->n), "%s mean %g", t->name, mean);
        cr_assert(fabs(var / (sd * sd) - 1) < 5 * sqrt(2.0 / t->n), "%s var %g, want %g", t->name,
                  var, sd * sd);
    }
    for (size_t j = 0; j < m.nparams; j++)
        cr_assert_eq(m.momentum[j], 0.0f);
    model_free(&m);
    model_free(&m2);
    be->ops->destroy(be);
}

/* The cancellation hook (backend.cancel): a set flag makes every kind of
 * step return MODEL_STEP_CANCELLED and leaves parameters and momentum as
 * they were; cleared, the same model steps normally. */
Test(nn_model, cancelled_backend_stops_the_step_without_an_update)
{
    for (int threads = 1; threads <= 2; threads++) {
        backend *be = cpu_backend(threads);
        volatile sig_atomic_t flag = 1;
        be->cancel = &flag;
        model m;
        create_ok(&m, "lenet", 1, 28, 28, 10, 16, be);
        model_init_params(&m, 1);
        nn_set s;
        synth_set(&s, 16, 1, 28, 28, 10, 1);
        float *w = download_floats(be, m.params, m.nparams);
        step_stats st = {0};
        cr_assert_eq(model_train_step(&m, s.x, s.y, 16, 0.1f, 0.9f, 0, &st), MODEL_STEP_CANCELLED);
        cr_assert_eq(model_forward_backward(&m, s.x, s.y, 16, &st), MODEL_STEP_CANCELLED);
        cr_assert_eq(model_eval_step(&m, s.x, s.y, 16, &st), MODEL_STEP_CANCELLED);
        cr_assert_eq(st.n, 0, "stats are not filled");
        for (size_t i = 0; i < m.nparams; i++) {
            cr_assert_eq(m.params[i], w[i], "params[%zu] changed", i);
            cr_assert_eq(m.momentum[i], 0.0f, "momentum[%zu] changed", i);
        }
        flag = 0;
        cr_assert_eq(model_train_step(&m, s.x, s.y, 16, 0.1f, 0.9f, 0, &st), MODEL_STEP_OK);
        cr_assert_eq(st.n, 16);
        free(w);
        nn_set_free(&s);
        model_free(&m);
        be->ops->destroy(be);
    }
}

Test(nn_model, sgd_step_is_the_formula)
{
    backend *be = cpu_backend(2);
    model m;
    create_ok(&m, "lenet", 1, 28, 28, 10, 16, be);
    model_init_params(&m, 1);
    nn_set s;
    synth_set(&s, 16, 1, 28, 28, 10, 1);
    step_stats st;
    float lr = 0.05f, mom = 0.9f, wd = 1e-3f;
    /* two steps, so momentum is non-zero in the second */
    cr_assert_eq(model_train_step(&m, s.x, s.y, 16, lr, mom, wd, &st), 0);
    float *w = download_floats(be, m.params, m.nparams),
          *v = download_floats(be, m.momentum, m.nparams);
    cr_assert_eq(model_forward_backward(&m, s.x, s.y, 16, &st), 0);
    float *g = download_floats(be, m.grads, m.nparams);
    model_sgd_step(&m, lr, mom, wd);
    for (size_t i = 0; i < m.nparams; i++) {
        float vn = mom * v[i] + (g[i] + wd * w[i]);
        cr_assert_eq(m.momentum[i], vn, "v[%zu]", i);
        cr_assert_eq(m.params[i], w[i] - lr * vn, "w[%zu]", i);
    }
    free(w), free(v), free(g);
    nn_set_free(&s);
    model_free(&m);
    be->ops->destroy(be);
}

Test(nn_model, lr_schedules)
{
    cr_assert_eq(lr_at(LR_CONST, 0.1, 3, 10, 5, 100), 0.1);
    /* step: x0.1 from 50% of the epochs, x0.01 from 75% */
    cr_assert_eq(lr_at(LR_STEP, 0.1, 4, 10, 99, 100), 0.1);
    cr_assert(fabs(lr_at(LR_STEP, 0.1, 5, 10, 0, 100) - 0.01) < 1e-15);
    cr_assert(fabs(lr_at(LR_STEP, 0.1, 7, 10, 0, 100) - 0.01) < 1e-15);
    cr_assert(fabs(lr_at(LR_STEP, 0.1, 8, 10, 0, 100) - 0.001) < 1e-15);
    cr_assert_eq(lr_at(LR_STEP, 0.1, 0, 1, 50, 100), 0.1);
    /* cosine: full at the start, half way at the middle, near 0 at the end */
    cr_assert_eq(lr_at(LR_COSINE, 0.2, 0, 4, 0, 50), 0.2);
    cr_assert(fabs(lr_at(LR_COSINE, 0.2, 2, 4, 0, 50) - 0.1) < 1e-12);
    double last = lr_at(LR_COSINE, 0.2, 3, 4, 49, 50);
    cr_assert(last > 0 && last < 1e-4, "%g", last);
    cr_assert(lr_at(LR_COSINE, 0.2, 1, 4, 10, 50) < lr_at(LR_COSINE, 0.2, 1, 4, 9, 50));
    lr_schedule sc;
    cr_assert_eq(lr_schedule_parse("cosine", &sc), 0);
    cr_assert_eq(sc, LR_COSINE);
    cr_assert_eq(lr_schedule_parse("step", &sc), 0);
    cr_assert_eq(sc, LR_STEP);
    cr_assert_eq(lr_schedule_parse("linear", &sc), -1);
    cr_assert_str_eq(lr_schedule_name(LR_CONST), "const");
    model_hparams hp;
    cr_assert_eq(model_defaults("lenet", &hp), 0);
    cr_assert(hp.lr > 0 && hp.momentum >= 0 && hp.wd >= 0);
    cr_assert_eq(model_defaults("nope", &hp), -1);
}

Test(nn_model, step_stats_and_eval)
{
    backend *be = cpu_backend(2);
    model m;
    create_ok(&m, "probe", 3, 12, 12, 4, 10, be);
    model_init_params(&m, 2);
    nn_set s;
    synth_set(&s, 10, 3, 12, 12, 4, 2);
    float *before = download_floats(be, m.params, m.nparams);
    step_stats st;
    cr_assert_eq(model_eval_step(&m, s.x, s.y, 7, &st), 0);
    cr_assert_eq(memcmp(before, m.params, m.nparams * 4), 0, "eval changed the parameters");
    cr_assert_eq(st.n, 7);
    /* loss_sum and correct are the per-sample values summed in order */
    double sum = 0;
    long correct = 0;
    for (int b = 0; b < 7; b++) { /* device memory is host memory on the CPU */
        sum += (double)m.loss[b];
        correct += m.pred[b] == s.y[b];
        cr_assert(m.loss[b] > 0);
    }
    cr_assert_eq(st.loss_sum, sum);
    cr_assert_eq(st.correct, correct);
    cr_assert_eq(st.nonfinite, 0);
    /* a different batch size than max_batch, then max_batch again */
    cr_assert_eq(model_train_step(&m, s.x, s.y, 10, 0.01f, 0.9f, 0, &st), 0);
    cr_assert_neq(memcmp(before, m.params, m.nparams * 4), 0);
    step_stats a = {.loss_sum = 1, .correct = 2, .n = 3},
               b = {.loss_sum = 0.5, .correct = 1, .n = 1, .nonfinite = 1};
    step_stats_add(&a, &b);
    cr_assert(a.loss_sum == 1.5 && a.correct == 3 && a.n == 4 && a.nonfinite == 1);
    free(before);
    nn_set_free(&s);
    model_free(&m);
    be->ops->destroy(be);
}

/* The pipelined steps of the training loop: results taken late, in order,
 * with their tags, equal to the synchronous steps' bit for bit. */
Test(nn_model, enqueued_steps_give_the_synchronous_numbers)
{
    backend *be = cpu_backend(2);
    model a, b;
    create_ok(&a, "probe", 3, 12, 12, 4, 10, be);
    create_ok(&b, "probe", 3, 12, 12, 4, 10, be);
    model_init_params(&a, 5);
    model_init_params(&b, 5);
    nn_set s;
    synth_set(&s, 10, 3, 12, 12, 4, 3);
    step_stats sync[4], late[4];
    int B[4] = {10, 7, 10, 4};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(i == 3 ? model_eval_step(&a, s.x, s.y, B[i], &sync[i])
                            : model_train_step(&a, s.x, s.y, B[i], 0.05f, 0.9f, 1e-4f, &sync[i]),
                     MODEL_STEP_OK);
    step_stats st;
    step_tag tag;
    model_batch mb[4];
    for (int i = 0; i < 4; i++)
        mb[i] = (model_batch){.x = s.x, .labels = s.y, .B = B[i]};
    cr_assert_eq(model_results_take(&b, 1, &st, &tag), 0, "nothing pending");
    cr_assert_eq(model_train_enqueue(&b, &mb[0], 0.05f, 0.9f, 1e-4f, (step_tag){7, 100, 0.5}),
                 MODEL_STEP_OK);
    cr_assert_eq(model_train_enqueue(&b, &mb[1], 0.05f, 0.9f, 1e-4f, (step_tag){7, 101, 0.5}),
                 MODEL_STEP_OK);
    cr_assert_eq(model_results_pending(&b), MODEL_RESULTS_MAX);
    int got = 0;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(model_results_take(&b, 0, &late[got], &tag), 1, "the CPU is done at once");
        cr_assert_eq(tag.batch, 100 + got, "oldest first");
        cr_assert_eq(tag.pass, 7, "the caller's tag comes back whole");
        cr_assert_eq(tag.lr, 0.5);
        got++;
    }
    cr_assert_eq(model_train_enqueue(&b, &mb[2], 0.05f, 0.9f, 1e-4f, (step_tag){8, 102, 0.25}),
                 MODEL_STEP_OK);
    cr_assert_eq(model_eval_enqueue(&b, &mb[3], (step_tag){9, 103, 0}), MODEL_STEP_OK);
    while (model_results_take(&b, 1, &late[got], &tag)) {
        cr_assert_eq(tag.batch, 100 + got);
        cr_assert_eq(tag.pass, got == 2 ? 8 : 9);
        got++;
    }
    cr_assert_eq(got, 4);
    for (int i = 0; i < 4; i++) {
        cr_expect_eq(late[i].loss_sum, sync[i].loss_sum, "step %d", i);
        cr_expect_eq(late[i].correct, sync[i].correct, "step %d", i);
        cr_expect_eq(late[i].n, B[i], "step %d", i);
    }
    cr_expect_eq(memcmp(a.params, b.params, a.nparams * sizeof(float)), 0);
    nn_set_free(&s);
    model_free(&a);
    model_free(&b);
    be->ops->destroy(be);
}

Test(nn_model, nan_loss_is_reported)
{
    backend *be = cpu_backend(1);
    model m;
    create_ok(&m, "probe", 1, 8, 8, 3, 4, be);
    model_init_params(&m, 2);
    nn_set s;
    synth_set(&s, 4, 1, 8, 8, 3, 3);
    m.params[tensor(&m, "fc1.bias")->offset] = NAN;
    step_stats st;
    cr_assert_eq(model_train_step(&m, s.x, s.y, 4, 0.1f, 0.9f, 0, &st), 1);
    cr_assert_eq(st.nonfinite, 4);
    cr_assert(isnan(st.loss_sum));
    char msg[128];
    cr_assert_str_eq(model_nonfinite_msg(msg, sizeof msg, 3, 17, st.loss_sum, 0.1),
                     "epoch 3 batch 17: loss is nan (lr 0.1)");
    cr_assert_str_eq(model_nonfinite_msg(msg, sizeof msg, 1, 0, INFINITY, 2.5),
                     "epoch 1 batch 0: loss is inf (lr 2.5)");
    nn_set_free(&s);
    model_free(&m);
    be->ops->destroy(be);
}

/* A whole training run gives the same bits with 1, 2 and 3 threads: the
 * invariant that makes --workers and --threads irrelevant to the result. */
Test(nn_model, training_is_bit_identical_across_thread_counts)
{
    nn_set s;
    synth_set(&s, 200, 1, 28, 28, 10, 4);
    float *ref = NULL;
    double ref_loss = 0;
    for (int t = 1; t <= 3; t++) {
        backend *be = cpu_backend(t);
        model m;
        create_ok(&m, "lenet", 1, 28, 28, 10, 64, be);
        model_init_params(&m, 11);
        double loss = run_epoch(&m, &s, 200, 64, 0.05f, 0.9f, 5e-4f, NULL);
        if (t == 1) {
            ref = download_floats(be, m.params, m.nparams);
            ref_loss = loss;
        } else {
            cr_assert_eq(loss, ref_loss, "loss with %d threads: %.17g vs %.17g", t, loss, ref_loss);
            cr_assert_eq(memcmp(ref, m.params, m.nparams * 4), 0,
                         "parameters differ with %d threads", t);
        }
        model_free(&m);
        be->ops->destroy(be);
    }
    free(ref);
    nn_set_free(&s);
}

/* the gradient of one training step with lr 0 (the parameters stay, the
 * gradient is left in m->grads) over chunks size[0..n) of s's first samples */
static float *chunk_gradient(model *m, const nn_set *s, int first, const int *size, int n,
                             int global)
{
    size_t px = (size_t)s->C * s->H * s->W;
    model_batch b = {.x = s->x + (size_t)first * px, .labels = s->y + first};
    for (int i = 0; i < n; i++)
        b.B += b.split.chunk[i] = size[i];
    b.split.nchunks = n;
    b.split.global_batch = global;
    step_stats st;
    cr_assert_eq(model_train_batch(m, &b, 0.0f, 0.0f, 0.0f, &st), MODEL_STEP_OK);
    return download_floats(m->be, m->grads, m->nparams);
}

/* Batch norm makes the backend's groups unfit (model_groups_cheap), so
 * chunks run a pass each and are summed as a tree: the gradient over
 * chunks {3, 5} is, bit for bit, the sum of each chunk's gradient alone. */
Test(nn_model, chunks_of_a_batch_norm_net_sum_as_a_tree)
{
    nn_set s;
    synth_set(&s, 8, 3, 16, 16, 10, 5);
    backend *be = cpu_backend(2);
    model m;
    create_ok(&m, "resnet8", 3, 16, 16, 10, 8, be);
    model_init_params(&m, 3);
    cr_assert_eq(model_groups_cheap(&m), 0, "batch norm: no groups");
    int both[2] = {3, 5};
    float *all = chunk_gradient(&m, &s, 0, both, 2, 8);
    float *left = chunk_gradient(&m, &s, 0, both, 1, 8);
    float *right = chunk_gradient(&m, &s, 3, both + 1, 1, 8);
    size_t differ = 0;
    for (size_t i = 0; i < m.nparams; i++)
        differ += all[i] != left[i] + right[i];
    cr_assert_eq(differ, 0, "%zu of %zu gradients are not left + right", differ, m.nparams);
    free(all), free(left), free(right);
    model_free(&m);
    be->ops->destroy(be);
    nn_set_free(&s);
}

Test(nn_model, lenet_on_the_cpu_sums_chunks_in_the_backend)
{
    backend *be = cpu_backend(1);
    model m;
    create_ok(&m, "lenet", 1, 28, 28, 10, 8, be);
    cr_assert_eq(model_groups_cheap(&m), 1);
    model_free(&m);
    be->ops->destroy(be);
}

Test(nn_model, learns_a_synthetic_task)
{
    backend *be = cpu_backend(2);
    nn_set s;
    synth_set(&s, 256, 3, 16, 16, 4, 5);
    model m;
    create_ok(&m, "convnet", 3, 16, 16, 4, 32, be);
    model_init_params(&m, 1);
    double acc0, acc;
    double l0 = run_epoch(&m, &s, 256, 32, 0, 0, 0, &acc0);
    for (int ep = 0; ep < 6; ep++)
        run_epoch(&m, &s, 256, 32, 0.02f, 0.9f, 0, NULL);
    double l1 = run_epoch(&m, &s, 256, 32, 0, 0, 0, &acc);
    cr_assert(l1 < 0.5 * l0, "loss %g -> %g", l0, l1);
    cr_assert(acc > 0.9, "accuracy %g (was %g)", acc, acc0);
    nn_set_free(&s);
    model_free(&m);
    be->ops->destroy(be);
}

/* ---------------------------------------------------------------- overlap buckets */

/* A hook that stands in for a sum over 2 identical ranks: each bucket is
 * copied as it is handed over (it must already be the final gradient) and
 * doubled in place (the doubling must survive: nothing writes the bucket
 * after it was handed over). */
typedef struct bucket_log {
    int calls, waits, reduces;
    size_t off[MODEL_MAX_BUCKETS], n[MODEL_MAX_BUCKETS];
    float *seen; /* nparams: each bucket as it was when handed over */
} bucket_log;

static void log_range(void *ctx, float *grads, size_t off, size_t n)
{
    bucket_log *l = ctx;
    cr_assert_lt(l->calls, MODEL_MAX_BUCKETS);
    cr_assert_eq(l->waits, 0, "a bucket after reduce_wait");
    l->off[l->calls] = off;
    l->n[l->calls++] = n;
    memcpy(l->seen + off, grads + off, n * sizeof(float));
    for (size_t i = off; i < off + n; i++)
        grads[i] *= 2.0f;
}

static void log_wait(void *ctx) { ((bucket_log *)ctx)->waits++; }

static void log_reduce(void *ctx, float *grads, size_t n)
{
    (void)grads, (void)n;
    ((bucket_log *)ctx)->reduces++;
}

/* lenet (tensors in layer order) and resnet8 (weights first, then biases
 * and bn parameters: the first layers' biases lie near the end, so fewer
 * cuts): the buckets cover the slab once, in decreasing offsets, and each
 * is handed over only once backward has written all of it. */
Test(nn_model, gradient_buckets_are_handed_over_once_written)
{
    const char *names[2] = {"lenet", "resnet8"};
    int C[2] = {1, 3}, HW[2] = {28, 16}, min_buckets[2] = {2, 2};
    for (int k = 0; k < 2; k++) {
        nn_set s;
        synth_set(&s, 6, C[k], HW[k], HW[k], 10, 7);
        backend *be = cpu_backend(1);
        model m;
        create_ok(&m, names[k], C[k], HW[k], HW[k], 10, 6, be);
        model_init_params(&m, 5);
        step_stats st;
        cr_assert_eq(model_train_step(&m, s.x, s.y, 6, 0.0f, 0.0f, 0.0f, &st), MODEL_STEP_OK);
        float *ref = download_floats(be, m.grads, m.nparams);

        bucket_log l = {.seen = xcalloc(m.nparams, sizeof(float))};
        int nb = model_plan_buckets(&m, 4);
        cr_assert(nb >= min_buckets[k] && nb <= 4, "%s: %d buckets", names[k], nb);
        m.dist = (model_dist){.reduce = log_reduce,
                              .reduce_range = log_range,
                              .reduce_wait = log_wait,
                              .ctx = &l}; /* B is the whole batch: no split */
        cr_assert_eq(model_plan_buckets(&m, 4), nb);
        cr_assert_eq(model_train_step(&m, s.x, s.y, 6, 0.0f, 0.0f, 0.0f, &st), MODEL_STEP_OK);
        cr_assert_eq(l.calls, nb, "%s", names[k]);
        cr_assert_eq(l.waits, 1);
        cr_assert_eq(l.reduces, 0, "one sum of the whole slab besides the buckets");
        size_t at = m.nparams;
        for (int b = 0; b < nb; b++) {
            cr_assert_eq(l.off[b] + l.n[b], at, "%s: bucket %d does not end where %d began",
                         names[k], b, b - 1);
            cr_assert_gt(l.n[b], 0);
            at = l.off[b];
        }
        cr_assert_eq(at, 0, "%s: the buckets leave [0, %zu) out", names[k], at);
        float *got = download_floats(be, m.grads, m.nparams);
        size_t early = 0, lost = 0;
        for (size_t i = 0; i < m.nparams; i++) {
            early += l.seen[i] != ref[i];
            lost += got[i] != 2.0f * ref[i];
        }
        cr_assert_eq(early, 0, "%s: %zu gradients handed over before backward wrote them", names[k],
                     early);
        cr_assert_eq(lost, 0, "%s: %zu summed gradients overwritten after", names[k], lost);

        /* a rank with an empty slice makes the same calls, on zeros */
        l.calls = l.waits = 0;
        cr_assert_eq(model_train_step(&m, s.x, s.y, 0, 0.0f, 0.0f, 0.0f, &st), MODEL_STEP_OK);
        cr_assert_eq(l.calls, nb);
        cr_assert_eq(l.waits, 1);
        free(got);
        free(ref);
        free(l.seen);
        model_free(&m);
        be->ops->destroy(be);
        nn_set_free(&s);
    }
}
