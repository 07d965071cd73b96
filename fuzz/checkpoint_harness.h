/* checkpoint_harness.h — the checkpoint fuzz harness (nn/checkpoint.c's
 * reader), shared by fuzz/fuzz_checkpoint.c (libFuzzer target and replay
 * driver) and the corpus replay test (tests/test_fuzz_parsers.c).
 *
 * An input is one selector byte, then the file's bytes. A fuzzer does not
 * get past a 64-bit checksum by chance, so bit 0 makes the harness write
 * the true file size into the header and the true checksum over the end,
 * and the parser behind them is reached. The harness reads the file with
 * checkpoint_read_info and, with bit 1, loads it into a tiny model (probe,
 * 1x8x8 inputs, 3 classes, on the CPU backend) with or without (bit 2) the
 * class names to compare. Checked: a refusal is one line naming the file
 * and leaves the model's parameters, momentum and normalisation as they
 * were; a success has its header within the reader's limits and every
 * class name a string. A broken invariant aborts.
 */
#ifndef TRAIN_FUZZ_CHECKPOINT_HARNESS_H
#define TRAIN_FUZZ_CHECKPOINT_HARNESS_H

#include "cpu/cpu.h"
#include "fuzz/scratch.h"
#include "nn/checkpoint.h"

#define FUZZ_CKPT_MODEL "probe"
#define FUZZ_CKPT_C 1
#define FUZZ_CKPT_H 8
#define FUZZ_CKPT_W 8
#define FUZZ_CKPT_K 3
static const char *const fuzz_ckpt_classes[FUZZ_CKPT_K] = {"cat", "dog", "emu"};

/* The model the harness loads into (created once per process by the
 * caller, parameters from seed 1). */
static inline void fuzz_ckpt_model(model *m, backend **be)
{
    errbuf e;
    *be = backend_cpu_create(1, &e);
    if (!*be || model_create(m, FUZZ_CKPT_MODEL, FUZZ_CKPT_C, FUZZ_CKPT_H, FUZZ_CKPT_W, FUZZ_CKPT_K,
                             1, *be, &e) != 0)
        FUZZ_FAIL("fuzz_checkpoint", "cannot make the model: %s", e.msg);
    model_init_params(m, 1);
}

/* the model's parameters, momentum and normalisation, hashed */
static inline uint64_t fuzz_ckpt_state(const model *m)
{
    size_t bytes = m->nparams * sizeof(float);
    float *h = malloc(bytes ? bytes : 1);
    if (!h)
        FUZZ_FAIL("fuzz_checkpoint", "out of memory");
    m->be->ops->download(m->be, h, m->params, bytes);
    uint64_t s = hash64(h, bytes, 1);
    m->be->ops->download(m->be, h, m->momentum, bytes);
    s = hash64(h, bytes, s);
    free(h);
    s = hash64(m->mean, sizeof m->mean, s);
    return hash64(m->std, sizeof m->std, s);
}

/* Returns 0 when the file was read (and loaded, when asked), 1 when it
 * was refused properly. */
static inline int fuzz_checkpoint_one(model *m, const char *path, const uint8_t *data, size_t n)
{
    if (n == 0)
        return 1;
    uint8_t sel = data[0];
    size_t len = n - 1;
    uint8_t *f = malloc(len ? len : 1);
    if (!f)
        FUZZ_FAIL("fuzz_checkpoint", "out of memory");
    memcpy(f, data + 1, len);
    if (sel & 1 && len >= 24 + 8) { /* the true size and checksum */
        uint64_t size = len;
        memcpy(f + 16, &size, 8);
        uint64_t sum = hash64(f, len - 8, 0);
        memcpy(f + len - 8, &sum, 8);
    }
    fuzz_write("fuzz_checkpoint", path, f, len);
    free(f);
    ckpt_info info;
    errbuf e = {{0}};
    int rc = checkpoint_read_info(path, &info, &e);
    if (rc != 0) {
        fuzz_check_message("fuzz_checkpoint", path, e.msg);
        if (info.classes)
            FUZZ_FAIL("fuzz_checkpoint", "a refused read kept its class names");
    } else {
        if (info.C < 1 || info.C > MODEL_MAX_CHANNELS || info.H < 1 || info.W < 1 ||
            info.nclasses < 1 || !memchr(info.model, '\0', sizeof info.model))
            FUZZ_FAIL("fuzz_checkpoint", "accepted header %dx%dx%d, %d classes", info.C, info.H,
                      info.W, info.nclasses);
        for (int i = 0; i < info.nclasses; i++)
            if (!info.classes[i] || strlen(info.classes[i]) > 4096)
                FUZZ_FAIL("fuzz_checkpoint", "class %d of an accepted file has no name", i);
        ckpt_info_free(&info);
    }
    if (!(sel & 2))
        return rc ? 1 : 0;
    uint64_t before = fuzz_ckpt_state(m);
    ckpt_state st = {0};
    errbuf e2 = {{0}};
    const char *const *classes = sel & 4 ? NULL : fuzz_ckpt_classes;
    int lrc = checkpoint_load(path, m, classes, &st, &e2);
    if (lrc != 0) {
        fuzz_check_message("fuzz_checkpoint", path, e2.msg);
        if (fuzz_ckpt_state(m) != before || st.epoch != 0 || st.step != 0)
            FUZZ_FAIL("fuzz_checkpoint", "a refused load changed the model: %s", e2.msg);
        return 1;
    }
    if (rc != 0)
        FUZZ_FAIL("fuzz_checkpoint", "loaded a file read_info refused: %s", e.msg);
    for (int c = 0; c < m->C; c++)
        if (!(m->std[c] > 0.0f))
            FUZZ_FAIL("fuzz_checkpoint", "loaded a std of %g", (double)m->std[c]);
    return 0;
}

#endif
