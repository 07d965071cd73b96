/* model.h — the conv nets: definitions, parameters, one training step.
 *
 * A model is a list of layers (conv2d, relu, max pool, flatten, global
 * average pool, fully connected, batch norm, residual add) ending in softmax
 * cross-entropy, with every shape computed from the input (C, H, W) and the
 * class count. Each layer reads the output of the layer before it, or of an
 * earlier layer it names (model_layer.src); an add layer sums two earlier
 * outputs (src and src2). That is all a residual net needs: no graph. In the
 * backward pass an output read by more than the next layer (a block's
 * input, read by its first conv and its shortcut) has its own gradient
 * buffer into which every reader adds its part. Its
 * parameters, gradients and momentum are each ONE device allocation carved
 * into named tensors (llm.c's layout): a checkpoint is one write, SGD is one
 * call, a gradient check walks one array. All tensors come from
 * be->ops->alloc and all arithmetic goes through be->ops, so the same code
 * runs on the CPU and the GPU backend; per step the per-sample losses and
 * predictions come down (the labels travel with the batch, or go up).
 *
 * The input of a step is the loader's u8 batch (B x C x H x W, a DEVICE
 * pointer — on the CPU backend simply the ring slot) normalised on the
 * device as (x/255 - mean[c]) / std[c]; mean and std default to 0.5 for
 * every channel (model_set_norm changes them).
 *
 * Batch norm keeps its running mean and variance in the parameter array
 * too (tensors of role TENSOR_STAT: no gradient, never updated by SGD), so
 * a checkpoint carries them and an exact resume stays exact. Training steps
 * normalise with the batch's statistics and update the running ones;
 * model_eval_step uses the running ones.
 *
 * Data parallelism reaches the model two ways: a hook set once (model.dist,
 * set by its owner; comm/ fills it) sums the gradient slab over the ranks
 * between the backward pass and the update; each step's split
 * (model_batch.split) says the global batch the loss is averaged over and
 * the chunks of canonical sums. Without them the model is one process's.
 *
 * Left out: other optimisers, dropout, mixed precision.
 */
#ifndef TRAIN_MODEL_H
#define TRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/util.h"
#include "nn/backend.h"
#include "nn/schedule.h"

#define MODEL_MAX_CHANNELS 16
#define MODEL_MAX_TENSORS 160
#define MODEL_NAME_MAX 32
#define MODEL_PLAN_SLOTS 3                  /* conv plans kept per layer, one per batch size */
#define MODEL_MAX_CHUNKS BACKEND_GROUPS_MAX /* model_split.chunk */
#define MODEL_MAX_BUCKETS 8                 /* model_plan_buckets: at most this many asked */
/* enqueued steps whose results may be pending at once: the one being
 * enqueued and the one before it (results come back a step late) */
#define MODEL_RESULTS_MAX 2

/* ---------------------------------------------------------------- hyper-parameters */
typedef struct model_hparams {
    double lr, momentum, wd;
    lr_schedule schedule;
} model_hparams;

/* ---------------------------------------------------------------- model */
typedef enum layer_kind {
    LAYER_CONV,
    LAYER_RELU,
    LAYER_MAXPOOL, /* r x r, stride, pad (2x2/2 by default) */
    LAYER_FLATTEN,
    LAYER_GAP, /* global average pool */
    LAYER_FC,
    LAYER_BN,  /* batch norm over each channel */
    LAYER_ADD, /* out = src's output + src2's output (a residual shortcut) */
} layer_kind;

#define MODEL_BN_MOMENTUM 0.1f /* PyTorch's defaults */
#define MODEL_BN_EPS 1e-5f

/* What a tensor of the parameter array is, for init and SGD. */
typedef enum tensor_role {
    TENSOR_WEIGHT = 0, /* conv / fc weight: Kaiming normal, weight decay */
    TENSOR_BIAS,  /* bias, bn shift: zero; decayed unless the model says not (decay_weights_only) */
    TENSOR_SCALE, /* bn scale: one; decayed like a bias */
    TENSOR_STAT,  /* bn running mean (zero) / variance (one): no gradient, not touched by SGD */
} tensor_role;

/* A named slice of the parameter array. */
typedef struct model_tensor {
    char name[MODEL_NAME_MAX]; /* "conv1.weight", "fc2.bias" */
    int ndim;
    int shape[4];
    tensor_role role;
    size_t offset; /* in floats, from the start of params (64-byte aligned) */
    size_t n;      /* elements */
} model_tensor;

typedef struct model_layer {
    layer_kind kind;
    int in_c, in_h, in_w;    /* per-sample input */
    int out_c, out_h, out_w; /* per-sample output (fc/gap: out_c features, 1 x 1) */
    int k, r, stride, pad; /* conv: filters, kernel size, stride, padding; maxpool: r x r window */
    int src, src2;         /* layers whose outputs are the input (-1: the net's input) and, for add,
                                the second operand (-1 otherwise) */
    int w_tensor, b_tensor;   /* tensor indices, -1 when the layer has none (bn: scale, shift) */
    int rm_tensor, rv_tensor; /* bn: running mean and variance (TENSOR_STAT), else -1 */
    int need_din;             /* the input (src) needs a gradient: a layer below has parameters */
    int need_grad;            /* this output needs a gradient */
    int branch;               /* this output is read by more than the next layer: it has gacc */
    float *out;               /* device, max_batch x out size (flatten: its input) */
    float *gacc;              /* device, max_batch x out size, when branch: its gradient, summed */
    int gacc_set;             /* backward: gacc holds a first contribution */
    float *save_mean, *save_invstd; /* bn: device, out_c each, the last training forward's */
    /* Fusion (model_set_fusion): a relu whose input is a bn's output that
     * nothing else reads, or an add's of such a bn and another output, runs
     * them in one backend op (backend.h's bn_relu_*). Relu: fuse_bn and
     * fuse_add, the bn's and the add's indices (-1: none); bn and add:
     * fused_into, the relu's (-1: none). Their own outputs are then not
     * written. bwd_done: backward, the relu already did this layer's part. */
    int fuse_bn, fuse_add, fused_into;
    int bwd_done;
    struct {
        int B;
        void *plan;
        unsigned long used;
    } plans[MODEL_PLAN_SLOTS];
} model_layer;

/* Data-parallel training (all zero: one process). */
typedef struct model_dist {
    /* sums grads (device, n floats) over the ranks, in place; called by
     * every training step between backward and the update, also for a rank
     * whose slice of the batch is empty (its gradient is zero) */
    void (*reduce)(void *ctx, float *grads, size_t n);
    void *ctx;
    /* Overlap with backward (optional; set with model_plan_buckets, used
     * for steps without chunks: model_split.nchunks 0): instead of one reduce after backward, the slab is
     * summed in buckets, each handed over as soon as the ENQUEUED backward
     * pass has written every gradient in it. reduce_range(ctx, grads, off,
     * n) sums grads[off, off + n): it is called for every bucket of the
     * plan, in plan order (decreasing offsets; together exactly [0,
     * nparams)), by every rank the same way (a rank with an empty slice
     * too), and must not let the sum overtake the writes enqueued before
     * the call; reduce_wait(ctx) follows the last bucket, and everything
     * enqueued after it (the update) must come after every sum. */
    void (*reduce_range)(void *ctx, float *grads, size_t off, size_t n);
    void (*reduce_wait)(void *ctx);
    int nbuckets;
    size_t bucket_off[MODEL_MAX_BUCKETS + 1]; /* bucket k: [bucket_off[k+1], bucket_off[k]) */
    int bucket_after[MODEL_MAX_BUCKETS];      /* ... handed over after this layer's backward */
} model_dist;

/* How a training step's batch is split (all zero: one process, one
 * gradient in the backend's order). Given with each step (model_batch). */
typedef struct model_split {
    /* the step's samples over every rank: the loss, and so the gradient,
     * is averaged over this many (0: the step's own B) */
    int global_batch;
    /* Canonical gradient sums (nchunks > 0): the step's B samples are
     * nchunks consecutive chunks of chunk[i] samples (a power of two of
     * them; a chunk may be empty); each chunk's gradient is computed on
     * its own and the chunks are summed as a balanced binary tree, left
     * before right. With every rank holding an aligned subtree and the
     * ranks summed as the tree's top levels (comm/), the gradient has the
     * same bits whatever the number of ranks. Where model_groups_cheap
     * says so, the backend does it inside one step over the batch
     * (backend_ops.batch_groups: only the sums over samples are cut);
     * otherwise every chunk runs its own forward and backward pass. */
    int nchunks;
    int chunk[MODEL_MAX_CHUNKS];
} model_split;

/* One step's inputs. */
typedef struct model_batch {
    const uint8_t *x;          /* device: B images, C x H x W bytes each */
    const int32_t *labels;     /* host: their labels (checked; kept for the results) */
    const int32_t *dev_labels; /* device: the same labels already there (the stager
                                  copied them with the batch), or NULL: the step
                                  uploads them */
    int B;
    model_split split; /* training steps only */
} model_batch;

/* The caller's name for a step, handed back with its results
 * (model_results_take): which of its passes, which batch, at which rate. */
typedef struct step_tag {
    int pass;
    long batch;
    double lr;
} step_tag;

typedef struct model {
    char name[MODEL_NAME_MAX];
    int C, H, W, nclasses, max_batch;
    backend *be;
    int nlayers;
    model_layer *layers;
    int ntensors;
    model_tensor tensors[MODEL_MAX_TENSORS];
    size_t nparams;         /* floats in params, grads, momentum (with alignment gaps) */
    size_t nparams_used;    /* real parameters (bn running statistics not counted) */
    int decay_weights_only; /* weight decay on TENSOR_WEIGHT only (the resnets); else on everything */
    double flops;           /* forward FLOPs per sample (2 x multiply-adds of conv and fc) */
    float *params;          /* device (nparams) */
    float *grads;           /* device (nparams), written by the last backward pass */
    float *momentum;        /* device (nparams) */
    float mean[MODEL_MAX_CHANNELS], std[MODEL_MAX_CHANNELS];
    model_dist dist; /* data parallelism, set by the owner */
    float *tree[7];  /* device (nparams) each: partial sums of the chunk tree */

    /* private: activations and scratch */
    float *x;        /* device, max_batch x C x H x W normalised input */
    float *gbuf[2];  /* device, gradient ping-pong, max_batch x largest activation */
    float *gtmp;     /* device, max_batch x largest activation: a part added into a gacc */
    float *dlogits;  /* device, max_batch x nclasses */
    float *loss;     /* device, max_batch */
    int32_t *pred;   /* device, max_batch */
    int32_t *labels; /* device, max_batch */
    float *zeros;    /* device, nparams zeros (made at the first empty chunk), or NULL */
    /* results read back late (model_results_take): per pending step a slot
     * of max_batch losses then max_batch predictions (host, page-locked on
     * a GPU), its labels and the caller's tag; a ring, oldest at pend_head */
    float *results_host;     /* MODEL_RESULTS_MAX x 2 x max_batch */
    int32_t *results_labels; /* MODEL_RESULTS_MAX x max_batch */
    struct {
        int B;
        step_tag tag;
    } pend[MODEL_RESULTS_MAX];
    int pend_head, pend_n;
    int results_pinned;
    char
        results_pin_error[256]; /* why results_host could not be page-locked ("": it was, or n/a) */
    unsigned long tick;         /* plan-cache clock */
    int no_fuse;                /* model_set_fusion(m, 0): the separate ops everywhere */
    const float *fused_g;       /* backward: the gradient a fused relu left for the chain below */
} model;

/* Per-step results. loss_sum adds the per-sample losses in sample order in
 * double, so it is reproducible; nonfinite counts samples whose loss was NaN
 * or infinite. */
typedef struct step_stats {
    double loss_sum;
    long correct, n, nonfinite;
    /* samples whose label the loss found outside 0..nclasses-1 (counted in
     * nonfinite too, so a run stops; their loss is not in loss_sum), the
     * first one's place in the step and its label as the device read it */
    long bad_labels, bad_sample, bad_label;
} step_stats;

/* a += b, in that order */
void step_stats_add(step_stats *a, const step_stats *b);

/* Builds model `name` for inputs C x H x W and nclasses classes, with room
 * for batches up to max_batch. Parameters start at zero: call
 * model_init_params (or load a checkpoint). Returns -1 with a message for an
 * unknown name or an input too small for the net. */
int model_create(model *m, const char *name, int C, int H, int W, int nclasses, int max_batch,
                 backend *be, errbuf *e);
void model_free(model *m);
/* Why the step results' host buffer could not be page-locked on a GPU
 * (the backend's message), or NULL when it was or need not be: unpinned,
 * every step waits for its own read-back, and the run should say so. */
const char *model_results_unpinned(const model *m);
/* Make the convolution plans (and so the backend's workspace) for each
 * batch size in sizes, before the first step needs them: at most
 * MODEL_PLAN_SLOTS distinct sizes, each 1..max_batch (others are skipped).
 * Returns the number of sizes planned. */
int model_prepare_batches(model *m, const int *sizes, int n);

/* About how many bytes model_create and the first steps' convolution plans
 * take for these inputs on the CPU backend with `threads` compute threads
 * (activations dominate: they grow with the batch and the image area); 0
 * for an unknown name or an input the net cannot take. For refusing a run
 * that would not fit before anything is allocated. */
uint64_t model_memory_bytes(const char *name, int C, int H, int W, int nclasses, int max_batch,
                            int threads);

/* He (Kaiming) normal init of every weight (std sqrt(2/fan_in)), zero
 * biases and bn shifts, bn scales one, running means zero and variances
 * one, zero momentum; tensor i draws from rng_keyed(seed, RNG_INIT, i, 0),
 * so a tensor's values do not depend on the others. Done on the host, then
 * one upload. */
void model_init_params(model *m, uint64_t seed);

/* Batch norm, residual add and relu run fused where the graph and the
 * backend allow (on by default; off when TRAIN_FUSE=0 is in the
 * environment at model_create). The same bits either way: the switch is
 * for tests and A/B timing. */
void model_set_fusion(model *m, int on);

/* Per-channel normalisation; NULL leaves that array unchanged. Returns -1
 * for a std that is not positive and finite. */
int model_set_norm(model *m, const float *mean, const float *std, errbuf *e);

/* What a step returns. */
enum model_step_status {
    MODEL_STEP_OK = 0,
    MODEL_STEP_NONFINITE = 1, /* some loss was NaN or infinite */
    MODEL_STEP_CANCELLED = 2, /* the backend was cancelled (backend.cancel) between or inside
                                 layers: *st is not filled, the parameters are unchanged */
};

/* Forward, loss and backward on one batch: x is a DEVICE pointer to B x C x
 * H x W u8, labels a HOST array of B values in [0, nclasses). Leaves the
 * gradient of the mean loss in m->grads; fills *st (may be NULL). Returns a
 * model_step_status. B in [1, max_batch]; a bad B or
 * label is a programming error (message, exit 1): validate labels up front.
 * The cancellation flag is looked at after every layer. */
int model_forward_backward(model *m, const uint8_t *x, const int32_t *labels, int B,
                           step_stats *st);
/* One SGD step with momentum and weight decay (on every parameter, or on
 * the conv and fc weights only when m->decay_weights_only); running
 * statistics are left alone. */
void model_sgd_step(model *m, float lr, float momentum, float wd);
/* model_forward_backward + (m->dist.reduce) + model_sgd_step: one training
 * step. With m->dist.reduce set, B may be 0 (this rank's slice of the last
 * batch is empty): the step contributes a zero gradient and still updates.
 * The results
 * are downloaded before it returns, so timing around it measures the whole
 * step's compute. Returns MODEL_STEP_NONFINITE (the update applied, the
 * parameters now suspect) when some loss was NaN or infinite: stop the run;
 * MODEL_STEP_CANCELLED (no update) when cancelled before the update. */
int model_train_step(model *m, const uint8_t *x, const int32_t *labels, int B, float lr,
                     float momentum, float wd, step_stats *st);
/* The same for a whole model_batch (its device labels, its split). */
int model_train_batch(model *m, const model_batch *b, float lr, float momentum, float wd,
                      step_stats *st);
/* Pipelined steps, for a caller that must not wait for each step (the
 * training loop on a GPU): enqueue a step, and take its results later, in
 * order. model_train_enqueue / model_eval_enqueue return MODEL_STEP_OK or
 * MODEL_STEP_CANCELLED (no update, nothing pending) and remember `tag`
 * with the step (the caller keeps no record of its own); at most MODEL_RESULTS_MAX steps may be pending (take one
 * first). model_results_take gives the oldest pending step's results: 1
 * with *st (nonfinite counts its non-finite losses) and *tag filled (either
 * may be NULL), 0 when none is pending or, with wait 0, the device has not
 * finished it. On the CPU backend the results are ready when the step
 * returns; on a GPU the host waits only when it asks with wait 1. The
 * numbers equal the synchronous steps' bit for bit. */
int model_train_enqueue(model *m, const model_batch *b, float lr, float momentum, float wd,
                        step_tag tag);
int model_eval_enqueue(model *m, const model_batch *b, step_tag tag);
int model_results_take(model *m, int wait, step_stats *st, step_tag *tag);
int model_results_pending(const model *m);
/* Forward and loss only, no gradients, no update. Same return; B 0 (an
 * empty slice) with m->dist.reduce set does nothing. */
int model_eval_step(model *m, const uint8_t *x, const int32_t *labels, int B, step_stats *st);

/* The bucket plan of model_dist (reduce_range): about `want` buckets (1 to
 * MODEL_MAX_BUCKETS) of the slab in backward order, each cut where a
 * layer's backward pass completes a contiguous tail of the slab and at
 * least nparams / want floats long but the last (so at most want of
 * them); fewer where the layout allows no cut (one, when the
 * first layer's gradients lie at the end of the slab). Fills m->dist's
 * nbuckets, bucket_off and bucket_after; returns nbuckets. */
int model_plan_buckets(model *m, int want);

/* 1 when canonical gradient sums (model_split.nchunks) cost next to
 * nothing: the backend cuts only the sums over samples
 * (backend_ops.batch_groups) and no layer is batch norm; 0 when every
 * chunk would run its own forward and backward pass. */
int model_groups_cheap(const model *m);

/* "epoch 3 batch 17: loss is nan (lr 0.1)" into buf; the numbers are
 * printed as given. */
const char *model_nonfinite_msg(char *buf, size_t len, long epoch, long batch, double loss,
                                double lr);

/* ---------------------------------------------------------------- catalogue */
/* Default hyper-parameters of model `name`; -1 if unknown. */
int model_defaults(const char *name, model_hparams *hp);
/* The known names, NULL-terminated. */
const char *const *model_names(void);
/* `--model list`: one line per model — name, parameters, forward FLOPs per
 * sample for inputs C x H x W with nclasses classes, description, defaults
 * — and, when be (may be NULL) names its convolutions' algorithms
 * (backend_conv_describe), a line of them in layer order. */
void model_print_list(FILE *fp, int C, int H, int W, int nclasses, backend *be);

#endif
