/* kernels/x86/cvt_avx2.c: f16 <-> f32 rows with F16C, 8 values per instruction; the tails go
 * through core/fp16's scalar conversions, which these equal bit for bit (kernels.h). */
#include "kernels/x86/cvt_x86.h"

#include "core/fp16.h"

#include <immintrin.h>

void qhx_k_f16_to_f32_f16c(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = qhx_f16_to_f32(src[i]);
}

void qhx_k_f32_to_f16_f16c(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) /* round to nearest even, whatever MXCSR says */
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; i < n; i++) dst[i] = qhx_f32_to_f16(src[i]);
}
