/* kernels/x86/q4i8x_avx2.c: Q4 matvec/matmul with the activations quantized to int8 on the fly
 * (AVX2), the way ggml pairs Q4_0 weights with Q8_0 activations. The matvec is the default Q4
 * decode kernel on AVX2 tables (qhx_model_params.decode_math; BENCHMARKS.md, "Q4 decode on int8
 * activations"); the matmul is only reached through qhx_kern_install_x86_i8x (prefill has its
 * own int8 GEMM). Built with -mavx2 -mfma -mf16c.
 *
 * Numerics (docs/formats.md Q4, group 32): x is quantized per block of 32 columns, aligned with
 * the weight groups, as quant_x_avx2.h says (the same rounding as the int8 prefill GEMM: dx[g] =
 * max|x| / 127, codes rounded to nearest even; a block with a NaN or an infinity makes the
 * outputs NaN). Then y[r] = sum_g (d[r, g] * dx[g]) * isum[r, g] with isum = sum (nib - 8) * q
 * exact in int32 (computed as sum nib * q - 8 sum q), each group's term added in f32 to one of
 * two 8-lane accumulators in a fixed order. Error against exact arithmetic: at most
 * sum_g |d[r, g]| * dx[g] / 2 * sum_i |nib - 8| plus float32 rounding. Output row r depends
 * only on row r and x; matmul equals matvec bitwise. Columns over QX_MAX_COLS, groups other
 * than 32 or cols not a multiple of 32 take the exact qhx_k_matvec_q4_avx2 path instead.
 *
 * Speed: per two groups (64 weights, 32 bytes) and row, one load, a shift, two masks, two
 * vpmaddubsw, an add, one vpmaddwd, the offset subtract, a convert, a permute for the scales and
 * one FMA: about 2.4x fewer instructions than the int16-activation kernel (linear_x16_avx2.c),
 * which could not keep up with memory on Zen 3 (5-7 GB/s per thread against 10-15 here). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/x86/quant_x_avx2.h"
#include "kernels/x86/f16_x86.h"
#include "kernels/x86/multi_plan.h"
#include "kernels/x86/prefetch_x86.h"
#include "kernels/x86/x86.h"

#define AI static inline __attribute__((always_inline))
/* Constant-count loops over rows and tokens must unroll (accumulators stay in registers) at
 * any optimisation level, not only -O3. */
#define UNROLL _Pragma("GCC unroll 32")

/* The same body builds three times: here for AVX2; from q4i8x_avxvnni.c (QHX_I8_AVXVNNI, with
 * -mavxvnni); and from q4i8x_evex_avx512.c (QHX_I8_EVEX: AVX-512 VNNI on 256-bit vectors, with
 * the 32 registers of the EVEX encoding, for AVX-512 CPUs without AVX-VNNI such as Zen 4). In
 * the VNNI builds two vpdpbusd replace the two vpmaddubsw, their add and the vpmaddwd of a pair
 * of groups, starting from -8 sum q (off is stored negated there). vpdpbusd adds the u8 x s8
 * products of a lane straight into int32, the AVX2 int16 sums never saturate: the same
 * integers, so every build returns the same bits. */
#if defined(QHX_I8_AVXVNNI)
#define Q4I8X_NAME(f) f##_avxvnni
#define I8_VNNI 1
#define DPBUSD256 _mm256_dpbusd_avx_epi32
#define DPBUSD128 _mm_dpbusd_avx_epi32
#elif defined(QHX_I8_EVEX)
#define Q4I8X_NAME(f) f##_evex
#define I8_VNNI 1
#define DPBUSD256 _mm256_dpbusd_epi32
#define DPBUSD128 _mm_dpbusd_epi32
#else
#define Q4I8X_NAME(f) f##_avx2
#endif

/* Stack room for one quantized activation row. */
#define QX_MAX_COLS 8192

/* The activation row, laid out for two weight groups per 256-bit step. Groups 2p and 2p + 1 form
 * pair p: lo[32p..] = [x codes 0..15 of group 2p | codes 0..15 of group 2p + 1] and hi[32p..]
 * the codes 16..31 the same way, which is the order a 32-byte load of the two groups' packed
 * nibbles gives after masking (low nibbles, then high ones). off holds, per 32-bit lane of the
 * pair, 8 x the sum of the codes that lane multiplies: the weights enter the integer dot
 * product as unsigned nibbles u, and sum (u - 8) q = sum u q - 8 sum q exactly. An odd last
 * group fills the first half of its pair. */
typedef struct qx_row {
    _Alignas(32) int8_t lo[QX_MAX_COLS / 2];
    _Alignas(32) int8_t hi[QX_MAX_COLS / 2];
    _Alignas(32) int32_t off[QX_MAX_COLS / 8];
    _Alignas(32) float dx[QX_MAX_COLS / 32];
    _Alignas(32) float xs[QX_MAX_COLS / 32]; /* per block: the sum of its codes (Q4A's zero points) */
} qx_row;

/* Quantize x (cols,) into o, block by block as quant_x_avx2.h says (the prefill GEMM's rounding). */
static void quantize_x(const float *x, int64_t cols, qx_row *o) {
    const __m128i ones8 = _mm_set1_epi8(1), ones16 = _mm_set1_epi16(1);
    _Alignas(32) int8_t q[32];
    for (int64_t b = 0; b < cols / 32; b++) {
        int32_t sum8;
        qx_quantize_block(x + 32 * b, q, &o->dx[b], &sum8);
        o->xs[b] = (float)(sum8 / 8);
        __m128i q_lo = _mm_load_si128((const __m128i *)q), q_hi = _mm_load_si128((const __m128i *)(q + 16));
        int64_t at = 32 * (b / 2) + 16 * (b % 2);
        _mm_store_si128((__m128i *)(o->lo + at), q_lo);
        _mm_store_si128((__m128i *)(o->hi + at), q_hi);
        /* lane j of this half multiplies codes 4j..4j+3 and 16+4j..16+4j+3 */
        __m128i pairs = _mm_add_epi16(_mm_maddubs_epi16(ones8, q_lo), _mm_maddubs_epi16(ones8, q_hi));
        __m128i off = _mm_slli_epi32(_mm_madd_epi16(pairs, ones16), 3);
#ifdef I8_VNNI
        off = _mm_sub_epi32(_mm_setzero_si128(), off);
#endif
        _mm_store_si128((__m128i *)(o->off + at / 4), off);
    }
}

AI float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The offsets of pair `pair` for codes centred at 8 (Q4: bits 4) or 32 (Q6: bits 6): off holds
 * 8 sum q, so Q6 takes 4 times it. */
AI __m256i pair_off(const qx_row *qx, int64_t pair, int bits) {
    __m256i off = _mm256_load_si256((const __m256i *)(qx->off + 8 * pair));
    return bits == 6 ? _mm256_slli_epi32(off, 2) : off;
}
AI __m128i group_off(const qx_row *qx, int64_t pair, int bits) {
    __m128i off = _mm_load_si128((const __m128i *)(qx->off + 8 * pair));
    return bits == 6 ? _mm_slli_epi32(off, 2) : off;
}

/* Unsigned codes of one pair of groups, in the order of qx's lo/hi halves: the low nibbles of
 * the 32 bytes at p, then the high ones; for Q6 (hb: the pair's 16 bytes of high bits, quant.h)
 * each lane gets its high 2 bits at bits 4-5. Byte j of a group's 8 high bytes holds values j,
 * j + 8, j + 16, j + 24 in bits 0-1, 2-3, 4-5, 6-7: with the group's 8 bytes twice in a 128-bit
 * lane, shifting the 64-bit halves by (4, 2) left brings values 0-7 / 8-15 to bits 4-5, by
 * (0, 2) right values 16-23 / 24-31; the mask 0x30 keeps just those two bits of each byte. */
typedef struct code_pair {
    __m256i lo, hi;
} code_pair;

AI code_pair pair_codes(const uint8_t *p, const uint8_t *hb, int bits) {
    const __m256i mask = _mm256_set1_epi8(0x0f);
    __m256i b = _mm256_loadu_si256((const __m256i *)p);
    code_pair u = {_mm256_and_si256(b, mask), _mm256_and_si256(_mm256_srli_epi16(b, 4), mask)};
    if (bits == 6) {
        const __m256i m2 = _mm256_set1_epi8(0x30);
        __m256i h = _mm256_permute4x64_epi64(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)hb)), 0x50);
        u.lo = _mm256_or_si256(u.lo, _mm256_and_si256(_mm256_sllv_epi64(h, _mm256_setr_epi64x(4, 2, 4, 2)), m2));
        u.hi = _mm256_or_si256(u.hi, _mm256_and_si256(_mm256_srlv_epi64(h, _mm256_setr_epi64x(0, 2, 0, 2)), m2));
    }
    return u;
}

/* Exact integer dot products of one pair of groups with pair `pair` of qx: lanes 0-3 hold group
 * 2p's four partial sums of (u - centre) q, lanes 4-7 group 2p + 1's. */
AI __m256i pair_dot_codes(code_pair u, const qx_row *qx, int64_t pair, int bits) {
#ifdef I8_VNNI
    __m256i s = pair_off(qx, pair, bits); /* -8 sum q (Q6: -32 sum q) */
    s = DPBUSD256(s, u.lo, _mm256_load_si256((const __m256i *)(qx->lo + 32 * pair)));
    return DPBUSD256(s, u.hi, _mm256_load_si256((const __m256i *)(qx->hi + 32 * pair)));
#else
    const __m256i ones16 = _mm256_set1_epi16(1);
    /* |u q| <= 63 * 127: the int16 pair sums (<= 16002 each, two added: 32004) cannot saturate */
    __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(u.lo, _mm256_load_si256((const __m256i *)(qx->lo + 32 * pair))),
                                   _mm256_maddubs_epi16(u.hi, _mm256_load_si256((const __m256i *)(qx->hi + 32 * pair))));
    return _mm256_sub_epi32(_mm256_madd_epi16(s16, ones16), pair_off(qx, pair, bits));
#endif
}

AI __m256i pair_dot(const uint8_t *p, const uint8_t *hb, const qx_row *qx, int64_t pair, int bits) {
    return pair_dot_codes(pair_codes(p, hb, bits), qx, pair, bits);
}

/* The same for a lone last group (16 packed bytes, Q6: 8 high bytes): four partial sums. */
AI __m128i group_dot(const uint8_t *p, const uint8_t *hb, const qx_row *qx, int64_t pair, int bits) {
    const __m128i mask = _mm_set1_epi8(0x0f);
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    __m128i u_lo = _mm_and_si128(b, mask), u_hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
    if (bits == 6) {
        const __m128i m2 = _mm_set1_epi8(0x30);
        __m128i h = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)hb), _mm_loadl_epi64((const __m128i *)hb));
        u_lo = _mm_or_si128(u_lo, _mm_and_si128(_mm_sllv_epi64(h, _mm_set_epi64x(2, 4)), m2));
        u_hi = _mm_or_si128(u_hi, _mm_and_si128(_mm_srlv_epi64(h, _mm_set_epi64x(2, 0)), m2));
    }
#ifdef I8_VNNI
    __m128i s = group_off(qx, pair, bits);
    s = DPBUSD128(s, u_lo, _mm_load_si128((const __m128i *)(qx->lo + 32 * pair)));
    return DPBUSD128(s, u_hi, _mm_load_si128((const __m128i *)(qx->hi + 32 * pair)));
#else
    const __m128i ones16 = _mm_set1_epi16(1);
    __m128i s16 = _mm_add_epi16(_mm_maddubs_epi16(u_lo, _mm_load_si128((const __m128i *)(qx->lo + 32 * pair))),
                                _mm_maddubs_epi16(u_hi, _mm_load_si128((const __m128i *)(qx->hi + 32 * pair))));
    return _mm_sub_epi32(_mm_madd_epi16(s16, ones16), group_off(qx, pair, bits));
#endif
}

/* The next 8 groups of rows p[0..R) (128 bytes of codes; Q6: 64 of high bits, h), `ahead`
 * bytes on (prefetch_x86.h; the high bits are half as far). */
AI void prefetch_groups8(const uint8_t *const *p, const uint8_t *const *h, int R, int64_t g, int64_t ahead, int bits) {
    QHX_PREFETCH_ROWS(p, R, 16 * g + ahead);
    QHX_PREFETCH_ROWS(p, R, 16 * g + 64 + ahead);
    if (bits == 6) QHX_PREFETCH_ROWS(h, R, 8 * g + ahead / 2);
}

/* Rows r..r+R-1, R <= 4, against one quantized activation row; bits 4 (Q4) or 6 (Q6), a
 * constant. Per group the exact integer sum is scaled by d[r, g] * dx[g] (f32) and accumulated
 * in f32: groups 8 at a time (their 8 scales in one multiply), pairs alternating between two
 * accumulators so the FMA latency is hidden. */
AI void rows_q(const qhx_weight *w, const qx_row *qx, float *y, int64_t r, int R, int bits) {
    const int64_t ng = w->cols / 32;
    const __m256i spread[4] = {_mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
                               _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5), _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7)};
    const uint8_t *p[4], *h[4];
    const uint16_t *d[4];
    __m256 acc[4], acc2[4];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)(w->cols / 2);
        h[i] = bits == 6 ? w->high + (size_t)(r + i) * (size_t)(w->cols / 4) : NULL;
        d[i] = w->gscales + (r + i) * ng;
        acc[i] = acc2[i] = _mm256_setzero_ps();
    }
    const int64_t ahead = qhx_pf_ahead(R * (w->cols / 2)); /* prefetch_x86.h */
    int64_t g = 0;
    for (; g + 8 <= ng; g += 8) {
        __m256 dxv = _mm256_load_ps(qx->dx + g);
        prefetch_groups8(p, h, R, g, ahead, bits);
        UNROLL
        for (int i = 0; i < R; i++) {
            __m256 sc = _mm256_mul_ps(qhx_x86_f16x8(d[i] + g), dxv);
            UNROLL
            for (int k = 0; k < 4; k++) {
                const uint8_t *hb = bits == 6 ? h[i] + 8 * (g + 2 * k) : NULL;
                __m256 f = _mm256_cvtepi32_ps(pair_dot(p[i] + 16 * (g + 2 * k), hb, qx, g / 2 + k, bits));
                __m256 s = _mm256_permutevar8x32_ps(sc, spread[k]);
                if (k & 1) acc2[i] = _mm256_fmadd_ps(f, s, acc2[i]);
                else acc[i] = _mm256_fmadd_ps(f, s, acc[i]);
            }
        }
    }
    for (; g + 2 <= ng; g += 2) {
        UNROLL
        for (int i = 0; i < R; i++) {
            __m256 s = _mm256_set_m128(_mm_set1_ps(qhx_x86_f16(d[i] + g + 1) * qx->dx[g + 1]),
                                       _mm_set1_ps(qhx_x86_f16(d[i] + g) * qx->dx[g]));
            const uint8_t *hb = bits == 6 ? h[i] + 8 * g : NULL;
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pair_dot(p[i] + 16 * g, hb, qx, g / 2, bits)), s, acc[i]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++) {
        __m256 a = _mm256_add_ps(acc[i], acc2[i]);
        if (g < ng) { /* odd last group: add it in the low half */
            const uint8_t *hb = bits == 6 ? h[i] + 8 * g : NULL;
            __m128 f = _mm_cvtepi32_ps(group_dot(p[i] + 16 * g, hb, qx, g / 2, bits));
            __m128 lo = _mm_fmadd_ps(f, _mm_set1_ps(qhx_x86_f16(d[i] + g) * qx->dx[g]), _mm256_castps256_ps128(a));
            a = _mm256_insertf128_ps(a, lo, 0);
        }
        y[r + i] = hsum8(a);
    }
}

/* Rows shorter than a 4 KiB page are read one at a time (the prefetcher follows one stream per
 * page better than four short interleaved ones: linear_x16_avx2.c). */
#define ROW_BLOCK_MIN_BYTES 4096

AI void rows_range(const qhx_weight *w, const qx_row *qx, float *y, int64_t r0, int64_t r1, int bits) {
    int64_t r = r0;
    if (w->cols / 2 >= ROW_BLOCK_MIN_BYTES)
        for (; r + 4 <= r1; r += 4) rows_q(w, qx, y, r, 4, bits);
    for (; r < r1; r++) rows_q(w, qx, y, r, 1, bits);
}

static int i8x_ok(const qhx_weight *w) {
    return w->group == 32 && w->cols % 32 == 0 && w->cols <= QX_MAX_COLS;
}

/* One activation row quantized once, then rows [r0, r1); shapes without the int8 path go to
 * `exact` (Q4: the f32 AVX2 kernel; Q6: the reference). */
AI void matvec_i8x(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1, int bits,
                   qhx_matvec_fn exact) {
    if (!i8x_ok(w)) {
        exact(w, x, y, r0, r1);
        return;
    }
    qx_row qx;
    quantize_x(x, w->cols, &qx);
    rows_range(w, &qx, y, r0, r1, bits);
}

void Q4I8X_NAME(qhx_k_matvec_q4_i8x)(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    matvec_i8x(w, x, y, r0, r1, 4, qhx_k_matvec_q4_avx2);
}

/* Prefill: row blocks that stay in L2; inside each, one token at a time against its quantized
 * row (the codes are unpacked per token; at ~14 instructions per 32 weights this still beats
 * the exact path's ~21). */
#define MM_BLOCK_BYTES (192 * 1024)

/* Row blocks of MM_BLOCK_BYTES, each gone over by every token in turn; shapes without the int8
 * path go to `exact`. */
AI void matmul_i8x(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n, int64_t r0,
                   int64_t r1, int bits, qhx_matmul_fn exact) {
    if (!i8x_ok(w)) {
        exact(w, X, ldx, Y, ldy, n, r0, r1);
        return;
    }
    qx_row qx;
    int64_t row_bytes = w->cols / 2 + (bits == 6 ? w->cols / 4 : 0) + w->cols / 32 * 2;
    int64_t blk = MM_BLOCK_BYTES / (row_bytes > 0 ? row_bytes : 1);
    blk = blk < 4 ? 4 : blk - blk % 4;
    if (n == 1 || r1 - r0 <= blk) blk = r1 - r0; /* one block: quantize each token once */
    for (int64_t ra = r0; ra < r1; ra += blk) {
        int64_t rb = ra + blk < r1 ? ra + blk : r1;
        for (int64_t t = 0; t < n; t++) {
            quantize_x(X + t * ldx, w->cols, &qx);
            rows_range(w, &qx, Y + t * ldy, ra, rb, bits);
        }
    }
}

void Q4I8X_NAME(qhx_k_matmul_q4_i8x)(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                              int64_t ldy, int64_t n, int64_t r0, int64_t r1) {
    matmul_i8x(w, X, ldx, Y, ldy, n, r0, r1, 4, qhx_k_matmul_q4_avx2);
}

/* ---- Q6 (the same kernels with 6-bit codes; no exact SIMD path: other shapes take the
 * reference) ------------------------------------------------------------------------------------ */

void Q4I8X_NAME(qhx_k_matvec_q6_i8x)(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    matvec_i8x(w, x, y, r0, r1, 6, qhx_k_matvec_q6_ref);
}

void Q4I8X_NAME(qhx_k_matmul_q6_i8x)(const qhx_weight *w, const float *X, int64_t ldx, float *Y,
                              int64_t ldy, int64_t n, int64_t r0, int64_t r1) {
    matmul_i8x(w, X, ldx, Y, ldy, n, r0, r1, 6, qhx_k_matmul_q6_ref);
}

/* ---- several activation rows at once (decode of several sequences) ---------------------------
 * A register tile of MULTI_ROWS weight rows x up to MULTI_TILE activation rows: each weight row
 * is loaded and its nibbles masked once per pair of groups, then used by every activation row
 * of the tile. For each (r, b) the scale products, integer dots, FMAs into the two
 * accumulators, the odd last group and the horizontal sum are those of rows_q with R = 1, in the
 * same order, so y[b][r] has the bits of the single-row kernel for x[b]. With the 16 registers
 * of AVX2 a tile is one weight row by 3 activation rows (6 accumulators and 3 scale vectors;
 * with 4, GCC 12 kept 3 accumulators on the stack: a store and reload in every FMA chain). The
 * EVEX build has 32: 2 weight rows by 4 activation rows (16 accumulators), so four sequences
 * take one pass over the weights rather than two, and each quantized activation vector loaded
 * serves two weight rows. More rows take further tiles; the order in which (r, b) pairs run
 * changes no bits.
 *
 * Speed (BENCHMARKS.md, "Batched decode: the multi-row Q4 kernel"): the integer multiplies per
 * activation row stay what they are, so the gain is the shared unpacking and, mostly, cache
 * traffic: each weight row comes from L1 for every row of a tile, and x is quantized once per
 * call rather than once per cache block. */
#ifdef QHX_I8_EVEX
#define MULTI_TILE 4
#define MULTI_ROWS 2
#else
#define MULTI_TILE 3
#define MULTI_ROWS 1
#endif

/* Bytes of a quantized row that the tile reads: the codes, the offsets and the scales. */
static int64_t qx_bytes(int64_t cols) { return cols + cols / 2 + cols / 8; }

/* Weight rows r..r+R-1 (R <= MULTI_ROWS) against activation rows qx[0..NB) (NB <= MULTI_TILE):
 * rows_q(w, qx[b], y[b], r + i, 1, bits) for every (i, b) (bits 4: Q4, 6: Q6, a constant). */
AI void tile_multi(const qhx_weight *w, const qx_row *const *qx, float *const *y, int64_t r, int R, int NB, int bits) {
    const int64_t ng = w->cols / 32;
    const __m256i spread[4] = {_mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
                               _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5), _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7)};
    const uint8_t *p[MULTI_ROWS], *h[MULTI_ROWS];
    const uint16_t *d[MULTI_ROWS];
    __m256 acc[MULTI_ROWS][MULTI_TILE], acc2[MULTI_ROWS][MULTI_TILE];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)(w->cols / 2);
        h[i] = bits == 6 ? w->high + (size_t)(r + i) * (size_t)(w->cols / 4) : NULL;
        d[i] = w->gscales + (r + i) * ng;
        UNROLL
        for (int b = 0; b < NB; b++) acc[i][b] = acc2[i][b] = _mm256_setzero_ps();
    }
    const int64_t ahead = qhx_pf_ahead(R * (w->cols / 2)); /* prefetch_x86.h, as rows_q */
    int64_t g = 0;
    for (; g + 8 <= ng; g += 8) {
        prefetch_groups8(p, h, R, g, ahead, bits);
        __m256 sc[MULTI_ROWS][MULTI_TILE];
        UNROLL
        for (int i = 0; i < R; i++) {
            __m256 dv = qhx_x86_f16x8(d[i] + g);
            UNROLL
            for (int b = 0; b < NB; b++) sc[i][b] = _mm256_mul_ps(dv, _mm256_load_ps(qx[b]->dx + g));
        }
        UNROLL
        for (int k = 0; k < 4; k++) {
            UNROLL
            for (int i = 0; i < R; i++) {
                code_pair u = pair_codes(p[i] + 16 * (g + 2 * k), bits == 6 ? h[i] + 8 * (g + 2 * k) : NULL, bits);
                UNROLL
                for (int b = 0; b < NB; b++) {
                    __m256 f = _mm256_cvtepi32_ps(pair_dot_codes(u, qx[b], g / 2 + k, bits));
                    __m256 s = _mm256_permutevar8x32_ps(sc[i][b], spread[k]);
                    if (k & 1) acc2[i][b] = _mm256_fmadd_ps(f, s, acc2[i][b]);
                    else acc[i][b] = _mm256_fmadd_ps(f, s, acc[i][b]);
                }
            }
        }
    }
    for (; g + 2 <= ng; g += 2) {
        UNROLL
        for (int i = 0; i < R; i++) {
            code_pair u = pair_codes(p[i] + 16 * g, bits == 6 ? h[i] + 8 * g : NULL, bits);
            UNROLL
            for (int b = 0; b < NB; b++) {
                __m256 s = _mm256_set_m128(_mm_set1_ps(qhx_x86_f16(d[i] + g + 1) * qx[b]->dx[g + 1]),
                                           _mm_set1_ps(qhx_x86_f16(d[i] + g) * qx[b]->dx[g]));
                acc[i][b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pair_dot_codes(u, qx[b], g / 2, bits)), s, acc[i][b]);
            }
        }
    }
    UNROLL
    for (int i = 0; i < R; i++) {
        UNROLL
        for (int b = 0; b < NB; b++) {
            __m256 a = _mm256_add_ps(acc[i][b], acc2[i][b]);
            if (g < ng) { /* odd last group, as rows_q adds it */
                __m128 f = _mm_cvtepi32_ps(group_dot(p[i] + 16 * g, bits == 6 ? h[i] + 8 * g : NULL, qx[b], g / 2, bits));
                __m128 lo = _mm_fmadd_ps(f, _mm_set1_ps(qhx_x86_f16(d[i] + g) * qx[b]->dx[g]), _mm256_castps256_ps128(a));
                a = _mm256_insertf128_ps(a, lo, 0);
            }
            y[b][r + i] = hsum8(a);
        }
    }
}

/* Weight rows [r0, r1) against one tile of NB activation rows: MULTI_ROWS at a time, then one by
 * one. */
AI void rows_multi_nb(const qhx_weight *w, const qx_row *const *qx, float *const *y, int64_t r0, int64_t r1, int NB,
                      int bits) {
    int64_t r = r0;
    for (; r + MULTI_ROWS <= r1; r += MULTI_ROWS) tile_multi(w, qx, y, r, MULTI_ROWS, NB, bits);
    for (; r < r1; r++) tile_multi(w, qx, y, r, 1, NB, bits);
}

/* One tile of nb <= MULTI_TILE rows: a constant tile size per call, so the loops unroll. */
AI void rows_multi_tile(const qhx_weight *w, const qx_row *const *qx, float *const *y, int64_t r0, int64_t r1, int nb,
                        int bits) {
    switch (nb) {
    case 1: rows_multi_nb(w, qx, y, r0, r1, 1, bits); break;
    case 2: rows_multi_nb(w, qx, y, r0, r1, 2, bits); break;
#if MULTI_TILE > 3
    case 3: rows_multi_nb(w, qx, y, r0, r1, 3, bits); break;
#endif
    default: rows_multi_nb(w, qx, y, r0, r1, MULTI_TILE, bits); break;
    }
}

/* At most QHX_MATVEC_MULTI_MAX activation rows, quantized once each, as the single-row kernel
 * does per call (about 13 KiB of stack each, 106 KiB at 8 rows: the pool's threads and the
 * calling thread have glibc's default 8 MiB). */
AI void matvec_multi_up_to_max(const qhx_weight *w, const float *const *x, float *const *y, int nb, int64_t r0,
                               int64_t r1, int bits) {
    qx_row qx[QHX_MATVEC_MULTI_MAX];
    const qx_row *qp[QHX_MATVEC_MULTI_MAX];
    for (int b = 0; b < nb; b++) {
        quantize_x(x[b], w->cols, &qx[b]);
        qp[b] = &qx[b];
    }
    /* the rows in tiles over blocks (multi_plan.h) */
    const int64_t row_bytes = w->cols / 2 + (bits == 6 ? w->cols / 4 : 0) + w->cols / 8;
    const qhx_multi_plan pl = qhx_multi_plan_make(nb, qx_bytes(w->cols), MULTI_TILE, row_bytes, r0, r1);
    for (int64_t a = r0; a < r1; a += pl.blk) {
        int64_t e = a + pl.blk < r1 ? a + pl.blk : r1;
        for (int t = 0; t < pl.tiles; t++) rows_multi_tile(w, qp + pl.at[t], y + pl.at[t], a, e, pl.at[t + 1] - pl.at[t], bits);
    }
}

/* The multi-row twin of matvec_i8x: `one` for shapes without the int8 path. */
AI void matvec_multi_i8x(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb, int64_t r0,
                         int64_t r1, int bits, qhx_matvec_fn one) {
    if (!i8x_ok(w)) {
        for (int64_t b = 0; b < nb; b++) one(w, x[b], y[b], r0, r1);
        return;
    }
    for (int64_t b = 0; b < nb; b += QHX_MATVEC_MULTI_MAX) /* more rows than the contract's bound: in turn */
        matvec_multi_up_to_max(w, x + b, y + b, (int)(nb - b < QHX_MATVEC_MULTI_MAX ? nb - b : QHX_MATVEC_MULTI_MAX),
                               r0, r1, bits);
}

void Q4I8X_NAME(qhx_k_matvec_multi_q4_i8x)(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                          int64_t r0, int64_t r1) {
    matvec_multi_i8x(w, x, y, nb, r0, r1, 4, qhx_k_matvec_q4_avx2);
}

/* Q6 (the tied head of q4 bundles, a third of a 2B q4 bundle's bytes): read once for every
 * sequence of a batched step instead of once per sequence. */
void Q4I8X_NAME(qhx_k_matvec_multi_q6_i8x)(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                          int64_t r0, int64_t r1) {
    matvec_multi_i8x(w, x, y, nb, r0, r1, 6, qhx_k_matvec_q6_ref);
}

/* ---- Q4A (docs/formats.md, "Q4A"): 4-bit codes in Q4's layout, per group an 8-bit scale s and
 * zero point z, per super-block of 8 groups an f16 d --------------------------------------------
 * W = c (16 u - z), c = d 2^-12 s, so a group adds c dx (16 sum u q - z sum q). The kernels add
 * the exact int32 lane sums P = sum u q times sc16 = 16 (c dx) into the two accumulators as the
 * Q4 kernel adds its group sums, and the zero points once per group: (c dx z) * sum q, with
 * sum q kept per block by the activation quantizer, into a third accumulator (one lane per group
 * of a super-block) that is subtracted at the end. These are the float operations of
 * qhx_k_matvec_q4a_i8x_ref (kernels/ref/quant_q4a.c) in its order, so the results are its bits.
 * Per pair of groups this is the Q4 kernel's work less its offset subtraction; per super-block a
 * few vector multiplies and one FMA more. Bounds: the AVX2 int16 pair sums hold u q <= 15 * 127
 * four times at most (7620), no saturation. */

/* The lane sums P = sum u q of a pair of groups (4 lanes each). */
AI __m256i pair_dot_q4a(code_pair u, const qx_row *qx, int64_t pair) {
    const __m256i *lo = (const __m256i *)(qx->lo + 32 * pair), *hi = (const __m256i *)(qx->hi + 32 * pair);
#ifdef I8_VNNI
    __m256i p = DPBUSD256(_mm256_setzero_si256(), u.lo, _mm256_load_si256(lo));
    return DPBUSD256(p, u.hi, _mm256_load_si256(hi));
#else
    __m256i s16 = _mm256_add_epi16(_mm256_maddubs_epi16(u.lo, _mm256_load_si256(lo)),
                                   _mm256_maddubs_epi16(u.hi, _mm256_load_si256(hi)));
    return _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
#endif
}

AI __m128i group_dot_q4a(const uint8_t *p, const qx_row *qx, int64_t pair) {
    const __m128i mask = _mm_set1_epi8(0x0f);
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    __m128i u_lo = _mm_and_si128(b, mask), u_hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
    const __m128i *lo = (const __m128i *)(qx->lo + 32 * pair), *hi = (const __m128i *)(qx->hi + 32 * pair);
#ifdef I8_VNNI
    __m128i s = DPBUSD128(_mm_setzero_si128(), u_lo, _mm_load_si128(lo));
    return DPBUSD128(s, u_hi, _mm_load_si128(hi));
#else
    return _mm_madd_epi16(_mm_add_epi16(_mm_maddubs_epi16(u_lo, _mm_load_si128(lo)),
                                        _mm_maddubs_epi16(u_hi, _mm_load_si128(hi))),
                          _mm_set1_epi16(1));
#endif
}

/* A whole super-block's factors from its 16 (s, z) bytes: sc16[g] = 16 ((d 2^-12 s_g) dx_g) and
 * mz[g] = ((d 2^-12 s_g) dx_g) z_g for its 8 groups. */
AI void super_factors(const uint16_t *d, const uint8_t *sub, const float *dx, __m256 *sc16, __m256 *mz) {
    const __m128i split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m128i sz = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)sub), split);
    __m256 c = _mm256_mul_ps(_mm256_set1_ps(qhx_x86_f16(d) * 0x1p-12f), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sz)));
    __m256 sc = _mm256_mul_ps(c, _mm256_loadu_ps(dx));
    *sc16 = _mm256_mul_ps(sc, _mm256_set1_ps(16.0f));
    *mz = _mm256_mul_ps(sc, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sz, 8))));
}

/* The same two factors of one group g (a partial super-block), as scalars. */
AI float group_sc(const uint16_t *d, const uint8_t *sub, const float *dx, int64_t g) {
    return qhx_x86_f16(d + g / 8) * 0x1p-12f * (float)sub[2 * g] * dx[g];
}

/* Rows r..r+R-1 (R <= 4) of a Q4A matrix against one quantized activation row. */
AI void rows_q4a(const qhx_weight *w, const qx_row *qx, float *y, int64_t r, int R) {
    const int64_t ng = w->cols / 32, ns = (ng + 7) / 8;
    const __m256i spread[4] = {_mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
                               _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5), _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7)};
    const uint8_t *p[4], *sb[4];
    const uint16_t *d[4];
    __m256 acc[4], acc2[4], accz[4];
    float zt[4];
    UNROLL
    for (int i = 0; i < R; i++) {
        p[i] = (const uint8_t *)w->data + (size_t)(r + i) * (size_t)(w->cols / 2);
        sb[i] = w->sub + (size_t)(r + i) * (size_t)(ng * 2);
        d[i] = w->gscales + (r + i) * ns;
        acc[i] = acc2[i] = accz[i] = _mm256_setzero_ps();
        zt[i] = 0.0f;
    }
    int64_t g = 0;
    for (; g + 8 <= ng; g += 8) {
        __m256 xs = _mm256_load_ps(qx->xs + g);
        UNROLL
        for (int i = 0; i < R; i++) {
            __m256 sc16, mz;
            super_factors(d[i] + g / 8, sb[i] + 2 * g, qx->dx + g, &sc16, &mz);
            accz[i] = _mm256_fmadd_ps(mz, xs, accz[i]);
            UNROLL
            for (int k = 0; k < 4; k++) {
                code_pair u = pair_codes(p[i] + 16 * (g + 2 * k), NULL, 4);
                __m256 f = _mm256_cvtepi32_ps(pair_dot_q4a(u, qx, g / 2 + k));
                __m256 s = _mm256_permutevar8x32_ps(sc16, spread[k]);
                if (k & 1) acc2[i] = _mm256_fmadd_ps(f, s, acc2[i]);
                else acc[i] = _mm256_fmadd_ps(f, s, acc[i]);
            }
        }
    }
    for (; g + 2 <= ng; g += 2) {
        UNROLL
        for (int i = 0; i < R; i++) {
            float s0 = group_sc(d[i], sb[i], qx->dx, g), s1 = group_sc(d[i], sb[i], qx->dx, g + 1);
            __m256 s = _mm256_set_m128(_mm_set1_ps(s1 * 16.0f), _mm_set1_ps(s0 * 16.0f));
            code_pair u = pair_codes(p[i] + 16 * g, NULL, 4);
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pair_dot_q4a(u, qx, g / 2)), s, acc[i]);
            zt[i] = fmaf(s0 * (float)sb[i][2 * g + 1], qx->xs[g], zt[i]);
            zt[i] = fmaf(s1 * (float)sb[i][2 * g + 3], qx->xs[g + 1], zt[i]);
        }
    }
    UNROLL
    for (int i = 0; i < R; i++) {
        __m256 a = _mm256_sub_ps(_mm256_add_ps(acc[i], acc2[i]), accz[i]);
        if (g < ng) {
            float s0 = group_sc(d[i], sb[i], qx->dx, g);
            __m128 f = _mm_cvtepi32_ps(group_dot_q4a(p[i] + 16 * g, qx, g / 2));
            __m128 lo = _mm_fmadd_ps(f, _mm_set1_ps(s0 * 16.0f), _mm256_castps256_ps128(a));
            a = _mm256_insertf128_ps(a, lo, 0);
            zt[i] = fmaf(s0 * (float)sb[i][2 * g + 1], qx->xs[g], zt[i]);
        }
        y[r + i] = hsum8(a) - zt[i];
    }
}

static void rows_range_q4a(const qhx_weight *w, const qx_row *qx, float *y, int64_t r0, int64_t r1) {
    int64_t r = r0;
    if (w->cols / 2 >= ROW_BLOCK_MIN_BYTES)
        for (; r + 4 <= r1; r += 4) rows_q4a(w, qx, y, r, 4);
    for (; r < r1; r++) rows_q4a(w, qx, y, r, 1);
}

static int q4a_i8x_ok(const qhx_weight *w) { return w->cols % 32 == 0 && w->cols <= QX_MAX_COLS; }

void Q4I8X_NAME(qhx_k_matvec_q4a_i8x)(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    if (!q4a_i8x_ok(w)) {
        qhx_k_matvec_q4a_ref(w, x, y, r0, r1);
        return;
    }
    qx_row qx;
    quantize_x(x, w->cols, &qx);
    rows_range_q4a(w, &qx, y, r0, r1);
}

void Q4I8X_NAME(qhx_k_matmul_q4a_i8x)(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                                      int64_t n, int64_t r0, int64_t r1) {
    if (!q4a_i8x_ok(w)) {
        qhx_k_matmul_q4a_ref(w, X, ldx, Y, ldy, n, r0, r1);
        return;
    }
    qx_row qx;
    int64_t row_bytes = w->cols / 2 + w->cols / 16 + 2 * ((w->cols / 32 + 7) / 8);
    int64_t blk = MM_BLOCK_BYTES / row_bytes;
    blk = blk < 4 ? 4 : blk - blk % 4;
    if (n == 1 || r1 - r0 <= blk) blk = r1 - r0;
    for (int64_t ra = r0; ra < r1; ra += blk) {
        int64_t rb = ra + blk < r1 ? ra + blk : r1;
        for (int64_t t = 0; t < n; t++) {
            quantize_x(X + t * ldx, w->cols, &qx);
            rows_range_q4a(w, &qx, Y + t * ldy, ra, rb);
        }
    }
}

/* Weight row r against activation rows qx[0..NB): rows_q4a(w, qx[b], y[b], r, 1) for every b,
 * the codes unpacked once for all of them. */
AI void row_multi_q4a(const qhx_weight *w, const qx_row *const *qx, float *const *y, int64_t r, int NB) {
    const int64_t ng = w->cols / 32, ns = (ng + 7) / 8;
    const __m256i spread[4] = {_mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
                               _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5), _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7)};
    const uint8_t *p = (const uint8_t *)w->data + (size_t)r * (size_t)(w->cols / 2);
    const uint8_t *sb = w->sub + (size_t)r * (size_t)(ng * 2);
    const uint16_t *d = w->gscales + r * ns;
    __m256 acc[MULTI_TILE], acc2[MULTI_TILE], accz[MULTI_TILE];
    float zt[MULTI_TILE];
    UNROLL
    for (int b = 0; b < NB; b++) acc[b] = acc2[b] = accz[b] = _mm256_setzero_ps(), zt[b] = 0.0f;
    int64_t g = 0;
    for (; g + 8 <= ng; g += 8) {
        __m256 sc16[MULTI_TILE];
        UNROLL
        for (int b = 0; b < NB; b++) {
            __m256 mz;
            super_factors(d + g / 8, sb + 2 * g, qx[b]->dx + g, &sc16[b], &mz);
            accz[b] = _mm256_fmadd_ps(mz, _mm256_load_ps(qx[b]->xs + g), accz[b]);
        }
        UNROLL
        for (int k = 0; k < 4; k++) {
            code_pair u = pair_codes(p + 16 * (g + 2 * k), NULL, 4);
            UNROLL
            for (int b = 0; b < NB; b++) {
                __m256 f = _mm256_cvtepi32_ps(pair_dot_q4a(u, qx[b], g / 2 + k));
                __m256 s = _mm256_permutevar8x32_ps(sc16[b], spread[k]);
                if (k & 1) acc2[b] = _mm256_fmadd_ps(f, s, acc2[b]);
                else acc[b] = _mm256_fmadd_ps(f, s, acc[b]);
            }
        }
    }
    for (; g + 2 <= ng; g += 2) {
        code_pair u = pair_codes(p + 16 * g, NULL, 4);
        UNROLL
        for (int b = 0; b < NB; b++) {
            float s0 = group_sc(d, sb, qx[b]->dx, g), s1 = group_sc(d, sb, qx[b]->dx, g + 1);
            __m256 s = _mm256_set_m128(_mm_set1_ps(s1 * 16.0f), _mm_set1_ps(s0 * 16.0f));
            acc[b] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pair_dot_q4a(u, qx[b], g / 2)), s, acc[b]);
            zt[b] = fmaf(s0 * (float)sb[2 * g + 1], qx[b]->xs[g], zt[b]);
            zt[b] = fmaf(s1 * (float)sb[2 * g + 3], qx[b]->xs[g + 1], zt[b]);
        }
    }
    UNROLL
    for (int b = 0; b < NB; b++) {
        __m256 a = _mm256_sub_ps(_mm256_add_ps(acc[b], acc2[b]), accz[b]);
        if (g < ng) {
            float s0 = group_sc(d, sb, qx[b]->dx, g);
            __m128 f = _mm_cvtepi32_ps(group_dot_q4a(p + 16 * g, qx[b], g / 2));
            __m128 lo = _mm_fmadd_ps(f, _mm_set1_ps(s0 * 16.0f), _mm256_castps256_ps128(a));
            a = _mm256_insertf128_ps(a, lo, 0);
            zt[b] = fmaf(s0 * (float)sb[2 * g + 1], qx[b]->xs[g], zt[b]);
        }
        y[b][r] = hsum8(a) - zt[b];
    }
}

static void rows_multi_tile_q4a(const qhx_weight *w, const qx_row *const *qx, float *const *y, int64_t r, int nb) {
    switch (nb) {
    case 1: row_multi_q4a(w, qx, y, r, 1); break;
    case 2: row_multi_q4a(w, qx, y, r, 2); break;
#if MULTI_TILE > 3
    case 3: row_multi_q4a(w, qx, y, r, 3); break;
#endif
    default: row_multi_q4a(w, qx, y, r, MULTI_TILE); break;
    }
}

/* As matvec_multi_up_to_max, for Q4A rows. */
static void matvec_multi_q4a_up_to_max(const qhx_weight *w, const float *const *x, float *const *y, int nb, int64_t r0,
                                       int64_t r1) {
    qx_row qx[QHX_MATVEC_MULTI_MAX];
    const qx_row *qp[QHX_MATVEC_MULTI_MAX];
    for (int b = 0; b < nb; b++) {
        quantize_x(x[b], w->cols, &qx[b]);
        qp[b] = &qx[b];
    }
    const qhx_multi_plan pl =
        qhx_multi_plan_make(nb, qx_bytes(w->cols), MULTI_TILE, w->cols / 2 + w->cols / 16 + w->cols / 8, r0, r1);
    for (int64_t a = r0; a < r1; a += pl.blk) {
        int64_t e = a + pl.blk < r1 ? a + pl.blk : r1;
        for (int t = 0; t < pl.tiles; t++)
            for (int64_t r = a; r < e; r++) rows_multi_tile_q4a(w, qp + pl.at[t], y + pl.at[t], r, pl.at[t + 1] - pl.at[t]);
    }
}

void Q4I8X_NAME(qhx_k_matvec_multi_q4a_i8x)(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb,
                                           int64_t r0, int64_t r1) {
    if (!q4a_i8x_ok(w)) {
        for (int64_t b = 0; b < nb; b++) qhx_k_matvec_q4a_ref(w, x[b], y[b], r0, r1);
        return;
    }
    for (int64_t b = 0; b < nb; b += QHX_MATVEC_MULTI_MAX)
        matvec_multi_q4a_up_to_max(w, x + b, y + b,
                                   (int)(nb - b < QHX_MATVEC_MULTI_MAX ? nb - b : QHX_MATVEC_MULTI_MAX), r0, r1);
}
