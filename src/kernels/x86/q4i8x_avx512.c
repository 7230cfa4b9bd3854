/* kernels/x86/q4i8x_avx512.c: Q4 matvec/matmul with the activations quantized to int8 on the fly
 * (AVX-512 F/BW/VL/DQ + VNNI), two groups per VPDPBUSD. Opt-in like q4i8x_avx2.c, with the same
 * contract: block b of 32 activations gets dx[b] = max|x| / 127 and codes nearbyintf(x / dx)
 * (x * (1 / dx), rounded to nearest even); y[r] = sum_g (d[r, g] * dx[g]) * isum[r, g] with
 * isum = sum (nib - 8) * q exact in int32, accumulated in 16 f32 lanes, reduced by the halving
 * tree of linear_avx512.c. Error bound as in q4i8x_avx2.c (results differ from it only by
 * float32 summation order). Groups other than 32, cols not a multiple of 32 or over QX_MAX_COLS
 * take the exact qhx_k_matvec_q4_avx512 path.
 *
 * VPDPBUSD multiplies unsigned by signed bytes, so it takes the raw nibbles (0..15) and the
 * codes q, starting from -8 * (sum of q over each 4 lanes): sum nib*q - 8 sum q = sum (nib-8)*q.
 *
 * Tests may build this file with QHX_X86_EMU defined and tests/x86_emu.h, as linear_avx512.c. */
#ifndef QHX_X86_EMU
#include <immintrin.h>
#endif
#include <math.h>
#include <stddef.h>

#include "kernels/x86/f16_x86.h"
#include "kernels/x86/x86.h"

#ifdef QHX_X86_EMU
#define AI static inline
#define UNROLL
#else
#define AI static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 32")
#endif

/* Stack room for one quantized activation row, plus one zero group of padding. */
#define QX_MAX_COLS 8192

typedef struct qx_row {
    _Alignas(64) int8_t q[QX_MAX_COLS + 32];
    _Alignas(64) int32_t corr[(QX_MAX_COLS + 32) / 4]; /* -8 * sum of each 4 codes */
    float dx[QX_MAX_COLS / 32 + 1];
} qx_row;

/* Quantize x (cols,) into o, and zero the group after the last, which an odd group count
 * pairs with. */
static void quantize_x(const float *x, int64_t cols, qx_row *o) {
    const int64_t nb = cols / 32;
    for (int64_t b = 0; b <= nb; b++) {
        float dx = 0.0f, id = 0.0f;
        if (b < nb) {
            float amax = 0.0f;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
            dx = amax / 127.0f;
            id = dx != 0.0f ? 1.0f / dx : 0.0f;
        }
        for (int i = 0; i < 32; i += 4) {
            int32_t s = 0;
            for (int j = i; j < i + 4; j++) {
                int8_t q = b < nb ? (int8_t)nearbyintf(x[32 * b + j] * id) : 0;
                o->q[32 * b + j] = q;
                s += q;
            }
            o->corr[8 * b + i / 4] = -8 * s;
        }
        o->dx[b] = dx;
    }
}

AI float hsum16(__m512 v) {
    float a[16];
    _mm512_storeu_ps(a, v);
    for (int i = 0; i < 8; i++) a[i] += a[i + 8];
    for (int i = 0; i < 4; i++) a[i] += a[i + 4];
    a[0] += a[2];
    a[1] += a[3];
    return a[0] + a[1];
}

/* Nibbles of groups g, g+1 (32 bytes at p, or 16 when `one`) in value order: bytes 0..31 group g,
 * 32..63 group g+1 (zero when `one`). */
AI __m512i nibbles2(const uint8_t *p, int one) {
    const __m256i m = _mm256_set1_epi8(0x0f);
    __m256i b = one ? _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)p))
                    : _mm256_loadu_si256((const __m256i *)p);
    __m256i lo = _mm256_and_si256(b, m), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); /* lo.g lo.g1 hi.g hi.g1 */
    return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));        /* lo.g hi.g lo.g1 hi.g1 */
}

/* Rows r..r+R-1, R <= 8, against one quantized activation row. */
AI void rows_q(const qhx_weight *w, const qx_row *qx, float *y, int64_t r, int R) {
    const int64_t ng = w->cols / 32;
    const uint8_t *p[8];
    const uint16_t *d[8];
    __m512 acc[8];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)(w->cols / 2);
        d[i] = w->gscales + (r + i) * ng;
        acc[i] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < ng; g += 2) {
        const int one = g + 1 == ng;
        __m512i q = _mm512_load_si512((const void *)(qx->q + 32 * g));
        __m512i c = _mm512_load_si512((const void *)(qx->corr + 8 * g));
        __m512 dxa = _mm512_set1_ps(qx->dx[g]), dxb = _mm512_set1_ps(qx->dx[g + 1]);
        UNROLL
        for (int i = 0; i < R; i++) {
            __m512i s = _mm512_dpbusd_epi32(c, nibbles2(p[i] + 16 * g, one), q);
            __m512 dw = _mm512_mask_blend_ps((__mmask16)0xff00, _mm512_set1_ps(qhx_x86_f16(d[i] + g)),
                                             _mm512_set1_ps(one ? 0.0f : qhx_x86_f16(d[i] + g + 1)));
            __m512 sc = _mm512_mask_blend_ps((__mmask16)0xff00, dxa, dxb);
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, sc), acc[i]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++) y[r + i] = hsum16(acc[i]);
}

AI void rows_range(const qhx_weight *w, const qx_row *qx, float *y, int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) rows_q(w, qx, y, r, 8);
    for (; r < r1; r++) rows_q(w, qx, y, r, 1);
}

static int i8x_ok(const qhx_weight *w) {
    return w->group == 32 && w->cols % 32 == 0 && w->cols <= QX_MAX_COLS;
}

void qhx_k_matvec_q4_i8x_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0,
                                int64_t r1) {
    if (!i8x_ok(w)) {
        qhx_k_matvec_q4_avx512(w, x, y, r0, r1);
        return;
    }
    qx_row qx;
    quantize_x(x, w->cols, &qx);
    rows_range(w, &qx, y, r0, r1);
}

/* Prefill: row blocks that stay in L2; inside each, one token at a time. */
#define MM_BLOCK_BYTES (512 * 1024)

void qhx_k_matmul_q4_i8x_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                                int64_t ldy, int64_t n, int64_t r0, int64_t r1) {
    if (!i8x_ok(w)) {
        qhx_k_matmul_q4_avx512(w, X, ldx, Y, ldy, n, r0, r1);
        return;
    }
    qx_row qx;
    int64_t row_bytes = w->cols / 2 + w->cols / 32 * 4;
    int64_t blk = MM_BLOCK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    blk = blk < 8 ? 8 : blk - blk % 8;
    if (n == 1 || r1 - r0 <= blk) blk = r1 - r0; /* one block: quantize each token once */
    for (int64_t ra = r0; ra < r1; ra += blk) {
        int64_t rb = ra + blk < r1 ? ra + blk : r1;
        for (int64_t t = 0; t < n; t++) {
            quantize_x(X + t * ldx, w->cols, &qx);
            rows_range(w, &qx, Y + t * ldy, ra, rb);
        }
    }
}
