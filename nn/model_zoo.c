/* model_zoo.c — the nets `--model` knows and their default hyper-parameters
 * (learning-rate schedules are in schedule.c).
 *
 *   probe    E1's "model": one C->C 3x3 convolution (channels follow the
 *            data), global average pool, fc to the classes. The cheapest net
 *            with a real backward pass, so the loader dominates.
 *   lenet    E2's net: conv 20@5x5 relu, pool, conv 50@5x5 relu, pool,
 *            fc 512 relu, fc classes.
 *   convnet  for 64x64 RGB crops: three conv3x3(pad 1)-relu-pool blocks of
 *            32, 64, 128 filters, global average pool, fc classes.
 *   resnet20 the CIFAR ResNet (He et al. 2016, section 4.2) for 32-64 px:
 *            conv3x3 16, bn, relu, then 3 stages of 3 BasicBlocks of 16, 32,
 *            64 channels (the first block of stages 2 and 3 strides by 2 and
 *            takes a 1x1/2 conv + bn shortcut — the paper's option B, as in
 *            resnet18 — the others the identity), global average pool, fc.
 *   resnet8  the same with 1 block per stage: small enough for the
 *            whole-model gradient check of tests/test_gradcheck.c.
 *   resnet18 the ImageNet ResNet-18 (torchvision's layout) for 64-224 px
 *            and anything down to 32: conv7x7/2 64, bn, relu, maxpool 3x3/2
 *            pad 1, 4 stages of 2 BasicBlocks of 64-512 channels (stages
 *            2-4 start with a stride-2 block and a 1x1/2 conv + bn
 *            shortcut), global average pool, fc.
 * A BasicBlock is conv3x3(stride) bn relu conv3x3 bn, plus the shortcut,
 * then relu; convolutions followed by a bn have no bias. The resnets do
 * not decay biases and bn parameters (decay_weights_only), as the
 * reference recipes.
 *
 * Defaults: lenet's (lr 0.01, momentum 0.95, wd 5e-4, cosine) reach 0.897 to
 * 0.902 Fashion-MNIST test accuracy after 3 epochs at batch 64 (seeds 1-3,
 * docs/BENCH-NN.md has the runs and the sweep they were picked from); the
 * others are the usual SGD-with-momentum settings for small nets.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>

#include "nn/model_defs.h"

/* the layer tables read as the nets are drawn: one line per net */
/* clang-format off */
#define CONV(k, r, stride, pad) {LAYER_CONV, k, r, stride, pad, 0, 0}
#define RELU {LAYER_RELU, 0, 0, 0, 0, 0, 0}
#define POOL {LAYER_MAXPOOL, 0, 0, 0, 0, 0, 0}
#define FLATTEN {LAYER_FLATTEN, 0, 0, 0, 0, 0, 0}
#define GAP {LAYER_GAP, 0, 0, 0, 0, 0, 0}
#define FC(n) {LAYER_FC, n, 0, 0, 0, 0, 0}

static const layer_spec probe_layers[] = {CONV(0, 3, 1, 1), GAP, FC(0)};
/* "conv relu pool" runs as conv, pool, relu: max pooling commutes with relu
 * (max of relus = relu of max, and the gradient reaches the same element,
 * or nothing when the maximum is <= 0), so the outputs and gradients are
 * the same bits, and relu touches a quarter of the elements. */
static const layer_spec lenet_layers[] = {CONV(20, 5, 1, 0), POOL,    RELU,    CONV(50, 5, 1, 0), POOL,
                                          RELU,              FLATTEN, FC(512), RELU,              FC(0)};
static const layer_spec convnet_layers[] = {CONV(32, 3, 1, 1), POOL, RELU, CONV(64, 3, 1, 1), POOL, RELU,
                                            CONV(128, 3, 1, 1), POOL, RELU, GAP, FC(0)};
/* clang-format on */

#define N_OF(a) (int)(sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------- resnets */
#define RESNET_MAX_LAYERS 96

typedef struct net_builder {
    layer_spec *l;
    int n, c; /* layers so far, channels of the last one's output */
} net_builder;

/* appends one layer reading layer `in` (-1: the one before); returns its index */
static int put(net_builder *b, layer_spec sp, int in)
{
    sp.in = in < 0 ? 0 : in + 1;
    b->l[b->n] = sp;
    return b->n++;
}

static int conv_bn(net_builder *b, int k, int r, int stride, int pad, int in)
{
    put(b, (layer_spec)CONV(k, r, stride, pad), in);
    return put(b, (layer_spec){LAYER_BN, 0, 0, 0, 0, 0, 0}, -1);
}

/* one BasicBlock of `width` channels on the output of layer `x` (the last
 * one); returns the index of its final relu */
static int basic_block(net_builder *b, int x, int width, int stride)
{
    conv_bn(b, width, 3, stride, 1, -1);
    put(b, (layer_spec)RELU, -1);
    int main_end = conv_bn(b, width, 3, 1, 1, -1);
    layer_spec add = {LAYER_ADD, 0, 0, 0, 0, 0, 0};
    if (stride != 1 || b->c != width) {
        conv_bn(b, width, 1, stride, 0, x); /* projection shortcut */
        add.in2 = main_end + 1;
    } else {
        add.in2 = x + 1; /* identity */
    }
    put(b, add, -1);
    b->c = width;
    return put(b, (layer_spec)RELU, -1);
}

/* imagenet: resnet18's stem (7x7/2 conv, 3x3/2 max pool), else the CIFAR
 * one (3x3 conv); stages of `blocks` blocks of widths[s] channels */
static int build_resnet(layer_spec *l, int imagenet, const int *widths, int nstages, int blocks)
{
    net_builder b = {l, 0, 0};
    int x;
    if (imagenet) {
        conv_bn(&b, widths[0], 7, 2, 3, -1);
        put(&b, (layer_spec)RELU, -1);
        x = put(&b, (layer_spec){LAYER_MAXPOOL, 0, 3, 2, 1, 0, 0}, -1);
    } else {
        conv_bn(&b, widths[0], 3, 1, 1, -1);
        x = put(&b, (layer_spec)RELU, -1);
    }
    b.c = widths[0];
    for (int s = 0; s < nstages; s++)
        for (int k = 0; k < blocks; k++)
            x = basic_block(&b, x, widths[s], s > 0 && k == 0 ? 2 : 1);
    put(&b, (layer_spec)GAP, -1);
    put(&b, (layer_spec)FC(0), -1);
    return b.n;
}

static layer_spec resnet20_layers[RESNET_MAX_LAYERS], resnet8_layers[RESNET_MAX_LAYERS],
    resnet18_layers[RESNET_MAX_LAYERS];

static model_def defs[] = {
    {"probe",
     "one CxC 3x3 conv, global avg pool, fc: the loader dominates (E1)",
     probe_layers,
     N_OF(probe_layers),
     {0.01, 0.9, 0.0, LR_CONST},
     0},
    {"lenet",
     "conv20@5 relu pool conv50@5 relu pool fc512 relu fc (E2)",
     lenet_layers,
     N_OF(lenet_layers),
     {0.01, 0.95, 5e-4, LR_COSINE},
     0},
    {"convnet",
     "3 x (conv3x3 relu pool) 32-64-128, global avg pool, fc: 64x64 RGB crops",
     convnet_layers,
     N_OF(convnet_layers),
     {0.02, 0.9, 5e-4, LR_COSINE},
     0},
    {"resnet20",
     "CIFAR ResNet-20: conv, 3 stages x 3 BasicBlocks 16-32-64 with bn, gap, fc: 32-64 px",
     resnet20_layers,
     0,
     {0.1, 0.9, 5e-4, LR_COSINE},
     1},
    {"resnet8",
     "CIFAR ResNet-8: resnet20 with 1 block per stage (tests, quick runs)",
     resnet8_layers,
     0,
     {0.1, 0.9, 5e-4, LR_COSINE},
     1},
    {"resnet18",
     "ResNet-18: conv7x7/2, maxpool, 4 stages x 2 BasicBlocks 64-512 with bn, gap, fc: 64-224 px",
     resnet18_layers,
     0,
     {0.1, 0.9, 1e-4, LR_COSINE},
     1},
};

static const char *const names[] = {"probe",    "lenet",    "convnet", "resnet8",
                                    "resnet20", "resnet18", NULL};

/* the resnets' layer lists, written once (before any thread exists: the
 * first lookup is at option parsing) */
static void build_defs(void)
{
    static int built;
    static const int cifar[3] = {16, 32, 64}, imagenet[4] = {64, 128, 256, 512};
    if (built)
        return;
    built = 1;
    defs[3].nlayers = build_resnet(resnet20_layers, 0, cifar, 3, 3);
    defs[4].nlayers = build_resnet(resnet8_layers, 0, cifar, 3, 1);
    defs[5].nlayers = build_resnet(resnet18_layers, 1, imagenet, 4, 2);
}

const model_def *model_def_find(const char *name)
{
    build_defs();
    for (int i = 0; i < N_OF(defs); i++)
        if (strcmp(defs[i].name, name) == 0)
            return &defs[i];
    return NULL;
}

const char *const *model_names(void) { return names; }

int model_defaults(const char *name, model_hparams *hp)
{
    const model_def *d = model_def_find(name);
    if (!d)
        return -1;
    *hp = d->hp;
    return 0;
}
