/* model_list.h — `train --model list` (app/model_list.c). */
#ifndef TRAIN_MODEL_LIST_H
#define TRAIN_MODEL_LIST_H

#include "app/options.h"

/* The list on stdout; 2 when the data set or its first image cannot be
 * read (the reason on stderr), else 0. */
int model_list_main(const options *o);

#endif
