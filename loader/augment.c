/* augment.c — the per-fetch half of the image pipeline: random crop,
 * horizontal flip, HWC -> CHW, in one pass over the output.
 *
 * The rng draws are the contract with preload mode (see img_augment in
 * image.h): a fixed order and count, so lazy and preloaded samples are the
 * same bytes. Deliberately nothing photometric (colour jitter, rotation):
 * the experiments this program reproduces use crop and flip only.
 */
#define _POSIX_C_SOURCE 200809L
#include <string.h>

#include "img_internal.h"

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

/* out[ch][sy.dst + y][sx.dst + x] = base[sy.src + y][sx.src + x][ch],
 * mirrored in x when flip. */
static void write_chw(uint8_t *out, int oh, int ow, const uint8_t *base, int bw, int C, img_span sy,
                      img_span sx, int flip)
{
    if (sy.len < oh || sx.len < ow)
        memset(out, 0, (size_t)C * (size_t)oh * (size_t)ow);
    for (int ch = 0; ch < C; ch++) {
        for (int y = 0; y < sy.len; y++) {
            const uint8_t *s = base + ((size_t)(sy.src + y) * (size_t)bw + (size_t)sx.src) * (size_t)C + ch;
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
    int flip = p->hflip > 0 && rng_uniform(r) < p->hflip;
    write_chw(out, out_h, out_w, base, bw, p->channels, sy, sx, flip);
    return 0;
}
