/* fuzz_image.c — libFuzzer target over the image pipeline (fuzz/harness.h).
 *
 * Built two ways (mk/image.mk):
 *   clang -fsanitize=fuzzer,address,undefined -DFUZZ_LIBFUZZER
 *       -> build/fuzz/fuzz_image, run by `make fuzz-image` for FUZZ_SECONDS;
 *          stb_image is compiled into it from the Debian header so the
 *          fuzzer sees (and ASan checks) stb_image's code; TurboJPEG is the
 *          uninstrumented system library.
 *   gcc -> build/tools/fuzz_image, a plain driver:
 *       fuzz_image FILE...     replay inputs (e.g. a crasher) through the
 *                              same harness, with the normal libraries
 *       fuzz_image --seeds DIR write small valid inputs of every format,
 *                              the fuzzer's starting corpus
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz/harness.h"

static char fuzz_path[64];
static img_ctx *fuzz_ctx;

/* The harness writes each input to a file and loads it by path. The file
 * is created and unlinked at once, and reached through /proc/self/fd: no
 * exit (libFuzzer's time limit, a crash, abort, SIGKILL) leaves it behind. */
static void fuzz_setup(void)
{
    if (fuzz_ctx)
        return;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char named[64];
    snprintf(named, sizeof named, "%s/fuzz-image-%ld.img", base, (long)getpid());
    int fd = open(named, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600); /* a stale one: reused */
    if (fd < 0) {
        fprintf(stderr, "fuzz_image: cannot create %s: %s\n", named, strerror(errno));
        exit(1);
    }
    unlink(named);
    snprintf(fuzz_path, sizeof fuzz_path, "/proc/self/fd/%d", fd);
    fuzz_ctx = img_ctx_create();
}

#ifdef FUZZ_LIBFUZZER

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_setup();
    fuzz_image_one(fuzz_ctx, fuzz_path, data, size);
    return 0;
}

#else

#include <turbojpeg.h>

#include <stb/stb_image_write.h>

#include "common/util.h"
#include "fuzz/driver.h"

typedef struct mem {
    uint8_t *d;
    size_t n, cap;
} mem;

static void mem_write(void *ctx, void *data, int size)
{
    mem *m = ctx;
    if (m->n + (size_t)size > m->cap) {
        m->cap = (m->n + (size_t)size) * 2;
        m->d = xrealloc(m->d, m->cap);
    }
    memcpy(m->d + m->n, data, (size_t)size);
    m->n += (size_t)size;
}

static int seed_jpeg(const char *dir, const char *name, uint8_t sel, const uint8_t *px, int h,
                     int w, int pf, int samp, int flags)
{
    tjhandle tj = tjInitCompress();
    unsigned char *j = NULL;
    unsigned long n = 0;
    int rc = tjCompress2(tj, px, w, 0, h, pf, &j, &n, samp, 75, flags);
    if (rc == 0)
        rc = fuzz_put_seed(dir, name, sel, j, n);
    tjFree(j);
    tjDestroy(tj);
    return rc;
}

static int seeds(const char *dir)
{
    enum { H = 20, W = 24 };
    uint8_t px[H * W * 4], psd[40 + H * W * 3] = {0};
    for (int i = 0; i < H * W * 4; i++)
        px[i] = (uint8_t)(i * 29 + (i / 97) * 7);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return 1;
    }
    int rc = 0;
    rc |= seed_jpeg(dir, "jpeg-420", 0x0b, px, H, W, TJPF_RGB, TJSAMP_420, 0);
    rc |= seed_jpeg(dir, "jpeg-prog", 0x52, px, H, W, TJPF_RGB, TJSAMP_422, TJFLAG_PROGRESSIVE);
    rc |= seed_jpeg(dir, "jpeg-gray", 0x09, px, H, W, TJPF_GRAY, TJSAMP_GRAY, 0);
    rc |= seed_jpeg(dir, "jpeg-cmyk", 0x8a, px, H, W, TJPF_CMYK, TJSAMP_444, 0);
    const struct {
        const char *name;
        int comp;
        uint8_t sel;
    } pngs[] = {
        {"png-gray", 1, 0x01}, {"png-ga", 2, 0x12}, {"png-rgb", 3, 0x4c}, {"png-rgba", 4, 0x3e}};
    for (int k = 0; k < 4; k++) {
        mem m = {0};
        stbi_write_png_to_func(mem_write, &m, W, H, pngs[k].comp, px, W * pngs[k].comp);
        rc |= fuzz_put_seed(dir, pngs[k].name, pngs[k].sel, m.d, m.n);
        free(m.d);
    }
    mem m = {0};
    stbi_write_bmp_to_func(mem_write, &m, W, H, 3, px);
    rc |= fuzz_put_seed(dir, "bmp", 0x0a, m.d, m.n);
    m.n = 0;
    stbi_write_tga_with_rle = 1;
    stbi_write_tga_to_func(mem_write, &m, W, H, 3, px);
    rc |= fuzz_put_seed(dir, "tga-rle", 0x3a, m.d, m.n);
    m.n = 0;
    stbi_write_tga_with_rle = 0;
    stbi_write_tga_to_func(mem_write, &m, W, H, 1, px);
    rc |= fuzz_put_seed(dir, "tga-gray", 0x03, m.d, m.n);
    free(m.d);
    static const uint8_t gif[] = "GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00"
                                 "\x21\xf9\x04\x01\x00\x00\x00\x00\x2c\x00\x00\x00\x00\x01\x00"
                                 "\x01\x00\x00\x02\x02\x44\x01\x00\x3b";
    rc |= fuzz_put_seed(dir, "gif", 0x20, gif, sizeof gif - 1);
    /* PSD: version 1, 3 channels, H x W, 8 bits, RGB; empty colour data,
     * resources and layers; raw planar pixels */
    memcpy(psd, "8BPS\0\1", 6);
    psd[13] = 3, psd[17] = H, psd[21] = W, psd[23] = 8, psd[25] = 3;
    memcpy(psd + 40, px, H * W * 3);
    rc |= fuzz_put_seed(dir, "psd", 0x0c, psd, sizeof psd);
    char pnm[32 + H * W * 3];
    int n = snprintf(pnm, 32, "P6\n%d %d\n255\n", W, H);
    memcpy(pnm + n, px, H * W * 3);
    rc |= fuzz_put_seed(dir, "ppm", 0x42, pnm, (size_t)n + H * W * 3);
    n = snprintf(pnm, 32, "P5\n%d %d\n65535\n", W, H / 2);
    memcpy(pnm + n, px, H * W);
    rc |= fuzz_put_seed(dir, "pgm16", 0x05, pnm, (size_t)n + H * W);
    if (rc == 0)
        printf("fuzz_image: seeds written to %s\n", dir);
    return rc ? 1 : 0;
}

static int one(const uint8_t *d, size_t n) { return fuzz_image_one(fuzz_ctx, fuzz_path, d, n); }
static void teardown(void) { img_ctx_free(fuzz_ctx); }

int main(int argc, char **argv)
{
    static const fuzz_driver t = {"fuzz_image", seeds,    fuzz_setup, one,
                                  teardown,     "loaded", "refused"};
    return fuzz_driver_main(&t, argc, argv);
}

#endif
