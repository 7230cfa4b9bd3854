/* kernels/x86/ggml_avx2.c: matvec (decode), matmul (prefill) and row lookup over a GGUF tensor's
 * ggml blocks in place (QHX_W_GGML) with AVX2 + F16C; f32 activations. Built with -mavx2 -mf16c
 * -ffp-contract=off (CMakeLists.txt); reached only through qhx_kern_install_x86 after a CPU check.
 *
 * Bit for bit the reference (kernels/ref/gguf_linear.c): each block is dequantized in registers
 * with the float32 operations of kernels/ref/gguf_quant.c in its order (scale times sub-scale as
 * one product per sub-block, 8 sub-blocks at a time where a block has 8 or 16, that times the code, then the minimum subtracted or added: separate
 * multiplies and adds, never a fused one; codes and f16 scales widen to f32 exactly), stored to a
 * block buffer in L1 (the matvec of 32-value blocks skips it: see tile()), and dotted in the
 * reference's 8-lane order: one accumulator per output, acc = acc + w * x per 8 columns in column
 * order, then reduce8's tree. Types without a path here (F32, F16, BF16) run the reference per
 * call.
 *
 * Every block starts at any byte address (GGUF aligns only the tensor's start; the rows and
 * blocks of Q8_0, Q5_K, ... are not even 4-byte aligned), so every load is unaligned. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/ggml_type.h"
#include "kernels/quant.h"
#include "kernels/x86/ggml_blocks_avx2.h"
#include "kernels/x86/prefetch_x86.h"
#include "kernels/x86/x86.h"


#define MV_ROWS 4 /* matvec rows per tile: independent accumulator chains, one block buffer each */
#define MM_TOKENS 8 /* matmul tokens per tile: each dequantized block is dotted with up to 8 tokens */

/* 8 signed byte codes (the low 8 bytes of v) as f32. */
AI __m256 i8x8(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

/* out[0..8) = s * (float)v[i] for the 8 bytes of v (signed where sgn), one product each: the
 * scalar products of the reference's sub-block scales, 8 at a time. */
AI void scales8(__m128i v, int sgn, float s, float *out) {
    __m256i i = sgn ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
    _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(i)));
}

/* The 32 signed byte codes of q as f32, in four vectors of 8 (values 0-7, 8-15, 16-23, 24-31). */
AI void widen32(__m256i q, __m256 f[4]) {
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    f[0] = i8x8(lo);
    f[1] = i8x8(_mm_unpackhi_epi64(lo, lo));
    f[2] = i8x8(hi);
    f[3] = i8x8(_mm_unpackhi_epi64(hi, hi));
}

/* Where dequantized values go: stored to o (a block buffer, a row lookup's output), or, with dot
 * set, dotted straight into *acc as the reference does (acc = acc + w * x, 8 columns at a time,
 * x the activations of the block's columns). A constant once inlined, so each use compiles to
 * the one path. */
typedef struct sink {
    int dot;
    float *o;
    const float *x;
    __m256 *acc;
} sink;

AI sink at(sink s, int off) {
    if (s.dot)
        s.x += off;
    else
        s.o += off;
    return s;
}

AI void put(sink s, int k, __m256 v) {
    if (s.dot)
        *s.acc = _mm256_add_ps(*s.acc, _mm256_mul_ps(v, _mm256_loadu_ps(s.x + k)));
    else
        _mm256_storeu_ps(s.o + k, v);
}

/* o[0..32) = s * code, s = s0 for the first 16 values and s1 for the next (one product each). */
AI void scale32(__m256i q, float s0, float s1, sink o) {
    __m256 f[4], a = _mm256_set1_ps(s0), b = _mm256_set1_ps(s1);
    widen32(q, f);
    put(o, 0, _mm256_mul_ps(a, f[0]));
    put(o, 8, _mm256_mul_ps(a, f[1]));
    put(o, 16, _mm256_mul_ps(b, f[2]));
    put(o, 24, _mm256_mul_ps(b, f[3]));
}

/* o[0..32) = s * code - m, per half as scale32 (the K-quants with minimums). */
AI void scale32_sub(__m256i q, float s0, float s1, float m0, float m1, sink o) {
    __m256 f[4], a = _mm256_set1_ps(s0), b = _mm256_set1_ps(s1), ma = _mm256_set1_ps(m0), mb = _mm256_set1_ps(m1);
    widen32(q, f);
    put(o, 0, _mm256_sub_ps(_mm256_mul_ps(a, f[0]), ma));
    put(o, 8, _mm256_sub_ps(_mm256_mul_ps(a, f[1]), ma));
    put(o, 16, _mm256_sub_ps(_mm256_mul_ps(b, f[2]), mb));
    put(o, 24, _mm256_sub_ps(_mm256_mul_ps(b, f[3]), mb));
}

/* o[0..32) = d * code + m (Q4_1, Q5_1). */
AI void scale32_add(__m256i q, float d, float m, sink o) {
    __m256 f[4], a = _mm256_set1_ps(d), mv = _mm256_set1_ps(m);
    widen32(q, f);
    UNROLL
    for (int k = 0; k < 4; k++) put(o, 8 * k, _mm256_add_ps(_mm256_mul_ps(a, f[k]), mv));
}

/* The code book of IQ4_NL and IQ4_XS, as gguf_quant.c's, for a byte shuffle. */
AI __m256i iq4_lookup(__m256i idx) {
    const __m256i book = _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
                                          -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    return _mm256_shuffle_epi8(book, idx);
}

/* ---- one block each, into o[0 .. blk_vals) (gguf_quant.c has the layouts) ------------------ */

/* Q8_0's codes widen straight from the block (one load-and-widen per 8). */
AI void deq_q8_0(const uint8_t *b, sink o) {
    __m256 d = _mm256_set1_ps(f16at(b));
    UNROLL
    for (int k = 0; k < 4; k++)
        put(o, 8 * k, _mm256_mul_ps(d, i8x8(_mm_loadl_epi64((const __m128i *)(b + 2 + 8 * k)))));
}

AI void deq_q4_0(const uint8_t *b, sink o) {
    float d = f16at(b);
    scale32(_mm256_sub_epi8(nibbles16(b + 2), bytes(8)), d, d, o);
}

AI void deq_q4_1(const uint8_t *b, sink o) { scale32_add(nibbles16(b + 4), f16at(b), f16at(b + 2), o); }

AI void deq_q5_0(const uint8_t *b, sink o) {
    float d = f16at(b);
    __m256i q = _mm256_or_si256(nibbles16(b + 6), bit4_of_bits32(b + 2));
    scale32(_mm256_sub_epi8(q, bytes(16)), d, d, o);
}

AI void deq_q5_1(const uint8_t *b, sink o) {
    scale32_add(_mm256_or_si256(nibbles16(b + 8), bit4_of_bits32(b + 4)), f16at(b), f16at(b + 2), o);
}

AI void deq_iq4_nl(const uint8_t *b, sink o) {
    float d = f16at(b);
    scale32(iq4_lookup(nibbles16(b + 2)), d, d, o);
}

/* Q4_K and Q5_K (fifth bits at qh, NULL for Q4_K): per 64 values, 32 bytes of nibbles. */
AI void deq_q45_k(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, sink o) {
    _Alignas(16) uint32_t u[4];
    float d1[8], m1[8];
    memcpy(u, b + 4, 12);
    /* gguf_quant.c's k_scale_min for all eight sub-blocks at once, on little-endian 32-bit words
     * of the 12 bytes: bytes 0-7 become the scales, 8-15 the mins */
    u[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    const uint32_t mins_lo = u[1] & 0x3f3f3f3fu;
    u[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    u[2] = mins_lo;
    u[0] &= 0x3f3f3f3fu;
    const __m128i sm = _mm_load_si128((const __m128i *)u);
    scales8(sm, 0, f16at(b), d1);
    scales8(_mm_unpackhi_epi64(sm, sm), 0, f16at(b + 2), m1);
    const __m256i m15 = bytes(15), one = bytes(1);
    __m256i hb = qh ? ld32(qh) : _mm256_setzero_si256();
    UNROLL
    for (int c = 0; c < 4; c++) {
        __m256i q = ld32(qs + 32 * c);
        __m256i lo = _mm256_and_si256(q, m15), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m15);
        if (qh) { /* bit 2c of byte l for the low nibbles, bit 2c + 1 for the high */
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4));
            hb = _mm256_srli_epi16(hb, 2);
        }
        scale32_sub(lo, d1[2 * c], d1[2 * c], m1[2 * c], m1[2 * c], at(o, 64 * c));
        scale32_sub(hi, d1[2 * c + 1], d1[2 * c + 1], m1[2 * c + 1], m1[2 * c + 1], at(o, 64 * c + 32));
    }
}

AI void deq_q4_k(const uint8_t *b, sink o) { deq_q45_k(b, NULL, b + 16, o); }
AI void deq_q5_k(const uint8_t *b, sink o) { deq_q45_k(b, b + 16, b + 48, o); }

/* Q6_K: per 128 values, ql[l] and ql[l + 32] give the low nibbles of values l + 32 k, qh[l] their
 * top two bits (bits 2k, 2k + 1); code - 32; one int8 scale per 16 values. */
AI void deq_q6_k(const uint8_t *b, sink o) {
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = f16at(b + 208), dl[16];
    scales8(_mm_loadl_epi64((const __m128i *)sc), 1, d, dl);
    scales8(_mm_loadl_epi64((const __m128i *)(sc + 8)), 1, d, dl + 8);
    __m256i q[8];
    q6k_codes(b, q);
    UNROLL
    for (int j = 0; j < 8; j++) scale32(q[j], dl[2 * j], dl[2 * j + 1], at(o, 32 * j));
}

/* Q2_K: per 128 values, bits 2s..2s+1 of byte l are value 32 s + l; a nibble scale and a nibble
 * min per 16 values. */
AI void deq_q2_k(const uint8_t *b, sink o) {
    float d = f16at(b + 80), dmin = f16at(b + 82), dl[16], ml[16];
    const __m128i sc = ld16(b), lo = _mm_and_si128(sc, _mm_set1_epi8(15)),
                  hi = _mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(15));
    scales8(lo, 0, d, dl);
    scales8(_mm_unpackhi_epi64(lo, lo), 0, d, dl + 8);
    scales8(hi, 0, dmin, ml);
    scales8(_mm_unpackhi_epi64(hi, hi), 0, dmin, ml + 8);
    const __m256i m3 = bytes(3);
    UNROLL
    for (int h = 0; h < 2; h++) {
        __m256i q = ld32(b + 16 + 32 * h);
        UNROLL
        for (int s = 0; s < 4; s++) {
            int g = 8 * h + 2 * s;
            scale32_sub(_mm256_and_si256(q, m3), dl[g], dl[g + 1], ml[g], ml[g + 1], at(o, 128 * h + 32 * s));
            q = _mm256_srli_epi16(q, 2);
        }
    }
}

/* Q3_K: Q2_K's code layout, plus bit j / 32 of hmask byte j % 32: code = low - 4 where clear. */
AI void deq_q3_k(const uint8_t *b, sink o) {
    /* gguf_quant.c's q3_scale for all sixteen at once, on little-endian 32-bit words of the 12
     * bytes: byte i of the result is scale i + 32 (low nibble from bytes 0-7, top bits from 8-11) */
    _Alignas(16) uint32_t u[4];
    float dl[16], d = f16at(b + 108);
    memcpy(u, b + 96, 12);
    const uint32_t top = u[2], m2 = 0x03030303u, m4 = 0x0f0f0f0fu;
    u[2] = ((u[0] >> 4) & m4) | ((top >> 4) & m2) << 4;
    u[3] = ((u[1] >> 4) & m4) | ((top >> 6) & m2) << 4;
    u[0] = (u[0] & m4) | (top & m2) << 4;
    u[1] = (u[1] & m4) | ((top >> 2) & m2) << 4;
    const __m128i sc = _mm_sub_epi8(_mm_load_si128((const __m128i *)u), _mm_set1_epi8(32));
    scales8(sc, 1, d, dl);
    scales8(_mm_unpackhi_epi64(sc, sc), 1, d, dl + 8);
    const __m256i m3 = bytes(3), one = bytes(1), four = bytes(4);
    __m256i hm = ld32(b);
    UNROLL
    for (int h = 0; h < 2; h++) {
        __m256i q = ld32(b + 32 + 32 * h);
        UNROLL
        for (int s = 0; s < 4; s++) {
            __m256i high = _mm256_slli_epi16(_mm256_and_si256(hm, one), 2); /* 4 where set */
            __m256i code = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(q, m3), high), four);
            int g = 8 * h + 2 * s;
            scale32(code, dl[g], dl[g + 1], at(o, 128 * h + 32 * s));
            q = _mm256_srli_epi16(q, 2);
            hm = _mm256_srli_epi16(hm, 1);
        }
    }
}

/* IQ4_XS: eight IQ4_NL-like sub-blocks of 32 under one d, each with a 6-bit scale - 32. */
AI void deq_iq4_xs(const uint8_t *b, sink o) {
    float d = f16at(b);
    int sh = b[2] | b[3] << 8;
    UNROLL
    for (int ib = 0; ib < 8; ib++) {
        int ls = (((b[4 + ib / 2] >> (4 * (ib % 2))) & 15) | ((sh >> (2 * ib)) & 3) << 4) - 32;
        float dl = d * (float)ls;
        scale32(iq4_lookup(nibbles16(b + 8 + 16 * ib)), dl, dl, at(o, 32 * ib));
    }
}

AI void deq_block(uint32_t t, const uint8_t *b, sink o) {
    switch (t) {
    case QHX_GGML_Q8_0: deq_q8_0(b, o); break;
    case QHX_GGML_Q4_0: deq_q4_0(b, o); break;
    case QHX_GGML_Q4_1: deq_q4_1(b, o); break;
    case QHX_GGML_Q5_0: deq_q5_0(b, o); break;
    case QHX_GGML_Q5_1: deq_q5_1(b, o); break;
    case QHX_GGML_IQ4_NL: deq_iq4_nl(b, o); break;
    case QHX_GGML_Q2_K: deq_q2_k(b, o); break;
    case QHX_GGML_Q3_K: deq_q3_k(b, o); break;
    case QHX_GGML_Q4_K: deq_q4_k(b, o); break;
    case QHX_GGML_Q5_K: deq_q5_k(b, o); break;
    case QHX_GGML_Q6_K: deq_q6_k(b, o); break;
    default: deq_iq4_xs(b, o); break;
    }
}

/* ---- dots ----------------------------------------------------------------------------------- */

/* gguf_linear.c's reduce8: ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7)). */
AI float reduce8(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* s_i + s_{i+4} */
    __m128 h = _mm_hadd_ps(a, a);                                                    /* a0 + a1, a2 + a3 */
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* A tile of R rows x T tokens (R * T <= 8 accumulators): each block of each row is dequantized
 * once into buf and dotted with the T tokens. Y[(t + j) * ldy + r + i] for i < R, j < T.
 * pf: prefetch the rows ahead (decode, where the weights stream from memory once). */
AI void tile(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t r, int64_t t, int R,
             int T, uint32_t type, int pf) {
    const int B = blk_vals(type), bb = blk_bytes(type);
    const int64_t nblk = w->cols / B, rb = w->row_bytes;
    _Alignas(32) float buf[MV_ROWS][QK_K];
    const uint8_t *p[MV_ROWS];
    const float *xt[MM_TOKENS];
    __m256 acc[MV_ROWS * MM_TOKENS];
    UNROLL
    for (int i = 0; i < R; i++) p[i] = (const uint8_t *)w->data + (r + i) * rb;
    UNROLL
    for (int j = 0; j < T; j++) xt[j] = X + (t + j) * ldx;
    UNROLL
    for (int a = 0; a < R * T; a++) acc[a] = _mm256_setzero_ps();
    const int64_t ahead = pf ? qhx_pf_ahead(R * rb) : 0;
    int64_t next_pf = 0;
    for (int64_t k = 0; k < nblk; k++) {
        if (pf)
            for (; next_pf < (k + 1) * bb; next_pf += 64) QHX_PREFETCH_ROWS(p, R, next_pf + ahead);
        const int64_t c0 = k * B;
        if (T == 1 && B == 32) {
            /* one token, blocks of 32: dequantized straight into the dot (4 adds per row and block,
             * so the R rows' sums overlap; measured 10-30 % faster than through the buffer, which
             * stays faster for the 256-value blocks, whose 32 adds per row and block in a row would
             * wait on each other) */
            UNROLL
            for (int i = 0; i < R; i++) deq_block(type, p[i] + k * bb, (sink){1, NULL, xt[0] + c0, &acc[i]});
            continue;
        }
        UNROLL
        for (int i = 0; i < R; i++) deq_block(type, p[i] + k * bb, (sink){0, buf[i], NULL, NULL});
        for (int v = 0; v < B; v += 8) {
            UNROLL
            for (int j = 0; j < T; j++) {
                __m256 xv = _mm256_loadu_ps(xt[j] + c0 + v);
                UNROLL
                for (int i = 0; i < R; i++)
                    acc[i * T + j] = _mm256_add_ps(acc[i * T + j], _mm256_mul_ps(_mm256_load_ps(buf[i] + v), xv));
            }
        }
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < T; j++) Y[(t + j) * ldy + r + i] = reduce8(acc[i * T + j]);
}

AI void matvec_t(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1, uint32_t type) {
    int64_t r = r0;
    for (; r + MV_ROWS <= r1; r += MV_ROWS) tile(w, x, 0, y, 0, r, 0, MV_ROWS, 1, type, 1);
    for (; r < r1; r++) tile(w, x, 0, y, 0, r, 0, 1, 1, type, 1);
}

/* Per row, the tokens in tiles of 8, then 4, 2, 1: the same arithmetic per (row, token) as the
 * matvec, so Y[t] has matvec(X[t])'s bits (and the reference's). */
AI void matmul_t(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n, int64_t r0,
                 int64_t r1, uint32_t type) {
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = 0;
        for (; t + 8 <= n; t += 8) tile(w, X, ldx, Y, ldy, r, t, 1, 8, type, 0);
        if (t + 4 <= n) tile(w, X, ldx, Y, ldy, r, t, 1, 4, type, 0), t += 4;
        if (t + 2 <= n) tile(w, X, ldx, Y, ldy, r, t, 1, 2, type, 0), t += 2;
        if (t < n) tile(w, X, ldx, Y, ldy, r, t, 1, 1, type, 0);
    }
}

AI void row_t(const qhx_weight *w, int64_t r, float *out, uint32_t type) {
    const int B = blk_vals(type), bb = blk_bytes(type);
    const uint8_t *p = (const uint8_t *)w->data + r * w->row_bytes;
    for (int64_t k = 0; k < w->cols / B; k++) deq_block(type, p + k * bb, (sink){0, out + k * B, NULL, NULL});
}

/* One instance per type with a fast path; `fallback` for the rest. */
#define GGML_TYPES(X)                                                                                           \
    X(QHX_GGML_Q8_0) X(QHX_GGML_Q4_0) X(QHX_GGML_Q4_1) X(QHX_GGML_Q5_0) X(QHX_GGML_Q5_1) X(QHX_GGML_IQ4_NL)     \
    X(QHX_GGML_Q2_K) X(QHX_GGML_Q3_K) X(QHX_GGML_Q4_K) X(QHX_GGML_Q5_K) X(QHX_GGML_Q6_K) X(QHX_GGML_IQ4_XS)

int qhx_ggml_avx2_has(uint32_t type) {
#define CASE(T) case T:
    switch (type) {
    GGML_TYPES(CASE) return 1;
    default: return 0;
    }
#undef CASE
}

/* The activations rounded as llama.cpp rounds them for this type (qhx_ggml_round_x, the
 * reference's first step): n rows of cols values into a new buffer, or NULL. */
static float *rounded(const qhx_weight *w, const float *X, int64_t ldx, int64_t n) {
    float *xr = qhx_malloc((size_t)(n * w->cols) * sizeof *xr);
    for (int64_t t = 0; xr && t < n; t++) qhx_ggml_round_x(w->gtype, X + t * ldx, w->cols, xr + t * w->cols);
    return xr;
}

void qhx_k_matvec_ggml_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    if (!qhx_ggml_avx2_has(w->gtype)) {
        qhx_k_matvec_ggml_ref(w, x, y, r0, r1);
        return;
    }
    float *xr = rounded(w, x, w->cols, 1);
    if (!xr) { /* no memory to round into: NaN rather than other numbers */
        for (int64_t r = r0; r < r1; r++) y[r] = NAN;
        return;
    }
#define CASE(T) case T: matvec_t(w, xr, y, r0, r1, T); break;
    switch (w->gtype) {
    GGML_TYPES(CASE)
    default: break;
    }
#undef CASE
    qhx_free(xr);
}

void qhx_k_matmul_ggml_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                            int64_t r0, int64_t r1) {
    if (!qhx_ggml_avx2_has(w->gtype)) {
        qhx_k_matmul_ggml_ref(w, X, ldx, Y, ldy, n, r0, r1);
        return;
    }
    float *xr = rounded(w, X, ldx, n);
    if (!xr) { /* no memory: NaN rather than other numbers */
        for (int64_t t = 0; t < n; t++)
            for (int64_t r = r0; r < r1; r++) Y[t * ldy + r] = NAN;
        return;
    }
#define CASE(T) case T: matmul_t(w, xr, w->cols, Y, ldy, n, r0, r1, T); break;
    switch (w->gtype) {
    GGML_TYPES(CASE)
    default: break;
    }
#undef CASE
    qhx_free(xr);
}

void qhx_k_row_ggml_avx2(const qhx_weight *w, int64_t r, float *out) {
#define CASE(T) case T: row_t(w, r, out, T); return;
    switch (w->gtype) {
    GGML_TYPES(CASE)
    default: qhx_k_row_ggml_ref(w, r, out); return;
    }
#undef CASE
}
