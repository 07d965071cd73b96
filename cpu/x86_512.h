/* x86_512.h — AVX-512 pieces the CPU convolution kernels share
 * (conv_direct.c, conv_wino.c, conv_wino_dw.c): a mask of the lanes below n
 * and a 16 x 16 transpose in registers. Include it only where
 * <immintrin.h> is available (x86); the callers carry the target
 * attribute, these are inlined into them. */
#ifndef TRAIN_CPU_X86_512_H
#define TRAIN_CPU_X86_512_H

#include <immintrin.h>

/* the lanes below n (0-16) */
static inline __mmask16 x512_mask(int n)
{
    return (__mmask16)(n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1);
}

/* 16 x 16 floats transposed in registers: r[i] lane j <- r[j] lane i */
__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) void
x512_tr16(__m512 *r)
{
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            t[8 * h + j] = _mm512_shuffle_f32x4(r[8 * h + j], r[8 * h + j + 4], 0x88);
            t[8 * h + j + 4] = _mm512_shuffle_f32x4(r[8 * h + j], r[8 * h + j + 4], 0xdd);
        }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
        r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
    }
}

#endif
