/* fuzz_checkpoint.c — libFuzzer target over the checkpoint reader
 * (fuzz/checkpoint_harness.h).
 *
 * Built two ways (mk/fuzz.mk):
 *   clang -fsanitize=fuzzer,address,undefined -DFUZZ_LIBFUZZER
 *       -> build/fuzz/fuzz_checkpoint, run by `make fuzz-checkpoint`
 *   gcc -> build/tools/fuzz_checkpoint, a plain driver:
 *       fuzz_checkpoint FILE...      replay inputs through the same harness
 *       fuzz_checkpoint --seeds DIR  write the starting corpus: a real
 *                                    checkpoint of the harness's model, as
 *                                    it is and under the selector's repairs
 */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>

#include "fuzz/checkpoint_harness.h"

static char fuzz_path[64];
static model fuzz_model;
static backend *fuzz_be;

static void setup(void)
{
    if (fuzz_path[0])
        return;
    fuzz_scratch_file("fuzz_checkpoint", fuzz_path, sizeof fuzz_path);
    fuzz_ckpt_model(&fuzz_model, &fuzz_be);
}

#ifdef FUZZ_LIBFUZZER

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    fuzz_checkpoint_one(&fuzz_model, fuzz_path, data, size);
    return 0;
}

#else

#include "fuzz/driver.h"

static int seeds(const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return 1;
    }
    setup();
    float mean = 0.25f, sd = 0.5f;
    errbuf e;
    const ckpt_state st = {.epoch = 2,
                           .step = 30,
                           .seed = 7,
                           .epochs = 5,
                           .batch = 8,
                           .lr = 0.1,
                           .momentum = 0.9,
                           .data = {.n = 24, .nclasses = 3, .hash = 99}};
    char file[4096];
    snprintf(file, sizeof file, "%s/.checkpoint", dir);
    if (model_set_norm(&fuzz_model, &mean, &sd, &e) != 0 ||
        checkpoint_save(file, &fuzz_model, fuzz_ckpt_classes, &st, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    size_t n;
    uint8_t *d = (uint8_t *)read_whole_file(file, &n, &e);
    unlink(file);
    if (!d) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    int rc = fuzz_put_seed(dir, "probe-read", 0x00, d, n);
    rc |= fuzz_put_seed(dir, "probe-load", 0x02, d, n);
    rc |= fuzz_put_seed(dir, "probe-load-repaired", 0x03, d, n);
    rc |= fuzz_put_seed(dir, "probe-load-no-classes", 0x07, d, n);
    /* version 1: no data fingerprint (24 bytes fewer), repaired */
    if (n > 24 + 32) {
        uint8_t *v1 = xmalloc(n);
        size_t cut = n - 8 - 2 * fuzz_model.nparams * sizeof(float) - 24;
        memcpy(v1, d, cut);
        memcpy(v1 + cut, d + cut + 24, n - cut - 24);
        uint32_t one = 1;
        memcpy(v1 + 8, &one, 4);
        rc |= fuzz_put_seed(dir, "probe-v1-repaired", 0x03, v1, n - 24);
        free(v1);
    }
    free(d);
    if (rc == 0)
        printf("fuzz_checkpoint: seeds written to %s\n", dir);
    return rc ? 1 : 0;
}

static int one(const uint8_t *d, size_t n)
{
    return fuzz_checkpoint_one(&fuzz_model, fuzz_path, d, n);
}

static void teardown(void)
{
    model_free(&fuzz_model);
    fuzz_be->ops->destroy(fuzz_be);
}

int main(int argc, char **argv)
{
    static const fuzz_driver t = {"fuzz_checkpoint", seeds,  setup,    one,
                                  teardown,          "read", "refused"};
    return fuzz_driver_main(&t, argc, argv);
}

#endif
