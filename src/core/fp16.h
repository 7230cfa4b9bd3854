/* core/fp16: IEEE half and bfloat16 <-> float32, round to nearest even, NaN/Inf/subnormals exact.
 * Scalar and portable; SIMD kernels convert in bulk with their own instructions and are tested
 * against these. */
#ifndef QHX_CORE_FP16_H
#define QHX_CORE_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t qhx_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float qhx_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* bf16 is the top half of a float32: widening is exact. */
static inline float qhx_bf16_to_f32(uint16_t h) { return qhx_bits_f32((uint32_t)h << 16); }

/* Round to nearest even; NaN stays NaN (quiet bit forced so truncation cannot make it Inf). */
static inline uint16_t qhx_f32_to_bf16(float f) {
    uint32_t u = qhx_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float qhx_f16_to_f32(uint16_t h);
uint16_t qhx_f32_to_f16(float f);

/* Bulk row conversions (scalar). */
void qhx_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
void qhx_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
void qhx_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n);
void qhx_f32_to_bf16_row(const float *src, uint16_t *dst, int64_t n);

#endif
