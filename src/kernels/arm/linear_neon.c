/* kernels/arm/linear_neon.c: matvec (decode) and matmul (prefill) for F32, F16, BF16, Q8 and Q4
 * weights with baseline ARMv8-A Advanced SIMD; f32 activations, f32 accumulation. Reached only
 * through qhx_kern_install_arm after the hwcap check.
 *
 * Numerics, shared by every path in this file so results do not depend on how rows or tokens are
 * grouped. Output (r, t) keeps eight f32 partial sums in two vectors (lo = lanes 0..3, hi = lanes
 * 4..7), lane j taking columns j, j+8, j+16, ..., fed by fused multiply-adds in column order, the
 * last partial block zero-padded, and reduced by the tree ((s0+s4)+(s1+s5)) + ((s2+s6)+(s3+s7)).
 * That is the order of the F32/F16/BF16 references (kernels/ref/linear_ref.c), so for those the
 * only difference is the single rounding of each fused multiply-add; the Q8/Q4 references sum
 * sequentially (kernels/ref/quant.c), a different order within the tests' tolerance. Q8 then
 * multiplies by the row scale. Weights widen to f32 exactly (f16, bf16, int8 are subsets of f32).
 * Q4 (group 32, docs/formats.md) differs only in its inner step: per group, the eight lanes of
 * s = codes (nib - 8) . x (lane j: values j, j+8, j+16, j+24), then acc = fma(d[group], s, acc);
 * the same tree reduces acc. */
#include <arm_neon.h>
#include <string.h>

#include "kernels/arm/arm.h"
#include "kernels/quant.h"

#define AI static inline __attribute__((always_inline))
/* Constant-count loops over rows and tokens must unroll (accumulators stay in registers) at any
 * optimisation level, not only -O3. */
#define UNROLL _Pragma("GCC unroll 32")

typedef float32x4x2_t f32x8; /* eight lanes: val[0] = lanes 0..3, val[1] = lanes 4..7 */

AI size_t esize(int fmt) { return fmt == QHX_W_F32 ? 4 : fmt == QHX_W_Q8 ? 1 : 2; }

AI f32x8 zero8(void) {
    f32x8 v = {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}};
    return v;
}

/* acc + w * x, lane by lane, one rounding per lane. */
AI f32x8 fma8(f32x8 acc, f32x8 w, f32x8 x) {
    acc.val[0] = vfmaq_f32(acc.val[0], w.val[0], x.val[0]);
    acc.val[1] = vfmaq_f32(acc.val[1], w.val[1], x.val[1]);
    return acc;
}

/* 8 weights starting at p (a byte address), widened to f32. */
AI f32x8 ld8w(const uint8_t *p, int fmt) {
    f32x8 w;
    switch (fmt) {
    case QHX_W_F32:
        w.val[0] = vld1q_f32((const float *)p);
        w.val[1] = vld1q_f32((const float *)p + 4);
        break;
    case QHX_W_F16: {
        float16x8_t h = vreinterpretq_f16_u16(vld1q_u16((const uint16_t *)p));
        w.val[0] = vcvt_f32_f16(vget_low_f16(h));
        w.val[1] = vcvt_high_f32_f16(h);
        break;
    }
    case QHX_W_BF16: { /* bf16 is the top half of an f32: shift the bits into place */
        uint16x8_t h = vld1q_u16((const uint16_t *)p);
        w.val[0] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
        w.val[1] = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
        break;
    }
    default: {
        int16x8_t q = vmovl_s8(vld1_s8((const int8_t *)p));
        w.val[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(q)));
        w.val[1] = vcvtq_f32_s32(vmovl_high_s16(q));
    }
    }
    return w;
}

/* The first n (1..7) weights at p, zero-padded to 8. */
AI f32x8 ld8w_tail(const uint8_t *p, int64_t n, int fmt) {
    _Alignas(16) uint8_t buf[32] = {0};
    memcpy(buf, p, (size_t)n * esize(fmt));
    return ld8w(buf, fmt);
}

AI f32x8 ld8x(const float *x) {
    f32x8 v = {{vld1q_f32(x), vld1q_f32(x + 4)}};
    return v;
}

/* The first n (1..7) floats at x, zero-padded to 8. */
AI f32x8 ld8x_tail(const float *x, int64_t n) {
    _Alignas(16) float buf[8] = {0};
    memcpy(buf, x, (size_t)n * sizeof(float));
    return ld8x(buf);
}

/* The one reduction order, the reference's reduce8: ((s0+s4)+(s1+s5)) + ((s2+s6)+(s3+s7)). */
AI float hsum8(f32x8 v) {
    float32x4_t t = vaddq_f32(v.val[0], v.val[1]);                  /* t_j = s_j + s_(j+4) */
    float32x2_t p = vpadd_f32(vget_low_f32(t), vget_high_f32(t)); /* (t0+t1, t2+t3) */
    return vpadds_f32(p);
}

/* Four hsum8() at once, bitwise equal to them: lane i = hsum8(v_i). */
AI float32x4_t hsum8x4(f32x8 a, f32x8 b, f32x8 c, f32x8 d) {
    float32x4_t ta = vaddq_f32(a.val[0], a.val[1]), tb = vaddq_f32(b.val[0], b.val[1]);
    float32x4_t tc = vaddq_f32(c.val[0], c.val[1]), td = vaddq_f32(d.val[0], d.val[1]);
    /* vpaddq(u, v) = (u0+u1, u2+u3, v0+v1, v2+v3): twice gives ((t0+t1)+(t2+t3)) per input */
    return vpaddq_f32(vpaddq_f32(ta, tb), vpaddq_f32(tc, td));
}

AI float row_scale(const qhx_weight *w, int64_t r, int fmt) {
    return fmt == QHX_W_Q8 ? w->scales[r] : 1.0f;
}

/* ---- matvec: R rows at a time, the activation vector loaded once for all of them ------------ */

/* R (1 or 4) rows from r: 2R independent accumulator chains, enough to hide the latency of
 * fused multiply-adds on two pipes. */
AI void matvec_rows(const qhx_weight *w, const float *x, float *y, int64_t r, int R, int fmt) {
    const int64_t cols = w->cols, kv = cols & ~(int64_t)7;
    const size_t es = esize(fmt);
    const uint8_t *p[4];
    f32x8 acc[4];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)cols * es;
        acc[i] = zero8();
    }
    for (int64_t k = 0; k < kv; k += 8) {
        f32x8 xv = ld8x(x + k);
        UNROLL
        for (int i = 0; i < R; i++) acc[i] = fma8(acc[i], ld8w(p[i] + (size_t)k * es, fmt), xv);
    }
    if (cols > kv) {
        f32x8 xv = ld8x_tail(x + kv, cols - kv);
        UNROLL
        for (int i = 0; i < R; i++) acc[i] = fma8(acc[i], ld8w_tail(p[i] + (size_t)kv * es, cols - kv, fmt), xv);
    }
    if (R == 4) {
        float32x4_t s = hsum8x4(acc[0], acc[1], acc[2], acc[3]);
        if (fmt == QHX_W_Q8) s = vmulq_f32(s, vld1q_f32(w->scales + r));
        vst1q_f32(y + r, s);
    } else {
        UNROLL
        for (int i = 0; i < R; i++) y[r + i] = hsum8(acc[i]) * row_scale(w, r + i, fmt);
    }
}

AI void matvec(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1, int fmt) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) matvec_rows(w, x, y, r, 4, fmt);
    for (; r < r1; r++) matvec_rows(w, x, y, r, 1, fmt);
}

/* ---- matmul: register tiles of R rows x T tokens ------------------------------------------- */

/* Tile of R rows x T tokens: each weight vector is widened once and used T times, each
 * activation vector loaded once and used R times. R = 2, T = 4: 16 accumulator vectors, 4 for
 * the weights and 2 for an activation fit the 32 vector registers with room to spare. */
AI void mm_tile(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t t,
                int64_t r, int R, int T, int fmt) {
    const int64_t cols = w->cols, kv = cols & ~(int64_t)7;
    const size_t es = esize(fmt);
    const uint8_t *p[2];
    const float *xt[4];
    f32x8 acc[2][4];
    UNROLL
    for (int i = 0; i < R; i++) p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)cols * es;
    UNROLL
    for (int j = 0; j < T; j++) xt[j] = X + (t + j) * ldx;
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < T; j++) acc[i][j] = zero8();
    for (int64_t k = 0; k < kv; k += 8) {
        f32x8 wv[2];
        UNROLL
        for (int i = 0; i < R; i++) wv[i] = ld8w(p[i] + (size_t)k * es, fmt);
        UNROLL
        for (int j = 0; j < T; j++) {
            f32x8 xv = ld8x(xt[j] + k);
            UNROLL
            for (int i = 0; i < R; i++) acc[i][j] = fma8(acc[i][j], wv[i], xv);
        }
    }
    if (cols > kv) {
        f32x8 wv[2];
        UNROLL
        for (int i = 0; i < R; i++) wv[i] = ld8w_tail(p[i] + (size_t)kv * es, cols - kv, fmt);
        UNROLL
        for (int j = 0; j < T; j++) {
            f32x8 xv = ld8x_tail(xt[j] + kv, cols - kv);
            UNROLL
            for (int i = 0; i < R; i++) acc[i][j] = fma8(acc[i][j], wv[i], xv);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++) {
        float s = row_scale(w, r + i, fmt);
        if (T == 4) {
            float32x4_t v = vmulq_n_f32(hsum8x4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]), s);
            Y[(t + 0) * ldy + r + i] = vgetq_lane_f32(v, 0);
            Y[(t + 1) * ldy + r + i] = vgetq_lane_f32(v, 1);
            Y[(t + 2) * ldy + r + i] = vgetq_lane_f32(v, 2);
            Y[(t + 3) * ldy + r + i] = vgetq_lane_f32(v, 3);
        } else {
            UNROLL
            for (int j = 0; j < T; j++) Y[(t + j) * ldy + r + i] = hsum8(acc[i][j]) * s;
        }
    }
}

/* Tokens t..t+T-1 over rows [ra, rb). */
AI void mm_rows(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t t,
                int T, int64_t ra, int64_t rb, int fmt) {
    int64_t r = ra;
    for (; r + 2 <= rb; r += 2) mm_tile(w, X, ldx, Y, ldy, t, r, 2, T, fmt);
    for (; r < rb; r++) mm_tile(w, X, ldx, Y, ldy, t, r, 1, T, fmt);
}

/* Row blocks small enough to stay in L2 while every token tile passes over them. */
#define MM_BLOCK_BYTES (192 * 1024)

/* Rows per L2 block for rows of row_bytes bytes: at least `mult`, a multiple of it. */
AI int64_t block_rows(int64_t row_bytes, int64_t mult) {
    int64_t blk = MM_BLOCK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    return blk < mult ? mult : blk - blk % mult;
}

AI void matmul(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
               int64_t r0, int64_t r1, int fmt) {
    const int64_t blk = block_rows(w->cols * (int64_t)esize(fmt), 2);
    for (int64_t ra = r0; ra < r1; ra += blk) {
        int64_t rb = ra + blk < r1 ? ra + blk : r1;
        int64_t t = 0;
        for (; t + 4 <= n; t += 4) mm_rows(w, X, ldx, Y, ldy, t, 4, ra, rb, fmt);
        for (; t < n; t++) mm_rows(w, X, ldx, Y, ldy, t, 1, ra, rb, fmt);
    }
}

/* ---- Q4, group 32: 16 bytes of codes and one f32 scale per group ---------------------------- */

/* 16 int8 values as four f32 vectors, in order. */
AI void widen16(int8x16_t v, float32x4_t c[4]) {
    int16x8_t a = vmovl_s8(vget_low_s8(v)), b = vmovl_high_s8(v);
    c[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(a)));
    c[1] = vcvtq_f32_s32(vmovl_high_s16(a));
    c[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(b)));
    c[3] = vcvtq_f32_s32(vmovl_high_s16(b));
}

/* The 32 codes of a group as f32 (nib - 8), in value order: c[0..3] = values 0..15 (the low
 * nibbles of bytes 0..15), c[4..7] = values 16..31 (the high nibbles). */
AI void q4_codes(const uint8_t *p, float32x4_t c[8]) {
    const uint8x16_t b = vld1q_u8(p);
    const int8x16_t eight = vdupq_n_s8(8);
    widen16(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0f))), eight), c);
    widen16(vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), eight), c + 4);
}

/* The group step: acc += d * (c . x) over the group's 32 activations at xg; the eight lanes of
 * the partial dot product (lo, hi) take values j, j+8, j+16, j+24 as the column lanes of the
 * other formats do. x is loaded here, next to its use, rather than once per group for all rows
 * or tokens: eight more live vectors would spill the accumulators (the loads hit L1). */
AI f32x8 q4_step(const float32x4_t c[8], const float *xg, float d, f32x8 acc) {
    float32x4_t lo = vmulq_f32(c[0], vld1q_f32(xg)), hi = vmulq_f32(c[1], vld1q_f32(xg + 4));
    lo = vfmaq_f32(lo, c[2], vld1q_f32(xg + 8));
    hi = vfmaq_f32(hi, c[3], vld1q_f32(xg + 12));
    lo = vfmaq_f32(lo, c[4], vld1q_f32(xg + 16));
    hi = vfmaq_f32(hi, c[5], vld1q_f32(xg + 20));
    lo = vfmaq_f32(lo, c[6], vld1q_f32(xg + 24));
    hi = vfmaq_f32(hi, c[7], vld1q_f32(xg + 28));
    acc.val[0] = vfmaq_n_f32(acc.val[0], lo, d);
    acc.val[1] = vfmaq_n_f32(acc.val[1], hi, d);
    return acc;
}

/* A Q4 group scale (f16; widening is exact). */
AI float f16_scale(const uint16_t *p) {
    __fp16 h;
    memcpy(&h, p, sizeof h);
    return (float)h;
}

AI int q4_fast(const qhx_weight *w) { return w->group == 32 && w->cols % 32 == 0; }

/* R (1 or 2) rows from r. Two rows keep everything in registers (8 code vectors and 2
 * accumulators per row); four spilled to the stack. */
AI void q4_matvec_rows(const qhx_weight *w, const float *x, float *y, int64_t r, int R) {
    const int64_t ng = w->cols / 32;
    const uint8_t *p[2];
    const uint16_t *d[2];
    f32x8 acc[2];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)(w->cols / 2);
        d[i] = w->gscales + (r + i) * ng;
        acc[i] = zero8();
    }
    for (int64_t g = 0; g < ng; g++) {
        UNROLL
        for (int i = 0; i < R; i++) {
            float32x4_t c[8];
            q4_codes(p[i] + 16 * g, c);
            acc[i] = q4_step(c, x + 32 * g, f16_scale(d[i] + g), acc[i]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++) y[r + i] = hsum8(acc[i]);
}

static void q4_matvec(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 2 <= r1; r += 2) q4_matvec_rows(w, x, y, r, 2);
    for (; r < r1; r++) q4_matvec_rows(w, x, y, r, 1);
}

/* One row x T tokens: the group's codes are widened once and used T times. 8 code vectors,
 * 2T accumulators and the partial sums fit the registers for T = 4. */
AI void q4_tile(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t t,
                int64_t r, int T) {
    const int64_t ng = w->cols / 32;
    const uint8_t *p = (const uint8_t *)w->data + (size_t)r * (size_t)(w->cols / 2);
    const uint16_t *d = w->gscales + r * ng;
    f32x8 acc[4];
    UNROLL
    for (int j = 0; j < T; j++) acc[j] = zero8();
    for (int64_t g = 0; g < ng; g++) {
        float32x4_t c[8];
        q4_codes(p + 16 * g, c);
        UNROLL
        for (int j = 0; j < T; j++) acc[j] = q4_step(c, X + (t + j) * ldx + 32 * g, f16_scale(d + g), acc[j]);
    }
    if (T == 4) {
        float32x4_t v = hsum8x4(acc[0], acc[1], acc[2], acc[3]);
        Y[(t + 0) * ldy + r] = vgetq_lane_f32(v, 0);
        Y[(t + 1) * ldy + r] = vgetq_lane_f32(v, 1);
        Y[(t + 2) * ldy + r] = vgetq_lane_f32(v, 2);
        Y[(t + 3) * ldy + r] = vgetq_lane_f32(v, 3);
    } else {
        UNROLL
        for (int j = 0; j < T; j++) Y[(t + j) * ldy + r] = hsum8(acc[j]);
    }
}

static void q4_matmul(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                      int64_t n, int64_t r0, int64_t r1) {
    const int64_t blk = block_rows(w->cols / 2 + w->cols / 32 * 4, 1);
    for (int64_t ra = r0; ra < r1; ra += blk) {
        int64_t rb = ra + blk < r1 ? ra + blk : r1;
        int64_t t = 0;
        for (; t + 4 <= n; t += 4)
            for (int64_t r = ra; r < rb; r++) q4_tile(w, X, ldx, Y, ldy, t, r, 4);
        for (; t < n; t++)
            for (int64_t r = ra; r < rb; r++) q4_tile(w, X, ldx, Y, ldy, t, r, 1);
    }
}

void qhx_k_matvec_q4_neon(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    if (q4_fast(w)) q4_matvec(w, x, y, r0, r1);
    else qhx_k_matvec_q4_ref(w, x, y, r0, r1);
}

void qhx_k_matmul_q4_neon(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                          int64_t n, int64_t r0, int64_t r1) {
    if (q4_fast(w)) q4_matmul(w, X, ldx, Y, ldy, n, r0, r1);
    else qhx_k_matmul_q4_ref(w, X, ldx, Y, ldy, n, r0, r1);
}

/* ---- entry points -------------------------------------------------------------------------- */

#define DEFINE(name, fmt)                                                                        \
    void qhx_k_matvec_##name##_neon(const qhx_weight *w, const float *x, float *y, int64_t r0,  \
                                    int64_t r1) {                                                \
        matvec(w, x, y, r0, r1, fmt);                                                            \
    }                                                                                            \
    void qhx_k_matmul_##name##_neon(const qhx_weight *w, const float *X, int64_t ldx, float *Y, \
                                    int64_t ldy, int64_t n, int64_t r0, int64_t r1) {            \
        matmul(w, X, ldx, Y, ldy, n, r0, r1, fmt);                                               \
    }

DEFINE(f32, QHX_W_F32)
DEFINE(f16, QHX_W_F16)
DEFINE(bf16, QHX_W_BF16)
DEFINE(q8, QHX_W_Q8)
