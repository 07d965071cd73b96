/* test_checkpoint.c — checkpoints on real files: bit-exact round trip,
 * atomic write, truncated / corrupted / mismatched files refused with a
 * message and the model left untouched, and an exact resume (two epochs
 * straight = one epoch, save, load into a fresh model, one epoch). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#include "nn/checkpoint.h"
#include "tests/support/helpers.h"
#include "tests/support/nn_fixtures.h"

static char *dir;
static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }
TestSuite(checkpoint, .init = setup, .fini = teardown);

static const char *const classes10[10] = {"t-shirt", "trouser", "pullover", "dress", "coat",
                                          "sandal",  "shirt",   "sneaker",  "bag",   "ankle-boot"};

static void create_ok(model *m, const char *name, int C, int H, int W, int K, backend *be)
{
    errbuf e = {{0}};
    cr_assert_eq(model_create(m, name, C, H, W, K, 16, be, &e), 0, "%s", e.msg);
}

/* a lenet with non-trivial parameters, momentum and normalisation */
static void trained_lenet(model *m, backend *be)
{
    create_ok(m, "lenet", 1, 28, 28, 10, be);
    model_init_params(m, 5);
    float mean = 0.286f, sd = 0.353f;
    errbuf e;
    cr_assert_eq(model_set_norm(m, &mean, &sd, &e), 0);
    nn_set s;
    synth_set(&s, 32, 1, 28, 28, 10, 9);
    run_epoch(m, &s, 32, 16, 0.05f, 0.9f, 1e-4f, NULL);
    nn_set_free(&s);
}

static const ckpt_state state1 = {.epoch = 3,
                                  .step = 2811,
                                  .seed = 42,
                                  .epochs = 10,
                                  .batch = 64,
                                  .schedule = LR_COSINE,
                                  .lr = 0.02,
                                  .momentum = 0.9,
                                  .wd = 5e-4};

static char *save_ok(const model *m, const char *name)
{
    char *p = path_join(dir, name);
    errbuf e = {{0}};
    cr_assert_eq(checkpoint_save(p, m, classes10, &state1, &e), 0, "%s", e.msg);
    return p;
}

/* load must fail with a message containing the path and `want`, leaving
 * m's parameters, momentum and normalisation as they were */
static void load_refused(const char *path, model *m, const char *const *classes, const char *want)
{
    float *p0 = download_floats(m->be, m->params, m->nparams),
          *v0 = download_floats(m->be, m->momentum, m->nparams);
    float mean0 = m->mean[0];
    ckpt_state st = {0};
    errbuf e = {{0}};
    cr_assert_eq(checkpoint_load(path, m, classes, &st, &e), -1, "loaded a bad file (want: %s)",
                 want);
    cr_assert(strstr(e.msg, path) != NULL, "message does not name the file: %s", e.msg);
    cr_assert(strstr(e.msg, want) != NULL, "message '%s' lacks '%s'", e.msg, want);
    cr_assert_eq(memcmp(p0, m->params, m->nparams * 4), 0, "parameters changed by a refused load");
    cr_assert_eq(memcmp(v0, m->momentum, m->nparams * 4), 0, "momentum changed by a refused load");
    cr_assert_eq(m->mean[0], mean0);
    cr_assert_eq(st.epoch, 0);
    free(p0);
    free(v0);
}

Test(checkpoint, round_trip_is_bit_exact_and_atomic)
{
    backend *be = cpu_backend(2);
    model a, b;
    trained_lenet(&a, be);
    char *p = save_ok(&a, "ck.bin");
    /* the temporary file is gone: the folder holds exactly the checkpoint */
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            cr_assert_str_eq(de->d_name, "ck.bin", "stray file %s", de->d_name);
            n++;
        }
    closedir(d);
    cr_assert_eq(n, 1);

    create_ok(&b, "lenet", 1, 28, 28, 10, be);
    model_init_params(&b, 99);
    ckpt_state st;
    errbuf e = {{0}};
    cr_assert_eq(checkpoint_load(p, &b, classes10, &st, &e), 0, "%s", e.msg);
    cr_assert_eq(memcmp(a.params, b.params, a.nparams * 4), 0);
    cr_assert_eq(memcmp(a.momentum, b.momentum, a.nparams * 4), 0);
    cr_assert_eq(b.mean[0], 0.286f);
    cr_assert_eq(b.std[0], 0.353f);
    cr_assert(st.epoch == 3 && st.step == 2811 && st.seed == 42 && st.epochs == 10 &&
              st.batch == 64 && st.schedule == LR_COSINE && st.lr == 0.02 && st.momentum == 0.9 &&
              st.wd == 5e-4);
    /* and without a class check */
    cr_assert_eq(checkpoint_load(p, &b, NULL, NULL, &e), 0, "%s", e.msg);

    ckpt_info info;
    cr_assert_eq(checkpoint_read_info(p, &info, &e), 0, "%s", e.msg);
    cr_assert_str_eq(info.model, "lenet");
    cr_assert(info.C == 1 && info.H == 28 && info.W == 28 && info.nclasses == 10);
    cr_assert_str_eq(info.classes[9], "ankle-boot");
    cr_assert_eq(info.nparams, a.nparams);
    cr_assert_eq(info.state.step, 2811);
    ckpt_info_free(&info);

    /* saving again replaces the file, still nothing else in the folder */
    cr_assert_eq(checkpoint_save(p, &b, classes10, &state1, &e), 0, "%s", e.msg);
    d = opendir(dir);
    n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    cr_assert_eq(n, 1);
    free(p);
    model_free(&a);
    model_free(&b);
    be->ops->destroy(be);
}

Test(checkpoint, truncated_and_corrupted_files_are_refused)
{
    backend *be = cpu_backend(1);
    model a, b;
    trained_lenet(&a, be);
    char *p = save_ok(&a, "ck.bin");
    size_t len;
    errbuf e;
    char *good = read_whole_file(p, &len, &e);
    cr_assert_not_null(good);
    create_ok(&b, "lenet", 1, 28, 28, 10, be);
    model_init_params(&b, 1);

    size_t cuts[] = {len - 1, len - 100, len / 2, 30, 12};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char *q = write_file(dir, "cut.bin", good, cuts[i]);
        load_refused(q, &b, classes10, "truncated");
        free(q);
    }
    char *q = write_file(dir, "empty.bin", "", 0);
    load_refused(q, &b, classes10, "not a train checkpoint");
    free(q);

    /* a flipped byte anywhere after the header fails the checksum */
    size_t spots[] = {40, len / 3, len - 20, len - 1};
    for (size_t i = 0; i < sizeof spots / sizeof spots[0]; i++) {
        good[spots[i]] ^= 0x10;
        q = write_file(dir, "flip.bin", good, len);
        load_refused(q, &b, classes10, "corrupt (checksum mismatch)");
        free(q);
        good[spots[i]] ^= 0x10;
    }
    good[2] ^= 1;
    q = write_file(dir, "magic.bin", good, len);
    load_refused(q, &b, classes10, "not a train checkpoint");
    free(q);
    good[2] ^= 1;
    good[8] = 7;
    q = write_file(dir, "version.bin", good, len);
    load_refused(q, &b, classes10, "checkpoint version 7");
    free(q);
    /* trailing junk */
    good[8] = CKPT_VERSION;
    char *longer = xmalloc(len + 5);
    memcpy(longer, good, len);
    memcpy(longer + len, "junk!", 5);
    q = write_file(dir, "long.bin", longer, len + 5);
    load_refused(q, &b, classes10, "oversized");
    free(q);
    load_refused("/nonexistent/ck.bin", &b, classes10, "No such file");
    free(longer);
    free(good);
    free(p);
    model_free(&a);
    model_free(&b);
    be->ops->destroy(be);
}

Test(checkpoint, mismatched_model_shape_or_classes_are_refused)
{
    backend *be = cpu_backend(1);
    model a, b;
    trained_lenet(&a, be);
    char *p = save_ok(&a, "ck.bin");

    create_ok(&b, "probe", 1, 28, 28, 10, be);
    load_refused(p, &b, classes10, "checkpoint of model 'lenet', this run's model is 'probe'");
    model_free(&b);
    create_ok(&b, "lenet", 1, 32, 32, 10, be);
    load_refused(p, &b, classes10, "checkpoint for 1x28x28 inputs, this run's are 1x32x32");
    model_free(&b);
    create_ok(&b, "lenet", 3, 28, 28, 10, be);
    load_refused(p, &b, classes10, "checkpoint for 1x28x28 inputs, this run's are 3x28x28");
    model_free(&b);
    create_ok(&b, "lenet", 1, 28, 28, 5, be);
    load_refused(p, &b, classes10, "checkpoint has 10 classes, this run has 5");
    model_free(&b);
    create_ok(&b, "lenet", 1, 28, 28, 10, be);
    const char *other[10];
    memcpy(other, classes10, sizeof other);
    other[4] = "jacket";
    load_refused(p, &b, other, "class 4 is 'coat' in the checkpoint, 'jacket' in this run");
    model_free(&b);
    free(p);

    /* saving: a folder that does not exist, missing class names */
    errbuf e = {{0}};
    cr_assert_eq(checkpoint_save("/nonexistent/dir/ck.bin", &a, classes10, &state1, &e), -1);
    cr_assert(strstr(e.msg, "/nonexistent/dir/ck.bin") != NULL, "%s", e.msg);
    const char *missing[10] = {"a", "b"};
    p = path_join(dir, "x.bin");
    cr_assert_eq(checkpoint_save(p, &a, missing, &state1, &e), -1);
    cr_assert(strstr(e.msg, "class name 2 is missing") != NULL, "%s", e.msg);
    cr_assert_neq(access(p, F_OK), 0, "a failed save left a file");
    free(p);
    model_free(&a);
    be->ops->destroy(be);
}

/* ---------------------------------------------------------------- exact resume */
typedef struct run {
    model m;
    double losses[64];
    long step;
} run;

/* epoch `ep` of a run over s: shuffled by (seed, epoch), lr from the
 * model's cosine schedule over `epochs` */
static void train_epoch(run *r, const nn_set *s, int ep, int epochs, int B)
{
    int n = s->n, steps = (n + B - 1) / B;
    int *perm = xmalloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++)
        perm[i] = i;
    rng g = rng_keyed(42, RNG_SHUFFLE, (uint64_t)ep, 0);
    for (int i = n - 1; i > 0; i--) {
        int k = (int)rng_below(&g, (uint32_t)i + 1), t = perm[i];
        perm[i] = perm[k];
        perm[k] = t;
    }
    size_t px = (size_t)s->C * s->H * s->W;
    uint8_t *x = xmalloc((size_t)B * px);
    int32_t y[64];
    for (int st = 0; st < steps; st++, r->step++) {
        int b = n - st * B < B ? n - st * B : B;
        for (int i = 0; i < b; i++) {
            memcpy(x + i * px, s->x + (size_t)perm[st * B + i] * px, px);
            y[i] = s->y[perm[st * B + i]];
        }
        float lr = (float)lr_at(LR_COSINE, 0.05, ep, epochs, st, steps);
        step_stats ss;
        cr_assert_eq(model_train_step(&r->m, x, y, b, lr, 0.9f, 5e-4f, &ss), 0);
        r->losses[r->step] = ss.loss_sum;
    }
    free(x);
    free(perm);
}

static void resume_check(const char *name, int images)
{
    nn_set s;
    fashion_load(&s, "train", images);
    backend *be = cpu_backend(2);
    errbuf e = {{0}};
    run straight = {0}, resumed = {0};
    cr_assert_eq(model_create(&straight.m, name, 1, 28, 28, 10, 64, be, &e), 0, "%s", e.msg);
    model_init_params(&straight.m, 42);
    train_epoch(&straight, &s, 0, 2, 64);
    train_epoch(&straight, &s, 1, 2, 64);

    cr_assert_eq(model_create(&resumed.m, name, 1, 28, 28, 10, 64, be, &e), 0, "%s", e.msg);
    model_init_params(&resumed.m, 42);
    train_epoch(&resumed, &s, 0, 2, 64);
    char *p = path_join(dir, "resume.bin");
    ckpt_state st = {.epoch = 1,
                     .step = resumed.step,
                     .seed = 42,
                     .epochs = 2,
                     .batch = 64,
                     .schedule = LR_COSINE,
                     .lr = 0.05,
                     .momentum = 0.9,
                     .wd = 5e-4};
    cr_assert_eq(checkpoint_save(p, &resumed.m, classes10, &st, &e), 0, "%s", e.msg);
    double first[64];
    memcpy(first, resumed.losses, sizeof first);
    model_free(&resumed.m);

    /* a fresh model (and backend), as a new process would have */
    backend *be2 = cpu_backend(1);
    run again = {0};
    cr_assert_eq(model_create(&again.m, name, 1, 28, 28, 10, 64, be2, &e), 0, "%s", e.msg);
    model_init_params(&again.m, 7); /* overwritten by the load */
    ckpt_state got;
    cr_assert_eq(checkpoint_load(p, &again.m, classes10, &got, &e), 0, "%s", e.msg);
    memcpy(again.losses, first, sizeof first);
    again.step = got.step;
    cr_assert_eq(got.epoch, 1);
    train_epoch(&again, &s, (int)got.epoch, 2, 64);

    cr_assert_eq(again.step, straight.step);
    for (long i = 0; i < straight.step; i++)
        cr_assert_eq(again.losses[i], straight.losses[i], "step %ld: %.17g vs %.17g", i,
                     again.losses[i], straight.losses[i]);
    cr_assert_eq(memcmp(again.m.params, straight.m.params, straight.m.nparams * 4), 0);
    cr_assert_eq(memcmp(again.m.momentum, straight.m.momentum, straight.m.nparams * 4), 0);
    free(p);
    model_free(&straight.m);
    model_free(&again.m);
    be->ops->destroy(be);
    be2->ops->destroy(be2);
    nn_set_free(&s);
}

Test(checkpoint, resume_is_exact)
{
    resume_check("lenet", 600); /* 10 batches of 64, the last one short */
}

/* batch norm's running statistics travel in the checkpoint (they are
 * tensors of the one parameter array, so the final bit-for-bit comparison
 * covers them), and a resumed resnet trains on exactly as one never
 * stopped */
Test(checkpoint, resume_of_a_resnet_is_exact)
{
    resume_check("resnet8", 200); /* 4 batches, the last one short */
}

/* Version 2 keeps the training data's fingerprint (--resume compares it
 * with the data it is given); a version 1 file, which has none, still
 * loads, saying so (has_data 0). The version 1 file is this one with the
 * fingerprint's 24 bytes cut out, its version, size and checksum redone. */
Test(checkpoint, the_data_fingerprint_is_kept_and_version_1_files_still_load)
{
    backend *be = cpu_backend(1);
    model a, b;
    trained_lenet(&a, be);
    ckpt_state st = state1;
    st.data = (data_fp){.n = 12345, .nclasses = 10, .hash = 0x0123456789abcdefull};
    char *p = path_join(dir, "fp.bin");
    errbuf e = {{0}};
    cr_assert_eq(checkpoint_save(p, &a, classes10, &st, &e), 0, "%s", e.msg);
    ckpt_info info;
    cr_assert_eq(checkpoint_read_info(p, &info, &e), 0, "%s", e.msg);
    cr_assert(info.state.has_data, "a version 2 file has the fingerprint");
    cr_assert(info.state.data.n == 12345 && info.state.data.nclasses == 10 &&
                  info.state.data.hash == 0x0123456789abcdefull,
              "fingerprint read back as %llu %llu %llx", (unsigned long long)info.state.data.n,
              (unsigned long long)info.state.data.nclasses,
              (unsigned long long)info.state.data.hash);
    ckpt_info_free(&info);

    size_t len;
    uint8_t *good = (uint8_t *)read_whole_file(p, &len, &e);
    cr_assert_not_null(good, "%s", e.msg);
    size_t at = len - 8 - 2 * a.nparams * sizeof(float) - 24; /* the fingerprint */
    uint64_t n24;
    memcpy(&n24, good + at, 8);
    cr_assert_eq(n24, 12345, "the fingerprint sits before the parameters");
    uint8_t *old = xmalloc(len - 24);
    memcpy(old, good, at);
    memcpy(old + at, good + at + 24, len - at - 24);
    size_t olen = len - 24;
    uint32_t v1 = 1;
    uint64_t size = olen, sum;
    memcpy(old + 8, &v1, 4);
    memcpy(old + 16, &size, 8);
    sum = hash64(old, olen - 8, 0);
    memcpy(old + olen - 8, &sum, 8);
    char *q = write_file(dir, "v1.bin", old, olen);
    create_ok(&b, "lenet", 1, 28, 28, 10, be);
    ckpt_state got;
    memset(&got, 0xff, sizeof got);
    cr_assert_eq(checkpoint_load(q, &b, classes10, &got, &e), 0, "%s", e.msg);
    cr_assert_eq(got.has_data, 0, "a version 1 file has no fingerprint");
    cr_assert(got.epoch == 3 && got.step == 2811 && got.wd == 5e-4);
    cr_assert_eq(memcmp(a.params, b.params, a.nparams * 4), 0);
    cr_assert_eq(memcmp(a.momentum, b.momentum, a.nparams * 4), 0);
    free(q);
    free(old);
    free(good);
    free(p);
    model_free(&a);
    model_free(&b);
    be->ops->destroy(be);
}
