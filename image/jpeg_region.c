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
 * random-resized crop and of a resize or centre crop, image.c) stops before upsampling and colour conversion: it
 * takes libjpeg's post-processor slot (jpegint.h's method table, set
 * after jpeg_start_decompress) and copies each row group's component rows
 * into planes. libjpeg-turbo 2.1.5's own raw mode (raw_data_out +
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
/* after jpeglib.h: the post-processor's method table, hooked by the
 * planar decode (installed with libjpeg-turbo's headers) */
#include <jpegint.h>

#include "image/internal.h"

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

/* Where the planar decode's post-processor hook puts each row group. */
typedef struct plane_sink {
    int n;         /* components */
    int maxv;      /* output rows per row group */
    int rgh[3];    /* rows of component k per row group */
    int w[3];      /* samples of component k copied per row */
    int rows[3];   /* rows of component k kept */
    uint8_t *p[3]; /* plane k */
    size_t stride[3];
    JDIMENSION y0; /* output row of the first kept row group */
} plane_sink;

/* Takes the place of the post-processor (upsampling and colour
 * conversion): one row group of component rows copied into the planes,
 * as many output rows counted as the upsampler would have made. */
static void take_row_group(j_decompress_ptr d, JSAMPIMAGE in, JDIMENSION *in_row_group_ctr,
                           JDIMENSION in_row_groups_avail, JSAMPARRAY out, JDIMENSION *out_row_ctr,
                           JDIMENSION out_rows_avail)
{
    (void)out;
    plane_sink *s = d->client_data;
    if (*in_row_group_ctr >= in_row_groups_avail || *out_row_ctr >= out_rows_avail)
        return;
    const JDIMENSION row = d->output_scanline + *out_row_ctr;
    if (row >= s->y0) {
        const size_t g = (row - s->y0) / (JDIMENSION)s->maxv;
        for (int k = 0; k < s->n; k++)
            for (int r = 0; r < s->rgh[k]; r++) {
                size_t dst = g * (size_t)s->rgh[k] + (size_t)r;
                if (dst < (size_t)s->rows[k])
                    memcpy(s->p[k] + dst * s->stride[k],
                           in[k][*in_row_group_ctr * (JDIMENSION)s->rgh[k] + (JDIMENSION)r],
                           (size_t)s->w[k]);
            }
    }
    JDIMENSION n = (JDIMENSION)s->maxv, left = d->output_height - row,
               room = out_rows_avail - *out_row_ctr;
    n = n < left ? n : left;
    n = n < room ? n : room;
    *out_row_ctr += n;
    (*in_row_group_ctr)++;
}

/* The planar layouts this decode takes: grey, or YCbCr whose luma is at
 * the output's resolution and whose chroma divides it evenly. */
static int planar_layout(const struct jpeg_decompress_struct *d)
{
    if (d->num_components == 1 && d->jpeg_color_space == JCS_GRAYSCALE)
        return 1;
    if (d->num_components != 3 || d->jpeg_color_space != JCS_YCbCr)
        return 0;
    const jpeg_component_info *y = &d->comp_info[0];
    if (y->h_samp_factor != d->max_h_samp_factor || y->v_samp_factor != d->max_v_samp_factor)
        return 0;
    for (int k = 1; k < 3; k++) {
        const jpeg_component_info *ch = &d->comp_info[k];
        if (d->max_h_samp_factor % ch->h_samp_factor || d->max_v_samp_factor % ch->v_samp_factor)
            return 0;
    }
    return 1;
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

/* The rows [y0, y1) (from the row group holding y0) of the cropped
 * columns as planes: the components' samples before upsampling and colour
 * conversion, in c->dec. */
static int planar_rows(img_ctx *c, j_decompress_ptr d, const char *path, int y0, int y1, int sh,
                       int sw, JDIMENSION x0, JDIMENSION cw, img_planes *pl, img_region *got,
                       int to_end, errbuf *e)
{
    plane_sink s = {.n = d->num_components, .maxv = d->max_v_samp_factor};
    const int ya = y0 - y0 % s.maxv, groups = (y1 - ya + s.maxv - 1) / s.maxv;
    size_t off[3], total = 0;
    for (int k = 0; k < s.n; k++) {
        const jpeg_component_info *ci = &d->comp_info[k];
        /* samples per row group across and down (jdsample.c's in_group) */
        const int h_in = ci->h_samp_factor * ci->DCT_scaled_size / d->min_DCT_scaled_size;
        const int v_in = ci->v_samp_factor * ci->DCT_scaled_size / d->min_DCT_scaled_size;
        /* relative to the largest factor, grey included: a grey file may
         * declare 2x2 (jpegtran -grayscale writes that), and its one
         * component is then at the output's resolution with h_in = 2 */
        const int h_out = d->max_h_samp_factor;
        s.rgh[k] = v_in;
        s.w[k] = (int)(((size_t)cw * (size_t)h_in + (size_t)h_out - 1) / (size_t)h_out);
        s.rows[k] = groups * v_in;
        s.stride[k] = ((size_t)s.w[k] + 31) & ~(size_t)31;
        off[k] = total;
        total += s.stride[k] * (size_t)s.rows[k];
        pl->fy[k] = (double)v_in / s.maxv;
        pl->fx[k] = (double)h_in / h_out;
    }
    uint8_t *buf = img_grow(&c->dec, &c->dec_cap, total + 64); /* vector passes read past rows */
    for (int k = 0; k < s.n; k++) {
        s.p[k] = buf + off[k];
        pl->p[k] = s.p[k];
        pl->stride[k] = s.stride[k];
        pl->h[k] = s.rows[k];
        pl->w[k] = s.w[k];
    }
    pl->n = s.n;
    s.y0 = (JDIMENSION)ya;
    d->client_data = &s;
    d->post->post_process_data = take_row_group;
    if (ya > 0 && jpeg_skip_scanlines(d, (JDIMENSION)ya) != (JDIMENSION)ya)
        return errf(e, "%s: truncated JPEG (cannot skip to row %d)", path, ya);
    JSAMPLE unused[4] = {0};
    JSAMPROW rows[4] = {unused, unused, unused, unused}; /* max_v_samp_factor <= 4 */
    for (int g = 0; g < groups; g++)
        if (jpeg_read_scanlines(d, rows, (JDIMENSION)s.maxv) == 0)
            break;
    /* The rest of the file, for decode_region's read to the end: row groups
     * to the next iMCU row, whole iMCU rows skipped (entropy-decoded only),
     * then the last iMCU row read (take_row_group keeps nothing below the
     * crop). A skip that does not start and end on iMCU rows goes through
     * the upsampler's counters, which the hook bypasses: libjpeg then read
     * past the scan and warned of a premature end. */
    const JDIMENSION imcu = (JDIMENSION)(d->min_DCT_scaled_size * d->max_v_samp_factor);
    while (to_end && d->output_scanline < d->output_height && d->output_scanline % imcu)
        if (jpeg_read_scanlines(d, rows, (JDIMENSION)s.maxv) == 0)
            break;
    const JDIMENSION left = d->output_height - d->output_scanline;
    if (to_end && left > imcu)
        jpeg_skip_scanlines(d, (left - 1) / imcu * imcu);
    while (to_end && d->output_scanline < d->output_height)
        if (jpeg_read_scanlines(d, rows, (JDIMENSION)s.maxv) == 0)
            break;
    int h = groups * s.maxv;
    *got = (img_region){
        .y = ya, .x = (int)x0, .h = h < sh - ya ? h : sh - ya, .w = (int)cw, .sh = sh, .sw = sw};
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
    if (pl && (info->cmyk || !planar_layout(&d))) {
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
    const int to_end = !img_jpeg_verified(c);
    if (pl ? planar_rows(c, &d, path, y0, y1, sh, sw, x0, cw, pl, got, to_end, e)
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
        img_jpeg_set_verified(c);
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
