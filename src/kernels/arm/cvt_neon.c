/* kernels/arm/cvt_neon.c: f16 <-> f32 rows with FCVTL / FCVTN (baseline ARMv8-A), 8 values per
 * step; the tails go through core/fp16's scalar conversions. FCVTN rounds by FPCR, which is
 * round to nearest even unless a program changes it (Linux starts every thread so); with
 * FPCR.DN clear a NaN keeps its top payload bits and gets the quiet bit, as qhx_f32_to_f16
 * does, so these equal the references bit for bit (kernels.h). */
#if defined(QHX_HAVE_ARM) && defined(__aarch64__)

#include "kernels/arm/cvt_arm.h"

#include "core/fp16.h"

#include <arm_neon.h>

void qhx_k_f16_to_f32_neon(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(src + i));
        vst1q_f32(dst + i, vcvt_f32_f16(vget_low_f16(h)));
        vst1q_f32(dst + i + 4, vcvt_high_f32_f16(h));
    }
    for (; i < n; i++) dst[i] = qhx_f16_to_f32(src[i]);
}

void qhx_k_f32_to_f16_neon(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(src + i)), vld1q_f32(src + i + 4));
        vst1q_u16(dst + i, vreinterpretq_u16_f16(h));
    }
    for (; i < n; i++) dst[i] = qhx_f32_to_f16(src[i]);
}

#else
typedef int qhx_cvt_neon_unused; /* ISO C forbids an empty translation unit */
#endif
