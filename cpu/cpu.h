/* cpu.h — the CPU backend: the one entry point above nn/backend.h's
 * interface. Convolutions by several algorithms, picked per shape when a
 * plan is made (conv.c): on AVX-512, Winograd F(2x2,3x3) (conv_wino.c,
 * wino_dw.c) and direct kernels (conv_direct.c); im2col + OpenBLAS GEMM
 * otherwise. Fully connected layers by OpenBLAS; the element-wise, pooling
 * and batch-norm work on our own threads. Everything else of cpu/ is
 * internal (cpu/internal.h). */
#ifndef TRAIN_CPU_H
#define TRAIN_CPU_H

#include "nn/backend.h"

/* threads: our worker threads (OpenBLAS runs single-threaded in each),
 * 0 = one per core, at most CPU_MAX_THREADS. NULL with e filled when threads is out of range or memory is
 * short. */
#define CPU_MAX_THREADS 256
backend *backend_cpu_create(int threads, errbuf *e);

/* OpenBLAS single-threaded, its thread pool stopped: call first thing in
 * main. Debian's pthread OpenBLAS starts one thread per core in its
 * library constructor, and they spin (sched_yield) for about 2^28 cycles
 * waiting for work before they sleep: 0.1 s of CPU on this machine in
 * every process, competing with the loader at start-up, for a pool our
 * backend never uses (it calls OpenBLAS from its own threads, one each).
 * A BLAS without OpenBLAS's internal blas_thread_shutdown_ is left as it
 * is. */
void cpu_blas_single(void);

#endif
