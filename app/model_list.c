/* model_list.c — `train --model list`: the zoo's models and their sizes,
 * for Fashion-MNIST's and E1's shapes, or for the shape of the given data
 * set's first image after the transforms the options ask for, with the
 * convolution algorithms the CPU backend would pick for each model. */
#include <stdio.h>

#include "app/feed.h"
#include "app/model_list.h"
#include "cpu/cpu.h"
#include "image/image.h"
#include "loader/dataset.h"
#include "nn/model.h"

static int model_list_data(const options *o, backend *cpu, const csv_opts *co);

/* --model list's lines for the data's inputs (or two usual ones); cpu
 * (may be NULL) names each model's convolutions' algorithms */
static int model_list_print(const options *o, backend *cpu)
{
    if (!o->csv) {
        printf("for 1x28x28 inputs (Fashion-MNIST) and 10 classes:\n");
        model_print_list(stdout, 1, 28, 28, 10, cpu);
        printf("\nfor 3x64x64 inputs (E1 crops) and 10 classes:\n");
        model_print_list(stdout, 3, 64, 64, 10, cpu);
        return 0;
    }
    errbuf e;
    csv_opts co = o->csv_o;
    shard_cache_opts sc;
    int temp;
    if (feed_shard_cache_open(o, &o->csv, 1, &co, &sc, &temp, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    int rc = model_list_data(o, cpu, &co);
    feed_shard_cache_close(&sc, temp);
    return rc;
}

static int model_list_data(const options *o, backend *cpu, const csv_opts *co)
{
    dataset ds;
    errbuf e;
    if (dataset_load(&ds, o->csv, co, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    int w, h, c, oh, ow;
    img_src at;
    char where[ERR_MAX], local[4096];
    if (dataset_src_local(&ds, 0, &at, where, sizeof where, local, sizeof local, 1, &e) != 0 ||
        img_probe_src(&at, o->img.exif, &w, &h, &c, &e) != 0) {
        char line[2 * ERR_MAX];
        fprintf(stderr, "%s\n", dataset_row_message(&ds, 0, e.msg, line, sizeof line));
        dataset_free(&ds);
        return 2;
    }
    img_params p = o->img;
    if (p.rrc)
        p.crop_h = o->rrc_h, p.crop_w = o->rrc_w;
    img_output_size(&p, h, w, &oh, &ow);
    int ch = o->channels ? o->channels : (c >= 3 ? 3 : 1);
    printf("for %dx%dx%d inputs and %u classes (%s):\n", ch, oh, ow, ds.nclasses, o->csv);
    model_print_list(stdout, ch, oh, ow, (int)ds.nclasses, cpu);
    dataset_free(&ds);
    return 0;
}

/* --model list, with the algorithms the CPU backend picks (a backend of
 * one thread: it makes no plan, conv_describe only names the choice) */
int model_list_main(const options *o)
{
    errbuf e;
    backend *cpu = backend_cpu_create(1, &e);
    int rc = model_list_print(o, cpu);
    if (cpu)
        cpu->ops->destroy(cpu);
    return rc;
}
