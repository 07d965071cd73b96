/* tools/idx.h — read the gzip'd IDX files of (Fashion-)MNIST, for the tools
 * (and the tests' Fashion-MNIST fixtures); the program never reads IDX, so
 * this lives with the tools, not in common/.
 *
 * IDX: big-endian magic (0x00000801 labels, 0x00000803 images), counts and
 * dimensions, then raw u8 data. Header-only because only the tools use it.
 */
#ifndef TRAIN_TOOLS_IDX_H
#define TRAIN_TOOLS_IDX_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct idx_set {
    uint32_t n, rows, cols; /* rows = cols = 0 for label files */
    uint8_t *data;          /* n * rows * cols bytes (or n labels) */
} idx_set;

/* Where Fashion-MNIST's IDX files are: $TRAIN_FASHION_DIR, else Debian's
 * dataset-fashion-mnist folder (machines without the package, a GPU box
 * with the bundle, point the variable at a copy of the four .gz files). */
static inline const char *fashion_mnist_dir(void)
{
    const char *d = getenv("TRAIN_FASHION_DIR");
    return d && *d ? d : "/usr/share/datasets/fashion-mnist";
}

static uint32_t idx_be32(const uint8_t b[4])
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Reads `path` (gzip or plain). Returns 0, or -1 with a message on stderr. */
static int idx_read(const char *path, idx_set *s)
{
    memset(s, 0, sizeof *s);
    gzFile f = gzopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open (is dataset-fashion-mnist installed? try: make deps)\n",
                path);
        return -1;
    }
    uint8_t h[16];
    if (gzread(f, h, 8) != 8)
        goto bad;
    uint32_t magic = idx_be32(h), n = idx_be32(h + 4);
    size_t each = 1;
    if (magic == 0x803) {
        if (gzread(f, h + 8, 8) != 8)
            goto bad;
        s->rows = idx_be32(h + 8);
        s->cols = idx_be32(h + 12);
        if (s->rows == 0 || s->cols == 0 || s->rows > 4096 || s->cols > 4096)
            goto bad;
        each = (size_t)s->rows * s->cols;
    } else if (magic != 0x801) {
        goto bad;
    }
    if (n == 0 || n > 10000000)
        goto bad;
    s->n = n;
    s->data = malloc((size_t)n * each);
    if (!s->data)
        goto bad;
    if (gzread(f, s->data, (unsigned)((size_t)n * each)) != (int)((size_t)n * each))
        goto bad;
    gzclose(f);
    return 0;
bad:
    fprintf(stderr, "%s: not a valid IDX file (truncated or wrong magic)\n", path);
    free(s->data);
    s->data = NULL;
    gzclose(f);
    return -1;
}

#endif
