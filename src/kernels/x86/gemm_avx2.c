/* kernels/x86/gemm_avx2.c: prefill matmul (many tokens) for every weight format with AVX2 + FMA,
 * as a packed-panel GEMM. Built with -mavx2 -mfma -mf16c; installed by kernels/select.c when
 * the table holds AVX2 kernels.
 *
 * For each block of KC columns and each group of NP panels of 16 rows, the weights are widened
 * to f32 once into (KC, 16) panels (Q4 group scales applied, Q8 row scales kept for the end),
 * then every tile of 6 tokens runs a 6 x 16 register tile over each panel in turn (its x rows
 * stay in L1 across the panels): per column, two panel loads, six broadcasts of x, twelve FMAs.
 * The widening, done once per panel instead of once per token tile, and the larger tile keep
 * the FMA units busy.
 *
 * Numerics: output (t, r) is one f32 accumulator fed by one FMA per column in column order
 * (partial sums are stored to Y between column blocks, exactly), then multiplied by the Q8 row
 * scale; so it depends only on row r and token t, never on [r0, r1), on n or on the tiling. It
 * differs from the matvec kernels by summation order (float32 rounding noise). Fewer than
 * MIN_TOKENS tokens, columns not a multiple of 8, or Q4 with a group other than 32, go to the
 * register-tile kernels of linear_avx2.c. Panels are packed 8 rows x 8 columns at a time
 * through an in-register transpose. */
#include <immintrin.h>
#include <string.h>

#include "kernels/x86/ops_x86.h"
#include "kernels/x86/tile_avx2.h"
#include "kernels/x86/f16_x86.h"
#include "kernels/x86/x86.h"

#define AI static inline __attribute__((always_inline))
#define KC 256       /* columns per panel */
#define NR 16        /* rows per panel */
#define MT 6         /* tokens per register tile */
#define MIN_TOKENS 8

/* 8 weights of row `row`, columns [k, k + 8), as f32 (Q4: group scale applied). */
AI __m256 load8(const qhx_weight *w, int fmt, int64_t row, int64_t k) {
    const int64_t cols = w->cols;
    switch (fmt) {
    case QHX_W_F32: return _mm256_loadu_ps((const float *)w->data + row * cols + k);
    case QHX_W_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w->data + row * cols + k)));
    case QHX_W_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)w->data + row * cols + k))), 16));
    case QHX_W_Q8:
        return _mm256_cvtepi32_ps(
            _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)((const int8_t *)w->data + row * cols + k))));
    default: { /* Q4, group 32: value o of a group is byte o's low nibble (o < 16), else byte o-16's high */
        const uint8_t *grp = (const uint8_t *)w->data + (size_t)row * (size_t)(cols / 2) + 16 * (k / 32);
        int64_t o = k % 32;
        __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(grp + (o & 15))));
        if (o >= 16) b = _mm256_srli_epi32(b, 4);
        b = _mm256_sub_epi32(_mm256_and_si256(b, _mm256_set1_epi32(15)), _mm256_set1_epi32(8));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(b), _mm256_set1_ps(qhx_x86_f16(w->gscales + row * (cols / 32) + k / 32)));
    }
    }
}

/* r[i] (8 rows x 8 columns) -> transposed in place: r[j] = column j (8 rows). */
AI void transpose8(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* Panel P (kc, NR) of rows [r, r + nr) (nr <= NR; missing rows are zeros), columns [k0, k0 + kc);
 * kc a multiple of 8 (the caller sends other shapes elsewhere). */
static void pack(const qhx_weight *w, int fmt, int64_t r, int nr, int64_t k0, int64_t kc, float *P) {
    for (int h = 0; h < NR / 8; h++) {
        for (int64_t k = 0; k < kc; k += 8) {
            __m256 v[8];
            for (int i = 0; i < 8; i++) v[i] = 8 * h + i < nr ? load8(w, fmt, r + 8 * h + i, k0 + k) : _mm256_setzero_ps();
            transpose8(v);
            for (int j = 0; j < 8; j++) _mm256_store_ps(P + (k + j) * NR + 8 * h, v[j]);
        }
    }
}

/* Y[t + j, r .. r + nr) (+)= X[t + j, k0 .. k0 + kc) . P for j < T. first: start from zero;
 * scale: multiply by these row scales at the end (last column block), or NULL. */
AI void tile(const float *P, const float *X, int64_t ldx, int64_t kc, float *Y, int64_t ldy, int T, int nr,
             int first, const float *scale) {
    __m256 c[MT][2];
    tile_acc_load(c, Y, ldy, T, nr, first);
    for (int64_t k = 0; k < kc; k++) {
        __m256 w0 = _mm256_load_ps(P + k * NR), w1 = _mm256_load_ps(P + k * NR + 8);
        for (int j = 0; j < T; j++) {
            __m256 xb = _mm256_broadcast_ss(X + j * ldx + k);
            c[j][0] = _mm256_fmadd_ps(xb, w0, c[j][0]);
            c[j][1] = _mm256_fmadd_ps(xb, w1, c[j][1]);
        }
    }
    tile_acc_store(c, Y, ldy, T, nr, scale);
}

#define NP 4 /* panels packed together: a token tile's x stays in L1 across them */

/* Tokens [0, n) against the np packed panels of rows r .. (the last panel may be partial: nr_last). */
static void tiles(const float *P, int np, int nr_last, const float *X, int64_t ldx, int64_t kc, float *Y, int64_t ldy,
                  int64_t n, int first, const float *const *scale) {
    for (int64_t t = 0; t < n; t += MT) {
        int T = n - t < MT ? (int)(n - t) : MT;
        for (int p = 0; p < np; p++) {
            const float *Pp = P + p * KC * NR;
            int nr = p == np - 1 ? nr_last : NR;
            float *Yp = Y + t * ldy + p * NR;
            const float *Xt = X + t * ldx;
            switch (T) {
            case 6: tile(Pp, Xt, ldx, kc, Yp, ldy, 6, nr, first, scale[p]); break;
            case 5: tile(Pp, Xt, ldx, kc, Yp, ldy, 5, nr, first, scale[p]); break;
            case 4: tile(Pp, Xt, ldx, kc, Yp, ldy, 4, nr, first, scale[p]); break;
            case 3: tile(Pp, Xt, ldx, kc, Yp, ldy, 3, nr, first, scale[p]); break;
            case 2: tile(Pp, Xt, ldx, kc, Yp, ldy, 2, nr, first, scale[p]); break;
            default: tile(Pp, Xt, ldx, kc, Yp, ldy, 1, nr, first, scale[p]); break;
            }
        }
    }
}

static void gemm(const qhx_weight *w, int fmt, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                 int64_t r0, int64_t r1) {
    _Alignas(32) float P[NP * KC * NR];
    _Alignas(32) float sc[NR];
    const int64_t K = w->cols;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        int64_t kc = K - k0 < KC ? K - k0 : KC;
        int last = k0 + kc == K;
        for (int64_t rb = r0; rb < r1; rb += NP * NR) {
            int np = 0, nr = NR;
            const float *scale[NP];
            for (int64_t r = rb; r < r1 && np < NP; r += NR, np++) {
                nr = r1 - r < NR ? (int)(r1 - r) : NR;
                pack(w, fmt, r, nr, k0, kc, P + np * KC * NR);
                scale[np] = last && fmt == QHX_W_Q8 ? w->scales + r : NULL;
                if (scale[np] && nr < NR) { /* tile_acc_store reads 16 scales: past the rows, zeros */
                    memset(sc, 0, sizeof sc);
                    memcpy(sc, scale[np], (size_t)nr * sizeof(float));
                    scale[np] = sc;
                }
            }
            tiles(P, np, nr, X + k0, ldx, kc, Y + rb, ldy, n, k0 == 0, scale);
        }
    }
}

void qhx_k_matmul_f32_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                                int64_t r0, int64_t r1) {
    if (n < MIN_TOKENS || w->cols % 8) qhx_k_matmul_f32_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm(w, QHX_W_F32, X, ldx, Y, ldy, n, r0, r1);
}
void qhx_k_matmul_f16_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                                int64_t r0, int64_t r1) {
    if (n < MIN_TOKENS || w->cols % 8) qhx_k_matmul_f16_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm(w, QHX_W_F16, X, ldx, Y, ldy, n, r0, r1);
}
void qhx_k_matmul_bf16_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                                 int64_t r0, int64_t r1) {
    if (n < MIN_TOKENS || w->cols % 8) qhx_k_matmul_bf16_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm(w, QHX_W_BF16, X, ldx, Y, ldy, n, r0, r1);
}
void qhx_k_matmul_q8_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                               int64_t r0, int64_t r1) {
    if (n < MIN_TOKENS || w->cols % 8) qhx_k_matmul_q8_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm(w, QHX_W_Q8, X, ldx, Y, ldy, n, r0, r1);
}
void qhx_k_matmul_q4_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                               int64_t r0, int64_t r1) {
    if (n < MIN_TOKENS || w->group != 32 || w->cols % 32) qhx_k_matmul_q4_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm(w, QHX_W_Q4, X, ldx, Y, ldy, n, r0, r1);
}
