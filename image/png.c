/* png.c — PNG through libpng (Debian's libpng-dev), from memory.
 *
 * The same bytes stb_image gave (stb.c decoded PNG before, and
 * tests/test_png_libpng.c holds the two against each other): 8 bits per
 * sample, 16-bit samples keeping their high byte (png_set_strip_16),
 * palettes expanded, grey depths below 8 scaled up, alpha dropped with no
 * compositing; then our own conversion to 1 or 3 channels (ITU-R 601 luma
 * for colour to grey, grey replicated for colour). tRNS only ever made
 * alpha, which is dropped, so libpng ignores it (img_png_prepare refuses the
 * tRNS chunks stb_image refused); so are gAMA, iCCP, sRGB, sBIT and the
 * other ancillary chunks (no colour management, as stb_image and PIL).
 * Interlaced (Adam7) images are read in libpng's passes.
 * Stricter than stb_image on some broken files it accepted: IDAT chunks
 * with another chunk between them, a second PLTE, a chunk type with bytes
 * that are not letters ("corrupt PNG (libpng's reason)" now); and laxer
 * on one: damage in the zlib stream after the last pixel's data.
 *
 * Tolerated as stb_image tolerated them: CRC and Adler-32 errors (stb_image
 * checks neither, and img_png_prepare's padded palette leaves the PLTE CRC
 * stale), a zlib header's window size, libpng's benign errors; libpng's
 * warnings are not printed. libpng's errors longjmp to here and become
 * "path: corrupt PNG (libpng's message)"; memory libpng or zlib could not
 * get is reported as such (IMG_ENOMEM). check.c's structural checks run
 * first (img_png_header, img_png_prepare), as they did before stb_image.
 */
#define _POSIX_C_SOURCE 200809L
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/internal.h"

typedef struct png_src {
    const uint8_t *d;
    size_t n, pos;
    int overrun; /* libpng asked for bytes past the end */
    int nomem;   /* an allocation for libpng or zlib failed */
    char msg[96];
} png_src;

static void png_err_fn(png_structp png, png_const_charp msg)
{
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg ? msg : "unknown reason");
    png_longjmp(png, 1);
}

static void png_warn_fn(png_structp png, png_const_charp msg)
{
    (void)png, (void)msg; /* accepted, as stb_image accepted it, and quiet */
}

static png_voidp png_malloc_fn(png_structp png, png_alloc_size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p) {
        png_src *s = png_get_mem_ptr(png);
        s->nomem = 1;
    }
    return p;
}

static void png_free_fn(png_structp png, png_voidp p)
{
    (void)png;
    free(p);
}

static void png_read_fn(png_structp png, png_bytep out, size_t len)
{
    png_src *s = png_get_io_ptr(png);
    if (len > s->n - s->pos) {
        s->overrun = 1;
        png_error(png, "the data ends before the image");
    }
    memcpy(out, s->d + s->pos, len);
    s->pos += len;
}

/* The known ancillary chunks, none of which changes the pixels we keep. */
static const png_byte ignored_chunks[] = "bKGD\0cHRM\0eXIf\0gAMA\0hIST\0iCCP\0iTXt\0oFFs\0"
                                         "pCAL\0pHYs\0sBIT\0sCAL\0sPLT\0sRGB\0sTER\0tEXt\0"
                                         "tIME\0tRNS\0zTXt";

/* n channels (1 or 3) of npix pixels at buf, to C channels in place (buf
 * holds npix * max(n, C) bytes): colour to grey by our luma (forwards: each
 * pixel's grey lands before its colour), grey to colour replicated
 * (backwards). */
static void png_to_channels(uint8_t *buf, size_t npix, int n, int C)
{
    if (n == C)
        return;
    if (C == 1) {
        for (size_t i = 0; i < npix; i++)
            buf[i] = img_luma(buf[3 * i], buf[3 * i + 1], buf[3 * i + 2]);
        return;
    }
    for (size_t i = npix; i-- > 0;)
        buf[3 * i] = buf[3 * i + 1] = buf[3 * i + 2] = buf[i];
}

/* The decode proper; every libpng call after png_create is under its
 * setjmp. Returns the file's channel count after the transforms (1 or 3),
 * or 0 after a longjmp (s->msg, s->overrun, s->nomem say why). */
static int png_run(png_structp png, png_infop info, png_src *s, img_ctx *c, const img_info *want,
                   int C)
{
    if (setjmp(png_jmpbuf(png)))
        return 0;
    png_set_read_fn(png, s, png_read_fn);
    png_set_crc_action(png, PNG_CRC_QUIET_USE, PNG_CRC_QUIET_USE);
#ifdef PNG_IGNORE_ADLER32
    png_set_option(png, PNG_IGNORE_ADLER32, PNG_OPTION_ON);
#endif
    png_set_option(png, PNG_MAXIMUM_INFLATE_WINDOW, PNG_OPTION_ON);
    png_set_benign_errors(png, 1);
    /* our own limits (image.c) apply, not libpng's million pixels a side
     * (stb_image's limit was 2^24) */
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, 0);
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, ignored_chunks,
                                (int)(sizeof ignored_chunks / 5));
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
    if ((int)w != want->w || (int)h != want->h) {
        snprintf(s->msg, sizeof s->msg, "header says %dx%d, data %ux%u", want->w, want->h, w, h);
        return 0;
    }
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16)
        png_set_strip_16(png);
    png_set_strip_alpha(png); /* also any tRNS would-be alpha, were it read */
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int n = png_get_channels(png, info);
    size_t stride = (size_t)w * (size_t)n;
    if ((n != 1 && n != 3) || png_get_bit_depth(png, info) != 8 ||
        png_get_rowbytes(png, info) != stride) {
        snprintf(s->msg, sizeof s->msg, "unexpected layout: %d channels of %d bits", n,
                 png_get_bit_depth(png, info));
        return 0;
    }
    size_t npix = (size_t)w * (size_t)h, need = npix * (size_t)(n > C ? n : C);
    uint8_t *buf = img_try_grow(&c->dec, &c->dec_cap, need);
    if (!buf) {
        s->nomem = 1;
        return 0;
    }
    for (int p = 0; p < passes; p++)
        for (png_uint_32 y = 0; y < h; y++)
            png_read_row(png, buf + (size_t)y * stride, NULL);
    /* the chunks after the image, as stb_image read them to IEND (an
     * unknown critical chunk there is refused) */
    png_read_end(png, info); /* with no info it would skip every chunk unread */
    png_to_channels(buf, npix, n, C);
    return n;
}

int img_png_decode(img_ctx *c, const char *path, const img_info *info, int C, int *dh, int *dw,
                   errbuf *e)
{
    const uint8_t *data = c->file;
    size_t len = c->file_len;
    if (img_png_prepare(c, &data, &len, path, e) != 0)
        return -1;
    png_src s = {.d = data, .n = len};
    png_structp png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, &s, png_err_fn, png_warn_fn,
                                               &s, png_malloc_fn, png_free_fn);
    png_infop pi = png ? png_create_info_struct(png) : NULL;
    int made = pi != NULL, n = made ? png_run(png, pi, &s, c, info, C) : 0;
    png_destroy_read_struct(&png, made ? &pi : NULL, NULL); /* NULLs both */
    if (n > 0) {
        *dh = info->h;
        *dw = info->w;
        return 0;
    }
    if (s.overrun)
        return errf(e, "%s: truncated PNG (the data ends before the image)", path);
    if (s.nomem || !made) {
        char need[32];
        fmt_bytes(need, sizeof need, info->decode_bytes);
        errf(e, "%s: out of memory decoding this %dx%d PNG (it needs about %s)", path, info->h,
             info->w, need);
        return IMG_ENOMEM;
    }
    img_printable(s.msg);
    return errf(e, "%s: corrupt PNG (%s)", path, s.msg);
}
