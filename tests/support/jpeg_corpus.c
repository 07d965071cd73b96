/* jpeg_corpus.c — see jpeg_corpus.h. */
#define _POSIX_C_SOURCE 200809L
#include "tests/support/jpeg_corpus.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "tests/support/images.h"

int jc_components(int space) { return space == JC_GREY ? 1 : space >= JC_CMYK ? 4 : 3; }

static const char *const space_names[] = {"grey", "ycc", "rgb", "cmyk", "ycck"};
static const char *const coding_names[] = {"base", "prog", "arith", "rst", "opt"};

/* The layouts: space and per-component sampling factors. */
typedef struct layout {
    int space;
    int samp[4][2];
} layout;

static const layout layouts[] = {
    /* grey: a one-component file may declare any factors; libjpeg's
     * buffers follow them, the pixels do not */
    {JC_GREY, {{1, 1}}},
    {JC_GREY, {{2, 2}}},
    {JC_GREY, {{2, 1}}},
    {JC_GREY, {{1, 2}}},
    {JC_GREY, {{4, 1}}},
    {JC_GREY, {{1, 4}}},
    {JC_GREY, {{4, 2}}},
    {JC_GREY, {{3, 3}}},
    {JC_GREY, {{4, 4}}},
    /* YCbCr, chroma 1x1: every luma factor pair within 10 blocks per MCU */
    {JC_YCC, {{1, 1}, {1, 1}, {1, 1}}},
    {JC_YCC, {{2, 1}, {1, 1}, {1, 1}}},
    {JC_YCC, {{1, 2}, {1, 1}, {1, 1}}},
    {JC_YCC, {{2, 2}, {1, 1}, {1, 1}}},
    {JC_YCC, {{4, 1}, {1, 1}, {1, 1}}},
    {JC_YCC, {{1, 4}, {1, 1}, {1, 1}}},
    {JC_YCC, {{4, 2}, {1, 1}, {1, 1}}},
    {JC_YCC, {{2, 4}, {1, 1}, {1, 1}}},
    {JC_YCC, {{3, 1}, {1, 1}, {1, 1}}},
    {JC_YCC, {{3, 2}, {1, 1}, {1, 1}}},
    /* per-component oddities */
    {JC_YCC, {{2, 2}, {2, 1}, {1, 1}}}, /* Cb and Cr sampled differently */
    {JC_YCC, {{2, 2}, {1, 2}, {2, 1}}},
    {JC_YCC, {{4, 1}, {2, 1}, {1, 1}}},
    {JC_YCC, {{1, 1}, {2, 2}, {1, 1}}}, /* chroma denser than luma */
    {JC_YCC, {{2, 1}, {1, 2}, {1, 1}}}, /* chroma taller than luma */
    {JC_YCC, {{2, 1}, {2, 1}, {2, 1}}}, /* every factor 2x1: 4:4:4 */
    {JC_RGB, {{1, 1}, {1, 1}, {1, 1}}}, /* no colour transform */
    {JC_CMYK, {{1, 1}, {1, 1}, {1, 1}, {1, 1}}},
    {JC_YCCK, {{2, 2}, {1, 1}, {1, 1}, {2, 2}}},
};

/* Sizes from 1 to 70 around the MCU boundaries of 8, 16 and 32, paired so
 * that height and width fall differently; then a few large ones. */
static const int small_sizes[] = {1, 7, 8, 9, 15, 16, 17, 23, 31, 32, 33, 47, 63, 64, 65, 70};
static const int large_sizes[][2] = {{333, 501}, {600, 398}};

int jc_corpus(jc_spec *out, int max)
{
    const int nl = (int)(sizeof layouts / sizeof *layouts);
    const int ns = (int)(sizeof small_sizes / sizeof *small_sizes);
    int n = 0;
#define ADD(L, H, W, CODING, Q)                                                                    \
    do {                                                                                           \
        if (out && n < max) {                                                                      \
            jc_spec *s = &out[n];                                                                  \
            memset(s, 0, sizeof *s);                                                               \
            s->h = (H), s->w = (W), s->space = (L)->space, s->coding = (CODING), s->quality = (Q); \
            memcpy(s->samp, (L)->samp, sizeof s->samp);                                            \
            int o = snprintf(s->name, sizeof s->name, "%s", space_names[s->space]);                \
            for (int k = 0; k < jc_components(s->space); k++)                                      \
                o += snprintf(s->name + o, sizeof s->name - (size_t)o, "%s%dx%d", k ? "-" : "_",   \
                              s->samp[k][0], s->samp[k][1]);                                       \
            snprintf(s->name + o, sizeof s->name - (size_t)o, "_%s_%dx%d.jpg",                     \
                     coding_names[s->coding], s->h, s->w);                                         \
        }                                                                                          \
        n++;                                                                                       \
    } while (0)
    for (int l = 0; l < nl; l++) {
        const layout *L = &layouts[l];
        /* baseline: every size, height and width paired off by a stride */
        for (int i = 0; i < ns; i++)
            ADD(L, small_sizes[i], small_sizes[(i + 5 + l) % ns], JC_BASELINE, 85);
        ADD(L, large_sizes[l % 2][0], large_sizes[l % 2][1], JC_BASELINE, 90);
        /* the other codings: a few sizes each */
        for (int c = JC_PROGRESSIVE; c <= JC_OPTIMIZED; c++) {
            ADD(L, 17 + 2 * c, 33 + 3 * l % 31, c, 80);
            ADD(L, 64, 65, c, 92);
            if (l % 4 == c % 4)
                ADD(L, large_sizes[(l + c) % 2][0], large_sizes[(l + c) % 2][1], c, 88);
        }
    }
#undef ADD
    return n;
}

typedef struct cerr {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
} cerr;

static void on_error(j_common_ptr ci) { longjmp(((cerr *)ci->err)->jump, 1); }

/* libjpeg's compressor over px as the spec says, into *buf (malloc'd by
 * libjpeg): 0, or -1 with libjpeg's reason. The setjmp lives here, where
 * nothing the error path reads changes after it. */
static int encode_into(const jc_spec *s, const uint8_t *px, int nc, unsigned char **buf,
                       unsigned long *size, char why[200])
{
    struct jpeg_compress_struct c;
    cerr e;
    c.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = on_error;
    if (setjmp(e.jump)) {
        e.pub.format_message((j_common_ptr)&c, why);
        jpeg_destroy_compress(&c);
        return -1;
    }
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, buf, size);
    c.image_width = (JDIMENSION)s->w;
    c.image_height = (JDIMENSION)s->h;
    c.input_components = nc;
    c.in_color_space = nc == 1 ? JCS_GRAYSCALE : nc == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_colorspace(&c, s->space == JC_GREY   ? JCS_GRAYSCALE
                            : s->space == JC_YCC  ? JCS_YCbCr
                            : s->space == JC_RGB  ? JCS_RGB
                            : s->space == JC_CMYK ? JCS_CMYK
                                                  : JCS_YCCK);
    jpeg_set_quality(&c, s->quality, TRUE);
    for (int k = 0; k < nc; k++) {
        c.comp_info[k].h_samp_factor = s->samp[k][0];
        c.comp_info[k].v_samp_factor = s->samp[k][1];
    }
    switch (s->coding) {
    case JC_PROGRESSIVE: jpeg_simple_progression(&c); break;
    case JC_ARITH: c.arith_code = TRUE; break;
    case JC_RESTART: c.restart_interval = 3; break;
    case JC_OPTIMIZED: c.optimize_coding = TRUE; break;
    default: break;
    }
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)px + (size_t)c.next_scanline * (size_t)s->w * (size_t)nc;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return 0;
}

uint8_t *jc_encode(const jc_spec *s, uint64_t seed, size_t *len, char why[200])
{
    const int nc = jc_components(s->space);
    uint8_t *px = ti_picture(s->h, s->w, nc, seed);
    unsigned char *buf = NULL;
    unsigned long size = 0;
    int rc = encode_into(s, px, nc, &buf, &size, why);
    free(px);
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    uint8_t *out = malloc(size);
    memcpy(out, buf, size);
    free(buf);
    *len = size;
    return out;
}

/* The segments before the first SOS: calls f(offset, total length incl.
 * marker) for each; returns the SOS's offset (or n). */
static size_t walk_header(const uint8_t *f, size_t n, uint8_t marker, size_t *first, size_t *flen,
                          size_t *keep, uint8_t *out, size_t *olen)
{
    size_t i = 2, o = 0;
    if (out) {
        memcpy(out, f, 2);
        o = 2;
    }
    *first = 0;
    while (i + 4 <= n && f[i] == 0xFF && f[i + 1] != 0xDA) {
        size_t seg = 2 + (size_t)(f[i + 2] << 8 | f[i + 3]);
        if (i + seg > n)
            break;
        if (f[i + 1] == marker) {
            if (!*first) {
                *first = i;
                *flen = seg;
            }
            (*keep)++;
        } else if (out) {
            memcpy(out + o, f + i, seg);
            o += seg;
        }
        i += seg;
    }
    if (out) {
        memcpy(out + o, f + i, n - i);
        *olen = o + (n - i);
    }
    return i;
}

uint8_t *jc_drop_segments(const uint8_t *f, size_t n, uint8_t marker, size_t *out_len)
{
    size_t first, flen = 0, count = 0, olen = 0;
    walk_header(f, n, marker, &first, &flen, &count, NULL, NULL);
    if (!count)
        return NULL;
    uint8_t *out = malloc(n);
    count = 0;
    walk_header(f, n, marker, &first, &flen, &count, out, &olen);
    *out_len = olen;
    return out;
}

uint8_t *jc_duplicate_segment(const uint8_t *f, size_t n, uint8_t marker, size_t *out_len)
{
    size_t first, flen = 0, count = 0;
    walk_header(f, n, marker, &first, &flen, &count, NULL, NULL);
    if (!count)
        return NULL;
    uint8_t *out = malloc(n + flen);
    memcpy(out, f, first + flen);
    memcpy(out + first + flen, f + first, n - first);
    *out_len = n + flen;
    return out;
}
