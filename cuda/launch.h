/* launch.h — the one way a kernel is launched, so kernels.cu compiles both
 * with nvcc (a real <<<grid, block, 0, stream>>> launch) and with g++
 * -DKERNEL_EMULATION (the same kernel run serially over the grid by the
 * test-only fake runtime, under AddressSanitizer: mk/cuda.mk force-includes
 * tests/fakecuda/runtime/emu.h, which declares emu_launch).
 *
 * Rules for kernels launched this way, so the serial emulation is exact:
 * every thread is independent (no __syncthreads, no shared memory, no
 * atomics, no warp intrinsics) and indexes with KERNEL_LOOP.
 */
#ifndef TRAIN_CUDA_LAUNCH_H
#define TRAIN_CUDA_LAUNCH_H

#include "cuda/check.h"

#ifdef KERNEL_EMULATION
#define LAUNCH_EXPR(k, grid, block, stream, ...)                                                   \
    emu_launch((stream), (grid), (block), #k, k, __VA_ARGS__)
#else
#define LAUNCH_EXPR(k, grid, block, stream, ...) k<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#endif

/* Enqueue kernel k; a bad configuration or argument is reported here.
 * cudaGetLastError is cleared first: a benign non-sticky status left by an
 * earlier call (cudaEventQuery's cudaErrorNotReady, a refused
 * cudaHostRegister that was handled) must not be blamed on this launch.
 * Sticky faults are unaffected: the launch itself then fails. */
#define LAUNCH(k, grid, block, stream, ...)                                                        \
    do {                                                                                           \
        (void)cudaGetLastError();                                                                  \
        LAUNCH_EXPR(k, grid, block, stream, __VA_ARGS__);                                          \
        gpu_check_cuda(cudaGetLastError(), "launch " #k "<<<" #grid ", " #block ">>>", __func__,   \
                       __FILE__, __LINE__);                                                        \
    } while (0)

/* Grid-stride loop over [0, n): correct for any grid size. */
#define KERNEL_LOOP(i, n)                                                                          \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n);                \
         i += (size_t)blockDim.x * gridDim.x)

#define KERNEL_THREADS 256
#define KERNEL_MAX_BLOCKS 4096

/* Blocks for n elements at KERNEL_THREADS each, capped (the loop covers the rest). */
static inline unsigned kernel_blocks(size_t n)
{
    size_t b = (n + KERNEL_THREADS - 1) / KERNEL_THREADS;
    if (b < 1)
        b = 1;
    return (unsigned)(b > KERNEL_MAX_BLOCKS ? KERNEL_MAX_BLOCKS : b);
}

#endif
