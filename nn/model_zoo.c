/* model_zoo.c — the nets `--model` knows, their default hyper-parameters,
 * and the learning-rate schedules.
 *
 *   probe    E1's "model": one C->C 3x3 convolution (channels follow the
 *            data), global average pool, fc to the classes. The cheapest net
 *            with a real backward pass, so the loader dominates.
 *   lenet    E2's net: conv 20@5x5 relu, pool, conv 50@5x5 relu, pool,
 *            fc 512 relu, fc classes.
 *   convnet  for 64x64 RGB crops: three conv3x3(pad 1)-relu-pool blocks of
 *            32, 64, 128 filters, global average pool, fc classes.
 *
 * Defaults: lenet's (lr 0.01, momentum 0.95, wd 5e-4, cosine) reach 0.897 to
 * 0.902 Fashion-MNIST test accuracy after 3 epochs at batch 64 (seeds 1-3,
 * docs/BENCH-NN.md has the runs and the sweep they were picked from); the
 * others are the usual SGD-with-momentum settings for small nets.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>

#include "model_defs.h"

#define CONV(k, r, stride, pad) {LAYER_CONV, k, r, stride, pad}
#define RELU {LAYER_RELU, 0, 0, 0, 0}
#define POOL {LAYER_MAXPOOL, 0, 0, 0, 0}
#define FLATTEN {LAYER_FLATTEN, 0, 0, 0, 0}
#define GAP {LAYER_GAP, 0, 0, 0, 0}
#define FC(n) {LAYER_FC, n, 0, 0, 0}

static const layer_spec probe_layers[] = {CONV(0, 3, 1, 1), GAP, FC(0)};
/* "conv relu pool" runs as conv, pool, relu: max pooling commutes with relu
 * (max of relus = relu of max, and the gradient reaches the same element,
 * or nothing when the maximum is <= 0), so the outputs and gradients are
 * the same bits, and relu touches a quarter of the elements. */
static const layer_spec lenet_layers[] = {CONV(20, 5, 1, 0), POOL,    RELU,    CONV(50, 5, 1, 0), POOL,
                                          RELU,              FLATTEN, FC(512), RELU,              FC(0)};
static const layer_spec convnet_layers[] = {CONV(32, 3, 1, 1), POOL, RELU, CONV(64, 3, 1, 1), POOL, RELU,
                                            CONV(128, 3, 1, 1), POOL, RELU, GAP, FC(0)};

#define N_OF(a) (int)(sizeof(a) / sizeof((a)[0]))

static const model_def defs[] = {
    {"probe", "one CxC 3x3 conv, global avg pool, fc: the loader dominates (E1)", probe_layers,
     N_OF(probe_layers), {0.01, 0.9, 0.0, LR_CONST}},
    {"lenet", "conv20@5 relu pool conv50@5 relu pool fc512 relu fc (E2)", lenet_layers, N_OF(lenet_layers),
     {0.01, 0.95, 5e-4, LR_COSINE}},
    {"convnet", "3 x (conv3x3 relu pool) 32-64-128, global avg pool, fc: 64x64 RGB crops", convnet_layers,
     N_OF(convnet_layers), {0.02, 0.9, 5e-4, LR_COSINE}},
};

static const char *const names[] = {"probe", "lenet", "convnet", NULL};

const model_def *model_def_find(const char *name)
{
    for (int i = 0; i < N_OF(defs); i++)
        if (strcmp(defs[i].name, name) == 0)
            return &defs[i];
    return NULL;
}

const char *const *model_names(void)
{
    return names;
}

int model_defaults(const char *name, model_hparams *hp)
{
    const model_def *d = model_def_find(name);
    if (!d)
        return -1;
    *hp = d->hp;
    return 0;
}

/* ---------------------------------------------------------------- lr schedules */
double lr_at(lr_schedule sched, double base_lr, int epoch, int epochs, long step, long steps_per_epoch)
{
    if (epochs < 1)
        epochs = 1;
    switch (sched) {
    case LR_STEP:
        if (4 * epoch >= 3 * epochs)
            return base_lr * 0.01;
        if (2 * epoch >= epochs)
            return base_lr * 0.1;
        return base_lr;
    case LR_COSINE: {
        const double pi = 3.14159265358979323846;
        if (steps_per_epoch < 1)
            steps_per_epoch = 1;
        double t = ((double)epoch * steps_per_epoch + step) / ((double)epochs * steps_per_epoch);
        if (t > 1.0)
            t = 1.0;
        return base_lr * 0.5 * (1.0 + cos(pi * t));
    }
    case LR_CONST:
    default:
        return base_lr;
    }
}

int lr_schedule_parse(const char *s, lr_schedule *out)
{
    static const char *const n[] = {"const", "step", "cosine"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, n[i]) == 0) {
            *out = (lr_schedule)i;
            return 0;
        }
    return -1;
}

const char *lr_schedule_name(lr_schedule s)
{
    switch (s) {
    case LR_STEP:
        return "step";
    case LR_COSINE:
        return "cosine";
    case LR_CONST:
    default:
        return "const";
    }
}
