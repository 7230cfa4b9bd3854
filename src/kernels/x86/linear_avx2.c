/* kernels/x86/linear_avx2.c: matvec (decode) and matmul (prefill) for F32, F16, BF16, Q8 and Q4
 * weights with AVX2 + FMA + F16C; f32 activations, f32 accumulation. Built with -mavx2 -mfma
 * -mf16c; reached only through qhx_kern_install_x86 after a CPU check.
 *
 * Numerics, shared by every path in this file so results do not depend on how rows or tokens are
 * grouped: output (r, t) keeps one 8-lane accumulator, fed by one FMA per 8 columns in column
 * order (the last partial block zero-padded), then reduced by the fixed tree of hsum8(); Q8 then
 * multiplies by the row scale. Weights widen to f32 exactly (f16/bf16/int8 are subsets of f32).
 * Q4 (group 32, docs/formats.md) differs only in its inner step: per group, s = the 4-vector dot
 * of codes (nib - 8) and x, then acc = fma(d[group], s, acc); the same tree reduces acc. */
#include <immintrin.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/x86/f16_x86.h"
#include "kernels/x86/multi_plan.h"
#include "kernels/x86/prefetch_x86.h"
#include "kernels/x86/x86.h"

#define AI static inline __attribute__((always_inline))
/* Constant-count loops over rows and tokens must unroll (accumulators stay in registers) at
 * any optimisation level, not only -O3. */
#define UNROLL _Pragma("GCC unroll 32")

AI size_t esize(int fmt) { return fmt == QHX_W_F32 ? 4 : fmt == QHX_W_Q8 ? 1 : 2; }

/* 8 weights starting at p (a byte address), widened to f32. */
AI __m256 ld8w(const uint8_t *p, int fmt) {
    switch (fmt) {
    case QHX_W_F32: return _mm256_loadu_ps((const float *)p);
    case QHX_W_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    case QHX_W_BF16:
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    default: return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)));
    }
}

/* The first n (1..7) weights at p, zero-padded to 8. */
AI __m256 ld8w_tail(const uint8_t *p, int64_t n, int fmt) {
    _Alignas(32) uint8_t buf[32] = {0};
    memcpy(buf, p, (size_t)n * esize(fmt));
    return ld8w(buf, fmt);
}

/* The first n (1..7) floats at x, zero-padded to 8. */
AI __m256 ld8x_tail(const float *x, int64_t n) {
    _Alignas(32) float buf[8] = {0};
    memcpy(buf, x, (size_t)n * sizeof(float));
    return _mm256_load_ps(buf);
}

/* The one reduction order: ((v0+v1)+(v2+v3)) + ((v4+v5)+(v6+v7)). */
AI float hsum8(__m256 v) {
    __m256 h = _mm256_hadd_ps(v, v);
    h = _mm256_hadd_ps(h, h);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    return _mm_cvtss_f32(s);
}

/* Four hsum8() at once, bitwise equal to them: lane i = hsum8(v_i). */
AI __m128 hsum8x4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

AI float row_scale(const qhx_weight *w, int64_t r, int fmt) {
    return fmt == QHX_W_Q8 ? w->scales[r] : 1.0f;
}

/* ---- matvec: R rows at a time, weights streamed once --------------------------------------- */

AI void matvec_rows(const qhx_weight *w, const float *x, float *y, int64_t r, int R, int fmt) {
    const int64_t cols = w->cols, kv = cols & ~(int64_t)7;
    const size_t es = esize(fmt);
    const uint8_t *p[8];
    __m256 acc[8];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)cols * es;
        acc[i] = _mm256_setzero_ps();
    }
    const int64_t ahead = qhx_pf_ahead(R * cols * (int64_t)es); /* prefetch_x86.h */
    for (int64_t k = 0; k < kv; k += 8) {
        if (((k * (int64_t)es) & 63) == 0) QHX_PREFETCH_ROWS(p, R, k * es + ahead);
        __m256 xv = _mm256_loadu_ps(x + k);
        UNROLL
        for (int i = 0; i < R; i++) acc[i] = _mm256_fmadd_ps(ld8w(p[i] + k * es, fmt), xv, acc[i]);
    }
    if (cols > kv) {
        __m256 xv = ld8x_tail(x + kv, cols - kv);
        UNROLL
        for (int i = 0; i < R; i++)
            acc[i] = _mm256_fmadd_ps(ld8w_tail(p[i] + kv * es, cols - kv, fmt), xv, acc[i]);
    }
    if (R == 8) {
        __m128 lo = hsum8x4(acc[0], acc[1], acc[2], acc[3]);
        __m128 hi = hsum8x4(acc[4], acc[5], acc[6], acc[7]);
        if (fmt == QHX_W_Q8) {
            lo = _mm_mul_ps(lo, _mm_loadu_ps(w->scales + r));
            hi = _mm_mul_ps(hi, _mm_loadu_ps(w->scales + r + 4));
        }
        _mm_storeu_ps(y + r, lo);
        _mm_storeu_ps(y + r + 4, hi);
    } else {
        UNROLL
        for (int i = 0; i < R; i++) y[r + i] = hsum8(acc[i]) * row_scale(w, r + i, fmt);
    }
}

AI void matvec(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1, int fmt) {
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) matvec_rows(w, x, y, r, 8, fmt);
    for (; r < r1; r++) matvec_rows(w, x, y, r, 1, fmt);
}

/* ---- several activation rows at once (a batched decode step) ------------------------------
 * Weight row r is loaded and widened once per 8 columns and used by every activation row of the
 * call (at most QHX_MATVEC_MULTI_MAX = 8: 8 accumulators, the weights and one activation vector
 * in the 16 registers); each (r, b) is matvec_rows' R = 1 arithmetic in its order (the same
 * FMAs, the zero-padded tail, hsum8, the row scale), so y[b][r] has the single-row kernel's bits. */
AI void row_multi(const qhx_weight *w, const float *const *x, float *const *y, int64_t r, int NB, int fmt) {
    const int64_t cols = w->cols, kv = cols & ~(int64_t)7;
    const size_t es = esize(fmt);
    const uint8_t *p = (const uint8_t *)w->data + (size_t)r * (size_t)cols * es;
    __m256 acc[QHX_MATVEC_MULTI_MAX];
    UNROLL
    for (int b = 0; b < NB; b++) acc[b] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kv; k += 8) {
        __m256 wv = ld8w(p + k * es, fmt);
        UNROLL
        for (int b = 0; b < NB; b++) acc[b] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[b] + k), acc[b]);
    }
    if (cols > kv) {
        __m256 wv = ld8w_tail(p + kv * es, cols - kv, fmt);
        UNROLL
        for (int b = 0; b < NB; b++) acc[b] = _mm256_fmadd_ps(wv, ld8x_tail(x[b] + kv, cols - kv), acc[b]);
    }
    UNROLL
    for (int b = 0; b < NB; b++) y[b][r] = hsum8(acc[b]) * row_scale(w, r, fmt);
}

/* A constant tile width per call, so the loops unroll. */
AI void rows_multi(const qhx_weight *w, const float *const *x, float *const *y, int nb, int64_t r0, int64_t r1,
                   int fmt) {
#define ROWS(n) for (int64_t r = r0; r < r1; r++) row_multi(w, x, y, r, n, fmt)
    switch (nb) {
    case 1: ROWS(1); break;
    case 2: ROWS(2); break;
    case 3: ROWS(3); break;
    case 4: ROWS(4); break;
    case 5: ROWS(5); break;
    case 6: ROWS(6); break;
    case 7: ROWS(7); break;
    default: ROWS(8); break;
    }
#undef ROWS
}

/* The rows in tiles over blocks (multi_plan.h): x rows of cols floats. */
AI void multi_up_to_max(const qhx_weight *w, const float *const *x, float *const *y, int nb, int64_t r0, int64_t r1,
                        int fmt) {
    const qhx_multi_plan pl = qhx_multi_plan_make(nb, w->cols * (int64_t)sizeof(float), QHX_MATVEC_MULTI_MAX,
                                                  w->cols * (int64_t)esize(fmt), r0, r1);
    for (int64_t a = r0; a < r1; a += pl.blk) {
        int64_t e = a + pl.blk < r1 ? a + pl.blk : r1;
        for (int t = 0; t < pl.tiles; t++)
            rows_multi(w, x + pl.at[t], y + pl.at[t], pl.at[t + 1] - pl.at[t], a, e, fmt);
    }
}

AI void matvec_multi(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb, int64_t r0, int64_t r1,
                     int fmt) {
    for (int64_t b = 0; b < nb; b += QHX_MATVEC_MULTI_MAX) /* more rows than the contract's bound: in turn */
        multi_up_to_max(w, x + b, y + b, (int)(nb - b < QHX_MATVEC_MULTI_MAX ? nb - b : QHX_MATVEC_MULTI_MAX), r0, r1,
                        fmt);
}

/* ---- matmul: register tiles of R rows x T tokens ------------------------------------------- */

/* Tile of R rows x T tokens: each weight vector is widened once and used T times, each
 * activation vector loaded once and used R times. R*T accumulators + R weights + 1 activation
 * fit the 16 ymm registers for R = 3, T = 4. */
AI void mm_tile(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t t,
                int64_t r, int R, int T, int fmt) {
    const int64_t cols = w->cols, kv = cols & ~(int64_t)7;
    const size_t es = esize(fmt);
    const uint8_t *p[3];
    const float *xt[4];
    __m256 acc[3][4];
    UNROLL
    for (int i = 0; i < R; i++) p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)cols * es;
    UNROLL
    for (int j = 0; j < T; j++) xt[j] = X + (t + j) * ldx;
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < T; j++) acc[i][j] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kv; k += 8) {
        __m256 wv[3];
        UNROLL
        for (int i = 0; i < R; i++) wv[i] = ld8w(p[i] + k * es, fmt);
        UNROLL
        for (int j = 0; j < T; j++) {
            __m256 xv = _mm256_loadu_ps(xt[j] + k);
            UNROLL
            for (int i = 0; i < R; i++) acc[i][j] = _mm256_fmadd_ps(wv[i], xv, acc[i][j]);
        }
    }
    if (cols > kv) {
        __m256 wv[3];
        UNROLL
        for (int i = 0; i < R; i++) wv[i] = ld8w_tail(p[i] + kv * es, cols - kv, fmt);
        UNROLL
        for (int j = 0; j < T; j++) {
            __m256 xv = ld8x_tail(xt[j] + kv, cols - kv);
            UNROLL
            for (int i = 0; i < R; i++) acc[i][j] = _mm256_fmadd_ps(wv[i], xv, acc[i][j]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++) {
        float s = row_scale(w, r + i, fmt);
        if (T == 4) {
            _Alignas(16) float v[4];
            _mm_store_ps(v, hsum8x4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
            UNROLL
            for (int j = 0; j < 4; j++) Y[(t + j) * ldy + r + i] = v[j] * s;
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
    for (; r + 3 <= rb; r += 3) mm_tile(w, X, ldx, Y, ldy, t, r, 3, T, fmt);
    for (; r < rb; r++) mm_tile(w, X, ldx, Y, ldy, t, r, 1, T, fmt);
}

/* Row blocks small enough to stay in L2 while every token tile passes over them. */
#define MM_BLOCK_BYTES (192 * 1024)

AI void matmul(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
               int64_t r0, int64_t r1, int fmt) {
    int64_t row_bytes = w->cols * (int64_t)esize(fmt);
    int64_t blk = MM_BLOCK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    blk = blk < 3 ? 3 : blk - blk % 3;
    for (int64_t ra = r0; ra < r1; ra += blk) {
        int64_t rb = ra + blk < r1 ? ra + blk : r1;
        int64_t t = 0;
        for (; t + 4 <= n; t += 4) mm_rows(w, X, ldx, Y, ldy, t, 4, ra, rb, fmt);
        for (; t < n; t++) mm_rows(w, X, ldx, Y, ldy, t, 1, ra, rb, fmt);
    }
}

/* ---- Q4, group 32: 16 bytes of codes and one f32 scale per group ---------------------------- */

/* The 32 codes of a group as f32 (nib - 8): w[0], w[1] = values 0..15 (low nibbles of bytes
 * 0..15), w[2], w[3] = values 16..31 (high nibbles). */
AI void q4_codes(const uint8_t *p, __m256 w[4]) {
    const __m128i m = _mm_set1_epi8(0x0f), e = _mm_set1_epi8(8);
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    __m128i lo = _mm_sub_epi8(_mm_and_si128(b, m), e);
    __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), m), e);
    w[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
    w[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(lo, lo)));
    w[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
    w[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(hi, hi)));
}

/* The group step: acc += d * (w . x) over the group's 32 values at xg. */
AI __m256 q4_step(const __m256 w[4], const float *xg, __m256 d, __m256 acc) {
    __m256 s = _mm256_mul_ps(w[0], _mm256_loadu_ps(xg));
    s = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xg + 8), s);
    s = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xg + 16), s);
    s = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xg + 24), s);
    return _mm256_fmadd_ps(d, s, acc);
}

AI int q4_fast(const qhx_weight *w) { return w->group == 32 && w->cols % 32 == 0; }

AI void q4_matvec_rows(const qhx_weight *w, const float *x, float *y, int64_t r, int R) {
    const int64_t ng = w->cols / 32;
    const uint8_t *p[4];
    const uint16_t *d[4];
    __m256 acc[4];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)(w->cols / 2);
        d[i] = w->gscales + (r + i) * ng;
        acc[i] = _mm256_setzero_ps();
    }
    for (int64_t g = 0; g < ng; g++) {
        UNROLL
        for (int i = 0; i < R; i++) {
            __m256 wv[4];
            q4_codes(p[i] + 16 * g, wv);
            acc[i] = q4_step(wv, x + 32 * g, _mm256_set1_ps(qhx_x86_f16(d[i] + g)), acc[i]);
        }
    }
    if (R == 4) {
        _mm_storeu_ps(y + r, hsum8x4(acc[0], acc[1], acc[2], acc[3]));
    } else {
        UNROLL
        for (int i = 0; i < R; i++) y[r + i] = hsum8(acc[i]);
    }
}

static void q4_matvec(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) q4_matvec_rows(w, x, y, r, 4);
    for (; r < r1; r++) q4_matvec_rows(w, x, y, r, 1);
}

/* Tile of R rows x T tokens: each group's codes are widened once per row and used T times;
 * R*T accumulators + 4 codes + the partial sum + the scale fit 16 ymm for R = 2, T = 4. */
AI void q4_tile(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t t,
                int64_t r, int R, int T) {
    const int64_t ng = w->cols / 32;
    const uint8_t *p[2];
    const uint16_t *d[2];
    __m256 acc[2][4];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)(w->cols / 2);
        d[i] = w->gscales + (r + i) * ng;
        UNROLL
        for (int j = 0; j < T; j++) acc[i][j] = _mm256_setzero_ps();
    }
    for (int64_t g = 0; g < ng; g++) {
        UNROLL
        for (int i = 0; i < R; i++) {
            __m256 wv[4];
            q4_codes(p[i] + 16 * g, wv);
            __m256 dv = _mm256_set1_ps(qhx_x86_f16(d[i] + g));
            UNROLL
            for (int j = 0; j < T; j++)
                acc[i][j] = q4_step(wv, X + (t + j) * ldx + 32 * g, dv, acc[i][j]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++) {
        if (T == 4) {
            _Alignas(16) float v[4];
            _mm_store_ps(v, hsum8x4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]));
            UNROLL
            for (int j = 0; j < 4; j++) Y[(t + j) * ldy + r + i] = v[j];
        } else {
            UNROLL
            for (int j = 0; j < T; j++) Y[(t + j) * ldy + r + i] = hsum8(acc[i][j]);
        }
    }
}

AI void q4_rows(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t t,
                int T, int64_t ra, int64_t rb) {
    int64_t r = ra;
    for (; r + 2 <= rb; r += 2) q4_tile(w, X, ldx, Y, ldy, t, r, 2, T);
    for (; r < rb; r++) q4_tile(w, X, ldx, Y, ldy, t, r, 1, T);
}

static void q4_matmul(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                      int64_t n, int64_t r0, int64_t r1) {
    int64_t row_bytes = w->cols / 2 + w->cols / 32 * 4;
    int64_t blk = MM_BLOCK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    blk = blk < 2 ? 2 : blk - blk % 2;
    for (int64_t ra = r0; ra < r1; ra += blk) {
        int64_t rb = ra + blk < r1 ? ra + blk : r1;
        int64_t t = 0;
        for (; t + 4 <= n; t += 4) q4_rows(w, X, ldx, Y, ldy, t, 4, ra, rb);
        for (; t < n; t++) q4_rows(w, X, ldx, Y, ldy, t, 1, ra, rb);
    }
}

void qhx_k_matvec_q4_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    if (q4_fast(w)) q4_matvec(w, x, y, r0, r1);
    else qhx_k_matvec_q4_ref(w, x, y, r0, r1);
}

void qhx_k_matmul_q4_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                          int64_t n, int64_t r0, int64_t r1) {
    if (q4_fast(w)) q4_matmul(w, X, ldx, Y, ldy, n, r0, r1);
    else qhx_k_matmul_q4_ref(w, X, ldx, Y, ldy, n, r0, r1);
}

/* ---- entry points -------------------------------------------------------------------------- */

#define DEFINE(name, fmt)                                                                        \
    void qhx_k_matvec_##name##_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0,  \
                                    int64_t r1) {                                                \
        matvec(w, x, y, r0, r1, fmt);                                                            \
    }                                                                                            \
    void qhx_k_matmul_##name##_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, \
                                    int64_t ldy, int64_t n, int64_t r0, int64_t r1) {            \
        matmul(w, X, ldx, Y, ldy, n, r0, r1, fmt);                                               \
    }                                                                                            \
    void qhx_k_matvec_multi_##name##_avx2(const qhx_weight *w, const float *const *x, float *const *y, \
                                          int64_t nb, int64_t r0, int64_t r1) {                  \
        matvec_multi(w, x, y, nb, r0, r1, fmt);                                                  \
    }

DEFINE(f32, QHX_W_F32)
DEFINE(f16, QHX_W_F16)
DEFINE(bf16, QHX_W_BF16)
DEFINE(q8, QHX_W_Q8)
