/* jpeg_planar.h — the planar JPEG decode's hook into libjpeg
 * (jpeg_planar.c), for jpeg_region.c. Includes jpeglib.h. */
#ifndef TRAIN_IMAGE_JPEG_PLANAR_H
#define TRAIN_IMAGE_JPEG_PLANAR_H

#include <stdio.h>

#include <jpeglib.h>

#include "image/internal.h"

/* The file's layout (after jpeg_read_header) has a planar decode: grey,
 * or YCbCr whose luma is at the output's resolution and whose chroma
 * divides it evenly. 0 where the hook is not built. */
int img_jpeg_planar_layout(const struct jpeg_decompress_struct *d);

/* Whether the hook may be used in this process: built, and its self-check
 * passed against the libjpeg actually loaded (made once, on the first
 * call). *why, if not NULL, gets the reason it is off, or "". */
int img_jpeg_planar_ok(void);
const char *img_jpeg_planar_why(void);

/* After jpeg_start_decompress and jpeg_crop_scanline: the rows [y0, y1)
 * (from the row group holding y0) of the cropped columns x0 + cw as
 * planes in c->dec (*pl, *got); with to_end, the rest of the file is read
 * too (the caller then finishes the decompression). */
int img_jpeg_planar_rows(img_ctx *c, j_decompress_ptr d, const char *path, int y0, int y1, int sh,
                         int sw, JDIMENSION x0, JDIMENSION cw, img_planes *pl, img_region *got,
                         int to_end, errbuf *e);

#endif
