/* run_header.c — the run record that opens a --json file (report.h's
 * run_header), filled from a run's context. The version is the git
 * revision the Makefile writes into build/version.h ("unknown" outside a
 * git checkout). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "app/device.h"
#include "app/run_ctx.h"
#include "app/sweep.h"
#include "build/version.h"
#include "comm/dist.h"
#include "image/image.h"

int run_print_version(FILE *out)
{
    fprintf(out, "train %s\n", TRAIN_REVISION);
    fprintf(out, "build: %s, %s\n", device_built_with_cuda() ? "CUDA" : "CPU only (no CUDA)",
#ifdef TRAIN_MPI
            "MPI"
#else
            "one process (no MPI)"
#endif
    );
    fprintf(out, "images: %s\n", img_decoder_versions());
    char libs[200], warn[400];
    if (device_gpu_libraries(libs, sizeof libs, warn, sizeof warn))
        fprintf(out, "gpu libraries: %s (loaded)%s%s\n", libs, warn[0] ? "; warning: " : "", warn);
    if (dist_nccl_version(libs, sizeof libs, warn, sizeof warn))
        fprintf(out, "nccl: %s (loaded)%s%s\n", libs, warn[0] ? "; warning: " : "", warn);
    return 0;
}

void run_write_header(run_ctx *r)
{
    if (!r->json)
        return;
    const options *o = r->o;
    run_header h = {.argc = o->argc,
                    .argv = o->argv,
                    .version = TRAIN_REVISION,
                    .data = o->csv,
                    .val = r->f.have_val ? o->val_csv : NULL,
                    .samples = r->f.train.n,
                    .val_samples = r->f.have_val ? r->f.val.n : 0,
                    .classes = r->f.train.nclasses,
                    .first_h = r->f.fixed_h,
                    .first_w = r->f.fixed_w,
                    .channels = r->f.ss.channels,
                    .out_h = r->f.ss.out_h,
                    .out_w = r->f.ss.out_w,
                    .img = &r->f.ss.train,
                    .eval = &r->f.ss.eval,
                    .normalize_imagenet = o->normalize_imagenet,
                    .shuffle = o->shuffle,
                    .drop_last = o->drop_last,
                    .seed = o->seed,
                    .epochs = o->epochs};
    /* the channels are known once the data is (a run that stopped before
     * has none to normalise) */
    float mean[MODEL_MAX_CHANNELS], stdv[MODEL_MAX_CHANNELS];
    if (r->f.ss.channels > 0 && r->f.ss.channels <= MODEL_MAX_CHANNELS) {
        run_norm_values(o, r->f.ss.channels, mean, stdv);
        h.mean = mean;
        h.std = stdv;
    }
    /* a sweep's configuration: the sweep's command line, as the user gave it */
    const char *user = o->sweep_child ? getenv(SWEEP_ARGV_ENV) : NULL;
    if (user && user[0] == '[' && user[strlen(user) - 1] == ']')
        h.sweep_argv = user;
    /* the device as asked (auto, cpu, cuda): it is chosen after the fork;
     * the epoch records name it */
    h.cfg = run_config_of(&r->c, r->f.batch, o->device, r->model_name);
    run_json_wrote(r, report_run_json(r->json, &h, &r->mi));
}
