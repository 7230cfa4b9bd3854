/* kernels/x86/gemm_i8_avx2.c: prefill matmul of Q8, Q4 and Q4A weights with the activations
 * quantized to int8 and integer dot products (AVX2). Built with -mavx2 -mfma -mf16c; installed by
 * qhx_kern_install_x86_int8 as qhx_model_params.prefill_math asks (by default for Q4, and for Q4A
 * with Q4's switch: BENCHMARKS.md, "int8-activation prefill GEMM", "Q4A prefill GEMM"), since
 * its results differ from the f32-activation GEMM by the rounding of x bounded below.
 *
 * Activations: each token's row is cut into blocks of 32 columns (the Q4 groups) and quantized
 * to int8 as quant_x_avx2.h says (dx = max|x| / 127 per block, round to nearest even; a block
 * with a NaN or an infinity gets dx = NaN, so the outputs it feeds are NaN). Each call quantizes the X rows
 * it needs itself: ~1 / rows of the call in multiply-adds, but measured at about a fifth of the
 * GEMM's time for the runtime's 128-row pieces (quantizing costs ~1.4 instructions per value).
 *
 * Layout: per call, weights are packed into panels of 16 rows x KC columns in which a 32-byte
 * vector holds one "quad" (4 consecutive columns) of 8 rows. A token's quad is broadcast to all
 * 8 lanes, so one vpmaddubsw + vpmaddwd multiplies 8 rows x 4 columns and leaves one int32 per
 * row: lanes are rows, and no horizontal sum is ever needed. The register tile is TT tokens x
 * 16 rows; each panel vector loaded is used by TT tokens, each broadcast by 16 rows.
 *
 * Integer products (vpmaddubsw multiplies unsigned by signed bytes and adds pairs into int16
 * with saturation; the bounds show it never saturates):
 *   Q8: the unsigned side is |w| (<= 127, as forge never writes -128) and x takes the sign of w
 *       (vpsignb; 0 where w = 0): |w| sign(x, w) = w x. A pair is at most 2 * 127 * 127 = 32258
 *       < 32767. vpmaddwd with ones widens the pairs to int32, one per quad; a block sums to at
 *       most 32 * 127 * 127 = 516128.
 *   Q4: the stored nibble c = v + 8 is already unsigned, so no sign step: vpmaddubsw(c, q). A
 *       pair is at most 2 * 15 * 127 = 3810, so a block's 8 quads add up in int16 (<= 30480) and
 *       are widened once per block; then sum (c - 8) q = sum c q - 8 sum q, with 8 sum q per
 *       token and block computed when x is quantized. Exact; one instruction less per quad than
 *       the sign step would cost.
 *   Q4A (docs/formats.md: W' = c (16 u - z), c = d 2^-12 s per group): the codes u are Q4's
 *       nibbles, so the same vpmaddubsw(u, q) and int16 block sums P = sum u q (u is not scaled
 *       by 16 first: 16 * 15 * 127 pairs would saturate). Per block and row lane the exact
 *       integer isum = 16 P - z sum q: vpmaddwd by 16 widens and scales P (<= 975360), a second
 *       vpmaddwd forms z * sum q (z <= 255 and |sum q| <= 4064 are int16; <= 1036320), so
 *       |isum| < 2^21 converts to f32 exactly. One instruction more per block and token than Q4.
 * Speed: on Zen 3 vpmaddubsw and vpmaddwd share the two FMA pipes (measured: 4 of them and 4
 * FMAs take as long as 8 FMAs), so Q8, with two multiply instructions and a sign step per 32
 * products, runs ~1.25x the f32 GEMM in cache; Q4, with one, ~1.8x (BENCHMARKS.md).
 * Scaling: each block's int32 sum is converted to f32 and accumulated by one FMA per block, in
 * column order: Q8 acc += isum * dx[b], times scale[r] after the last block; Q4 acc += isum *
 * (d[r, b] * dx[b]); Q4A acc += isum * (c[r, b] * dx[b]), which is qhx_k_matmul_q4a_i8gemm_ref
 * (kernels/ref/quant_q4a.c) step for step, so the results are its bits. That order is not the
 * per-token Q4A kernels' (q4i8x_avx2.c: four lane sums per group in two 8-lane accumulators,
 * the zero points in a third, a horizontal sum at the end): to give their bits a GEMM with rows
 * in lanes would need 24 f32 accumulators and four converts and FMAs per group and output, more
 * float work than the integer work it saves. Both compute sum W' q dx on the same codes, so
 * they differ by f32 rounding only.
 * Partial sums are stored to Y between column blocks (exactly), so output (t, r) depends only on
 * row r of W and row t of X: never on [r0, r1), n or the tiling.
 * Error against exact arithmetic on the given x: at most sum_c |W'[r, c]| * dx[c / 32] / 2 from
 * the rounding of x, plus float32 rounding of the block sums (Q4A: one rounding of c dx and one
 * per FMA, so to first order at most (ng + 1) 2^-24 sum_g |isum_g c_g dx_g| over its ng groups).
 *
 * Shapes without this path (cols not a multiple of 32, Q4 groups other than 32) go to the f32
 * packed GEMM (gemm_avx2.c), Q4A ones (cols not a multiple of 32, which no Q4A matrix has) to
 * qhx_k_matmul_q4a_ref. Q4A has no row-length limit here (the per-token kernels stop at 8192). */
#include <immintrin.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/x86/i8_panel_avx2.h"
#include "kernels/x86/ops_x86.h"
#include "kernels/x86/quant_x_avx2.h"
#include "kernels/x86/tile_avx2.h"
#include "kernels/x86/f16_x86.h"
#include "kernels/x86/x86.h"

#define AI static inline __attribute__((always_inline))
/* Constant-count loops over tokens and row halves must unroll (accumulators in registers) at
 * any optimisation level, not only -O3. */
#define UNROLL _Pragma("GCC unroll 32")
/* The quad loop must stay a loop: unrolled, the compiler reassociates the integer sums into
 * trees whose partial products no longer fit in 16 registers (2x slower, measured). */
#define NO_UNROLL _Pragma("GCC unroll 1")

/* The same body builds twice: here for AVX2, and from gemm_i8_avxvnni.c (QHX_I8_AVXVNNI, with
 * -mavxvnni) where one vpdpbusd replaces the vpmaddubsw + vpmaddwd + add of a quad. vpdpbusd
 * adds the four u8 x s8 products of a lane straight into int32 (no int16 step, no saturation),
 * so it gives the same integers as the AVX2 sequence, whose int16 sums never saturate (bounds
 * above): both builds return the same bits. For Q8 the VNNI build packs w + 128 (unsigned,
 * w ^ 0x80) and takes off 128 * sum q per block (16 * sum8): one instruction per quad instead of
 * |w| and a sign step. For Q4A it packs 16 u (<= 240, no saturation in vpdpbusd) and starts each
 * block's int32 sums at -z sum q, so they end at 16 sum u q - z sum q with nothing after. */
#ifdef QHX_I8_AVXVNNI
#define I8GEMM_NAME(f) f##_avxvnni
#else
#define I8GEMM_NAME(f) f##_avx2
#endif

#define KC 256         /* columns per column block */
#define NBK (KC / 32)  /* quantization blocks per column block */
#define TC 128         /* tokens per chunk: quantized once, weights packed once per chunk */
#define NR 16          /* rows per panel: two vectors of 8 row lanes */
/* Tokens per register tile: 8 sums + 2 panel vectors (+ 2 |w| for Q8) + a broadcast. With 3
 * tokens Q8 spills less but reuses each panel load less; no difference was measurable. */
#define TT_Q8 4
#define TT_Q4 4
#define TT_MAX 6       /* the tail switch of panel_q8 / panel_q4 covers 1 .. TT_MAX - 1 tokens */

/* Weight formats of gemm_i8 (a constant in every call, so each tile compiles for one). */
#define K_Q8 0
#define K_Q4 1
#define K_Q4A 2

// ---- activations: int8 codes per block of 32 --------------------------------------------------

/* TC tokens x KC columns of X, quantized (40 KB on the stack). */
typedef struct xq_chunk {
    _Alignas(32) int8_t q[TC][KC];
    float dx[TC][NBK];      /* block scale: max|x| / 127 */
    int32_t sum8[TC][NBK];  /* 8 * sum of the block's codes (the Q4 nibble offset) */
} xq_chunk;

/* Tokens [0, tc) of X (row stride ldx), columns [0, 32 nb) from X's pointer on. */
static void quantize_chunk(const float *X, int64_t ldx, int tc, int nb, xq_chunk *xq) {
    for (int t = 0; t < tc; t++)
        for (int b = 0; b < nb; b++)
            qx_quantize_block(X + t * ldx + 32 * b, &xq->q[t][32 * b], &xq->dx[t][b], &xq->sum8[t][b]);
}

// ---- weights: panels of 16 rows, one quad of 8 rows per vector ---------------------------------

typedef struct w_panel {
    _Alignas(32) int8_t c[NBK][8][2][32]; /* [block][quad][row half]: rows 8h..8h+7 x 4 columns */
    _Alignas(32) float d[NBK][NR];        /* Q4: group scales, Q4A: c = d 2^-12 s; 0 past the end */
    _Alignas(32) int32_t z[NBK][NR];      /* Q4A: zero points (0..255); 0 for rows past the end */
    _Alignas(32) float s[NR];             /* Q8: row scales; 0 for rows past the end */
} w_panel;

/* Panel of rows [r, r + nr) (nr <= NR; missing rows are zeros), columns [k0, k0 + 32 nb). */
static void pack_panel(const qhx_weight *w, int kind, int64_t r, int nr, int64_t k0, int nb, w_panel *P) {
    for (int h = 0; h < 2; h++)
        for (int b = 0; b < nb; b++) {
            __m256i v[8];
            for (int i = 0; i < 8; i++)
                v[i] = 8 * h + i < nr ? load_codes(w, kind != K_Q8, r + 8 * h + i, k0 + 32 * b) : _mm256_setzero_si256();
#ifdef QHX_I8_AVXVNNI
            if (kind == K_Q8) /* w + 128 as unsigned; rows past the end become 128, times 0 row scale */
                for (int i = 0; i < 8; i++) v[i] = _mm256_xor_si256(v[i], _mm256_set1_epi8((char)0x80));
            if (kind == K_Q4A) /* 16 u (<= 240 per byte): vpdpbusd does not saturate */
                for (int i = 0; i < 8; i++) v[i] = _mm256_slli_epi16(v[i], 4);
#endif
            transpose_quads(v);
            for (int j = 0; j < 8; j++) _mm256_store_si256((__m256i *)P->c[b][j][h], v[j]);
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

// ---- register tiles ------------------------------------------------------------------------------

/* A token's quad (4 codes) in every 32-bit lane. */
AI __m256i bcast_quad(const int8_t *q) {
    int32_t v;
    memcpy(&v, q, sizeof v);
    return _mm256_set1_epi32(v);
}

/* Q8: Y[t, 16 rows] (+)= sum over the nb blocks of tokens t0 .. t0 + T of the chunk. */
AI void tile_q8(const w_panel *P, const xq_chunk *xq, int t0, int T, int nb, float *Y, int64_t ldy, int nr,
                int first, int last) {
    const __m256i ones = _mm256_set1_epi16(1);
    (void)ones; /* unused by the VNNI build */
    __m256 acc[TT_MAX][2];
    tile_acc_load(acc, Y, ldy, T, nr, first);
    for (int b = 0; b < nb; b++) {
        __m256i s[TT_MAX][2];
        UNROLL
        for (int t = 0; t < T; t++) s[t][0] = s[t][1] = _mm256_setzero_si256();
        NO_UNROLL
        for (int j = 0; j < 8; j++) {
            __m256i w0 = _mm256_load_si256((const __m256i *)P->c[b][j][0]);
            __m256i w1 = _mm256_load_si256((const __m256i *)P->c[b][j][1]);
#ifdef QHX_I8_AVXVNNI
            UNROLL
            for (int t = 0; t < T; t++) {
                __m256i x = bcast_quad(&xq->q[t0 + t][32 * b + 4 * j]);
                s[t][0] = _mm256_dpbusd_avx_epi32(s[t][0], w0, x); /* (w + 128) x */
                s[t][1] = _mm256_dpbusd_avx_epi32(s[t][1], w1, x);
            }
#else
            __m256i a0 = _mm256_abs_epi8(w0), a1 = _mm256_abs_epi8(w1);
            UNROLL
            for (int t = 0; t < T; t++) {
                __m256i x = bcast_quad(&xq->q[t0 + t][32 * b + 4 * j]);
                __m256i p0 = _mm256_maddubs_epi16(a0, _mm256_sign_epi8(x, w0));
                __m256i p1 = _mm256_maddubs_epi16(a1, _mm256_sign_epi8(x, w1));
                s[t][0] = _mm256_add_epi32(s[t][0], _mm256_madd_epi16(p0, ones));
                s[t][1] = _mm256_add_epi32(s[t][1], _mm256_madd_epi16(p1, ones));
            }
#endif
        }
        UNROLL
        for (int t = 0; t < T; t++) {
#ifdef QHX_I8_AVXVNNI
            __m256i off = _mm256_set1_epi32(16 * xq->sum8[t0 + t][b]); /* 128 sum q */
            s[t][0] = _mm256_sub_epi32(s[t][0], off);
            s[t][1] = _mm256_sub_epi32(s[t][1], off);
#endif
            __m256 dx = _mm256_broadcast_ss(&xq->dx[t0 + t][b]);
            acc[t][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t][0]), dx, acc[t][0]);
            acc[t][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t][1]), dx, acc[t][1]);
        }
    }
    tile_acc_store(acc, Y, ldy, T, nr, last ? P->s : NULL);
}

/* Q4: as tile_q8, codes unsigned (nibbles) and group scales per row and block. Q4A (za): the same
 * lane sums P = sum u q (<= 8 * 3810 per int16, no saturation), then isum = 16 P - z sum q per
 * row lane (z * sum q by vpmaddwd: z and |sum q| <= 4064 fit int16), times c dx. */
AI void tile_q4(const w_panel *P, const xq_chunk *xq, int t0, int T, int nb, float *Y, int64_t ldy, int nr,
                int first, int za) {
    const __m256i ones = _mm256_set1_epi16(1);
    (void)ones; /* unused by the VNNI build */
    __m256 acc[TT_MAX][2];
    tile_acc_load(acc, Y, ldy, T, nr, first);
    for (int b = 0; b < nb; b++) {
        __m256i s[TT_MAX][2];
        UNROLL
        for (int t = 0; t < T; t++) s[t][0] = s[t][1] = _mm256_setzero_si256();
#ifdef QHX_I8_AVXVNNI
        if (za) { /* the sums start at -z sum q; the packed codes are 16 u */
            __m256i z0 = _mm256_load_si256((const __m256i *)P->z[b]), z1 = _mm256_load_si256((const __m256i *)(P->z[b] + 8));
            UNROLL
            for (int t = 0; t < T; t++) {
                __m256i nsq = _mm256_set1_epi32(-(xq->sum8[t0 + t][b] / 8));
                s[t][0] = _mm256_madd_epi16(z0, nsq), s[t][1] = _mm256_madd_epi16(z1, nsq);
            }
        }
#endif
        NO_UNROLL
        for (int j = 0; j < 8; j++) {
            __m256i c0 = _mm256_load_si256((const __m256i *)P->c[b][j][0]);
            __m256i c1 = _mm256_load_si256((const __m256i *)P->c[b][j][1]);
            UNROLL
            for (int t = 0; t < T; t++) {
                __m256i x = bcast_quad(&xq->q[t0 + t][32 * b + 4 * j]);
#ifdef QHX_I8_AVXVNNI
                s[t][0] = _mm256_dpbusd_avx_epi32(s[t][0], c0, x); /* int32 lanes */
                s[t][1] = _mm256_dpbusd_avx_epi32(s[t][1], c1, x);
#else
                s[t][0] = _mm256_add_epi16(s[t][0], _mm256_maddubs_epi16(c0, x)); /* int16 pairs */
                s[t][1] = _mm256_add_epi16(s[t][1], _mm256_maddubs_epi16(c1, x));
#endif
            }
        }
        __m256 d0 = _mm256_load_ps(P->d[b]), d1 = _mm256_load_ps(P->d[b] + 8);
#ifndef QHX_I8_AVXVNNI
        __m256i z0 = _mm256_setzero_si256(), z1 = z0;
        if (za) z0 = _mm256_load_si256((const __m256i *)P->z[b]), z1 = _mm256_load_si256((const __m256i *)(P->z[b] + 8));
#endif
        UNROLL
        for (int t = 0; t < T; t++) {
            __m256 dx = _mm256_broadcast_ss(&xq->dx[t0 + t][b]);
            __m256i i0, i1;
            if (za) { /* 16 P - z sum q */
#ifdef QHX_I8_AVXVNNI
                i0 = s[t][0], i1 = s[t][1]; /* -z sum q + sum 16 u q */
#else
                __m256i sq = _mm256_set1_epi32(xq->sum8[t0 + t][b] / 8);
                const __m256i sixteen = _mm256_set1_epi16(16);
                i0 = _mm256_sub_epi32(_mm256_madd_epi16(s[t][0], sixteen), _mm256_madd_epi16(z0, sq));
                i1 = _mm256_sub_epi32(_mm256_madd_epi16(s[t][1], sixteen), _mm256_madd_epi16(z1, sq));
#endif
            } else { /* sum (c - 8) q = sum c q - 8 sum q */
                __m256i off = _mm256_set1_epi32(xq->sum8[t0 + t][b]);
#ifdef QHX_I8_AVXVNNI
                i0 = _mm256_sub_epi32(s[t][0], off), i1 = _mm256_sub_epi32(s[t][1], off);
#else
                i0 = _mm256_sub_epi32(_mm256_madd_epi16(s[t][0], ones), off);
                i1 = _mm256_sub_epi32(_mm256_madd_epi16(s[t][1], ones), off);
#endif
            }
            acc[t][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i0), _mm256_mul_ps(d0, dx), acc[t][0]);
            acc[t][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i1), _mm256_mul_ps(d1, dx), acc[t][1]);
        }
    }
    tile_acc_store(acc, Y, ldy, T, nr, NULL);
}

/* All tc tokens of the chunk against one packed panel, TT tokens at a time (constant T so the
 * tile's loops unroll). Y points at the chunk's first token and the panel's first row. */
static void panel_q8(const w_panel *P, const xq_chunk *xq, int tc, int nb, float *Y, int64_t ldy, int nr, int first,
                     int last) {
    int t = 0;
    for (; t + TT_Q8 <= tc; t += TT_Q8) tile_q8(P, xq, t, TT_Q8, nb, Y + t * ldy, ldy, nr, first, last);
    switch (tc - t) {
    case 5: tile_q8(P, xq, t, 5, nb, Y + t * ldy, ldy, nr, first, last); break;
    case 4: tile_q8(P, xq, t, 4, nb, Y + t * ldy, ldy, nr, first, last); break;
    case 3: tile_q8(P, xq, t, 3, nb, Y + t * ldy, ldy, nr, first, last); break;
    case 2: tile_q8(P, xq, t, 2, nb, Y + t * ldy, ldy, nr, first, last); break;
    case 1: tile_q8(P, xq, t, 1, nb, Y + t * ldy, ldy, nr, first, last); break;
    default: break;
    }
}

/* za: Q4A (a constant in each call below, so the tiles compile without the test). */
AI void panel_q4(const w_panel *P, const xq_chunk *xq, int tc, int nb, float *Y, int64_t ldy, int nr, int first,
                 int za) {
    int t = 0;
    for (; t + TT_Q4 <= tc; t += TT_Q4) tile_q4(P, xq, t, TT_Q4, nb, Y + t * ldy, ldy, nr, first, za);
    switch (tc - t) {
    case 5: tile_q4(P, xq, t, 5, nb, Y + t * ldy, ldy, nr, first, za); break;
    case 4: tile_q4(P, xq, t, 4, nb, Y + t * ldy, ldy, nr, first, za); break;
    case 3: tile_q4(P, xq, t, 3, nb, Y + t * ldy, ldy, nr, first, za); break;
    case 2: tile_q4(P, xq, t, 2, nb, Y + t * ldy, ldy, nr, first, za); break;
    case 1: tile_q4(P, xq, t, 1, nb, Y + t * ldy, ldy, nr, first, za); break;
    default: break;
    }
}
static void panel_q4_only(const w_panel *P, const xq_chunk *xq, int tc, int nb, float *Y, int64_t ldy, int nr,
                          int first) {
    panel_q4(P, xq, tc, nb, Y, ldy, nr, first, 0);
}
static void panel_q4a(const w_panel *P, const xq_chunk *xq, int tc, int nb, float *Y, int64_t ldy, int nr, int first) {
    panel_q4(P, xq, tc, nb, Y, ldy, nr, first, 1);
}

// ---- the loops -------------------------------------------------------------------------------------

/* Token chunks, then column blocks: each chunk's X block is quantized once, then every panel
 * of 16 rows of [r0, r1) is packed and run against all tokens of the chunk while it sits in L1. */
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
                if (kind == K_Q4) panel_q4_only(&P, &xq, tc, nb, Yp, ldy, nr, first);
                else if (kind == K_Q4A) panel_q4a(&P, &xq, tc, nb, Yp, ldy, nr, first);
                else panel_q8(&P, &xq, tc, nb, Yp, ldy, nr, first, last);
            }
        }
    }
}

void I8GEMM_NAME(qhx_k_matmul_q8_i8gemm)(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                                 int64_t r0, int64_t r1) {
    if (w->cols % 32) qhx_k_matmul_q8_gemm_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm_i8(w, K_Q8, X, ldx, Y, ldy, n, r0, r1);
}

void I8GEMM_NAME(qhx_k_matmul_q4_i8gemm)(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                                 int64_t r0, int64_t r1) {
    if (w->group != 32 || w->cols % 32) qhx_k_matmul_q4_gemm_avx2(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm_i8(w, K_Q4, X, ldx, Y, ldy, n, r0, r1);
}

/* Q4A: any cols that is a multiple of 32 (no row-length limit: x is quantized per column block);
 * other shapes, which no Q4A matrix has, take the f32 reference. */
void I8GEMM_NAME(qhx_k_matmul_q4a_i8gemm)(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                                          int64_t n, int64_t r0, int64_t r1) {
    if (w->cols % 32) qhx_k_matmul_q4a_ref(w, X, ldx, Y, ldy, n, r0, r1);
    else gemm_i8(w, K_Q4A, X, ldx, Y, ldy, n, r0, r1);
}
