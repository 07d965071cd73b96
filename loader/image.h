/* image.h — one file on disk to the u8 CHW sample the net consumes.
 *
 * The work is split in two so that preload mode can cache the first half:
 *
 *   base    = read -> decode (JPEG via TurboJPEG, DCT-scaled when the target
 *             is smaller; other formats via stb_image) -> channel conversion
 *             -> resize -> centre crop (unless the crop is random)
 *             deterministic; HWC u8, base_h x base_w x C
 *   sample  = random crop (if enabled) -> horizontal flip (probability
 *             hflip) -> HWC to CHW into the caller's buffer
 *             draws from the caller's rng, keyed by (seed, epoch, sample)
 *
 * img_load = base + augment. A per-worker img_ctx owns every scratch buffer
 * and the TurboJPEG handle, reused across samples: no malloc per sample once
 * the buffers have grown to the data set's largest image.
 *
 * Every failure is one line `path: reason` in the errbuf; nothing here
 * prints, exits, or leaks on bad input.
 */
#ifndef TRAIN_IMAGE_H
#define TRAIN_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/rng.h"
#include "../common/util.h"

#define IMG_MAX_SIDE 16384
#define IMG_MAX_PIXELS (256ull * 1024 * 1024)

typedef struct img_params {
    int channels;           /* 1 or 3 (resolve --channels auto with img_probe) */
    int resize_h, resize_w; /* both > 0: resize to exactly this size */
    int resize_short;       /* > 0: shorter side to this, keep aspect */
    int crop_h, crop_w;     /* > 0: crop to this size (centre unless random_crop) */
    int random_crop;        /* crop offset drawn from the sample's rng */
    int pad;                /* a crop larger than the image pads with zeros
                               instead of failing */
    float hflip;            /* probability of a horizontal flip */
    int cold;               /* drop each file from the page cache after reading */
} img_params;

/* Output size of every sample, when it is fixed by the parameters (a crop,
 * or an exact resize); fixed_h/w otherwise (e.g. the first image's size,
 * for data sets of equal-sized images). */
void img_output_size(const img_params *p, int fixed_h, int fixed_w, int *out_h, int *out_w);

/* Size of the base image when it is the same for every image (exact resize
 * or centre crop); returns -1 when it depends on the image. */
int img_base_size(const img_params *p, int fixed_h, int fixed_w, int *base_h, int *base_w);

typedef struct img_ctx img_ctx;
img_ctx *img_ctx_create(void);
void img_ctx_free(img_ctx *c);

/* Width, height and channel count of an image file without decoding it
 * (for --channels auto and data sets without --resize). */
int img_probe(const char *path, int *w, int *h, int *channels, errbuf *e);

/* Decode `path` into the base image. *base points into ctx (valid until the
 * next call on ctx); *bh, *bw receive its size. */
int img_load_base(img_ctx *c, const char *path, const img_params *p, const uint8_t **base, int *bh,
                  int *bw, errbuf *e);

/* Augment a base image into out (C x out_h x out_w u8, contiguous). */
int img_augment(uint8_t *out, int out_h, int out_w, const uint8_t *base, int bh, int bw,
                const img_params *p, rng *r, errbuf *e);

/* Both, for lazy loading: `path` -> out (C x out_h x out_w). */
int img_load(img_ctx *c, const char *path, const img_params *p, rng *r, uint8_t *out, int out_h,
             int out_w, errbuf *e);

/* Read the file's bytes only (for diagnosis: "no preprocessing"). Returns
 * the byte count, or -1. */
long img_read_only(img_ctx *c, const char *path, const img_params *p, errbuf *e);

/* Parse "HxW" or "N" (for --resize and --crop). Returns 0 or -1. */
int img_parse_size(const char *s, int *h, int *w, int *single);

#endif
