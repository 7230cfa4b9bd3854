/* kernels/x86/ggml_i8_avx2.c: the integer GGML matvec (decode) and matmul (prefill) with AVX2 for
 * Q8_0, Q5_0, Q4_K, Q5_K and Q6_K: the weight codes times the activations' int8 codes with
 * vpmaddubsw / vpmaddwd, the float scales once per block, as llama.cpp's CPU backend does. Bit for
 * bit kernels/ref/gguf_dot.c (its header has the arithmetic and the float order): the integer sums
 * are exact in any order, and the float operations are the reference's, one at a time (built with
 * -ffp-contract=off: the only fused multiply-adds are the explicit ones of the 32-value blocks). Other types run the f32 kernels of ggml_avx2.c.
 *
 * vpmaddubsw takes one unsigned operand: the Q4_K / Q5_K codes are unsigned already; signed codes
 * (Q8_0, Q5_0 less 16, Q6_K less 32) go in as |w| with the activation code's sign flipped where w
 * is negative, so each product is w * a exactly. No pair of products saturates 16 bits: |w| <= 128
 * and |a| <= 127 give at most 2 * 128 * 127 = 32512. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/ggml_type.h"
#include "kernels/quant.h"
#include "kernels/x86/ggml_blocks_avx2.h"
#include "kernels/x86/prefetch_x86.h"
#include "kernels/x86/x86.h"

#define MV_ROWS 4   /* 32-value types' matvec rows per tile: independent lane chains */
#define MM_TOKENS 8 /* matmul tokens per tile */

/* 8 int32 lanes, lane j = sum of w_i * a_i over i = 4j .. 4j + 3 (signed w and a). */
AI __m256i dot_s8(__m256i w, __m256i a) {
    __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

AI int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* gguf_dot.c's hsum8: ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)). */
AI float hsum8(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_add_ss(a, _mm_movehdup_ps(a)));
}

/* ---- 32-value blocks ------------------------------------------------------------------------ */

/* The block's 32 signed codes in value order. */
AI __m256i codes32(uint32_t t, const uint8_t *b) {
    switch (t) {
    case QHX_GGML_Q8_0: return ld32(b + 2);
    default: return _mm256_sub_epi8(_mm256_or_si256(nibbles16(b + 6), bit4_of_bits32(b + 2)), bytes(16)); /* Q5_0 */
    }
}

/* R rows x T tokens: lane j of acc takes fma(dw * da, (float)P_j, acc_j) per block, in order. */
AI void tile32(const qhx_weight *w, const qhx_ggml_xq *xq, float *Y, int64_t ldy, int64_t r, int64_t t, int R, int T,
               uint32_t type, int pf) {
    const int bb = blk_bytes(type);
    const int64_t nblk = w->cols / 32, rb = w->row_bytes;
    const uint8_t *p[MV_ROWS];
    __m256 acc[MV_ROWS * MM_TOKENS];
    UNROLL
    for (int i = 0; i < R; i++) p[i] = (const uint8_t *)w->data + (r + i) * rb;
    UNROLL
    for (int a = 0; a < R * T; a++) acc[a] = _mm256_setzero_ps();
    const int64_t ahead = pf ? qhx_pf_ahead(R * rb) : 0;
    int64_t next_pf = 0;
    for (int64_t k = 0; k < nblk; k++) {
        if (pf)
            for (; next_pf < (k + 1) * bb; next_pf += 64) QHX_PREFETCH_ROWS(p, R, next_pf + ahead);
        __m256i wq[MV_ROWS];
        float dw[MV_ROWS];
        UNROLL
        for (int i = 0; i < R; i++) {
            wq[i] = codes32(type, p[i] + k * bb);
            dw[i] = f16at(p[i] + k * bb);
        }
        UNROLL
        for (int j = 0; j < T; j++) {
            const __m256i a = ld32(xq[t + j].q + 32 * k);
            const float da = xq[t + j].d[k];
            UNROLL
            for (int i = 0; i < R; i++) {
                __m256 s = _mm256_cvtepi32_ps(dot_s8(wq[i], a));
                acc[i * T + j] = _mm256_fmadd_ps(_mm256_set1_ps(dw[i] * da), s, acc[i * T + j]);
            }
        }
    }
    UNROLL
    for (int i = 0; i < R; i++)
        UNROLL
        for (int j = 0; j < T; j++) Y[(t + j) * ldy + r + i] = hsum8(acc[i * T + j]);
}

/* ---- 256-value blocks ----------------------------------------------------------------------- */

/* One block's codes per 32 values (unsigned for Q4_K / Q5_K, signed for Q6_K), the int16
 * sub-scales that multiply each 32 (per 16 for Q6_K: the low half's, then the high half's), the
 * mins as int16 (Q4_K / Q5_K) and the f16 scales. */
typedef struct kblk {
    __m256i q[8], sc[8];
    __m128i mins;
    float d, dmin;
} kblk;

AI void dec_q45_k(const uint8_t *b, int q5, kblk *o) {
    _Alignas(16) uint32_t u[4];
    memcpy(u, b + 4, 12);
    /* gguf_quant.c's k_scale_min for all eight at once: bytes 0-7 the scales, 8-15 the mins */
    u[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    const uint32_t mins_lo = u[1] & 0x3f3f3f3fu;
    u[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    u[2] = mins_lo;
    u[0] &= 0x3f3f3f3fu;
    const uint8_t *s8 = (const uint8_t *)u;
    o->mins = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(s8 + 8)));
    o->d = f16at(b);
    o->dmin = f16at(b + 2);
    const uint8_t *qs = b + (q5 ? 48 : 16);
    const __m256i m15 = bytes(15), one = bytes(1);
    __m256i hb = q5 ? ld32(b + 16) : _mm256_setzero_si256();
    UNROLL
    for (int c = 0; c < 4; c++) {
        __m256i q = ld32(qs + 32 * c);
        __m256i lo = _mm256_and_si256(q, m15), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m15);
        if (q5) { /* bit 2c of byte l for the low nibbles, bit 2c + 1 for the high */
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4));
            hb = _mm256_srli_epi16(hb, 2);
        }
        o->q[2 * c] = lo;
        o->q[2 * c + 1] = hi;
        o->sc[2 * c] = _mm256_set1_epi16(s8[2 * c]);
        o->sc[2 * c + 1] = _mm256_set1_epi16(s8[2 * c + 1]);
    }
}

AI void dec_q6_k(const uint8_t *b, kblk *o) {
    const int8_t *sc = (const int8_t *)(b + 192);
    o->d = f16at(b + 208);
    o->dmin = 0.0f;
    o->mins = _mm_setzero_si128();
    q6k_codes(b, o->q);
    UNROLL
    for (int j = 0; j < 8; j++) o->sc[j] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * j + 1]), _mm_set1_epi16(sc[2 * j]));
}

/* T of one block and one token's 256 codes: the exact integer sum of sub-scale * code * a. */
AI int ksum(uint32_t type, const kblk *w, const int8_t *a) {
    __m256i s = _mm256_setzero_si256();
    UNROLL
    for (int c = 0; c < 8; c++) {
        const __m256i av = ld32(a + 32 * c);
        __m256i p = type == QHX_GGML_Q6_K ? _mm256_maddubs_epi16(_mm256_abs_epi8(w->q[c]), _mm256_sign_epi8(av, w->q[c]))
                                          : _mm256_maddubs_epi16(w->q[c], av);
        s = _mm256_add_epi32(s, _mm256_madd_epi16(p, w->sc[c]));
    }
    return hsum_i32(s);
}

/* M of one block and one token: sum of min_s * (bsum_2s + bsum_2s+1). */
AI int kmin(const kblk *w, const int16_t *bs) {
    __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)bs), _mm_loadu_si128((const __m128i *)(bs + 8)));
    __m128i m = _mm_madd_epi16(pairs, w->mins);
    m = _mm_add_epi32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_add_epi32(m, _mm_shuffle_epi32(m, 0xb1));
    return _mm_cvtsi128_si32(m);
}

/* One row x T tokens: sum = sum + v per block, v = (d * da) * (float)T [- (dmin * da) * (float)M]. */
AI void tile_k(const qhx_weight *w, const qhx_ggml_xq *xq, float *Y, int64_t ldy, int64_t r, int64_t t, int T,
               uint32_t type, int pf) {
    const int bb = blk_bytes(type);
    const int64_t nblk = w->cols / QK_K;
    const uint8_t *p = (const uint8_t *)w->data + r * w->row_bytes;
    float sum[MM_TOKENS];
    UNROLL
    for (int j = 0; j < T; j++) sum[j] = 0.0f;
    const int64_t ahead = pf ? qhx_pf_ahead(w->row_bytes) : 0;
    for (int64_t k = 0; k < nblk; k++) {
        const uint8_t *b = p + k * bb;
        if (pf)
            for (int64_t o = 0; o < bb; o += 64) QHX_PREFETCH(b + o + ahead);
        kblk blk;
        if (type == QHX_GGML_Q6_K)
            dec_q6_k(b, &blk);
        else
            dec_q45_k(b, type == QHX_GGML_Q5_K, &blk);
        UNROLL
        for (int j = 0; j < T; j++) {
            const qhx_ggml_xq *x = &xq[t + j];
            const float da = x->d[k];
            const int T_ = ksum(type, &blk, x->q + QK_K * k);
            float v;
            if (type == QHX_GGML_Q6_K)
                v = (blk.d * da) * (float)T_;
            else
                v = (blk.d * da) * (float)T_ - (blk.dmin * da) * (float)kmin(&blk, x->bsum + 16 * k);
            sum[j] = sum[j] + v;
        }
    }
    UNROLL
    for (int j = 0; j < T; j++) Y[(t + j) * ldy + r] = sum[j];
}

/* ---- row and token tiling ----------------------------------------------------------------- */

AI void tile(const qhx_weight *w, const qhx_ggml_xq *xq, float *Y, int64_t ldy, int64_t r, int64_t t, int R, int T,
             uint32_t type, int pf) {
    if (blk_vals(type) == QK_K)
        for (int i = 0; i < R; i++) tile_k(w, xq, Y, ldy, r + i, t, T, type, pf);
    else
        tile32(w, xq, Y, ldy, r, t, R, T, type, pf);
}

AI void matmul_t(const qhx_weight *w, const qhx_ggml_xq *xq, float *Y, int64_t ldy, int64_t n, int64_t r0, int64_t r1,
                 uint32_t type) {
    if (n == 1) { /* decode: the rows stream from memory once */
        int64_t r = r0;
        if (blk_vals(type) == 32)
            for (; r + MV_ROWS <= r1; r += MV_ROWS) tile(w, xq, Y, ldy, r, 0, MV_ROWS, 1, type, 1);
        for (; r < r1; r++) tile(w, xq, Y, ldy, r, 0, 1, 1, type, 1);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = 0;
        for (; t + 8 <= n; t += 8) tile(w, xq, Y, ldy, r, t, 1, 8, type, 0);
        if (t + 4 <= n) tile(w, xq, Y, ldy, r, t, 1, 4, type, 0), t += 4;
        if (t + 2 <= n) tile(w, xq, Y, ldy, r, t, 1, 2, type, 0), t += 2;
        if (t < n) tile(w, xq, Y, ldy, r, t, 1, 1, type, 0);
    }
}

void qhx_k_matmul_ggml_i8_avx2(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                               int64_t r0, int64_t r1) {
    if (!qhx_ggml_dot_has(w->gtype)) {
        qhx_k_matmul_ggml_avx2(w, X, ldx, Y, ldy, n, r0, r1);
        return;
    }
    const size_t per = qhx_ggml_xq_size(w->cols);
    uint8_t *buf = qhx_malloc(per * (size_t)n + (size_t)n * sizeof(qhx_ggml_xq));
    if (!buf) { /* no memory to quantize into: NaN rather than other numbers */
        for (int64_t t = 0; t < n; t++)
            for (int64_t r = r0; r < r1; r++) Y[t * ldy + r] = NAN;
        return;
    }
    qhx_ggml_xq *xq = (qhx_ggml_xq *)buf; /* the n descriptors first, then each token's buffer */
    uint8_t *data = buf + (size_t)n * sizeof(qhx_ggml_xq);
    for (int64_t t = 0; t < n; t++) {
        xq[t] = qhx_ggml_xq_at(data + per * (size_t)t, w->cols);
        qhx_ggml_quant_x(w->gtype, X + t * ldx, w->cols, xq[t]);
    }
    switch (w->gtype) {
    case QHX_GGML_Q8_0: matmul_t(w, xq, Y, ldy, n, r0, r1, QHX_GGML_Q8_0); break;
    case QHX_GGML_Q5_0: matmul_t(w, xq, Y, ldy, n, r0, r1, QHX_GGML_Q5_0); break;
    case QHX_GGML_Q4_K: matmul_t(w, xq, Y, ldy, n, r0, r1, QHX_GGML_Q4_K); break;
    case QHX_GGML_Q5_K: matmul_t(w, xq, Y, ldy, n, r0, r1, QHX_GGML_Q5_K); break;
    default: matmul_t(w, xq, Y, ldy, n, r0, r1, QHX_GGML_Q6_K); break;
    }
    qhx_free(buf);
}

void qhx_k_matvec_ggml_i8_avx2(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    if (!qhx_ggml_dot_has(w->gtype)) {
        qhx_k_matvec_ggml_avx2(w, x, y, r0, r1);
        return;
    }
    qhx_k_matmul_ggml_i8_avx2(w, x, w->cols, y, 0, 1, r0, r1);
}
