/* emu.h — serial emulation of the CUDA launch model, for tests only.
 *
 * With -DKERNEL_EMULATION, kernels.cu is compiled by g++ as plain C++:
 * __global__/__device__ expand to nothing (CUDA's host_defines.h does that
 * for non-nvcc compilers), blockIdx/threadIdx/blockDim/gridDim are
 * thread-local globals, and emu_launch checks the configuration like the
 * driver would, checks that every pointer argument is device memory of the
 * fake runtime, then hands the fake a job that loops over every block and
 * thread in order. The job runs when the fake's stream reaches it, so
 * stream ordering is the fake's, not "immediately".
 *
 * The emu_* functions are implemented by tests/fakecuda (the runtime the
 * emulated kernels are linked with). Deliberately missing: shared memory,
 * __syncthreads, atomics — launch.h forbids them in our kernels.
 */
#ifndef TRAIN_FAKECUDA_EMU_H
#define TRAIN_FAKECUDA_EMU_H

#ifndef __cplusplus
#error "emu.h is C++ (compile kernels.cu with g++ -x c++ -DKERNEL_EMULATION)"
#endif

#include <cuda_runtime_api.h>

#include <functional>
#include <type_traits>

extern "C" {
/* Enqueue job on stream s; run(job) executes it, drop(job) frees it. */
cudaError_t emu_enqueue(cudaStream_t s, const char *kernel, void (*run)(void *),
                        void (*drop)(void *), void *job);
/* 0 when p is NULL or inside a live device allocation; else reports and -1 */
int emu_check_arg(const char *kernel, int index, const void *p);
/* record a failed launch: cudaGetLastError returns err next */
void emu_launch_failed(const char *kernel, cudaError_t err, const char *why);
}

inline thread_local uint3 blockIdx, threadIdx;
inline thread_local dim3 blockDim, gridDim;

template <typename T> static inline int emu_arg_ok(const char *kernel, int index, const T &a)
{
    if constexpr (std::is_pointer<T>::value)
        return emu_check_arg(kernel, index, (const void *)a) == 0;
    else
        return 1;
}

template <typename... P, typename... A>
static void emu_launch(cudaStream_t s, dim3 grid, dim3 block, const char *name, void (*k)(P...),
                       A... args)
{
    unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !threads || threads > 1024 || block.z > 64 ||
        grid.y > 65535 || grid.z > 65535) {
        emu_launch_failed(name, cudaErrorInvalidConfiguration, "grid or block out of range");
        return;
    }
    static_assert(sizeof...(P) == sizeof...(A), "kernel argument count");
    int index = 0, ok = 1;
    ((ok &= emu_arg_ok(name, index++, args)), ...);
    if (!ok) {
        emu_launch_failed(name, cudaErrorInvalidValue, "a pointer argument is not device memory");
        return;
    }
    auto *job = new std::function<void()>([=]() {
        gridDim = grid;
        blockDim = block;
        for (unsigned bz = 0; bz < grid.z; bz++)
            for (unsigned by = 0; by < grid.y; by++)
                for (unsigned bx = 0; bx < grid.x; bx++)
                    for (unsigned tz = 0; tz < block.z; tz++)
                        for (unsigned ty = 0; ty < block.y; ty++)
                            for (unsigned tx = 0; tx < block.x; tx++) {
                                blockIdx = uint3{bx, by, bz};
                                threadIdx = uint3{tx, ty, tz};
                                k(args...);
                            }
    });
    emu_enqueue(
        s, name, [](void *j) { (*static_cast<std::function<void()> *>(j))(); },
        [](void *j) { delete static_cast<std::function<void()> *>(j); }, job);
}

#endif
