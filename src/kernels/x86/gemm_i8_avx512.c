/* kernels/x86/gemm_i8_avx512.c: the int8 prefill GEMM of Q8, Q4 and Q4A weights (gemm_i8_avx2.c's
 * contract and numerics) with AVX-512 VNNI: 512-bit vpdpbusd, panels of 32 rows, and the 32
 * zmm registers for a register tile of 6 tokens x 32 rows. Built with the AVX-512 flags; run
 * only where qhx_cpu_detect reports AVX-512 F/BW/VL/DQ and AVX512_VNNI.
 *
 * Numerics are gemm_i8_avx2.c's, step for step, so the results are bitwise its results:
 *   - x is quantized per block of 32 columns by quant_x_avx2.h (the shared rounding);
 *   - per block, the int32 dot products are exact (vpdpbusd adds the four u8 x s8 products of a
 *     lane into int32 without saturating): Q4 takes the stored nibbles c = v + 8 and subtracts
 *     8 sum q; Q8 packs w + 128 (w ^ 0x80, unsigned) and subtracts 128 sum q = 16 sum8; Q4A
 *     packs 16 u (<= 240: vpdpbusd does not saturate, so the AVX2 kernel's int16 limit does not
 *     apply) and starts each block's sums at -z sum q (one vpmaddwd), which leaves exactly
 *     16 sum u q - z sum q;
 *   - then one f32 FMA per block in column order (Q8: acc += isum * dx[b], times scale[r] after
 *     the last block; Q4: acc += isum * (d[r, b] * dx[b]), Q4A the same with c[r, b] =
 *     d 2^-12 s), partial sums kept in Y between column blocks exactly.
 * Layout: a panel vector holds one quad (4 consecutive columns) of 16 rows; a token's quad is
 * broadcast to the 16 lanes, so one vpdpbusd multiplies 16 rows x 4 columns. Shapes without
 * this path (cols not a multiple of 32, Q4 groups other than 32) go to the AVX2 f32 GEMM (Q4A:
 * to qhx_k_matmul_q4a_ref). */
#include <immintrin.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/x86/i8_panel_avx2.h"
#include "kernels/x86/ops_x86.h"
#include "kernels/x86/quant_x_avx2.h"
#include "kernels/x86/f16_x86.h"
#include "kernels/x86/x86.h"

#define AI static inline __attribute__((always_inline))
/* Constant-count loops over tokens and row halves must unroll (accumulators in registers). */
#define UNROLL _Pragma("GCC unroll 32")
/* The quad loop stays a loop (as in gemm_i8_avx2.c). */
#define NO_UNROLL _Pragma("GCC unroll 1")

#define KC 256         /* columns per column block */
#define NBK (KC / 32)  /* quantization blocks per column block */
#define TC 128         /* tokens per chunk: quantized once, weights packed once per chunk */
#define NR 32          /* rows per panel: two vectors of 16 row lanes */
/* Tokens per register tile: 6 x 2 int32 sums + 6 x 2 f32 sums + 2 panel vectors + a broadcast
 * = 27 of the 32 registers. */
#define TT 6

/* Weight formats of gemm_i8 (a constant in every call, so each tile compiles for one). */
#define K_Q8 0
#define K_Q4 1
#define K_Q4A 2

typedef struct xq_chunk {
    _Alignas(64) int8_t q[TC][KC];
    float dx[TC][NBK];
    int32_t sum8[TC][NBK]; /* 8 * sum of the block's codes */
} xq_chunk;

static void quantize_chunk(const float *X, int64_t ldx, int tc, int nb, xq_chunk *xq) {
    for (int t = 0; t < tc; t++)
        for (int b = 0; b < nb; b++)
            qx_quantize_block(X + t * ldx + 32 * b, &xq->q[t][32 * b], &xq->dx[t][b], &xq->sum8[t][b]);
}

typedef struct w_panel {
    _Alignas(64) int8_t c[NBK][8][2][64]; /* [block][quad][row half]: rows 16h..16h+15 x 4 columns */
    _Alignas(64) float d[NBK][NR];        /* Q4: group scales, Q4A: c = d 2^-12 s; 0 past the end */
    _Alignas(64) int32_t z[NBK][NR];      /* Q4A: zero points (0..255); 0 for rows past the end */
    _Alignas(64) float s[NR];             /* Q8: row scales; 0 for rows past the end */
} w_panel;

/* Panel of rows [r, r + nr) (nr <= NR; missing rows are zeros), columns [k0, k0 + 32 nb): each
 * 16-row half is two 8 x 8 quad transposes, whose outputs fill the low and high 32 bytes of the
 * half's vectors. Q8 codes get the +128 bias. */
static void pack_panel(const qhx_weight *w, int kind, int64_t r, int nr, int64_t k0, int nb, w_panel *P) {
    const __m256i bias = _mm256_set1_epi8(kind != K_Q8 ? 0 : (char)0x80);
    for (int h = 0; h < 4; h++) /* 8-row quarters: quarter h fills half h / 2, bytes 32 (h % 2) */
        for (int b = 0; b < nb; b++) {
            __m256i v[8];
            for (int i = 0; i < 8; i++) {
                int row = 8 * h + i;
                v[i] = row < nr ? load_codes(w, kind != K_Q8, r + row, k0 + 32 * b) : _mm256_setzero_si256();
                v[i] = _mm256_xor_si256(v[i], bias);
                if (kind == K_Q4A) v[i] = _mm256_slli_epi16(v[i], 4); /* 16 u <= 240, per byte */
            }
            transpose_quads(v);
            for (int j = 0; j < 8; j++) _mm256_store_si256((__m256i *)&P->c[b][j][h / 2][32 * (h % 2)], v[j]);
        }
    const int64_t ng = w->cols / 32;
    for (int i = 0; i < NR; i++) {
        if (kind == K_Q4)
            for (int b = 0; b < nb; b++) P->d[b][i] = i < nr ? qhx_x86_f16(w->gscales + (r + i) * ng + k0 / 32 + b) : 0.0f;
        else if (kind == K_Q4A)
            q4a_factors(w, r + i, i < nr, k0 / 32, nb, &P->d[0][i], &P->z[0][i], NR);
        else
            P->s[i] = i < nr ? w->scales[r + i] : 0.0f;
    }
}

/* Lane masks of a panel holding nr of its 32 rows. */
AI void row_masks(int nr, __mmask16 *m0, __mmask16 *m1) {
    *m0 = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1);
    *m1 = nr >= 32 ? (__mmask16)0xffff : nr <= 16 ? (__mmask16)0 : (__mmask16)((1u << (nr - 16)) - 1);
}

/* Y[t0 .. t0 + T, 32 rows] (+)= the nb blocks of the chunk's tokens against panel P. kind: a
 * constant; q4 below is "has group scales" (Q4 and Q4A). */
AI void tile(const w_panel *P, const xq_chunk *xq, int kind, int t0, int T, int nb, float *Y, int64_t ldy, int nr,
             int first, int last) {
    const int q4 = kind != K_Q8;
    __mmask16 m0, m1;
    row_masks(nr, &m0, &m1);
    __m512 acc[TT][2];
    UNROLL
    for (int t = 0; t < T; t++) {
        acc[t][0] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, Y + t * ldy);
        acc[t][1] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, Y + t * ldy + 16);
    }
    for (int b = 0; b < nb; b++) {
        __m512i s[TT][2];
        if (kind == K_Q4A) { /* the sums start at -z sum q; the packed codes are 16 u */
            __m512i z0 = _mm512_load_si512((const void *)P->z[b]), z1 = _mm512_load_si512((const void *)(P->z[b] + 16));
            UNROLL
            for (int t = 0; t < T; t++) {
                __m512i nsq = _mm512_set1_epi32(-(xq->sum8[t0 + t][b] / 8));
                s[t][0] = _mm512_madd_epi16(z0, nsq), s[t][1] = _mm512_madd_epi16(z1, nsq);
            }
        } else {
            UNROLL
            for (int t = 0; t < T; t++) s[t][0] = s[t][1] = _mm512_setzero_si512();
        }
        NO_UNROLL
        for (int j = 0; j < 8; j++) {
            __m512i c0 = _mm512_load_si512((const void *)P->c[b][j][0]);
            __m512i c1 = _mm512_load_si512((const void *)P->c[b][j][1]);
            UNROLL
            for (int t = 0; t < T; t++) {
                int32_t qv;
                memcpy(&qv, &xq->q[t0 + t][32 * b + 4 * j], sizeof qv);
                __m512i x = _mm512_set1_epi32(qv);
                s[t][0] = _mm512_dpbusd_epi32(s[t][0], c0, x);
                s[t][1] = _mm512_dpbusd_epi32(s[t][1], c1, x);
            }
        }
        __m512 d0 = q4 ? _mm512_load_ps(P->d[b]) : _mm512_setzero_ps();
        __m512 d1 = q4 ? _mm512_load_ps(P->d[b] + 16) : _mm512_setzero_ps();
        UNROLL
        for (int t = 0; t < T; t++) {
            int32_t sum8 = xq->sum8[t0 + t][b];
            __m512 dx = _mm512_set1_ps(xq->dx[t0 + t][b]);
            __m512i i0, i1;
            if (kind == K_Q4A) { /* -z sum q + sum 16 u q: the AVX2 kernel's integers */
                i0 = s[t][0], i1 = s[t][1];
            } else {
                __m512i off = _mm512_set1_epi32(q4 ? sum8 : 16 * sum8); /* Q4: 8 sum q; Q8: 128 sum q */
                i0 = _mm512_sub_epi32(s[t][0], off), i1 = _mm512_sub_epi32(s[t][1], off);
            }
            __m512 f0 = _mm512_cvtepi32_ps(i0), f1 = _mm512_cvtepi32_ps(i1);
            /* the AVX2 kernel's order: Q4 acc += isum * (d * dx), Q4A the same with c, Q8 acc += isum * dx */
            acc[t][0] = _mm512_fmadd_ps(f0, q4 ? _mm512_mul_ps(d0, dx) : dx, acc[t][0]);
            acc[t][1] = _mm512_fmadd_ps(f1, q4 ? _mm512_mul_ps(d1, dx) : dx, acc[t][1]);
        }
    }
    UNROLL
    for (int t = 0; t < T; t++) {
        __m512 a0 = acc[t][0], a1 = acc[t][1];
        if (!q4 && last) {
            a0 = _mm512_mul_ps(a0, _mm512_load_ps(P->s));
            a1 = _mm512_mul_ps(a1, _mm512_load_ps(P->s + 16));
        }
        _mm512_mask_storeu_ps(Y + t * ldy, m0, a0);
        _mm512_mask_storeu_ps(Y + t * ldy + 16, m1, a1);
    }
}

/* All tc tokens of the chunk against one panel, TT at a time (constant T so the tile unrolls). */
AI void panel(const w_panel *P, const xq_chunk *xq, int kind, int tc, int nb, float *Y, int64_t ldy, int nr,
                  int first, int last) {
    int t = 0;
    for (; t + TT <= tc; t += TT) tile(P, xq, kind, t, TT, nb, Y + t * ldy, ldy, nr, first, last);
    switch (tc - t) {
    case 5: tile(P, xq, kind, t, 5, nb, Y + t * ldy, ldy, nr, first, last); break;
    case 4: tile(P, xq, kind, t, 4, nb, Y + t * ldy, ldy, nr, first, last); break;
    case 3: tile(P, xq, kind, t, 3, nb, Y + t * ldy, ldy, nr, first, last); break;
    case 2: tile(P, xq, kind, t, 2, nb, Y + t * ldy, ldy, nr, first, last); break;
    case 1: tile(P, xq, kind, t, 1, nb, Y + t * ldy, ldy, nr, first, last); break;
    default: break;
    }
}

/* Token chunks, then column blocks; every panel of 32 rows of [r0, r1) is packed once per chunk
 * and column block and run against all tokens of the chunk while it sits in L1. */
static void gemm_i8(const qhx_weight *w, int kind, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                    int64_t r0, int64_t r1) {
    xq_chunk xq;
    w_panel P;
    const int64_t K = w->cols;
    for (int64_t t0 = 0; t0 < n; t0 += TC) {
        int tc = n - t0 < TC ? (int)(n - t0) : TC;
        for (int64_t k0 = 0; k0 < K; k0 += KC) {
            int nb = (int)((K - k0 < KC ? K - k0 : KC) / 32);
            int first = k0 == 0, last = k0 + 32 * nb == K;
            quantize_chunk(X + t0 * ldx + k0, ldx, tc, nb, &xq);
            for (int64_t r = r0; r < r1; r += NR) {
                int nr = r1 - r < NR ? (int)(r1 - r) : NR;
                pack_panel(w, kind, r, nr, k0, nb, &P);
                float *Yp = Y + t0 * ldy + r;
                if (kind == K_Q4) panel(&P, &xq, K_Q4, tc, nb, Yp, ldy, nr, first, last);
                else if (kind == K_Q4A) panel(&P, &xq, K_Q4A, tc, nb, Yp, ldy, nr, first, last);
                else panel(&P, &xq, K_Q8, tc, nb, Yp, ldy, nr, first, last);
            }
        }
    }
}

void qhx_k_matmul_q8_i8gemm_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                                   int64_t n, int64_t r0, int64_t r1) {
    if (w->cols % 32) qhx_k_matmul_q8_gemm_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm_i8(w, K_Q8, X, ldx, Y, ldy, n, r0, r1);
}

void qhx_k_matmul_q4_i8gemm_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                                   int64_t n, int64_t r0, int64_t r1) {
    if (w->group != 32 || w->cols % 32) qhx_k_matmul_q4_gemm_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm_i8(w, K_Q4, X, ldx, Y, ldy, n, r0, r1);
}

void qhx_k_matmul_q4a_i8gemm_avx512(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                                    int64_t n, int64_t r0, int64_t r1) {
    if (w->cols % 32) qhx_k_matmul_q4a_ref(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm_i8(w, K_Q4A, X, ldx, Y, ldy, n, r0, r1);
}
