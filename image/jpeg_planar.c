/* jpeg_planar.c — the planar JPEG decode's hook into libjpeg: the
 * components' samples of a region before upsampling and colour conversion
 * (jpeg_region.c's img_jpeg_decode_planes, image.c's planar paths).
 *
 * libjpeg has no API for this. The hook replaces the post-processor's
 * method (struct jpeg_d_post_controller in jpegint.h, a header libjpeg-
 * turbo's own build does not install but Debian's -dev package does) after
 * jpeg_start_decompress, with fancy upsampling off (no context rows), and
 * copies each row group's component rows into planes. So:
 *   - it is built only where jpegint.h is found and declares the
 *     libjpeg-turbo 2.x or 3.x it was written for (TRAIN_JPEGINT, set by
 *     the Makefile; `make JPEGINT=0` builds without it, as make test also
 *     does once); elsewhere every decode takes the pixel path;
 *   - before the first use in a process it checks itself against the
 *     libjpeg actually loaded (one soname, libjpeg.so.62, covers 2.x and
 *     3.x): a generated 4:2:0 file and a grey file declaring 2x2, their
 *     planes against libjpeg's own YCbCr output without fancy upsampling.
 *     A mismatch turns the hook off for the process, with the reason
 *     (img_jpeg_planar_why, shown by --selftest and --version);
 *   - before taking the slot it checks the slot is there.
 * Tested against libjpeg-turbo 2.1.5 (Debian 12) and 3.1.1 (the library in
 * Pillow 11.3.0's wheel, make test).
 */
#define _GNU_SOURCE /* dl_iterate_phdr, memmem */
#include "image/jpeg_planar.h"

#include <limits.h>
#include <link.h>

#include <pthread.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#if defined(TRAIN_JPEGINT) && TRAIN_JPEGINT
#include <jconfig.h>
#if defined(LIBJPEG_TURBO_VERSION_NUMBER) && LIBJPEG_TURBO_VERSION_NUMBER >= 2000000 &&            \
    LIBJPEG_TURBO_VERSION_NUMBER < 4000000
#define HOOK 1
/* after jpeglib.h: the post-processor's method table */
#include <jpegint.h>
#endif
#endif

#ifdef HOOK

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
int img_jpeg_planar_layout(const struct jpeg_decompress_struct *d)
{
    if (d->num_components == 1 && d->jpeg_color_space == JCS_GRAYSCALE)
        return 1;
    if (d->num_components != 3 || d->jpeg_color_space != JCS_YCbCr)
        return 0;
    const jpeg_component_info *y = &d->comp_info[0];
    if (y->h_samp_factor != d->max_h_samp_factor || y->v_samp_factor != d->max_v_samp_factor)
        return 0;
    /* chroma at 1 or 1/2 of the luma's resolution each way (4:4:4, 4:2:2,
     * 4:4:0, 4:2:0): the ratios libjpeg fancy-upsamples, which the planes'
     * resampler stands in for. Others (4:1:1, luma 1x4, 3x2 ...) libjpeg
     * upsamples by replication, which the resampler does not imitate: a
     * newcomer's 1x4 photograph was 2.6 levels off on average, p99 19. */
    for (int k = 1; k < 3; k++) {
        const jpeg_component_info *ch = &d->comp_info[k];
        if (d->max_h_samp_factor % ch->h_samp_factor || d->max_v_samp_factor % ch->v_samp_factor)
            return 0;
        const int rh = d->max_h_samp_factor / ch->h_samp_factor,
                  rv = d->max_v_samp_factor / ch->v_samp_factor;
        if (rh > 2 || rv > 2)
            return 0;
    }
    return 1;
}

/* The rows [y0, y1) (from the row group holding y0) of the cropped
 * columns as planes: the components' samples before upsampling and colour
 * conversion, in c->dec. */
int img_jpeg_planar_rows(img_ctx *c, j_decompress_ptr d, const char *path, int y0, int y1, int sh,
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

/* ---------------------------------------------------------------- self-check */

typedef struct cerr {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
} cerr;

static void check_error(j_common_ptr ci) { longjmp(((cerr *)ci->err)->jump, 1); }
static void check_message(j_common_ptr ci, int level)
{
    (void)ci;
    (void)level;
}

/* A 40 x 48 picture as JPEG: grey with 2x2 declared, or YCbCr 4:2:0. */
static unsigned char *check_file(int grey, unsigned long *len)
{
    struct jpeg_compress_struct c;
    cerr e;
    unsigned char *buf = NULL;
    *len = 0;
    c.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = check_error;
    if (setjmp(e.jump)) {
        jpeg_destroy_compress(&c);
        free(buf);
        return NULL;
    }
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &buf, len);
    c.image_width = 48, c.image_height = 40;
    c.input_components = grey ? 1 : 3;
    c.in_color_space = grey ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    c.comp_info[0].h_samp_factor = c.comp_info[0].v_samp_factor = 2;
    jpeg_start_compress(&c, TRUE);
    unsigned char row[48 * 3];
    while (c.next_scanline < c.image_height) {
        const unsigned y = c.next_scanline;
        for (unsigned x = 0; x < 48 * (unsigned)c.input_components; x++)
            row[x] = (unsigned char)(x * 5 + y * 7 + (x * y % 13) * 9);
        JSAMPROW r = row;
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return buf;
}

/* libjpeg's own output of f (YCbCr or grey, no fancy upsampling: chroma
 * replicated), or the hook's planes of the region x0.., rows y0..y1; 0 when
 * they agree. */
static int check_one(const unsigned char *f, unsigned long n, char *why, size_t whylen)
{
    struct jpeg_decompress_struct d;
    cerr e;
    unsigned char *ref = NULL;
    img_ctx *c = NULL;
    d.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = check_error;
    e.pub.emit_message = check_message;
    if (setjmp(e.jump)) {
        char msg[JMSG_LENGTH_MAX];
        d.err->format_message((j_common_ptr)&d, msg);
        snprintf(why, whylen, "libjpeg failed on the check's file: %s", msg);
        jpeg_destroy_decompress(&d);
        free(ref);
        img_ctx_free(c);
        return -1;
    }
    /* 1. the reference */
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, f, n);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = d.jpeg_color_space;
    d.do_fancy_upsampling = FALSE;
    d.dct_method = JDCT_ISLOW;
    jpeg_start_decompress(&d);
    const int W = (int)d.output_width, H = (int)d.output_height, C = d.output_components;
    ref = malloc((size_t)W * H * C);
    while (d.output_scanline < d.output_height) {
        JSAMPROW r = ref + (size_t)d.output_scanline * W * C;
        jpeg_read_scanlines(&d, &r, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    /* 2. the hook, on a region away from the corner */
    c = img_ctx_create();
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, f, n);
    jpeg_read_header(&d, TRUE);
    if (!img_jpeg_planar_layout(&d)) {
        snprintf(why, whylen, "the check's file has no planar layout");
        jpeg_destroy_decompress(&d);
        free(ref);
        img_ctx_free(c);
        return -1;
    }
    d.out_color_space = d.jpeg_color_space;
    d.do_fancy_upsampling = FALSE;
    d.dct_method = JDCT_ISLOW;
    jpeg_start_decompress(&d);
    JDIMENSION x0 = 16, cw = 24;
    jpeg_crop_scanline(&d, &x0, &cw);
    img_planes pl;
    img_region got;
    errbuf eb;
    if (!d.post || img_jpeg_planar_rows(c, &d, "check", 9, 33, H, W, x0, cw, &pl, &got, 1, &eb)) {
        snprintf(why, whylen, "the hook could not run");
        jpeg_destroy_decompress(&d);
        free(ref);
        img_ctx_free(c);
        return -1;
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    int bad = 0;
    for (int k = 0; k < pl.n && !bad; k++)
        for (int y = 0; y < got.h && !bad; y++)
            for (int x = 0; x < (int)cw && !bad; x++) {
                const int sy = (int)(y * pl.fy[k]), sx = (int)(x * pl.fx[k]);
                if (sy >= pl.h[k] || sx >= pl.w[k])
                    continue;
                const unsigned char want = ref[((size_t)(got.y + y) * W + got.x + x) * C + k],
                                    have = pl.p[k][(size_t)sy * pl.stride[k] + (size_t)sx];
                if (want != have) {
                    snprintf(why, whylen,
                             "the planes differ from libjpeg's own output (component %d, row %d, "
                             "column %d: %d vs %d)",
                             k, got.y + y, got.x + x, have, want);
                    bad = 1;
                }
            }
    free(ref);
    img_ctx_free(c);
    return bad ? -1 : 0;
}

static pthread_once_t check_once = PTHREAD_ONCE_INIT;
static int hook_ok;
static char hook_why[300];

static void check_hook(void)
{
    if (getenv("TRAIN_NO_PLANAR") && *getenv("TRAIN_NO_PLANAR") &&
        strcmp(getenv("TRAIN_NO_PLANAR"), "0")) {
        snprintf(hook_why, sizeof hook_why, "TRAIN_NO_PLANAR is set");
        return;
    }
    for (int grey = 0; grey < 2; grey++) {
        unsigned long n;
        unsigned char *f = check_file(grey, &n);
        if (!f) {
            snprintf(hook_why, sizeof hook_why, "the self-check could not write its file");
            return;
        }
        int rc = check_one(f, n, hook_why, sizeof hook_why);
        free(f);
        if (rc)
            return;
    }
    hook_ok = 1;
}

int img_jpeg_planar_ok(void)
{
    pthread_once(&check_once, check_hook);
    return hook_ok;
}

const char *img_jpeg_planar_why(void)
{
    pthread_once(&check_once, check_hook);
    return hook_ok ? "" : hook_why;
}

#else /* no hook: every decode takes the pixel path */

int img_jpeg_planar_layout(const struct jpeg_decompress_struct *d)
{
    (void)d;
    return 0;
}

int img_jpeg_planar_ok(void) { return 0; }

const char *img_jpeg_planar_why(void)
{
#if defined(TRAIN_JPEGINT) && TRAIN_JPEGINT
    return "built against a libjpeg other than libjpeg-turbo 2.x or 3.x";
#else
    return "built without libjpeg's jpegint.h";
#endif
}

int img_jpeg_planar_rows(img_ctx *c, j_decompress_ptr d, const char *path, int y0, int y1, int sh,
                         int sw, JDIMENSION x0, JDIMENSION cw, img_planes *pl, img_region *got,
                         int to_end, errbuf *e)
{
    (void)c, (void)d, (void)y0, (void)y1, (void)sh, (void)sw, (void)x0, (void)cw, (void)pl;
    (void)got, (void)to_end;
    return errf(e, "%s: internal: no planar decode in this build", path);
}

#endif

/* ---------------------------------------------------------------- versions */

typedef struct lib_find {
    const char *name; /* "libjpeg.so", "libturbojpeg.so" */
    char path[512];
} lib_find;

static int find_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    lib_find *f = arg;
    const char *slash = strrchr(info->dlpi_name, '/');
    if (slash && !strncmp(slash + 1, f->name, strlen(f->name))) {
        snprintf(f->path, sizeof f->path, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

/* "libjpeg-turbo version X (build Y)" as the loaded library file says it,
 * and the file; "?" where it cannot be read. */
static void lib_version(const char *name, char *out, size_t n)
{
    lib_find f = {.name = name};
    dl_iterate_phdr(find_lib, &f);
    if (!f.path[0]) {
        snprintf(out, n, "%s not loaded", name);
        return;
    }
    char real[PATH_MAX], ver[64] = "version unknown";
    const char *shown = realpath(f.path, real) ? real : f.path;
    FILE *fp = fopen(f.path, "rb");
    if (fp) {
        static char buf[1 << 16];
        const char key[] = "libjpeg-turbo version ";
        size_t got, keep = 0;
        while ((got = fread(buf + keep, 1, sizeof buf - keep - 1, fp)) > 0) {
            got += keep;
            buf[got] = 0;
            char *at = memmem(buf, got, key, sizeof key - 1);
            if (at && at + sizeof key - 1 + 16 < buf + got) {
                char *v = at + sizeof key - 1;
                size_t len = strcspn(v, " ");
                snprintf(ver, sizeof ver, "%.*s", (int)(len < 30 ? len : 30), v);
                break;
            }
            keep = got > 64 ? 64 : got; /* a key across the boundary */
            memmove(buf, buf + got - keep, keep);
        }
        fclose(fp);
    }
    snprintf(out, n, "%s (%.400s)", ver, shown);
}

const char *img_decoder_versions(void)
{
    static char text[1800];
    char jpeg[600], tj[600];
    /* the libraries are loaded at start (the binary links both) */
    lib_version("libjpeg.so", jpeg, sizeof jpeg);
    lib_version("libturbojpeg.so", tj, sizeof tj);
#ifdef LIBJPEG_TURBO_VERSION
#define TRAIN_STR2(x) #x
#define TRAIN_STR(x) TRAIN_STR2(x)
    const char *hdr = TRAIN_STR(LIBJPEG_TURBO_VERSION);
#else
    const char *hdr = "not libjpeg-turbo";
#endif
    const char *why = img_jpeg_planar_why();
    snprintf(text, sizeof text,
             "libjpeg %s; TurboJPEG %s; built with headers %s; planar decode %s%s%s", jpeg, tj, hdr,
             img_jpeg_planar_ok() ? "on" : "off", *why ? ": " : "", why);
    (void)sizeof text;
    return text;
}
