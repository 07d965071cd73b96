/* images.h — image files the image tests write: JPEG through
 * TurboJPEG, PNG/BMP/TGA through stb_image_write, and the encodings those do
 * not offer (16-bit and palette PNG, GIF, PSD, PNM) written byte by byte
 * here, plus deterministic test pictures and small comparison helpers. */
#ifndef TRAIN_TEST_IMAGE_UTIL_H
#define TRAIN_TEST_IMAGE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "image/image.h"

/* A smooth, textured h x w x c picture (gradients, a disc, mild noise),
 * the same for the same seed. Caller frees. */
uint8_t *ti_picture(int h, int w, int c, uint64_t seed);
/* Uniformly random bytes. Caller frees. */
uint8_t *ti_noise(size_t n, uint64_t seed);

/* Encode px (h x w, pixel format TJPF_*) as JPEG; returns malloc'd bytes. */
uint8_t *ti_jpeg(const uint8_t *px, int h, int w, int pf, int subsamp, int quality, int flags,
                 size_t *len);
/* ... and write it to dir/name; returns the path (malloc'd). */
char *ti_write_jpeg(const char *dir, const char *name, const uint8_t *px, int h, int w, int pf,
                    int subsamp, int quality, int flags);

/* A PNG with the given IHDR fields and raw (unfiltered, packed) rows, plus
 * an optional PLTE (n entries of RGB). Returns malloc'd bytes. */
uint8_t *ti_png_bytes(int w, int h, int depth, int color_type, const uint8_t *rows,
                      const uint8_t *plte, int plte_n, size_t *len);
char *ti_write_png_raw(const char *dir, const char *name, int w, int h, int depth, int color_type,
                       const uint8_t *rows, const uint8_t *plte, int plte_n);
/* 8-bit PNG via stb_image_write (c = 1..4). */
char *ti_write_png(const char *dir, const char *name, const uint8_t *px, int h, int w, int c);
/* A GIF with a 256-entry palette and one frame of palette indices. */
char *ti_write_gif(const char *dir, const char *name, const uint8_t *idx, int h, int w,
                   const uint8_t palette[768]);
/* An uncompressed RGB PSD, 8 or 16 bits (16-bit samples are v * 257). */
char *ti_write_psd(const char *dir, const char *name, const uint8_t *rgb, int h, int w, int depth);
/* An 8-bit palette BMP: n palette entries (RGB), indices h x w, rows
 * stored top-down (negative height) or bottom-up. */
char *ti_write_bmp8(const char *dir, const char *name, const uint8_t *idx, int h, int w,
                    const uint8_t *pal, int n, int top_down);
/* Binary PNM: P5 (c = 1) or P6 (c = 3), maxval 255 or 65535 (v * 257). */
char *ti_write_pnm(const char *dir, const char *name, const uint8_t *px, int h, int w, int c,
                   int maxval);

/* Decode a JPEG file with TurboJPEG directly, at full size. */
uint8_t *ti_tj_decode(const char *path, int pf, int *h, int *w);

/* HWC -> CHW. Caller frees. */
uint8_t *ti_chw(const uint8_t *hwc, int h, int w, int c);

/* Run img_load_base with a fresh context and copy the base out (NULL on
 * error, message in e). */
uint8_t *ti_base(const char *path, const img_params *p, int *bh, int *bw, errbuf *e);
/* the same with the planar decode on (1, the default) or off (0: the RGB
 * path of --decode exact and of files without a planar layout) */
uint8_t *ti_base_planar(const char *path, const img_params *p, int planar, int *bh, int *bw,
                        errbuf *e);

/* Mean and maximum absolute difference of two byte arrays. */
double ti_mean_diff(const uint8_t *a, const uint8_t *b, size_t n, int *max);

/* A histogram of absolute differences, summed over several comparisons:
 * its mean, 99th percentile and maximum (the fidelity bounds' terms). */
typedef struct ti_hist {
    size_t hist[256], n;
} ti_hist;
void ti_hist_add(ti_hist *d, const uint8_t *a, const uint8_t *b, size_t n);
double ti_hist_mean(const ti_hist *d, int *p99, int *max);

#endif
