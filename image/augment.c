/* augment.c — the per-fetch half of the image pipeline: random crop,
 * horizontal flip, HWC -> CHW, in one pass over the output.
 *
 * The rng draws are the contract with preload mode (see img_augment in
 * image.h): a fixed order and count, so lazy and preloaded samples are the
 * same bytes. The one photometric augmentation is colour jitter (the one
 * most ImageNet recipes add); deliberately no rotation or hue.
 */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "image/internal.h"
#include "image/simd.h"

int img_span_centre(int size, int crop, int pad, img_span *s)
{
    if (size >= crop) {
        /* torchvision: int(round((size - crop) / 2.0)), round half to even */
        int d = size - crop, k = d / 2;
        if (d % 2 && k % 2)
            k++;
        *s = (img_span){.src = k, .len = crop, .dst = 0};
        return 0;
    }
    if (!pad)
        return -1;
    *s = (img_span){.src = 0, .len = size, .dst = (crop - size) / 2};
    return 0;
}

/* One draw: the offset of the crop in the image, or (padding) of the image
 * in the crop. */
static int span_random(int size, int crop, int pad, rng *r, img_span *s)
{
    int d = size >= crop ? size - crop : crop - size;
    int o = (int)rng_below(r, (uint32_t)d + 1);
    if (size >= crop) {
        *s = (img_span){.src = o, .len = crop, .dst = 0};
        return 0;
    }
    *s = (img_span){.src = 0, .len = size, .dst = o};
    return pad ? 0 : -1;
}

/* write_chw for 3 channels on a CPU with AVX2: a row at a time */
static void chw3(uint8_t *out, int oh, int ow, const uint8_t *base, int bw, img_span sy,
                 img_span sx, int flip)
{
    const size_t plane = (size_t)oh * (size_t)ow;
    for (int y = 0; y < sy.len; y++) {
        const uint8_t *s = base + ((size_t)(sy.src + y) * (size_t)bw + (size_t)sx.src) * 3;
        uint8_t *r = out + (size_t)(sy.dst + y) * (size_t)ow +
                     (size_t)(flip ? ow - sx.dst - sx.len : sx.dst);
        img_chw3_row_avx2(r, r + plane, r + 2 * plane, s, sx.len, flip);
    }
}

/* out[ch][sy.dst + y][sx.dst + x] = base[sy.src + y][sx.src + x][ch],
 * mirrored in x when flip. */
static void write_chw(uint8_t *out, int oh, int ow, const uint8_t *base, int bw, int C, img_span sy,
                      img_span sx, int flip)
{
    if (sy.len < oh || sx.len < ow)
        memset(out, 0, (size_t)C * (size_t)oh * (size_t)ow);
    if (C == 3 && img_avx2()) {
        chw3(out, oh, ow, base, bw, sy, sx, flip);
        return;
    }
    for (int ch = 0; ch < C; ch++) {
        for (int y = 0; y < sy.len; y++) {
            const uint8_t *s =
                base + ((size_t)(sy.src + y) * (size_t)bw + (size_t)sx.src) * (size_t)C + ch;
            uint8_t *d = out + ((size_t)ch * (size_t)oh + (size_t)(sy.dst + y)) * (size_t)ow;
            if (!flip) {
                d += sx.dst;
                for (int x = 0; x < sx.len; x++)
                    d[x] = s[(size_t)x * (size_t)C];
            } else {
                d += ow - 1 - sx.dst;
                for (int x = 0; x < sx.len; x++)
                    d[-x] = s[(size_t)x * (size_t)C];
            }
        }
    }
}

static inline uint8_t round_clip(float v)
{
    // NOLINTNEXTLINE(bugprone-incorrect-roundings): v is in (0, 255), where this rounds half up
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)(v + 0.5f);
}

/* One adjustment over a CHW image: op 0 brightness, 1 contrast, 2 saturation. */
static void adjust(uint8_t *img, int C, size_t npix, int op, float f)
{
    if (op == 0) {
        for (size_t i = 0; i < npix * (size_t)C; i++)
            img[i] = round_clip(img[i] * f);
        return;
    }
    uint8_t *r = img, *g = C == 3 ? img + npix : img, *b = C == 3 ? img + 2 * npix : img;
    if (op == 1) {
        uint64_t sum = 0;
        for (size_t i = 0; i < npix; i++)
            sum += img_luma(r[i], g[i], b[i]);
        float mean = (float)(uint32_t)((double)sum / (double)npix + 0.5);
        for (size_t i = 0; i < npix * (size_t)C; i++)
            img[i] = round_clip(mean + f * ((float)img[i] - mean));
        return;
    }
    if (C != 3)
        return;
    for (size_t i = 0; i < npix; i++) {
        float y = img_luma(r[i], g[i], b[i]);
        r[i] = round_clip(y + f * ((float)r[i] - y));
        g[i] = round_clip(y + f * ((float)g[i] - y));
        b[i] = round_clip(y + f * ((float)b[i] - y));
    }
}

static void color_jitter(uint8_t *img, int C, size_t npix, const float x[3], rng *r)
{
    int order[3] = {0, 1, 2};
    for (int i = 2; i > 0; i--) {
        int j = (int)rng_below(r, (uint32_t)i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    float f[3] = {1.0f, 1.0f, 1.0f};
    for (int k = 0; k < 3; k++)
        if (x[k] > 0.0f) {
            double lo = x[k] < 1.0f ? 1.0 - x[k] : 0.0;
            f[k] = (float)(lo + (1.0 + x[k] - lo) * rng_uniform_d(r));
        }
    for (int k = 0; k < 3; k++)
        if (x[order[k]] > 0.0f)
            adjust(img, C, npix, order[k], f[order[k]]);
}

int img_augment(uint8_t *out, int out_h, int out_w, const uint8_t *base, int bh, int bw,
                const img_params *p, rng *r, errbuf *e)
{
    img_span sy = {0, bh, 0}, sx = {0, bw, 0};
    if (p->random_crop && p->crop_h > 0) {
        if (out_h != p->crop_h || out_w != p->crop_w)
            return errf(e, "output is %dx%d but the crop is %dx%d", out_h, out_w, p->crop_h,
                        p->crop_w);
        int ry = span_random(bh, p->crop_h, p->pad, r, &sy);
        int rx = span_random(bw, p->crop_w, p->pad, r, &sx);
        if (ry != 0 || rx != 0)
            return errf(e, "image is %dx%d, smaller than the %dx%d crop (--pad pads it)", bh, bw,
                        p->crop_h, p->crop_w);
    } else if (out_h != bh || out_w != bw) {
        return errf(e, "image is %dx%d, expected %dx%d (--resize or --crop make sizes equal)", bh,
                    bw, out_h, out_w);
    }
    int flip = img_flip_draw(p, r);
    write_chw(out, out_h, out_w, base, bw, p->channels, sy, sx, flip);
    img_jitter_chw(out, out_h, out_w, p, r);
    return 0;
}

int img_flip_draw(const img_params *p, rng *r)
{
    int flip = p->hflip > 0 && rng_uniform(r) < p->hflip;
    return flip;
}

void img_jitter_chw(uint8_t *out, int out_h, int out_w, const img_params *p, rng *r)
{
    if (p->jitter[0] > 0.0f || p->jitter[1] > 0.0f || p->jitter[2] > 0.0f)
        color_jitter(out, p->channels, (size_t)out_h * (size_t)out_w, p->jitter, r);
}
