/* cpu.h — the CPU backend (im2col + OpenBLAS, our own threads for the
 * element-wise and pooling work): the one entry point above nn/backend.h's
 * interface. Everything else of cpu/ is internal (cpu/internal.h). */
#ifndef TRAIN_CPU_H
#define TRAIN_CPU_H

#include "nn/backend.h"

/* threads: our worker threads (OpenBLAS runs single-threaded in each),
 * 0 = one per core, at most CPU_MAX_THREADS. NULL with e filled when threads is out of range or memory is
 * short. */
#define CPU_MAX_THREADS 256
backend *backend_cpu_create(int threads, errbuf *e);

#endif
