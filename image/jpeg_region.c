/* jpeg_region.c — decode only the part of a JPEG a crop needs, DCT-
 * scaled, through libjpeg-turbo's own API (the random-resized crop, and
 * the centre crop of a resize: image.c).
 *
 * Why this API: Debian bookworm ships libjpeg-turbo 2.1.5, whose TurboJPEG
 * has no partial decode (tj3SetCroppingRegion arrived in 3.0); its lossless
 * crop (tjTransform with TJXOPT_CROP) re-encodes the cropped coefficients
 * and would then be decoded again. libjpeg's jpeg_crop_scanline (columns,
 * widened to iMCU boundaries) and jpeg_skip_scanlines (rows above the crop;
 * the rows below are never read) skip the inverse DCT, upsampling and
 * colour conversion outside the region; entropy decoding of the rows above
 * still happens (a baseline JPEG has no index), and a progressive file is
 * entropy-decoded whole before any row comes out.
 *
 * The decoded pixels inside the region are the ones a full decode at the
 * same scale gives, byte for byte, except the first and last columns of a
 * crop that does not reach the image's edge: with 4:2:x chroma the fancy
 * upsampler treats them as the edge. The caller asks for a margin and keeps
 * its resampler off those columns; then the fused path at scale 1 is exact
 * (tests/test_rrc.c checks it on 4:2:0, 4:2:2, 4:4:4, progressive and grey
 * files).
 *
 * The planar decode (img_jpeg_decode_planes: --decode auto/fast of the
 * random-resized crop and of a resize or centre crop, image.c) stops before
 * upsampling and colour conversion: jpeg_planar.c takes libjpeg's
 * post-processor slot and copies each row group's component rows into
 * planes (where it is built and its self-check passes; else the pixel
 * path). libjpeg-turbo 2.1.5's own raw mode (raw_data_out +
 * jpeg_read_raw_data) cannot do this: jpeg_crop_scanline and
 * jpeg_skip_scanlines refuse its state, so it would inverse-transform every
 * column and every row above the crop. Fancy upsampling is turned off (no
 * context rows, so whole row groups are skipped cheaply); the skip starts
 * at a row group boundary so the post-processor always sees whole groups.
 * Taken for grey and YCbCr files whose luma has the full sampling; CMYK,
 * YCCK and RGB JPEGs take the pixel path.
 *
 * Errors and warnings follow jpeg.c's policy: a warning in the benign
 * list is accepted when the file has an end-of-image marker, anything else
 * fails with `path: reason`. Progressive files with more than 500 scans are
 * refused (TurboJPEG's TJFLAG_LIMITSCANS). CMYK/YCCK come out as CMYK and
 * are converted by the caller's rules (img_jpeg_cmyk).
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>

#include "image/internal.h"
#include "image/jpeg_planar.h"

#define MAX_SCANS 500

typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    int warned;
    char first_warning[JMSG_LENGTH_MAX];
} jerr;

static void on_error(j_common_ptr ci)
{
    jerr *j = (jerr *)ci->err;
    longjmp(j->jump, 1);
}

static void on_message(j_common_ptr ci, int level)
{
    jerr *j = (jerr *)ci->err;
    if (level >= 0 || j->warned++)
        return; /* trace messages; later warnings */
    ci->err->format_message(ci, j->first_warning);
}

static void on_progress(j_common_ptr ci)
{
    j_decompress_ptr d = (j_decompress_ptr)ci;
    if (d->is_decompressor && d->progressive_mode && d->input_scan_number > MAX_SCANS) {
        longjmp(((jerr *)ci->err)->jump, 2);
    }
}

void img_jpeg_scale_for(int w, int h, int want_h, int want_w, int *num)
{
    /* n/8 for n = 1..8: the smallest whose output still covers want */
    *num = 8;
    if (want_h <= 0 || want_w <= 0)
        return;
    for (int n = 1; n < 8; n++)
        if ((long)w * n >= (long)want_w * 8 && (long)h * n >= (long)want_h * 8) {
            *num = n;
            return;
        }
}

int img_jpeg_planar_scale(int num)
{
    /* libjpeg-turbo's inverse DCTs at 8/8, 4/8, 2/8 and 1/8 are SIMD; at
     * 3, 5, 6 and 7 they are scalar C, and a 4:2:0 file's chroma is then
     * transformed at twice the size (libjpeg scales chroma up in the IDCT
     * when the ratio allows: 10x10 to 14x14 blocks, four times the
     * samples, all of which the planes' resampler then reads). One step
     * up costs the resampler a little more luma and saves both: on the
     * ImageNet-sized set's photographs above 700 px, 1.19x for rrc and
     * for val (CPU time, 8 alternating runs; docs/BENCH-PHOTOS.md run K);
     * the output is closer to the exact path, as it has more of the image
     * to shrink. */
    return num == 3 ? 4 : num > 4 && num < 8 ? 8 : num;
}

/* The rows [y0, y1) of the cropped columns, as pixels of C channels (or
 * CMYK into c->tmp). */
static int rgb_rows(img_ctx *c, j_decompress_ptr d, const char *path, const img_info *info, int y0,
                    int y1, int sh, int sw, JDIMENSION x0, JDIMENSION cw, img_region *got,
                    errbuf *e)
{
    const size_t stride = (size_t)cw * (size_t)d->output_components;
    const size_t rows = (size_t)(y1 - y0);
    /* one row more: decode_region's scratch for reading the file's last row */
    uint8_t *dst = info->cmyk ? img_grow(&c->tmp, &c->tmp_cap, (rows + 1) * stride)
                              : img_grow(&c->dec, &c->dec_cap, (rows + 1) * stride);
    if (y0 > 0 && jpeg_skip_scanlines(d, (JDIMENSION)y0) != (JDIMENSION)y0)
        return errf(e, "%s: truncated JPEG (cannot skip to row %d)", path, y0);
    for (size_t r = 0; r < rows;) {
        JSAMPROW row = dst + r * stride;
        if (jpeg_read_scanlines(d, &row, 1) != 1)
            break;
        r++;
    }
    *got = (img_region){.y = y0, .x = (int)x0, .h = (int)rows, .w = (int)cw, .sh = sh, .sw = sw};
    return 0;
}

static int decode_region(img_ctx *c, const char *path, const img_info *info, int C, int num,
                         const img_region *want, img_region *got, img_planes *pl, errbuf *e)
{
    struct jpeg_decompress_struct d;
    struct jpeg_progress_mgr progress = {.progress_monitor = on_progress};
    jerr j;
    memset(&j, 0, sizeof j);
    d.err = jpeg_std_error(&j.pub);
    j.pub.error_exit = on_error;
    j.pub.emit_message = on_message;
    if (!img_jpeg_complete(c)) /* as a full decode would find, whatever the crop */
        return errf(e, "%s: truncated JPEG (no end-of-image marker)", path);
    int how = setjmp(j.jump);
    if (how) {
        char msg[JMSG_LENGTH_MAX];
        if (how == 2)
            snprintf(msg, sizeof msg, "more than %d progressive scans", MAX_SCANS);
        else
            d.err->format_message((j_common_ptr)&d, msg);
        jpeg_destroy_decompress(&d);
        img_printable(msg);
        return img_jpeg_failure_msg(c, path, msg, 0, e);
    }
    jpeg_create_decompress(&d);
    d.progress = &progress;
    jpeg_mem_src(&d, c->file, (unsigned long)c->file_len);
    jpeg_read_header(&d, TRUE);
    if (pl && (info->cmyk || !img_jpeg_planar_layout(&d) || !img_jpeg_planar_ok())) {
        jpeg_destroy_decompress(&d);
        return 1;
    }
    d.scale_num = (unsigned)num;
    d.scale_denom = 8;
    d.out_color_space = pl           ? d.jpeg_color_space
                        : info->cmyk ? JCS_CMYK
                        : C == 1     ? JCS_GRAYSCALE
                                     : JCS_RGB;
    d.dct_method = JDCT_ISLOW; /* TurboJPEG's default: the same pixels as img_jpeg_decode */
    if (pl)
        d.do_fancy_upsampling = FALSE; /* no context rows: whole row groups, simply skipped */
    jpeg_start_decompress(&d);
    const int sw = (int)d.output_width, sh = (int)d.output_height;
    int y0 = want->y < 0 ? 0 : want->y, y1 = want->y + want->h > sh ? sh : want->y + want->h;
    JDIMENSION x0 = (JDIMENSION)(want->x < 0 ? 0 : want->x);
    JDIMENSION cw = (JDIMENSION)((want->x + want->w > sw ? sw : want->x + want->w) - (int)x0);
    if (y1 <= y0 || cw == 0) {
        jpeg_destroy_decompress(&d);
        return errf(e, "%s: internal: empty JPEG region", path);
    }
    /* libjpeg-turbo 2.1.5's jpeg_crop_scanline gives wrong pixels for
     * colour files whose luma is sampled 4x2 or 2x4 at DCT scales below 8/8
     * (every column, up to 122 levels off; found by the generated corpus,
     * tests/test_jpeg_corpus.c): those decode every column instead */
    if (num < 8 && d.num_components > 1 && d.max_h_samp_factor * d.max_v_samp_factor >= 8) {
        x0 = 0;
        cw = d.output_width;
    } else {
        jpeg_crop_scanline(&d, &x0, &cw); /* widened to iMCU columns */
    }
    /* a file this context has not yet read to its end is read to its end
     * (below), once: accepted or refused for its bytes, not for the crop */
    const uint64_t key = img_jpeg_key(c);
    const int to_end = !img_jpeg_verified(c, key);
    if (pl ? img_jpeg_planar_rows(c, &d, path, y0, y1, sh, sw, x0, cw, pl, got, to_end, e)
           : rgb_rows(c, &d, path, info, y0, y1, sh, sw, x0, cw, got, e)) {
        jpeg_destroy_decompress(&d);
        return -1;
    }
    /* The first time this context meets the file, the rest of it is
     * decoded too (the RGB path entropy-decodes the rows below the crop,
     * the planar path read them above) and read to its end, so that a file
     * is accepted or refused for its bytes, not for where the crop fell: a
     * corrupt scan below the crop made a random-resized crop accept a file
     * in one epoch and refuse it in the next (found by the differential
     * fuzzing of tests/test_image_fuzz.c). Accepted files are remembered
     * by the hash of their bytes (img_jpeg_verified), so later epochs skip
     * the rest again: the check costs each worker one tail per file. */
    const JDIMENSION left = d.output_height - d.output_scanline;
    if (to_end && left > 0 && !pl) {
        /* (a skip that reaches the last row decodes nothing: libjpeg-turbo
         * then marks the end reached; the last row is read instead) */
        if (left > 1)
            jpeg_skip_scanlines(&d, left - 1);
        uint8_t *row = (info->cmyk ? c->tmp : c->dec) +
                       (size_t)got->h * (size_t)cw * (size_t)d.output_components;
        jpeg_read_scanlines(&d, &row, 1);
    }
    if (to_end)
        jpeg_finish_decompress(&d);
    else
        jpeg_abort_decompress(&d);
    int warned = j.warned;
    char warning[JMSG_LENGTH_MAX];
    snprintf(warning, sizeof warning, "%s", j.first_warning);
    jpeg_destroy_decompress(&d);
    if (warned) {
        img_printable(warning);
        if (img_jpeg_failure_msg(c, path, warning, 1, e) != 0)
            return -1;
    }
    if (to_end)
        img_jpeg_set_verified(c, key);
    if (info->cmyk && !pl)
        img_jpeg_cmyk(img_grow(&c->dec, &c->dec_cap, (size_t)got->h * (size_t)got->w * (size_t)C),
                      c->tmp, (size_t)got->h * (size_t)got->w, C);
    return 0;
}

int img_jpeg_header_libjpeg(img_ctx *c, const char *path, img_info *info, errbuf *e)
{
    struct jpeg_decompress_struct d;
    jerr j;
    memset(&j, 0, sizeof j);
    d.err = jpeg_std_error(&j.pub);
    j.pub.error_exit = on_error;
    j.pub.emit_message = on_message;
    if (setjmp(j.jump)) {
        char msg[JMSG_LENGTH_MAX];
        d.err->format_message((j_common_ptr)&d, msg);
        jpeg_destroy_decompress(&d);
        img_printable(msg);
        return img_jpeg_failure_msg(c, path, msg, 0, e);
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, c->file, (unsigned long)c->file_len);
    if (jpeg_read_header(&d, TRUE) != JPEG_HEADER_OK || d.image_width == 0 || d.image_height == 0) {
        jpeg_destroy_decompress(&d);
        return errf(e, "%s: truncated JPEG (no image data)", path);
    }
    info->format = IMG_FMT_JPEG;
    info->w = (int)d.image_width;
    info->h = (int)d.image_height;
    info->cmyk = d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK;
    info->channels = d.jpeg_color_space == JCS_GRAYSCALE ? 1 : 3;
    info->tj_refused = 1;
    jpeg_destroy_decompress(&d);
    return 0;
}

int img_jpeg_decode_region(img_ctx *c, const char *path, const img_info *info, int C, int num,
                           const img_region *want, img_region *got, errbuf *e)
{
    return decode_region(c, path, info, C, num, want, got, NULL, e);
}

int img_jpeg_decode_planes(img_ctx *c, const char *path, const img_info *info, int num,
                           const img_region *want, img_region *got, img_planes *pl, errbuf *e)
{
    memset(pl, 0, sizeof *pl);
    return decode_region(c, path, info, 3, num, want, got, pl, e);
}
