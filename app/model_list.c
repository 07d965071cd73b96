/* model_list.c — `train --model list`: the zoo's models and their sizes,
 * for Fashion-MNIST's and E1's shapes, or for the shape of the given data
 * set's first image after the transforms the options ask for. */
#include <stdio.h>

#include "app/model_list.h"
#include "image/image.h"
#include "loader/dataset.h"
#include "nn/model.h"

int model_list_main(const options *o)
{
    if (!o->csv) {
        printf("for 1x28x28 inputs (Fashion-MNIST) and 10 classes:\n");
        model_print_list(stdout, 1, 28, 28, 10);
        printf("\nfor 3x64x64 inputs (E1 crops) and 10 classes:\n");
        model_print_list(stdout, 3, 64, 64, 10);
        return 0;
    }
    dataset ix;
    errbuf e;
    if (dataset_load(&ix, o->csv, &o->csv_o, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    int w, h, c, oh, ow;
    if (img_probe(dataset_path(&ix, 0), o->img.exif, &w, &h, &c, &e) != 0) {
        char line[2 * ERR_MAX];
        fprintf(stderr, "%s\n", dataset_row_message(&ix, 0, e.msg, line, sizeof line));
        dataset_free(&ix);
        return 2;
    }
    img_params p = o->img;
    if (p.rrc)
        p.crop_h = o->rrc_h, p.crop_w = o->rrc_w;
    img_output_size(&p, h, w, &oh, &ow);
    int ch = o->channels ? o->channels : (c >= 3 ? 3 : 1);
    printf("for %dx%dx%d inputs and %u classes (%s):\n", ch, oh, ow, ix.nclasses, o->csv);
    model_print_list(stdout, ch, oh, ow, (int)ix.nclasses);
    dataset_free(&ix);
    return 0;
}
