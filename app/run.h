/* run.h — one configuration of train, start to finish: data, loader,
 * device, model, epochs, report. Sweeps (sweep.h) run this in a fresh
 * process per configuration; diagnosis (diagnose.h) runs parts of it. */
#ifndef TRAIN_RUN_H
#define TRAIN_RUN_H

#include "app/options.h"
#include "app/report.h"

/* The single values a run uses of the options a sweep varies. */
typedef struct run_choice {
    int workers, prefetch, batch, mode, pin, non_blocking;
} run_choice;

/* Exit statuses (also loader_status): */
enum run_status {
    RUN_OK = 0,
    RUN_INTERNAL = 1,
    RUN_BAD_INPUT = 2,
    RUN_WORKER_LOST = 3,
    RUN_NONFINITE = 4,
    RUN_NO_MEMORY = 5, /* memory ran out decoding an image (LOADER_NO_MEMORY) */
};

/* The record's view of a configuration: choice c with the batch actually
 * used (c->batch may be 0, the model's default) and the names of the
 * device and the model. The one place a run_config is filled. */
run_config run_config_of(const run_choice *c, int batch, const char *device, const char *model);

/* The choice from o's first list values. */
void run_choice_first(const options *o, run_choice *c);

/* Runs one configuration; prints the epoch lines; returns the exit status. */
int run_one(const options *o, const run_choice *c);

/* Installs SIGINT/SIGTERM handlers that stop the loader; returns the
 * signal received so far (0 if none). */
void run_install_signals(void);
int run_signal_received(void);

/* `train --version`: the revision, what was built in, the image
 * libraries in use (run_header.c). */
int run_print_version(FILE *out);

#endif
