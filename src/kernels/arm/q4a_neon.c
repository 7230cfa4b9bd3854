/* kernels/arm/q4a_neon.c: the Q4A int8-activation matvec and matmuls on NEON (docs/formats.md,
 * "Q4A"). The matvec and the token-by-token matmul are the operations of
 * qhx_k_matvec_q4a_i8x_ref (kernels/ref/quant_q4a.c) in its order, so the results are its bits,
 * and so the x86 per-token builds' bits too; the prefill matmul (qhx_k_matmul_q4a_i8gemm_neon)
 * is qhx_k_matmul_q4a_i8gemm_ref's order, the x86 int8 GEMM's bits. So a Q4A bundle gives the
 * same logits on aarch64 and x86-64, prompt and decode.
 *
 * Per block of 32 activations: the int8 codes, the scale dx and the sum of the codes xs, as the
 * reference's quantize_block forms them. Per group of 32 weights: the four int32 lane sums
 * P_j = sum u q over values 4j..4j+3 and 16+4j..16+4j+3 (exact: widening multiplies and pairwise
 * adds, |u q| <= 15 * 127), converted to float and added with one fused multiply-add each, times
 * 16 (c dx); the zero points' term (c dx z) xs per group, in the reference's lanes. Baseline
 * ARMv8-A only (no dot-product extension), like the rest of this folder. */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "core/fp16.h"
#include "kernels/arm/arm.h"
#include "kernels/quant.h"

#define AI static inline __attribute__((always_inline))
#define G QHX_Q4A_GROUP
#define SB QHX_Q4A_SUPER
#define MAX_BLOCKS (QHX_Q4A_I8X_MAX_COLS / G)

typedef struct qx_row {
    int8_t q[QHX_Q4A_I8X_MAX_COLS];
    float dx[MAX_BLOCKS]; /* per block: the scale (NaN for a block holding a NaN or an infinity) */
    float xs[MAX_BLOCKS]; /* per block: the sum of its codes */
} qx_row;

/* One block of 32 activations, as the reference's quantize_block: amax / 127, codes x * (1 / d)
 * rounded to nearest even (x / d for scales under 2^-120, where 1 / d would overflow). */
static void quantize_block(const float *x, int8_t *q, float *dx, float *xs) {
    float32x4_t v[8];
    uint32x4_t finite = vdupq_n_u32(~0u);
    float32x4_t m = vdupq_n_f32(0.0f);
    for (int i = 0; i < 8; i++) {
        v[i] = vld1q_f32(x + 4 * i);
        float32x4_t a = vabsq_f32(v[i]);
        finite = vandq_u32(finite, vcltq_f32(a, vdupq_n_f32(INFINITY))); /* false for NaN and infinity */
        m = vmaxq_f32(m, a);
    }
    if (vminvq_u32(finite) == 0) {
        memset(q, 0, 32);
        *dx = NAN;
        *xs = 0.0f;
        return;
    }
    const float d = vmaxvq_f32(m) / 127.0f;
    *dx = d;
    if (!(d >= 0x1p-120f)) { /* tiny or zero scale: the reference's scalar path */
        int32_t sum = 0;
        for (int i = 0; i < 32; i++) {
            q[i] = d > 0.0f ? (int8_t)nearbyintf(x[i] / d) : 0;
            sum += q[i];
        }
        *xs = (float)sum;
        return;
    }
    const float inv = 1.0f / d;
    int32x4_t sum = vdupq_n_s32(0);
    for (int h = 0; h < 2; h++) {
        int32x4_t c[4];
        for (int i = 0; i < 4; i++) {
            c[i] = vcvtnq_s32_f32(vmulq_n_f32(v[4 * h + i], inv));
            sum = vaddq_s32(sum, c[i]);
        }
        int16x8_t lo = vcombine_s16(vqmovn_s32(c[0]), vqmovn_s32(c[1]));
        int16x8_t hi = vcombine_s16(vqmovn_s32(c[2]), vqmovn_s32(c[3]));
        vst1q_s8(q + 16 * h, vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi)));
    }
    *xs = (float)vaddvq_s32(sum);
}

static void quantize_row(const float *x, int64_t cols, qx_row *qx) {
    for (int64_t b = 0; b < cols / G; b++) quantize_block(x + G * b, qx->q + G * b, &qx->dx[b], &qx->xs[b]);
}

/* The lane sums P_j of one group (16 code bytes: value k in the low nibble of byte k, value
 * 16 + k in the high nibble). */
AI float32x4_t group_lanes(const uint8_t *qg, const int8_t *xq) {
    const uint8x16_t b = vld1q_u8(qg);
    const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0f)));
    const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
    const int8x16_t x0 = vld1q_s8(xq), x1 = vld1q_s8(xq + 16);
    int16x8_t a = vaddq_s16(vmull_s8(vget_low_s8(lo), vget_low_s8(x0)), vmull_s8(vget_low_s8(hi), vget_low_s8(x1)));
    int16x8_t c = vaddq_s16(vmull_high_s8(lo, x0), vmull_high_s8(hi, x1));
    return vcvtq_f32_s32(vpaddq_s32(vpaddlq_s16(a), vpaddlq_s16(c)));
}

/* The group's factor c dx = ((d 2^-12) s) dx. */
AI float group_sc(const uint16_t *super, const uint8_t *sub, const float *dx, int64_t g) {
    return qhx_f16_to_f32(super[g / SB]) * 0x1p-12f * (float)sub[2 * g] * dx[g];
}

/* One weight row against one quantized activation row: the reference's row_i8x. Lanes 0-3 of
 * its 8-lane accumulators are the first group of a pair, lanes 4-7 the second. */
static float row_dot(const uint8_t *q, const uint16_t *super, const uint8_t *sub, const qx_row *qx, int64_t cols) {
    const int64_t ng = cols / G;
    float32x4_t acc[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, acc2[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    float accz[SB] = {0}, zt = 0.0f;
    int64_t g = 0;
    for (; g + 2 <= ng; g += 2) {
        const int full = (g / SB + 1) * SB <= ng; /* inside a whole super-block */
        float32x4_t *to = full && (g % SB) / 2 % 2 ? acc2 : acc;
        for (int h = 0; h < 2; h++) {
            const int64_t gg = g + h;
            const float sc = group_sc(super, sub, qx->dx, gg);
            to[h] = vfmaq_f32(to[h], group_lanes(q + gg * G / 2, qx->q + gg * G), vdupq_n_f32(sc * 16.0f));
            if (full) accz[gg % SB] = fmaf(sc * (float)sub[2 * gg + 1], qx->xs[gg], accz[gg % SB]);
            else zt = fmaf(sc * (float)sub[2 * gg + 1], qx->xs[gg], zt);
        }
    }
    float32x4_t a0 = vsubq_f32(vaddq_f32(acc[0], acc2[0]), vld1q_f32(accz));
    float32x4_t a1 = vsubq_f32(vaddq_f32(acc[1], acc2[1]), vld1q_f32(accz + 4));
    if (g < ng) {
        const float sc = group_sc(super, sub, qx->dx, g);
        a0 = vfmaq_f32(a0, group_lanes(q + g * G / 2, qx->q + g * G), vdupq_n_f32(sc * 16.0f));
        zt = fmaf(sc * (float)sub[2 * g + 1], qx->xs[g], zt);
    }
    /* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
    const float32x4_t s = vaddq_f32(a0, a1);
    const float e = vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 2), o = vgetq_lane_f32(s, 1) + vgetq_lane_f32(s, 3);
    return (e + o) - zt;
}

static void rows_range(const qhx_weight *w, const qx_row *qx, float *y, int64_t r0, int64_t r1) {
    const int64_t cols = w->cols, ns = qhx_q4a_row_supers(cols), sb = qhx_q4a_row_sub_bytes(cols);
    const uint8_t *q = (const uint8_t *)w->data;
    for (int64_t r = r0; r < r1; r++) y[r] = row_dot(q + r * (cols / 2), w->gscales + r * ns, w->sub + r * sb, qx, cols);
}

static int i8x_ok(const qhx_weight *w) { return w->cols % G == 0 && w->cols <= QHX_Q4A_I8X_MAX_COLS; }

void qhx_k_matvec_q4a_i8x_neon(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    if (!i8x_ok(w)) {
        qhx_k_matvec_q4a_ref(w, x, y, r0, r1);
        return;
    }
    qx_row qx;
    quantize_row(x, w->cols, &qx);
    rows_range(w, &qx, y, r0, r1);
}

void qhx_k_matmul_q4a_i8x_neon(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                               int64_t r0, int64_t r1) {
    if (!i8x_ok(w)) {
        qhx_k_matmul_q4a_ref(w, X, ldx, Y, ldy, n, r0, r1);
        return;
    }
    qx_row qx;
    for (int64_t t = 0; t < n; t++) {
        quantize_row(X + t * ldx, w->cols, &qx);
        rows_range(w, &qx, Y + t * ldy, r0, r1);
    }
}

/* ---- prefill in the int8 GEMM's order (qhx_k_matmul_q4a_i8gemm_ref) ---------------------------- */

/* Group g of a row against its quantized block: the exact 16 sum u q - z sum q (|.| < 2^21). */
AI int32_t group_isum(const uint8_t *qg, const int8_t *xq, int z, int32_t xs) {
    const uint8x16_t b = vld1q_u8(qg);
    const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0f)));
    const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
    const int8x16_t x0 = vld1q_s8(xq), x1 = vld1q_s8(xq + 16);
    int16x8_t a = vaddq_s16(vmull_s8(vget_low_s8(lo), vget_low_s8(x0)), vmull_s8(vget_low_s8(hi), vget_low_s8(x1)));
    int16x8_t c = vaddq_s16(vmull_high_s8(lo, x0), vmull_high_s8(hi, x1));
    return 16 * vaddvq_s32(vaddq_s32(vpaddlq_s16(a), vpaddlq_s16(c))) - z * xs;
}

/* Rows [r0, r1) of one token, groups [g0, g0 + nb) of its quantized columns (qx holds them from
 * group g0 on): y = fmaf(isum, c dx, y) per group in column order, from y = 0 at group 0 and
 * from the stored partial sum after (f32 stores are exact). */
static void rows_gemm_order(const qhx_weight *w, const qx_row *qx, int64_t g0, int64_t nb, float *y, int64_t r0,
                            int64_t r1) {
    const int64_t cols = w->cols, ns = qhx_q4a_row_supers(cols), sb = qhx_q4a_row_sub_bytes(cols);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *q = (const uint8_t *)w->data + r * (cols / 2), *sub = w->sub + r * sb;
        const uint16_t *super = w->gscales + r * ns;
        float acc = g0 == 0 ? 0.0f : y[r];
        for (int64_t i = 0; i < nb; i++) {
            const int64_t g = g0 + i;
            const float c = qhx_f16_to_f32(super[g / SB]) * 0x1p-12f * (float)sub[2 * g];
            const int32_t isum = group_isum(q + g * G / 2, qx->q + i * G, sub[2 * g + 1], (int32_t)qx->xs[i]);
            acc = fmaf((float)isum, c * qx->dx[i], acc);
        }
        y[r] = acc;
    }
}

/* Token by token; rows longer than one quantized row buffer go in pieces of its columns. */
void qhx_k_matmul_q4a_i8gemm_neon(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                                  int64_t r0, int64_t r1) {
    if (w->cols % G) {
        qhx_k_matmul_q4a_ref(w, X, ldx, Y, ldy, n, r0, r1);
        return;
    }
    qx_row qx;
    const int64_t ng = w->cols / G;
    for (int64_t t = 0; t < n; t++)
        for (int64_t g0 = 0; g0 < ng; g0 += MAX_BLOCKS) {
            const int64_t nb = ng - g0 < MAX_BLOCKS ? ng - g0 : MAX_BLOCKS;
            quantize_row(X + t * ldx + g0 * G, nb * G, &qx);
            rows_gemm_order(w, &qx, g0, nb, Y + t * ldy, r0, r1);
        }
}
