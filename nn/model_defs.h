/* model_defs.h — how a net is written down (model_zoo.c) and looked up
 * (model.c). Internal to nn/. */
#ifndef TRAIN_MODEL_DEFS_H
#define TRAIN_MODEL_DEFS_H

#include "nn/model.h"

/* One layer of a definition. conv: k filters of r x r (k = 0: as many as
 * input channels), stride, pad; a conv right before a bn has no bias.
 * maxpool: r x r window (0: 2x2), stride, pad. fc: k outputs (0: the class
 * count). in: 1 + the index of the layer whose output is the input (0: the
 * layer before); add: in2 likewise for the second operand. */
typedef struct layer_spec {
    layer_kind kind;
    int k, r, stride, pad;
    int in, in2;
} layer_spec;

typedef struct model_def {
    const char *name, *desc;
    const layer_spec *layers;
    int nlayers;
    model_hparams hp;
    int decay_weights_only; /* no weight decay on biases and bn parameters */
} model_def;

const model_def *model_def_find(const char *name);

#endif
