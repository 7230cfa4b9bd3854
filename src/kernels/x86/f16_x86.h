/* kernels/x86/f16_x86.h: reading the f16 group scales of Q4 weights (kernels.h gscales) in
 * kernels built with F16C (every AVX2 and AVX-512 file here). Widening f16 to f32 is exact, so
 * these give the values the reference reads through core/fp16.h. Files that tests build with
 * plain-C intrinsics (QHX_X86_EMU, tests/x86_emu.h) get the scalar widening instead. */
#ifndef QHX_KERNELS_F16_X86_H
#define QHX_KERNELS_F16_X86_H

#include <stdint.h>

#ifdef QHX_X86_EMU
#include "core/fp16.h"

static inline float qhx_x86_f16(const uint16_t *p) { return qhx_f16_to_f32(*p); }
#else
#include <immintrin.h>

/* One scale. */
static inline __attribute__((always_inline)) float qhx_x86_f16(const uint16_t *p) { return _cvtsh_ss(*p); }

/* Eight consecutive scales. */
static inline __attribute__((always_inline)) __m256 qhx_x86_f16x8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
#endif

#endif
