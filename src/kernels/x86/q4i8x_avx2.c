/* kernels/x86/q4i8x_avx2.c: Q4 matvec/matmul with the activations quantized to int8 on the fly
 * (AVX2), the way ggml pairs Q4_0 weights with Q8_0 activations. Not the default: results differ
 * from qhx_k_matvec_q4_ref by the activation rounding (bounded below), so the model opts in
 * (qhx_kern_install_x86_i8x) where that is acceptable. Built with -mavx2 -mfma -mf16c.
 *
 * Numerics (docs/formats.md Q4, group 32): x is cut into blocks of 32 aligned with the weight
 * groups; block b gets dx[b] = max|x| / 127 and q = x * (1 / dx) rounded to nearest even, in
 * [-127, 127] (all 0 when max|x| is 0). Then y[r] = sum_g (d[r, g] * dx[g]) * isum[r, g], isum = sum (nib - 8) * q
 * exact in int32, accumulated in 8 f32 lanes and reduced by the same tree as linear_avx2.c.
 * Error against exact arithmetic: at most sum_g |d[r, g]| * dx[g] / 2 * sum_i |nib - 8| plus
 * float32 rounding. Output row r depends only on row r and x; matmul equals matvec bitwise.
 * Columns over QX_MAX_COLS, groups other than 32 or cols not a multiple of 32 take the exact
 * qhx_k_matvec_q4_avx2 path instead. */
#include <immintrin.h>
#include <string.h>

#include "kernels/x86/x86.h"

#define AI static inline __attribute__((always_inline))
/* Constant-count loops over rows and tokens must unroll (accumulators stay in registers) at
 * any optimisation level, not only -O3. */
#define UNROLL _Pragma("GCC unroll 32")

/* Stack room for one quantized activation row: cols int8 + cols / 32 scales. */
#define QX_MAX_COLS 8192

typedef struct qx_row {
    _Alignas(32) int8_t q[QX_MAX_COLS];
    float dx[QX_MAX_COLS / 32];
} qx_row;

/* Quantize x (cols,) into o. Per block the scale is max|x| / 127 and the codes are x * (1 / dx)
 * rounded to nearest even (cvtps2dq under the default MXCSR, as nearbyintf); |x / dx| <= 127, so
 * the saturating packs never clip. */
static void quantize_x(const float *x, int64_t cols, qx_row *o) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < cols / 32; b++) {
        const float *xb = x + 32 * b;
        __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
        __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        float dx = _mm_cvtss_f32(h) / 127.0f, id = dx != 0.0f ? 1.0f / dx : 0.0f;
        __m256 s = _mm256_set1_ps(id);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, s)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, s));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, s)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, s));
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        _mm256_store_si256((__m256i *)(o->q + 32 * b), _mm256_permutevar8x32_epi32(p, order));
        o->dx[b] = dx;
    }
}

AI float hsum8(__m256 v) {
    __m256 h = _mm256_hadd_ps(v, v);
    h = _mm256_hadd_ps(h, h);
    return _mm_cvtss_f32(_mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

/* The 32 codes of a group as int8 (nib - 8), in value order. */
AI __m256i q4_codes8(const uint8_t *p) {
    const __m128i m = _mm_set1_epi8(0x0f);
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
    return _mm256_sub_epi8(w, _mm256_set1_epi8(8));
}

/* acc += scale * sum(w * q) over one group; aw = |w| (maddubs wants the unsigned side). */
AI __m256 q4_dot(__m256i w, __m256i aw, __m256i q, float scale, __m256 acc) {
    __m256i p16 = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(q, w));
    __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_set1_ps(scale), acc);
}

/* Rows r..r+R-1, R <= 4, against one quantized activation row. */
AI void rows_q(const qhx_weight *w, const qx_row *qx, float *y, int64_t r, int R) {
    const int64_t ng = w->cols / 32;
    const uint8_t *p[4];
    const float *d[4];
    __m256 acc[4];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)(w->cols / 2);
        d[i] = w->scales + (r + i) * ng;
        acc[i] = _mm256_setzero_ps();
    }
    for (int64_t g = 0; g < ng; g++) {
        __m256i q = _mm256_load_si256((const __m256i *)(qx->q + 32 * g));
        UNROLL
        for (int i = 0; i < R; i++) {
            __m256i c = q4_codes8(p[i] + 16 * g);
            acc[i] = q4_dot(c, _mm256_sign_epi8(c, c), q, d[i][g] * qx->dx[g], acc[i]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++) y[r + i] = hsum8(acc[i]);
}

AI void rows_range(const qhx_weight *w, const qx_row *qx, float *y, int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) rows_q(w, qx, y, r, 4);
    for (; r < r1; r++) rows_q(w, qx, y, r, 1);
}

static int i8x_ok(const qhx_weight *w) {
    return w->group == 32 && w->cols % 32 == 0 && w->cols <= QX_MAX_COLS;
}

void qhx_k_matvec_q4_i8x_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    if (!i8x_ok(w)) {
        qhx_k_matvec_q4_avx2(w, x, y, r0, r1);
        return;
    }
    qx_row qx;
    quantize_x(x, w->cols, &qx);
    rows_range(w, &qx, y, r0, r1);
}

/* Prefill: row blocks that stay in L2; inside each, one token at a time against its quantized
 * row (the codes are unpacked per token; at ~14 instructions per 32 weights this still beats
 * the exact path's ~21). */
#define MM_BLOCK_BYTES (192 * 1024)

void qhx_k_matmul_q4_i8x_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                              int64_t ldy, int64_t n, int64_t r0, int64_t r1) {
    if (!i8x_ok(w)) {
        qhx_k_matmul_q4_avx2(w, X, ldx, Y, ldy, n, r0, r1);
        return;
    }
    qx_row qx;
    int64_t row_bytes = w->cols / 2 + w->cols / 32 * 4;
    int64_t blk = MM_BLOCK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    blk = blk < 4 ? 4 : blk - blk % 4;
    if (n == 1 || r1 - r0 <= blk) blk = r1 - r0; /* one block: quantize each token once */
    for (int64_t ra = r0; ra < r1; ra += blk) {
        int64_t rb = ra + blk < r1 ? ra + blk : r1;
        for (int64_t t = 0; t < n; t++) {
            quantize_x(X + t * ldx, w->cols, &qx);
            rows_range(w, &qx, Y + t * ldy, ra, rb);
        }
    }
}
