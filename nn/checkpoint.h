/* checkpoint.h — save and resume a training run.
 *
 * One file holds everything an exact resume needs: the model (name, input
 * shape, class count and names, normalisation, the tensor table), the
 * parameters and the momentum, and the run's counters (epochs done, steps,
 * seed, hyper-parameters). It is written atomically (temporary file, fsync,
 * rename): a crash leaves the old checkpoint or the new one. Loading checks
 * everything — size, magic, version, checksum, model, shapes, classes —
 * before it changes anything, so a refused file leaves the model untouched.
 *
 * Format (little-endian, version 2): "TRAINCKP", u32 version, u32 byte-order
 * mark, u64 file size, then the fields in checkpoint.c's order, the params
 * and momentum as f32 arrays, and last a u64 hash64 of all bytes before it.
 * Version 2 added the training data's fingerprint (loader/fingerprint.h:
 * u64 samples, classes, hash) after the hyper-parameters; version 1 files
 * still load, with ckpt_state.has_data 0 (nothing to compare the data with).
 */
#ifndef TRAIN_CHECKPOINT_H
#define TRAIN_CHECKPOINT_H

#include <stdint.h>

#include "common/util.h"
#include "loader/fingerprint.h"
#include "nn/model.h"

/* A checkpoint's first 8 bytes. */
#define CKPT_MAGIC "TRAINCKP"
#define CKPT_VERSION 2

/* The run's state at the end of an epoch. */
typedef struct ckpt_state {
    int64_t epoch; /* epochs completed: a resume starts at this (0-based) epoch */
    int64_t step;  /* optimiser steps taken since the run began */
    uint64_t seed;
    int64_t epochs; /* epochs the run was asked for */
    int32_t batch;
    int32_t schedule; /* lr_schedule */
    double lr, momentum, wd;
    data_fp data; /* the training set's fingerprint (data.n 0: not known) */
    int has_data; /* read back: the file has a fingerprint (version 2 on, data.n > 0) */
} ckpt_state;

/* Writes model m (parameters and momentum from the device), its class names
 * (nclasses strings, the model's class count) and st to `path`. */
int checkpoint_save(const char *path, const model *m, const char *const *classes,
                    const ckpt_state *st, errbuf *e);

/* Reads `path` into m, which must have been created with the same model
 * name, input shape and class count; `classes` (m->nclasses strings, or
 * NULL to skip the check) must equal the saved names. On success uploads
 * the parameters and momentum, sets the normalisation, fills *st (may be
 * NULL) and returns 0. On any mismatch or damage returns -1 with a message
 * naming the file and the reason, and m is unchanged. */
int checkpoint_load(const char *path, model *m, const char *const *classes, ckpt_state *st,
                    errbuf *e);

/* What a checkpoint holds, without a model: for `--resume` to build the
 * right model before loading. Validated like checkpoint_load (size, magic,
 * version, checksum). */
typedef struct ckpt_info {
    char model[MODEL_NAME_MAX];
    int C, H, W, nclasses;
    char **classes; /* nclasses strings */
    float mean[MODEL_MAX_CHANNELS], std[MODEL_MAX_CHANNELS];
    uint64_t nparams;
    ckpt_state state;
} ckpt_info;

int checkpoint_read_info(const char *path, ckpt_info *info, errbuf *e);
void ckpt_info_free(ckpt_info *info);

#endif
