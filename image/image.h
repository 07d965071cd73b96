/* image.h — one file on disk to the u8 CHW sample the net consumes.
 *
 * The work is split in two so that preload mode can cache the first half:
 *
 *   base    = read -> decode (JPEG via TurboJPEG, DCT-scaled when the target
 *             is smaller, and with a centre crop only the region the crop
 *             reads; other formats via stb_image) -> channel conversion
 *             -> resize -> centre crop (unless the crop is random)
 *             deterministic; HWC u8, base_h x base_w x C
 *   sample  = random crop (if enabled) -> horizontal flip (probability
 *             hflip) -> HWC to CHW into the caller's buffer
 *             draws from the caller's rng, keyed by (seed, epoch, sample)
 *
 * img_load = base + augment, byte for byte. A per-worker img_ctx owns every
 * scratch buffer and the TurboJPEG handle, reused across samples: no malloc
 * of ours per sample once the buffers have grown to the data set's largest
 * image (stb_image and libjpeg still allocate internally per image).
 *
 * Formats are recognised by their first bytes, never by the file name:
 * JPEG (baseline, progressive; gray, YCbCr, CMYK/YCCK), PNG
 * (1-16 bit, palette, gray+alpha, RGBA), GIF (first frame), BMP, TGA, PSD,
 * binary PNM (P5/P6). Alpha is dropped, not composited (as PIL's
 * convert("RGB")). Gray from colour uses the ITU-R 601 luma weights
 * (0.299, 0.587, 0.114); a colour JPEG decoded to gray takes its Y plane.
 * CMYK JPEGs are read as Adobe-inverted, as PIL reads them.
 *
 * Geometry follows torchvision on PIL images: Resize((h, w)) / Resize(n)
 * (antialiased bilinear; n sets the shorter side, the longer is
 * floor(n * long / short)); CenterCrop offsets round((size - crop) / 2)
 * with Python's round-half-to-even; a padded centre crop puts the image at
 * floor((crop - size) / 2).
 *
 * Every failure is one line `path: reason` in the errbuf; nothing here
 * prints, exits, or leaks on bad input.
 */
#ifndef TRAIN_IMAGE_H
#define TRAIN_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "common/util.h"

/* Images larger than this are refused from their header, before any pixel
 * memory is allocated (img_ctx_set_limits lowers them, e.g. for fuzzing). */
#define IMG_MAX_SIDE 16384
#define IMG_MAX_PIXELS (256ull * 1024 * 1024)
#define IMG_MAX_FILE_BYTES (1ull << 30)
/* ... and so are images whose decoder would need more memory than this at
 * once (estimated from the header, per format: a 16-bit PNG needs its
 * inflated rows and the 16-bit image, a GIF three canvases of its logical
 * screen), whatever their pixel count. */
#define IMG_MAX_DECODE_BYTES (1ull << 30)

/* What the loading functions return instead of -1 when memory ran out
 * while decoding a file that may well be good (the message says "out of
 * memory"): a resource failure, not a verdict on the file. */
#define IMG_ENOMEM (-2)

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
    int full_decode;        /* never DCT-scale JPEGs: decode at full size and
                               resize (benchmarks, comparisons with PIL) */
    int rrc;                /* random-resized crop to crop_h x crop_w
                               (torchvision's RandomResizedCrop), fused with
                               the decode; ignores the resize */
    float rrc_scale[2];     /* area fraction range; 0 0: 0.08 1 */
    float rrc_ratio[2];     /* width/height range; 0 0: 3/4 4/3 */
    int decode;             /* img_decode: how far the fused path DCT-scales */
    float jitter[3];        /* colour jitter strengths: brightness, contrast,
                               saturation (torchvision's ColorJitter); 0 off */
    int exif;               /* turn JPEGs upright by their EXIF orientation
                               first (PIL's ImageOps.exif_transpose); off by
                               default, as torchvision */
} img_params;

/* How small a JPEG may be decoded before the resampler takes over, for
 * the random-resized crop (measured in docs/BENCH-PHOTOS.md):
 *   AUTO   the smallest n/8 that leaves the resampler >= 2x of shrinking
 *          (or full size): within 0.5 mean / 4 levels at the 99th
 *          percentile of the exact path on photographs;
 *   EXACT  full size (the region only): what torchvision on PIL computes;
 *   FAST   the smallest n/8 still >= the output (fastest, least faithful). */
typedef enum img_decode {
    IMG_DECODE_AUTO = 0,
    IMG_DECODE_EXACT,
    IMG_DECODE_FAST,
} img_decode;

/* torchvision's RandomResizedCrop.get_params for an h x w image: up to 10
 * tries of (area fraction, log aspect ratio) -- draws rng_uniform_d(r) for
 * the scale then for the log ratio, and for an accepted box
 * rng_below(h - bh + 1) for the top, then rng_below(w - bw + 1) for the
 * left -- then the centre fallback (the whole image clamped to the ratio
 * range). Sides are round-half-even of the square roots, as Python's
 * round(). */
void img_rrc_box(int h, int w, const img_params *p, rng *r, int *by, int *bx, int *bh, int *bw);

/* Check a parameter set once, up front (channels 1|3, sizes in 1..
 * IMG_MAX_SIDE given in pairs, not both resize kinds, random_crop only with
 * a crop, hflip in [0, 1]). The message has no path. */
int img_params_check(const img_params *p, errbuf *e);

/* Output size of every sample: the crop when there is one, else the exact
 * resize, else the size an image of fixed_h x fixed_w (its size on disk,
 * e.g. the first image's, for data sets of equal-sized images) gets from
 * resize_short or no resize; 0 x 0 when that is needed and unknown. */
void img_output_size(const img_params *p, int fixed_h, int fixed_w, int *out_h, int *out_w);

/* Size of the base image: the centre crop, else the exact resize, else
 * computed from fixed_h x fixed_w as above. Returns -1 when it depends on the
 * image and fixed_h/fixed_w are not given (<= 0). */
int img_base_size(const img_params *p, int fixed_h, int fixed_w, int *base_h, int *base_w);

typedef struct img_ctx img_ctx;
img_ctx *img_ctx_create(void);
void img_ctx_free(img_ctx *c);

/* Seconds this context has spent so far reading files (open to the last
 * byte) and decoding them (to pixels, before any resize); the rest of a
 * load is transformation. For --trace's per-batch read/decode/transform
 * spans: two clock reads around each, nothing else. */
void img_ctx_times(const img_ctx *c, double *read_s, double *decode_s);

/* The image format that the first n bytes of a file announce, by the same
 * magic numbers the decoder goes by: "JPEG", "PNG", ... or one recognised
 * but not decoded ("TIFF", "HEIF" ...); NULL for none. */
const char *img_sniff_name(const uint8_t *d, size_t n);

/* The stages of img_load, seconds so far per stage: the file's bytes
 * (read), recognising the format and parsing its header (header), the
 * decode to pixels or planes (decode), the resampler (resample), and the
 * output's layout: colour conversion, CHW, flip, jitter (store). A lap
 * clock, one clock read per stage. For tools/bench_photos's breakdown. */
enum { IMG_ST_READ, IMG_ST_HEADER, IMG_ST_DECODE, IMG_ST_RESAMPLE, IMG_ST_STORE, IMG_STAGES };
void img_ctx_stages(const img_ctx *c, double s[IMG_STAGES]);

/* Lower (or restore, with 0) the size limits checked before decoding. */
void img_ctx_set_limits(img_ctx *c, int max_side, uint64_t max_pixels);

/* Width, height and channel count (1 gray, 3 colour) of an image file from
 * its header, without decoding pixels (for --channels auto and data sets
 * without --resize); with exif, the size once turned upright. */
int img_probe(const char *path, int exif, int *w, int *h, int *channels, errbuf *e);

/* Decode `path` into the base image. *base points into ctx (valid until the
 * next call on ctx); *bh, *bw receive its size. A crop larger than the
 * (resized) image without p->pad is an error here, with the path. Returns
 * 0, -1 with `path: reason`, or IMG_ENOMEM (img_load too). */
int img_load_base(img_ctx *c, const char *path, const img_params *p, const uint8_t **base, int *bh,
                  int *bw, errbuf *e);

/* Augment a base image into out (C x out_h x out_w u8, contiguous).
 * Draws from r in a fixed order, so a sample depends only on its rng key:
 *   0. rrc (in img_load, before decoding): img_rrc_box's draws;
 *   1. random_crop: rng_below(|bh - crop_h| + 1) for the top offset, then
 *      rng_below(|bw - crop_w| + 1) for the left (when the base is smaller,
 *      with pad, the offset places the image inside the zero canvas);
 *   2. hflip > 0: one rng_uniform(r) < hflip decides the flip;
 *   3. any jitter > 0: the order of the three adjustments (rng_below(3),
 *      then rng_below(2): a Fisher-Yates shuffle of brightness, contrast,
 *      saturation), then one rng_uniform_d(r) per non-zero strength, in
 *      that fixed B, C, S order, for its factor in [max(0, 1 - x), 1 + x].
 * Nothing else draws. Jitter as torchvision's ColorJitter on PIL images:
 * brightness scales, contrast blends with the mean of the ITU-R 601 luma
 * (rounded to an integer, as PIL), saturation blends with each pixel's
 * luma; results rounded to nearest and clipped (PIL truncates some
 * intermediate values: within one level). Grey images skip saturation. out_h x out_w must be the crop (random_crop) or the
 * base size. */
int img_augment(uint8_t *out, int out_h, int out_w, const uint8_t *base, int bh, int bw,
                const img_params *p, rng *r, errbuf *e);

/* Both, for lazy loading: `path` -> out (C x out_h x out_w). */
int img_load(img_ctx *c, const char *path, const img_params *p, rng *r, uint8_t *out, int out_h,
             int out_w, errbuf *e);

/* Read the file's bytes only (for diagnosis: "no preprocessing"); honours
 * p->cold. Returns the byte count, or -1. */
long img_read_only(img_ctx *c, const char *path, const img_params *p, errbuf *e);

/* An image that is part of a larger file: bytes [off, off + len) of
 * `file` (a member of a tar shard: loader/dataset_shards.c). `name` is
 * what every message calls the image where a whole file's path would
 * stand ("shards/a.tar: member 000001.jpg"). The _src variants below are
 * the path functions above reading those bytes instead: one pread of the
 * range, the same checks (a regular file; len in 1..IMG_MAX_FILE_BYTES;
 * a file that ends inside the range is "truncated"), the same decode.
 * With file NULL, `name` is a path and its whole file is read, as the
 * path functions do, so a caller can hand every image over one way. */
typedef struct img_src {
    const char *file;
    uint64_t off, len;
    const char *name;
} img_src;

int img_probe_src(const img_src *s, int exif, int *w, int *h, int *channels, errbuf *e);
int img_load_base_src(img_ctx *c, const img_src *s, const img_params *p, const uint8_t **base,
                      int *bh, int *bw, errbuf *e);
int img_load_src(img_ctx *c, const img_src *s, const img_params *p, rng *r, uint8_t *out, int out_h,
                 int out_w, errbuf *e);
long img_read_only_src(img_ctx *c, const img_src *s, const img_params *p, errbuf *e);

/* The JPEG libraries in use, as loaded (file and version), the headers
 * built against, and whether the planar decode is on and why not (for
 * --version and --selftest). A static string. */
const char *img_decoder_versions(void);

/* Parse "HxW" or "N" (for --resize and --crop): h, w in 1..IMG_MAX_SIDE;
 * "N" gives h = w = N and *single = 1. Returns 0 or -1. */
int img_parse_size(const char *s, int *h, int *w, int *single);

#endif
