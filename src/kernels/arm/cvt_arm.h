/* kernels/arm/cvt_arm.h: f16 <-> f32 row conversions with the baseline Advanced SIMD
 * conversions (cvt_neon.c), the f16_to_f32 / f32_to_f16 slots of kernels.h. Reached only
 * through kernels/select.c once the NEON variants are installed. */
#ifndef QHX_KERNELS_CVT_ARM_H
#define QHX_KERNELS_CVT_ARM_H

#include <stdint.h>

void qhx_k_f16_to_f32_neon(const uint16_t *src, float *dst, int64_t n);
void qhx_k_f32_to_f16_neon(const float *src, uint16_t *dst, int64_t n);

#endif
