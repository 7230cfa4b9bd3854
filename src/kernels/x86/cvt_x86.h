/* kernels/x86/cvt_x86.h: f16 <-> f32 row conversions with F16C (cvt_avx2.c), the f16_to_f32 /
 * f32_to_f16 slots of kernels.h. Reached only through kernels/select.c after the AVX2 check
 * (which includes F16C). */
#ifndef QHX_KERNELS_CVT_X86_H
#define QHX_KERNELS_CVT_X86_H

#include <stdint.h>

void qhx_k_f16_to_f32_f16c(const uint16_t *src, float *dst, int64_t n);
void qhx_k_f32_to_f16_f16c(const float *src, uint16_t *dst, int64_t n);

#endif
