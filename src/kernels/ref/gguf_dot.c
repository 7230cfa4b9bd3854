/* kernels/ref/gguf_dot.c: the integer form of the GGUF matvec and matmul (QHX_W_GGML) for the
 * types of the files people run: Q8_0, Q5_0 (activations in Q8_0 form) and Q4_K, Q5_K, Q6_K
 * (activations in Q8_K form). Q4_0 stays on the f32 form: with this arithmetic the Q4_0 test
 * file's greedy parity with llama.cpp flips one step (llama.cpp's margin 0.076) that the f32
 * form keeps. llama.cpp's CPU backend multiplies the weight codes with the
 * activations' int8 codes and applies the float scales once per block; this does the same:
 *
 *   activations: int8 codes and scales on exactly qhx_ggml_round_x's grid (the rounded value is
 *     scale * code), plus, for Q8_K, the sum of each 16 codes;
 *   32-value blocks: P_j = sum of w_i * a_i over the block's values 4j .. 4j + 3 (j < 8, exact
 *     integers); lane j: acc_j = fma(dw * da, (float)P_j, acc_j), one rounding, blocks in order;
 *     the result is ((acc_0 + acc_4) + (acc_2 + acc_6)) + ((acc_1 + acc_5) + (acc_3 + acc_7)):
 *     ggml's own AVX2 arithmetic for these types, so that the two round the next layer's
 *     activations alike as often as can be;
 *   256-value blocks: T = the block's exact integer sum of sub-scale * code * activation code
 *     (Q6_K's codes less 32), and for Q4_K / Q5_K M = sum of min * (its 32 activation codes' sum,
 *     from the per-16 sums); v = (d * da) * (float)T, less (dmin * da) * (float)M; sum = sum + v
 *     in block order from 0.
 *
 * Every other float operation is rounded on its own (this file builds with -ffp-contract=off), so the
 * AVX2 kernels (kernels/x86/ggml_i8_avx2.c) give these bits exactly. The values are those of
 * gguf_linear.c's f32 path up to float rounding: the same rounded activations and weights, only
 * where the products are rounded and the order of the sums differ (the bound is in
 * tests/test_kernels_ggml.c). */
#include "core/alloc.h"
#include "core/fp16.h"
#include "kernels/gguf_quant.h"
#include "kernels/quant.h"

#include <math.h>
#include <string.h>

#define QK_K QHX_GGML_QK_K

int qhx_ggml_dot_has(uint32_t type) {
    switch (type) {
    case QHX_GGML_Q8_0: case QHX_GGML_Q5_0:
    case QHX_GGML_Q4_K: case QHX_GGML_Q5_K: case QHX_GGML_Q6_K: return 1;
    default: return 0;
    }
}

static int is_k(uint32_t type) { return qhx_ggml_type_block(type) == QK_K; }

size_t qhx_ggml_xq_size(int64_t n) {
    return (size_t)(n / 32) * sizeof(float) + (size_t)(n / 16) * sizeof(int16_t) + (size_t)n;
}

qhx_ggml_xq qhx_ggml_xq_at(void *buf, int64_t n) {
    qhx_ggml_xq q;
    q.d = buf;
    q.bsum = (int16_t *)(q.d + n / 32);
    q.q = (int8_t *)(q.bsum + n / 16);
    return q;
}

/* Q8_0: per 32 values d = f16(max|x| / 127), code = round-half-even(x * 127 / max|x|). */
static void quant_q8_0(const float *x, int64_t n, qhx_ggml_xq q) {
    for (int64_t b = 0; b < n; b += 32) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b + i]));
        q.d[b / 32] = qhx_f16_to_f32(qhx_f32_to_f16(amax / 127.0f));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int i = 0; i < 32; i++) q.q[b + i] = (int8_t)rintf(x[b + i] * id);
    }
}

/* Q8_K: per 256 values iscale = -127 / (the value of largest magnitude, the first such), code =
 * min(127, round-half-even(iscale * x)), d = 1 / iscale; zero codes and d where all are zero. */
static void quant_q8_k(const float *x, int64_t n, qhx_ggml_xq q) {
    for (int64_t b = 0; b < n; b += QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < QK_K; i++)
            if (fabsf(x[b + i]) > amax) amax = fabsf(x[b + i]), max = x[b + i];
        const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
        q.d[b / QK_K] = amax != 0.0f ? 1.0f / iscale : 0.0f;
        for (int i = 0; i < QK_K; i++) q.q[b + i] = (int8_t)fminf(127.0f, rintf(iscale * x[b + i]));
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += q.q[b + 16 * g + i];
            q.bsum[(b + 16 * g) / 16] = (int16_t)s;
        }
    }
}

void qhx_ggml_quant_x(uint32_t type, const float *x, int64_t n, qhx_ggml_xq q) {
    if (is_k(type))
        quant_q8_k(x, n, q);
    else
        quant_q8_0(x, n, q);
}

static float f16_at(const uint8_t *p) { return qhx_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* The 32 codes of a 32-value block (Q8_0 as stored, Q5_0 less 16), in value order. */
static void codes32(uint32_t type, const uint8_t *b, int8_t *w) {
    for (int i = 0; i < 16; i++) {
        if (type == QHX_GGML_Q8_0) {
            w[i] = (int8_t)b[2 + i];
            w[i + 16] = (int8_t)b[18 + i];
        } else { /* Q5_0: the fifth bit of value j is bit j of the 32-bit word at b + 2 */
            const uint8_t *qh = b + 2, *qs = b + 6;
            w[i] = (int8_t)(((qs[i] & 15) | ((qh[i >> 3] >> (i & 7)) & 1) << 4) - 16);
            w[i + 16] = (int8_t)(((qs[i] >> 4) | ((qh[(i + 16) >> 3] >> ((i + 16) & 7)) & 1) << 4) - 16);
        }
    }
}

/* ggml's AVX2 horizontal sum: the halves added, then the pairs two apart, then the two left. */
static float hsum8(const float *s) {
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

static float dot32(uint32_t type, const uint8_t *row, int64_t nblk, qhx_ggml_xq x) {
    const int bb = qhx_ggml_type_block_bytes(type);
    float acc[8] = {0};
    int8_t w[32];
    for (int64_t k = 0; k < nblk; k++) {
        const uint8_t *b = row + k * bb;
        const int8_t *a = x.q + 32 * k;
        codes32(type, b, w);
        const float D = f16_at(b) * x.d[k];
        for (int j = 0; j < 8; j++) {
            int p = 0;
            for (int i = 4 * j; i < 4 * j + 4; i++) p += w[i] * a[i];
            acc[j] = fmaf(D, (float)p, acc[j]);
        }
    }
    return hsum8(acc);
}

/* Q4_K / Q5_K's six-bit scale and min of sub-block i (gguf_quant.c's k_scale_min). */
static void k_scale_min(const uint8_t *s, int i, int *sc, int *m) {
    if (i < 4) {
        *sc = s[i] & 63;
        *m = s[i + 4] & 63;
    } else {
        *sc = (s[i + 4] & 15) | (s[i - 4] >> 6) << 4;
        *m = (s[i + 4] >> 4) | (s[i] >> 6) << 4;
    }
}

/* Q4_K (qh NULL) / Q5_K: T and M of one block and 256 activation codes a with their 16 sums. */
static void tm_q45_k(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, const int8_t *a, const int16_t *bs,
                     int *T, int *M) {
    int t = 0, m = 0;
    for (int s = 0; s < 8; s++) {
        int sc, mn, p = 0;
        k_scale_min(b + 4, s, &sc, &mn);
        for (int l = 0; l < 32; l++) {
            int q = (qs[(s / 2) * 32 + l] >> ((s & 1) * 4)) & 15;
            if (qh) q |= ((qh[l] >> s) & 1) << 4;
            p += q * a[32 * s + l];
        }
        t += sc * p;
        m += mn * (bs[2 * s] + bs[2 * s + 1]);
    }
    *T = t;
    *M = m;
}

/* Q6_K: T of one block (codes less 32, one int8 scale per 16 values). */
static int t_q6_k(const uint8_t *b, const int8_t *a) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    int t = 0;
    for (int g = 0; g < 16; g++) {
        int p = 0;
        for (int j = 16 * g; j < 16 * g + 16; j++) {
            int half = j / 128, k = (j % 128) / 32, l = j % 32;
            int lo = (ql[half * 64 + l + (k & 1) * 32] >> ((k >> 1) * 4)) & 15;
            int hi = (qh[half * 32 + l] >> (2 * k)) & 3;
            p += ((lo | hi << 4) - 32) * a[j];
        }
        t += sc[g] * p;
    }
    return t;
}

static float dot_k(uint32_t type, const uint8_t *row, int64_t nblk, qhx_ggml_xq x) {
    const int bb = qhx_ggml_type_block_bytes(type);
    float sum = 0.0f;
    for (int64_t k = 0; k < nblk; k++) {
        const uint8_t *b = row + k * bb;
        const int8_t *a = x.q + QK_K * k;
        const float da = x.d[k];
        int T, M;
        float v;
        if (type == QHX_GGML_Q6_K) {
            v = (f16_at(b + 208) * da) * (float)t_q6_k(b, a);
        } else {
            tm_q45_k(b, type == QHX_GGML_Q5_K ? b + 16 : NULL, b + (type == QHX_GGML_Q5_K ? 48 : 16), a,
                     x.bsum + 16 * k, &T, &M);
            v = (f16_at(b) * da) * (float)T - (f16_at(b + 2) * da) * (float)M;
        }
        sum = sum + v;
    }
    return sum;
}

float qhx_ggml_dot_row(uint32_t type, const uint8_t *row, int64_t cols, qhx_ggml_xq x) {
    const int64_t nblk = cols / qhx_ggml_type_block(type);
    return is_k(type) ? dot_k(type, row, nblk, x) : dot32(type, row, nblk, x);
}

static const uint8_t *row_of(const qhx_weight *w, int64_t r) {
    return (const uint8_t *)w->data + r * w->row_bytes;
}

void qhx_k_matvec_ggml_dot_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    qhx_k_matmul_ggml_dot_ref(w, x, w->cols, y, 0, 1, r0, r1);
}

void qhx_k_matmul_ggml_dot_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                               int64_t r0, int64_t r1) {
    if (!qhx_ggml_dot_has(w->gtype)) {
        qhx_k_matmul_ggml_ref(w, X, ldx, Y, ldy, n, r0, r1);
        return;
    }
    const size_t per = qhx_ggml_xq_size(w->cols);
    uint8_t *buf = qhx_malloc(per * (size_t)n);
    if (!buf) { /* no memory to quantize into: NaN rather than other numbers */
        for (int64_t t = 0; t < n; t++)
            for (int64_t r = r0; r < r1; r++) Y[t * ldy + r] = NAN;
        return;
    }
    for (int64_t t = 0; t < n; t++)
        qhx_ggml_quant_x(w->gtype, X + t * ldx, w->cols, qhx_ggml_xq_at(buf + per * (size_t)t, w->cols));
    for (int64_t r = r0; r < r1; r++)
        for (int64_t t = 0; t < n; t++)
            Y[t * ldy + r] = qhx_ggml_dot_row(w->gtype, row_of(w, r), w->cols, qhx_ggml_xq_at(buf + per * (size_t)t, w->cols));
    qhx_free(buf);
}
