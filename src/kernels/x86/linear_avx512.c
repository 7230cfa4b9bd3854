/* kernels/x86/linear_avx512.c: matvec (decode) and matmul (prefill) for F32, F16, BF16, Q8 and
 * Q4 weights with AVX-512 F/BW/VL/DQ; f32 activations, f32 accumulation. Reached only through
 * qhx_kern_install_x86 after a CPU + OS (ZMM state) check.
 *
 * Numerics, shared by every path in this file so results do not depend on how rows or tokens are
 * grouped: output (r, t) keeps one 16-lane accumulator, fed by one FMA per 16 columns in column
 * order (the last partial block loaded masked, i.e. zero-padded), then reduced by hsum16()'s fixed
 * halving tree; Q8 then multiplies by the row scale. Weights widen to f32 exactly. Q4 (group 32,
 * docs/formats.md) differs only in its inner step: per group, s = the 2-vector dot of codes
 * (nib - 8) and x, then acc = fma(d[group], s, acc); the same tree reduces acc.
 *
 * Tests may build this file with QHX_X86_EMU defined and plain-C stand-ins for the intrinsics
 * (tests/x86_emu.h), so the tiling and tail logic is checked on hosts without AVX-512. */
#ifndef QHX_X86_EMU
#include <immintrin.h>
#endif
#include <stddef.h>

#include "kernels/quant.h"
#include "kernels/x86/f16_x86.h"
#include "kernels/x86/multi_plan.h"
#include "kernels/x86/prefetch_x86.h"
#include "kernels/x86/x86.h"

#ifdef QHX_X86_EMU
#define AI static inline /* the emulated build favours compile time over speed */
#else
#define AI static inline __attribute__((always_inline))
#endif
/* Constant-count loops over rows and tokens must unroll (accumulators stay in registers) at
 * any optimisation level, not only -O3; the emulated build keeps them rolled. */
#ifdef QHX_X86_EMU
#define UNROLL
#else
#define UNROLL _Pragma("GCC unroll 32")
#endif

AI size_t esize(int fmt) { return fmt == QHX_W_F32 ? 4 : fmt == QHX_W_Q8 ? 1 : 2; }

/* 16 weights starting at p (a byte address), widened to f32. */
AI __m512 ld16w(const uint8_t *p, int fmt) {
    switch (fmt) {
    case QHX_W_F32: return _mm512_loadu_ps((const float *)p);
    case QHX_W_F16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    case QHX_W_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
    default: return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
    }
}

/* The weights at p selected by m (the first n < 16), zeros elsewhere; masked-off bytes are not
 * read, so a row's end may be the end of the mapping. */
AI __m512 ld16w_mask(const uint8_t *p, __mmask16 m, int fmt) {
    switch (fmt) {
    case QHX_W_F32: return _mm512_maskz_loadu_ps(m, p);
    case QHX_W_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    case QHX_W_BF16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
    default: return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p)));
    }
}

/* The one reduction order: halve 16 -> 8 -> 4 -> 2 -> 1, adding lane i and lane i + half. */
AI float hsum16(__m512 v) {
    float a[16];
    _mm512_storeu_ps(a, v);
    UNROLL
    for (int i = 0; i < 8; i++) a[i] += a[i + 8];
    UNROLL
    for (int i = 0; i < 4; i++) a[i] += a[i + 4];
    a[0] += a[2];
    a[1] += a[3];
    return a[0] + a[1];
}

AI float row_scale(const qhx_weight *w, int64_t r, int fmt) {
    return fmt == QHX_W_Q8 ? w->scales[r] : 1.0f;
}

/* ---- matvec: R rows at a time, weights streamed once --------------------------------------- */

AI void matvec_rows(const qhx_weight *w, const float *x, float *y, int64_t r, int R, int fmt) {
    const int64_t cols = w->cols, kv = cols & ~(int64_t)15;
    const size_t es = esize(fmt);
    const __mmask16 tail = (__mmask16)((1u << (cols - kv)) - 1u);
    const uint8_t *p[8];
    __m512 acc[8];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)cols * es;
        acc[i] = _mm512_setzero_ps();
    }
    const int64_t ahead = qhx_pf_ahead(R * cols * (int64_t)es); /* prefetch_x86.h */
    for (int64_t k = 0; k < kv; k += 16) {
        if (((k * (int64_t)es) & 63) == 0) QHX_PREFETCH_ROWS(p, R, k * es + ahead);
        __m512 xv = _mm512_loadu_ps(x + k);
        UNROLL
        for (int i = 0; i < R; i++) acc[i] = _mm512_fmadd_ps(ld16w(p[i] + k * es, fmt), xv, acc[i]);
    }
    if (tail) {
        __m512 xv = _mm512_maskz_loadu_ps(tail, x + kv);
        UNROLL
        for (int i = 0; i < R; i++)
            acc[i] = _mm512_fmadd_ps(ld16w_mask(p[i] + kv * es, tail, fmt), xv, acc[i]);
    }
    UNROLL
    for (int i = 0; i < R; i++) y[r + i] = hsum16(acc[i]) * row_scale(w, r + i, fmt);
}

AI void matvec(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1, int fmt) {
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) matvec_rows(w, x, y, r, 8, fmt);
    for (; r < r1; r++) matvec_rows(w, x, y, r, 1, fmt);
}

/* ---- several activation rows at once (a batched decode step) ------------------------------
 * A register tile of R weight rows x NB activation rows: per 16 columns each of the R weight
 * vectors is loaded and widened once and each of the NB activation vectors loaded once, then
 * R * NB FMAs, one per (r, b) accumulator. Each (r, b) is matvec_rows' R = 1 arithmetic in its
 * order (the same FMAs, the masked tail, hsum16, the row scale), so y[b][r] has the single-row
 * kernel's bits whatever R and NB are. Why a tile of weight rows too: with one weight row, NB
 * accumulators are NB dependent FMA chains, and at NB 2-4 their latency (4 cycles, two FMA
 * ports: 8 chains to fill them) bounded the step; R weight rows give R * NB chains, and each
 * activation vector, which at cols 2048 may come from L2 rather than L1, serves R FMAs. */
AI void rows_tile(const qhx_weight *w, const float *const *x, float *const *y, int64_t r, int R, int NB, int fmt) {
    const int64_t cols = w->cols, kv = cols & ~(int64_t)15;
    const size_t es = esize(fmt);
    const __mmask16 tail = (__mmask16)((1u << (cols - kv)) - 1u);
    const uint8_t *p[8];
    __m512 acc[8][QHX_MATVEC_MULTI_MAX];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)cols * es;
        UNROLL
        for (int b = 0; b < NB; b++) acc[i][b] = _mm512_setzero_ps();
    }
    const int64_t ahead = qhx_pf_ahead(R * cols * (int64_t)es); /* prefetch_x86.h, as matvec_rows */
    for (int64_t k = 0; k < kv; k += 16) {
        __m512 wv[8];
        if (((k * (int64_t)es) & 63) == 0) QHX_PREFETCH_ROWS(p, R, k * es + ahead);
        UNROLL
        for (int i = 0; i < R; i++) wv[i] = ld16w(p[i] + k * es, fmt);
        UNROLL
        for (int b = 0; b < NB; b++) {
            __m512 xv = _mm512_loadu_ps(x[b] + k);
            UNROLL
            for (int i = 0; i < R; i++) acc[i][b] = _mm512_fmadd_ps(wv[i], xv, acc[i][b]);
        }
    }
    if (tail) {
        UNROLL
        for (int b = 0; b < NB; b++) {
            __m512 xv = _mm512_maskz_loadu_ps(tail, x[b] + kv);
            UNROLL
            for (int i = 0; i < R; i++) acc[i][b] = _mm512_fmadd_ps(ld16w_mask(p[i] + kv * es, tail, fmt), xv, acc[i][b]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++) {
        UNROLL
        for (int b = 0; b < NB; b++) y[b][r + i] = hsum16(acc[i][b]) * row_scale(w, r + i, fmt);
    }
}

/* Rows [r0, r1) against NB activation rows: tiles of R weight rows (R * NB <= 16 accumulators,
 * at most 8 weight rows, as the single-row kernel), single rows for the remainder. */
AI void rows_of(const qhx_weight *w, const float *const *x, float *const *y, int64_t r0, int64_t r1, int NB,
                int fmt) {
    const int R = NB <= 2 ? 8 : 16 / NB;
    int64_t r = r0;
    for (; r + R <= r1; r += R) rows_tile(w, x, y, r, R, NB, fmt);
    for (; r < r1; r++) rows_tile(w, x, y, r, 1, NB, fmt);
}

/* A constant tile width per call, so the loops unroll. */
AI void rows_multi(const qhx_weight *w, const float *const *x, float *const *y, int nb, int64_t r0, int64_t r1,
                   int fmt) {
    switch (nb) {
    case 1: rows_of(w, x, y, r0, r1, 1, fmt); break;
    case 2: rows_of(w, x, y, r0, r1, 2, fmt); break;
    case 3: rows_of(w, x, y, r0, r1, 3, fmt); break;
    case 4: rows_of(w, x, y, r0, r1, 4, fmt); break;
    case 5: rows_of(w, x, y, r0, r1, 5, fmt); break;
    case 6: rows_of(w, x, y, r0, r1, 6, fmt); break;
    case 7: rows_of(w, x, y, r0, r1, 7, fmt); break;
    default: rows_of(w, x, y, r0, r1, 8, fmt); break;
    }
}

/* The rows in tiles over blocks (multi_plan.h): x rows of cols floats, counted at half their
 * bytes against the plan's L1 budget: each activation vector loaded serves R weight rows, so a
 * tile whose rows spill from L1 into L2 costs less than a second pass of the weights through
 * the registers (4 rows of 2048 columns: one tile, not two). */
AI void multi_up_to_max(const qhx_weight *w, const float *const *x, float *const *y, int nb, int64_t r0, int64_t r1,
                        int fmt) {
    const qhx_multi_plan pl = qhx_multi_plan_make(nb, w->cols * (int64_t)sizeof(float) / 2, QHX_MATVEC_MULTI_MAX,
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

/* R*T accumulators + R weights + 1 activation fit the 32 zmm registers for R = 4, T = 6. */
#define TR 4
#define TT 6

AI void mm_tile(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t t,
                int64_t r, int R, int T, int fmt) {
    const int64_t cols = w->cols, kv = cols & ~(int64_t)15;
    const size_t es = esize(fmt);
    const __mmask16 tail = (__mmask16)((1u << (cols - kv)) - 1u);
    const uint8_t *p[TR];
    const float *xt[TT];
    __m512 acc[TR][TT];
    UNROLL
    for (int i = 0; i < R; i++) p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)cols * es;
    UNROLL
    for (int j = 0; j < T; j++) xt[j] = X + (t + j) * ldx;
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < T; j++) acc[i][j] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kv; k += 16) {
        __m512 wv[TR];
        UNROLL
        for (int i = 0; i < R; i++) wv[i] = ld16w(p[i] + k * es, fmt);
        UNROLL
        for (int j = 0; j < T; j++) {
            __m512 xv = _mm512_loadu_ps(xt[j] + k);
            UNROLL
            for (int i = 0; i < R; i++) acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);
        }
    }
    if (tail) {
        __m512 wv[TR];
        UNROLL
        for (int i = 0; i < R; i++) wv[i] = ld16w_mask(p[i] + kv * es, tail, fmt);
        UNROLL
        for (int j = 0; j < T; j++) {
            __m512 xv = _mm512_maskz_loadu_ps(tail, xt[j] + kv);
            UNROLL
            for (int i = 0; i < R; i++) acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++) {
        float s = row_scale(w, r + i, fmt);
        UNROLL
        for (int j = 0; j < T; j++) Y[(t + j) * ldy + r + i] = hsum16(acc[i][j]) * s;
    }
}

/* Tokens t..t+T-1 over rows [ra, rb). */
AI void mm_rows(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t t,
                int T, int64_t ra, int64_t rb, int fmt) {
    int64_t r = ra;
    for (; r + TR <= rb; r += TR) mm_tile(w, X, ldx, Y, ldy, t, r, TR, T, fmt);
    for (; r < rb; r++) mm_tile(w, X, ldx, Y, ldy, t, r, 1, T, fmt);
}

/* Row blocks small enough to stay in L2 while every token tile passes over them. */
#define MM_BLOCK_BYTES (512 * 1024)

AI void matmul(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
               int64_t r0, int64_t r1, int fmt) {
    int64_t row_bytes = w->cols * (int64_t)esize(fmt);
    int64_t blk = MM_BLOCK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    blk = blk < TR ? TR : blk - blk % TR;
    for (int64_t ra = r0; ra < r1; ra += blk) {
        int64_t rb = ra + blk < r1 ? ra + blk : r1;
        int64_t t = 0;
        for (; t + TT <= n; t += TT) mm_rows(w, X, ldx, Y, ldy, t, TT, ra, rb, fmt);
        for (; t < n; t++) mm_rows(w, X, ldx, Y, ldy, t, 1, ra, rb, fmt);
    }
}

/* ---- Q4, group 32: 16 bytes of codes and one f32 scale per group ---------------------------- */

/* The 32 codes of a group as f32 (nib - 8): w[0] = values 0..15 (low nibbles of bytes 0..15),
 * w[1] = values 16..31 (high nibbles). */
AI void q4_codes(const uint8_t *p, __m512 w[2]) {
    const __m128i m = _mm_set1_epi8(0x0f), e = _mm_set1_epi8(8);
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    w[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_sub_epi8(_mm_and_si128(b, m), e)));
    w[1] = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), m), e)));
}

/* The group step: acc += d * (w . x) over the group's 32 values at xg. */
AI __m512 q4_step(const __m512 w[2], const float *xg, __m512 d, __m512 acc) {
    __m512 s = _mm512_mul_ps(w[0], _mm512_loadu_ps(xg));
    s = _mm512_fmadd_ps(w[1], _mm512_loadu_ps(xg + 16), s);
    return _mm512_fmadd_ps(d, s, acc);
}

AI int q4_fast(const qhx_weight *w) { return w->group == 32 && w->cols % 32 == 0; }

AI void q4_matvec_rows(const qhx_weight *w, const float *x, float *y, int64_t r, int R) {
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
    for (int64_t g = 0; g < ng; g++) {
        UNROLL
        for (int i = 0; i < R; i++) {
            __m512 wv[2];
            q4_codes(p[i] + 16 * g, wv);
            acc[i] = q4_step(wv, x + 32 * g, _mm512_set1_ps(qhx_x86_f16(d[i] + g)), acc[i]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++) y[r + i] = hsum16(acc[i]);
}

static void q4_matvec(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) q4_matvec_rows(w, x, y, r, 8);
    for (; r < r1; r++) q4_matvec_rows(w, x, y, r, 1);
}

/* Tile of R rows x T tokens (R*T accumulators + 2 codes + partial sum + scale <= 32 zmm). */
AI void q4_tile(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t t,
                int64_t r, int R, int T) {
    const int64_t ng = w->cols / 32;
    const uint8_t *p[TR];
    const uint16_t *d[TR];
    __m512 acc[TR][TT];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)(w->cols / 2);
        d[i] = w->gscales + (r + i) * ng;
        UNROLL
        for (int j = 0; j < T; j++) acc[i][j] = _mm512_setzero_ps();
    }
    for (int64_t g = 0; g < ng; g++) {
        UNROLL
        for (int i = 0; i < R; i++) {
            __m512 wv[2];
            q4_codes(p[i] + 16 * g, wv);
            __m512 dv = _mm512_set1_ps(qhx_x86_f16(d[i] + g));
            UNROLL
            for (int j = 0; j < T; j++)
                acc[i][j] = q4_step(wv, X + (t + j) * ldx + 32 * g, dv, acc[i][j]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < T; j++) Y[(t + j) * ldy + r + i] = hsum16(acc[i][j]);
}

AI void q4_rows(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t t,
                int T, int64_t ra, int64_t rb) {
    int64_t r = ra;
    for (; r + TR <= rb; r += TR) q4_tile(w, X, ldx, Y, ldy, t, r, TR, T);
    for (; r < rb; r++) q4_tile(w, X, ldx, Y, ldy, t, r, 1, T);
}

static void q4_matmul(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                      int64_t n, int64_t r0, int64_t r1) {
    int64_t row_bytes = w->cols / 2 + w->cols / 32 * 4;
    int64_t blk = MM_BLOCK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    blk = blk < TR ? TR : blk - blk % TR;
    for (int64_t ra = r0; ra < r1; ra += blk) {
        int64_t rb = ra + blk < r1 ? ra + blk : r1;
        int64_t t = 0;
        for (; t + TT <= n; t += TT) q4_rows(w, X, ldx, Y, ldy, t, TT, ra, rb);
        for (; t < n; t++) q4_rows(w, X, ldx, Y, ldy, t, 1, ra, rb);
    }
}

void qhx_k_matvec_q4_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    if (q4_fast(w)) q4_matvec(w, x, y, r0, r1);
    else qhx_k_matvec_q4_ref(w, x, y, r0, r1);
}

void qhx_k_matmul_q4_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                            int64_t ldy, int64_t n, int64_t r0, int64_t r1) {
    if (q4_fast(w)) q4_matmul(w, X, ldx, Y, ldy, n, r0, r1);
    else qhx_k_matmul_q4_ref(w, X, ldx, Y, ldy, n, r0, r1);
}

/* ---- entry points -------------------------------------------------------------------------- */

#define DEFINE(name, fmt)                                                                          \
    void qhx_k_matvec_##name##_avx512(const qhx_weight *w, const float *x, float *y, int64_t r0,  \
                                      int64_t r1) {                                                \
        matvec(w, x, y, r0, r1, fmt);                                                              \
    }                                                                                              \
    void qhx_k_matmul_##name##_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y, \
                                      int64_t ldy, int64_t n, int64_t r0, int64_t r1) {            \
        matmul(w, X, ldx, Y, ldy, n, r0, r1, fmt);                                                 \
    }                                                                                              \
    void qhx_k_matvec_multi_##name##_avx512(const qhx_weight *w, const float *const *x, float *const *y, \
                                            int64_t nb, int64_t r0, int64_t r1) {                  \
        matvec_multi(w, x, y, nb, r0, r1, fmt);                                                    \
    }

DEFINE(f32, QHX_W_F32)
DEFINE(f16, QHX_W_F16)
DEFINE(bf16, QHX_W_BF16)
DEFINE(q8, QHX_W_Q8)
