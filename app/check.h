/* check.h — `train --check` and `--check=decode` (app/check.c). */
#ifndef TRAIN_CHECK_H
#define TRAIN_CHECK_H

#include "app/options.h"

/* Checks --csv and --val's data sets (o->check: 1 headers, 2 decode); 0
 * when every row and file is good, 2 otherwise (each named on stderr). */
int check_main(const options *o);

#endif
