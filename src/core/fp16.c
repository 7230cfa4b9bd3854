/* core/fp16: half-precision conversions by bit manipulation (no FPU rounding-mode dependence). */
#include "core/fp16.h"

float qhx_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return qhx_bits_f32(sign | 0x7f800000u | (mant << 13)); /* Inf / NaN */
    if (exp == 0) {
        if (mant == 0) return qhx_bits_f32(sign);
        /* subnormal: value = mant * 2^-24, exact in float32 */
        float v = (float)mant * 5.9604644775390625e-08f;
        return sign ? -v : v;
    }
    return qhx_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t qhx_f32_to_f16(float f) {
    uint32_t u = qhx_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: Inf */
    if (a < 0x38800000u) {
        /* result is subnormal or zero: value / 2^-24, rounded to nearest even */
        if (a < 0x33000000u) return sign; /* below half the smallest subnormal */
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    /* normal: rebias exponent, round mantissa to 10 bits (carry may bump the exponent) */
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

void qhx_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = qhx_f16_to_f32(src[i]);
}
void qhx_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = qhx_bf16_to_f32(src[i]);
}
void qhx_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = qhx_f32_to_f16(src[i]);
}
void qhx_f32_to_bf16_row(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = qhx_f32_to_bf16(src[i]);
}
