/* jpeg_corpus.h — a generated corpus of the JPEG layouts a decoder meets,
 * written with libjpeg's own compressor (which, unlike TurboJPEG's, takes
 * any sampling factors per component), plus byte patches for what no
 * encoder writes (missing or duplicated tables, truncations).
 *
 * The layouts: grey with every sampling factor a one-component file may
 * declare (libjpeg ignores them for the pixels, but not for its buffers);
 * YCbCr with every luma/chroma factor pair libjpeg accepts (at most 10
 * blocks per MCU) and a few per-component oddities (Cb and Cr sampled
 * differently, chroma denser than luma); CMYK and YCCK; each in baseline,
 * progressive, arithmetic-coded, restart-interval and optimised-Huffman
 * coding; sizes around every MCU boundary from 1 to 70 pixels plus a few
 * large ones. jc_corpus lists them; jc_encode writes one. */
#ifndef TRAIN_TESTS_JPEG_CORPUS_H
#define TRAIN_TESTS_JPEG_CORPUS_H

#include <stddef.h>
#include <stdint.h>

enum jc_space { JC_GREY, JC_YCC, JC_RGB, JC_CMYK, JC_YCCK };
enum jc_coding { JC_BASELINE, JC_PROGRESSIVE, JC_ARITH, JC_RESTART, JC_OPTIMIZED };

typedef struct jc_spec {
    int h, w;
    int space;      /* jc_space */
    int samp[4][2]; /* h, v sampling factor of each component (1..4) */
    int coding;     /* jc_coding */
    int quality;    /* 1..100 */
    char name[64];  /* a file name that says all of the above */
} jc_spec;

/* Components of a colour space (1, 3 or 4). */
int jc_components(int space);

/* The corpus: fills at most max specs (NULL: counts only); returns how
 * many there are. The same list on every call. */
int jc_corpus(jc_spec *out, int max);

/* Encode a picture of the spec's size (made from `seed`: smooth gradients,
 * a disc and texture, in the spec's input space: grey, RGB or CMYK) as the
 * spec says. Returns malloc'd bytes (*len), or NULL with a reason in why
 * when libjpeg refuses the layout. */
uint8_t *jc_encode(const jc_spec *s, uint64_t seed, size_t *len, char why[200]);

/* Byte patches. Each returns a malloc'd copy of the file (*out_len) or
 * NULL when the file has no such part. */
/* every DQT segment removed (the file then uses tables it does not define) */
uint8_t *jc_drop_segments(const uint8_t *f, size_t n, uint8_t marker, size_t *out_len);
/* the first segment with `marker` written twice */
uint8_t *jc_duplicate_segment(const uint8_t *f, size_t n, uint8_t marker, size_t *out_len);

#endif
