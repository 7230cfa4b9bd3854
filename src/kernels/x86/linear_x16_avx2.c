/* kernels/x86/linear_x16_avx2.c: decode matvec for Q8 and Q4 weights with the activation
 * vector held as int16 (AVX2). Built with -mavx2 -mfma -mf16c; installed by kernels/select.c
 * when the table holds AVX2 kernels.
 *
 * Why: widening every int8 or 4-bit weight to f32 costs more instructions per byte than the
 * memory system delivers bytes, so the f32-activation kernels are compute-bound at decode. Here
 * x is quantized once per call to int16 in blocks of 32 (dx_b = max|x_b| / 32767, round to
 * nearest even), and each block's products are summed exactly in int32 (vpmaddwd), then scaled
 * in f32. The only new error is the int16 rounding of x: at most dx_b / 2 per element, a
 * relative 1.5e-5 of the block's largest value, far below the weights' own quantization step.
 *
 * Results depend only on the row and x, never on [r0, r1): row groups of 4 share the x loads but
 * each row keeps its own accumulator, reduced in a fixed order. Shapes without a fast path
 * (cols not a multiple of 32, more than XQ_MAX_COLS columns, Q4 groups other than 32) go to the
 * f32-activation AVX2 kernels. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/x86/ops_x86.h"
#include "kernels/x86/f16_x86.h"
#include "kernels/x86/multi_plan.h"
#include "kernels/x86/prefetch_x86.h"
#include "kernels/x86/x86.h"

#define AI static inline __attribute__((always_inline))
#define XQ_MAX_COLS 16384

/* Rows shorter than a 4 KiB page are read one at a time. Reading 4 such rows side by side makes
 * 4 short interleaved streams, and the hardware prefetcher (which follows streams within a page)
 * keeps fewer lines in flight: from DRAM, 2048-column Q8 rows read 4 at a time ran at 10-13
 * GB/s on two Zen 3 cores against 15-18 one at a time; with rows of a page or more the 4-row
 * blocks were as fast or faster (6144 columns: 17 vs 16). Each row keeps its own accumulator
 * in either order, so the results are the same. */
#define ROW_BLOCK_MIN_BYTES 4096

AI float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* x (cols, a multiple of 32) -> q (cols) int16 and dx (cols / 32). */
static void quant_x16(const float *x, int64_t cols, int16_t *q, float *dx) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < cols / 32; b++) {
        const float *xb = x + 32 * b;
        __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8), v2 = _mm256_loadu_ps(xb + 16),
               v3 = _mm256_loadu_ps(xb + 24);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float mx = _mm_cvtss_f32(m4);
        /* max_ps drops NaNs, so a block with a NaN or an infinity is found apart: its scale is NaN
           and its codes 0, so every output it touches is NaN, as the f32 kernels give */
        __m256 bad = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(v0, v0, _CMP_UNORD_Q), _mm256_cmp_ps(v1, v1, _CMP_UNORD_Q)),
                                  _mm256_or_ps(_mm256_cmp_ps(v2, v2, _CMP_UNORD_Q), _mm256_cmp_ps(v3, v3, _CMP_UNORD_Q)));
        if (_mm256_movemask_ps(bad) || isinf(mx)) {
            memset(q + 32 * b, 0, 32 * sizeof *q);
            dx[b] = NAN;
            continue;
        }
        float inv = mx > 0.0f ? 32767.0f / mx : 0.0f;
        dx[b] = inv > 0.0f ? mx / 32767.0f : 0.0f;
        __m256 iv = _mm256_set1_ps(inv);
        __m256i a = _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v0, iv)), _mm256_cvtps_epi32(_mm256_mul_ps(v1, iv)));
        __m256i c = _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v2, iv)), _mm256_cvtps_epi32(_mm256_mul_ps(v3, iv)));
        /* packs interleaves the 128-bit lanes: put the values back in column order */
        _mm256_storeu_si256((__m256i *)(q + 32 * b), _mm256_permute4x64_epi64(a, 0xD8));
        _mm256_storeu_si256((__m256i *)(q + 32 * b + 16), _mm256_permute4x64_epi64(c, 0xD8));
    }
}

/* ---- Q8: int8 weights, one f32 scale per row --------------------------------------------------- */

AI void q8_rows(const qhx_weight *w, const int16_t *xq, const float *dx, float *y, int64_t r, int R) {
    const int64_t cols = w->cols, nb = cols / 32;
    const int8_t *p[4];
    __m256 acc[4];
    for (int i = 0; i < R; i++) {
        p[i] = (const int8_t *)w->data + (size_t)(r + i) * (size_t)cols;
        acc[i] = _mm256_setzero_ps();
    }
    const int64_t ahead = qhx_pf_ahead(R * cols); /* prefetch_x86.h */
    for (int64_t b = 0; b < nb; b++) {
        __m256i xa = _mm256_loadu_si256((const __m256i *)(xq + 32 * b));
        __m256i xb = _mm256_loadu_si256((const __m256i *)(xq + 32 * b + 16));
        __m256 d = _mm256_broadcast_ss(dx + b);
        if (!(b & 1)) QHX_PREFETCH_ROWS(p, R, 32 * b + ahead);
        for (int i = 0; i < R; i++) {
            __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p[i] + 32 * b)));
            __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p[i] + 32 * b + 16)));
            __m256i s = _mm256_add_epi32(_mm256_madd_epi16(w0, xa), _mm256_madd_epi16(w1, xb));
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc[i]);
        }
    }
    for (int i = 0; i < R; i++) y[r + i] = hsum(acc[i]) * w->scales[r + i];
}

void qhx_k_matvec_q8_x16_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    if (w->cols % 32 || w->cols > XQ_MAX_COLS) {
        qhx_k_matvec_q8_avx2(w, x, y, r0, r1);
        return;
    }
    _Alignas(32) int16_t xq[XQ_MAX_COLS];
    _Alignas(32) float dx[XQ_MAX_COLS / 32];
    quant_x16(x, w->cols, xq, dx);
    int64_t r = r0;
    if (w->cols >= ROW_BLOCK_MIN_BYTES)
        for (; r + 4 <= r1; r += 4) q8_rows(w, xq, dx, y, r, 4);
    for (; r < r1; r++) q8_rows(w, xq, dx, y, r, 1);
}

/* The multi-row twin: weight row r widened to int16 once per block and used by every activation
 * row of the call, each (r, b) with q8_rows' R = 1 arithmetic in its order (the exact int32 block
 * sums, the FMA per block, hsum, the row scale), so y[b][r] has the single-row kernel's bits.
 * The activations are quantized once each, as the single-row kernel does per call (each
 * 2 * cols + cols / 8 bytes on the stack: 288 KiB at 8 rows of 16384). */
AI void q8_row_multi(const qhx_weight *w, const int16_t *const *xq, const float *const *dx, float *const *y, int64_t r,
                     int NB) {
    const int64_t nb = w->cols / 32;
    const int8_t *p = (const int8_t *)w->data + (size_t)r * (size_t)w->cols;
    __m256 acc[QHX_MATVEC_MULTI_MAX];
    for (int b = 0; b < NB; b++) acc[b] = _mm256_setzero_ps();
    for (int64_t k = 0; k < nb; k++) {
        __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 32 * k)));
        __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 32 * k + 16)));
        for (int b = 0; b < NB; b++) {
            __m256i xa = _mm256_loadu_si256((const __m256i *)(xq[b] + 32 * k));
            __m256i xb = _mm256_loadu_si256((const __m256i *)(xq[b] + 32 * k + 16));
            __m256i s = _mm256_add_epi32(_mm256_madd_epi16(w0, xa), _mm256_madd_epi16(w1, xb));
            acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_broadcast_ss(dx[b] + k), acc[b]);
        }
    }
    for (int b = 0; b < NB; b++) y[b][r] = hsum(acc[b]) * w->scales[r];
}

/* A constant tile width per call, so the loops unroll. */
AI void q8_tile(const qhx_weight *w, const int16_t *const *xq, const float *const *dx, float *const *y, int64_t r,
                int n) {
    switch (n) {
    case 1: q8_row_multi(w, xq, dx, y, r, 1); break;
    case 2: q8_row_multi(w, xq, dx, y, r, 2); break;
    case 3: q8_row_multi(w, xq, dx, y, r, 3); break;
    case 4: q8_row_multi(w, xq, dx, y, r, 4); break;
    case 5: q8_row_multi(w, xq, dx, y, r, 5); break;
    case 6: q8_row_multi(w, xq, dx, y, r, 6); break;
    case 7: q8_row_multi(w, xq, dx, y, r, 7); break;
    default: q8_row_multi(w, xq, dx, y, r, 8); break;
    }
}

static void q8_multi_up_to_max(const qhx_weight *w, const float *const *x, float *const *y, int nbr, int64_t r0,
                               int64_t r1) {
    _Alignas(32) int16_t xq[QHX_MATVEC_MULTI_MAX][XQ_MAX_COLS];
    _Alignas(32) float dx[QHX_MATVEC_MULTI_MAX][XQ_MAX_COLS / 32];
    const int16_t *xp[QHX_MATVEC_MULTI_MAX];
    const float *dp[QHX_MATVEC_MULTI_MAX];
    for (int b = 0; b < nbr; b++) {
        quant_x16(x[b], w->cols, xq[b], dx[b]);
        xp[b] = xq[b], dp[b] = dx[b];
    }
    /* the rows in tiles over blocks (multi_plan.h): x rows of cols int16 values */
    const qhx_multi_plan pl = qhx_multi_plan_make(nbr, w->cols * (int64_t)sizeof(int16_t), QHX_MATVEC_MULTI_MAX,
                                                  w->cols, r0, r1);
    for (int64_t a = r0; a < r1; a += pl.blk) {
        int64_t e = a + pl.blk < r1 ? a + pl.blk : r1;
        for (int t = 0; t < pl.tiles; t++)
            for (int64_t r = a; r < e; r++)
                q8_tile(w, xp + pl.at[t], dp + pl.at[t], y + pl.at[t], r, pl.at[t + 1] - pl.at[t]);
    }
}

void qhx_k_matvec_multi_q8_x16_avx2(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                    int64_t r0, int64_t r1) {
    if (w->cols % 32 || w->cols > XQ_MAX_COLS) {
        for (int64_t b = 0; b < nb; b++) qhx_k_matvec_q8_avx2(w, x[b], y[b], r0, r1);
        return;
    }
    for (int64_t b = 0; b < nb; b += QHX_MATVEC_MULTI_MAX) /* more rows than the contract's bound: in turn */
        q8_multi_up_to_max(w, x + b, y + b, (int)(nb - b < QHX_MATVEC_MULTI_MAX ? nb - b : QHX_MATVEC_MULTI_MAX), r0,
                           r1);
}

/* ---- Q4, group 32: 16 bytes of codes (value i low nibble, i + 16 high) and one f32 scale -------- */

AI void q4_rows(const qhx_weight *w, const int16_t *xq, const float *dx, float *y, int64_t r, int R) {
    const int64_t ng = w->cols / 32;
    const uint8_t *p[4];
    const uint16_t *ds[4];
    __m256 acc[4];
    const __m128i mask = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)(w->cols / 2);
        ds[i] = w->gscales + (r + i) * ng;
        acc[i] = _mm256_setzero_ps();
    }
    for (int64_t g = 0; g < ng; g++) {
        __m256i xa = _mm256_loadu_si256((const __m256i *)(xq + 32 * g));
        __m256i xb = _mm256_loadu_si256((const __m256i *)(xq + 32 * g + 16));
        __m256 d = _mm256_broadcast_ss(dx + g);
        for (int i = 0; i < R; i++) {
            __m128i bytes = _mm_loadu_si128((const __m128i *)(p[i] + 16 * g));
            __m128i lo = _mm_sub_epi8(_mm_and_si128(bytes, mask), eight);
            __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask), eight);
            __m256i s = _mm256_add_epi32(_mm256_madd_epi16(_mm256_cvtepi8_epi16(lo), xa),
                                         _mm256_madd_epi16(_mm256_cvtepi8_epi16(hi), xb));
            __m256 sc = _mm256_mul_ps(_mm256_set1_ps(qhx_x86_f16(ds[i] + g)), d);
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), sc, acc[i]);
        }
    }
    for (int i = 0; i < R; i++) y[r + i] = hsum(acc[i]);
}

void qhx_k_matvec_q4_x16_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    if (w->group != 32 || w->cols % 32 || w->cols > XQ_MAX_COLS) {
        qhx_k_matvec_q4_avx2(w, x, y, r0, r1);
        return;
    }
    _Alignas(32) int16_t xq[XQ_MAX_COLS];
    _Alignas(32) float dx[XQ_MAX_COLS / 32];
    quant_x16(x, w->cols, xq, dx);
    int64_t r = r0;
    if (w->cols / 2 >= ROW_BLOCK_MIN_BYTES)
        for (; r + 4 <= r1; r += 4) q4_rows(w, xq, dx, y, r, 4);
    for (; r < r1; r++) q4_rows(w, xq, dx, y, r, 1);
}
