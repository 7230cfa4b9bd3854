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
 * MIN_TOKENS tokens, or Q4 with a group other than 32, go to the register-tile kernels of
 * linear_avx2.c. */
#include <immintrin.h>
#include <string.h>

#include "kernels/x86/ops_x86.h"
#include "kernels/x86/x86.h"

#define AI static inline __attribute__((always_inline))
#define KC 256       /* columns per panel */
#define NR 16        /* rows per panel */
#define MT 6         /* tokens per register tile */
#define MIN_TOKENS 8

/* Panel P (kc, NR) of rows [r, r + nr) (nr <= NR; missing rows are zeros), columns [k0, k0 + kc). */
static void pack(const qhx_weight *w, int fmt, int64_t r, int nr, int64_t k0, int64_t kc, float *P) {
    const int64_t cols = w->cols;
    if (nr < NR) memset(P, 0, (size_t)(kc * NR) * sizeof(float));
    for (int i = 0; i < nr; i++) {
        float *Pi = P + i;
        switch (fmt) {
        case QHX_W_F32: {
            const float *src = (const float *)w->data + (r + i) * cols + k0;
            for (int64_t k = 0; k < kc; k++) Pi[k * NR] = src[k];
            break;
        }
        case QHX_W_F16: {
            const uint16_t *src = (const uint16_t *)w->data + (r + i) * cols + k0;
            int64_t k = 0;
            for (; k + 8 <= kc; k += 8) {
                _Alignas(32) float t[8];
                _mm256_store_ps(t, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + k))));
                for (int j = 0; j < 8; j++) Pi[(k + j) * NR] = t[j];
            }
            for (; k < kc; k++) Pi[k * NR] = _cvtsh_ss(src[k]);
            break;
        }
        case QHX_W_BF16: {
            const uint16_t *src = (const uint16_t *)w->data + (r + i) * cols + k0;
            for (int64_t k = 0; k < kc; k++) {
                uint32_t u = (uint32_t)src[k] << 16;
                memcpy(&Pi[k * NR], &u, 4);
            }
            break;
        }
        case QHX_W_Q8: {
            const int8_t *src = (const int8_t *)w->data + (r + i) * cols + k0;
            for (int64_t k = 0; k < kc; k++) Pi[k * NR] = (float)src[k];
            break;
        }
        default: { /* Q4, group 32, k0 and kc multiples of 32 */
            const uint8_t *src = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)(cols / 2);
            const float *d = w->scales + (r + i) * (cols / 32);
            for (int64_t g = k0 / 32; g < (k0 + kc) / 32; g++) {
                const uint8_t *b = src + 16 * g;
                float dg = d[g];
                float *o = Pi + (g * 32 - k0) * NR;
                for (int j = 0; j < 16; j++) {
                    o[j * NR] = (float)((b[j] & 15) - 8) * dg;
                    o[(j + 16) * NR] = (float)((b[j] >> 4) - 8) * dg;
                }
            }
            break;
        }
        }
    }
}

/* Y[t + j, r .. r + nr) (+)= X[t + j, k0 .. k0 + kc) . P for j < T. first: start from zero;
 * scale: multiply by these row scales at the end (last column block), or NULL. */
AI void tile(const float *P, const float *X, int64_t ldx, int64_t kc, float *Y, int64_t ldy, int T, int nr,
             int first, const float *scale) {
    __m256 c[MT][2];
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane);
    const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8), lane);
    for (int j = 0; j < T; j++) {
        if (first) {
            c[j][0] = c[j][1] = _mm256_setzero_ps();
        } else if (nr == NR) {
            c[j][0] = _mm256_loadu_ps(Y + j * ldy);
            c[j][1] = _mm256_loadu_ps(Y + j * ldy + 8);
        } else {
            c[j][0] = _mm256_maskload_ps(Y + j * ldy, m0);
            c[j][1] = _mm256_maskload_ps(Y + j * ldy + 8, m1);
        }
    }
    for (int64_t k = 0; k < kc; k++) {
        __m256 w0 = _mm256_load_ps(P + k * NR), w1 = _mm256_load_ps(P + k * NR + 8);
        for (int j = 0; j < T; j++) {
            __m256 xb = _mm256_broadcast_ss(X + j * ldx + k);
            c[j][0] = _mm256_fmadd_ps(xb, w0, c[j][0]);
            c[j][1] = _mm256_fmadd_ps(xb, w1, c[j][1]);
        }
    }
    if (scale) {
        __m256 s0 = _mm256_maskload_ps(scale, m0), s1 = _mm256_maskload_ps(scale + 8, m1);
        for (int j = 0; j < T; j++) {
            c[j][0] = _mm256_mul_ps(c[j][0], s0);
            c[j][1] = _mm256_mul_ps(c[j][1], s1);
        }
    }
    for (int j = 0; j < T; j++) {
        if (nr == NR) {
            _mm256_storeu_ps(Y + j * ldy, c[j][0]);
            _mm256_storeu_ps(Y + j * ldy + 8, c[j][1]);
        } else {
            _mm256_maskstore_ps(Y + j * ldy, m0, c[j][0]);
            _mm256_maskstore_ps(Y + j * ldy + 8, m1, c[j][1]);
        }
    }
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
                if (scale[np] && nr < NR) { /* the masked load reads only nr scales; keep it in bounds */
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
    if (n < MIN_TOKENS) qhx_k_matmul_f32_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm(w, QHX_W_F32, X, ldx, Y, ldy, n, r0, r1);
}
void qhx_k_matmul_f16_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                                int64_t r0, int64_t r1) {
    if (n < MIN_TOKENS) qhx_k_matmul_f16_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm(w, QHX_W_F16, X, ldx, Y, ldy, n, r0, r1);
}
void qhx_k_matmul_bf16_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                                 int64_t r0, int64_t r1) {
    if (n < MIN_TOKENS) qhx_k_matmul_bf16_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm(w, QHX_W_BF16, X, ldx, Y, ldy, n, r0, r1);
}
void qhx_k_matmul_q8_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                               int64_t r0, int64_t r1) {
    if (n < MIN_TOKENS) qhx_k_matmul_q8_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm(w, QHX_W_Q8, X, ldx, Y, ldy, n, r0, r1);
}
void qhx_k_matmul_q4_gemm_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                               int64_t r0, int64_t r1) {
    if (n < MIN_TOKENS || w->group != 32 || w->cols % 32) qhx_k_matmul_q4_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm(w, QHX_W_Q4, X, ldx, Y, ldy, n, r0, r1);
}
