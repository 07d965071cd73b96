/* model_defs.h — how a net is written down (model_zoo.c) and looked up
 * (model.c). Internal to nn/. */
#ifndef TRAIN_MODEL_DEFS_H
#define TRAIN_MODEL_DEFS_H

#include "model.h"

/* One layer of a definition. conv: k filters of r x r (k = 0: as many as
 * input channels), stride, pad; fc: k outputs (0: the class count). */
typedef struct layer_spec {
    layer_kind kind;
    int k, r, stride, pad;
} layer_spec;

typedef struct model_def {
    const char *name, *desc;
    const layer_spec *layers;
    int nlayers;
    model_hparams hp;
} model_def;

const model_def *model_def_find(const char *name);

#endif
