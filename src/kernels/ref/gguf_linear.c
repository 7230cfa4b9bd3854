/* kernels/ref/gguf_linear.c: matvec, matmul and row lookup over a GGUF tensor's ggml blocks as the
 * file stores them (QHX_W_GGML). llama.cpp's CPU backend multiplies a quantized weight with its
 * activations rounded to the type's "vec_dot" format (Q8_0 or Q8_1 per 32 values for the 32-value
 * types, Q8_K per 256 for the K-quants and IQ4_XS), and the tiny models' greedy choices are as
 * close as that rounding (0.1-0.2 in the logits, where the f32 product differs): so the
 * activations are rounded onto exactly that grid first (qhx_ggml_round_x), and only the order of
 * the float sums differs from llama.cpp's. Each weight block is dequantized with the reference of
 * kernels/gguf_quant.h (bit-identical to ggml's values) and dotted with the rounded activations
 * in the 8-lane order of kernels/ref/linear_ref.c (lane j takes columns j, j + 8, ...; blocks
 * hold a multiple of 8 values, so the lanes run on across blocks). */
#include "core/alloc.h"
#include "core/fp16.h"
#include "kernels/gguf_quant.h"
#include "kernels/quant.h"

#include <math.h>
#include <string.h>

#define LANES 8

static inline float reduce8(const float *s) {
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* ---- the activations as llama.cpp rounds them -------------------------------------------- */

/* Q8_0 / Q8_1 (ggml's x86 quantize_row_q8_0): per 32 values d = max|x| / 127 stored as f16,
 * q = round-half-even(x * (127 / max|x|)); the values are f16(d) * q. */
static void round_q8_0(const float *x, int64_t n, float *out) {
    for (int64_t b = 0; b < n; b += 32) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b + i]));
        const float d = qhx_f16_to_f32(qhx_f32_to_f16(amax / 127.0f));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int i = 0; i < 32; i++) out[b + i] = d * rintf(x[b + i] * id);
    }
}

/* Q8_K (ggml's quantize_row_q8_K_ref): per 256 values, with max the value of largest magnitude
 * (the first such), iscale = -127 / max, q = min(127, round-half-even(iscale * x)), d = 1 / iscale
 * in f32; the values are d * q. */
static void round_q8_k(const float *x, int64_t n, float *out) {
    for (int64_t b = 0; b < n; b += QHX_GGML_QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < QHX_GGML_QK_K; i++)
            if (fabsf(x[b + i]) > amax) amax = fabsf(x[b + i]), max = x[b + i];
        if (amax == 0.0f) {
            memset(out + b, 0, QHX_GGML_QK_K * sizeof *out);
            continue;
        }
        const float iscale = -127.0f / max, d = 1.0f / iscale;
        for (int i = 0; i < QHX_GGML_QK_K; i++) out[b + i] = d * fminf(127.0f, rintf(iscale * x[b + i]));
    }
}

void qhx_ggml_round_x(uint32_t type, const float *x, int64_t n, float *out) {
    switch (type) {
    case QHX_GGML_Q2_K:
    case QHX_GGML_Q3_K:
    case QHX_GGML_Q4_K:
    case QHX_GGML_Q5_K:
    case QHX_GGML_Q6_K:
    case QHX_GGML_IQ4_XS: round_q8_k(x, n, out); break;
    case QHX_GGML_Q8_0:
    case QHX_GGML_Q4_0:
    case QHX_GGML_Q4_1:
    case QHX_GGML_Q5_0:
    case QHX_GGML_Q5_1:
    case QHX_GGML_IQ4_NL: round_q8_0(x, n, out); break;
    case QHX_GGML_F16: /* llama.cpp's F16 vec_dot type (such tensors bind as QHX_W_F16 at load) */
        for (int64_t i = 0; i < n; i++) out[i] = qhx_f16_to_f32(qhx_f32_to_f16(x[i]));
        break;
    case QHX_GGML_BF16:
        for (int64_t i = 0; i < n; i++) out[i] = qhx_bf16_to_f32(qhx_f32_to_bf16(x[i]));
        break;
    default: memcpy(out, x, (size_t)n * sizeof *out); break; /* F32 */
    }
}

static const uint8_t *row_of(const qhx_weight *w, int64_t r) {
    return (const uint8_t *)w->data + r * w->row_bytes;
}

/* dot of one ggml row (cols values) and x, a block at a time (8 values at a time for the
 * one-value blocks of F32, F16 and BF16, whose rows may end in fewer) */
static float dot_ggml(const qhx_weight *w, const uint8_t *row, const float *x) {
    const int64_t B = qhx_ggml_type_block(w->gtype), bb = qhx_ggml_type_block_bytes(w->gtype);
    const int64_t step = B < LANES ? LANES : B;
    float blk[QHX_GGML_QK_K], s[LANES] = {0};
    for (int64_t c0 = 0; c0 < w->cols; c0 += step) {
        const int64_t m = w->cols - c0 < step ? w->cols - c0 : step;
        qhx_gguf_dequant_row(w->gtype, row + (c0 / B) * bb, m, blk);
        for (int64_t c = 0; c < m; c++) s[c % LANES] += blk[c] * x[c0 + c];
    }
    return reduce8(s);
}

void qhx_k_matvec_ggml_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    float *xr = qhx_malloc((size_t)w->cols * sizeof *xr);
    if (!xr) { /* no memory to round into: NaN rather than other numbers */
        for (int64_t r = r0; r < r1; r++) y[r] = NAN;
        return;
    }
    qhx_ggml_round_x(w->gtype, x, w->cols, xr);
    for (int64_t r = r0; r < r1; r++) y[r] = dot_ggml(w, row_of(w, r), xr);
    qhx_free(xr);
}

void qhx_k_row_ggml_ref(const qhx_weight *w, int64_t r, float *out) {
    qhx_gguf_dequant_row(w->gtype, row_of(w, r), w->cols, out);
}

/* dot of an f32 row and x in the lane order above */
static float dot_f32(const float *a, const float *x, int64_t n) {
    float s[LANES] = {0};
    for (int64_t c = 0; c < n; c++) s[c % LANES] += a[c] * x[c];
    return reduce8(s);
}

/* Each row is dequantized once and then dotted with every token: the same products in the same
 * order as the matvec. Without memory for the row the matvec runs per token. */
void qhx_k_matmul_ggml_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                           int64_t r0, int64_t r1) {
    float *deq = qhx_malloc((size_t)w->cols * sizeof *deq), *xr = qhx_malloc((size_t)(n * w->cols) * sizeof *xr);
    if (!deq || !xr) { /* no memory: NaN rather than other numbers */
        for (int64_t t = 0; t < n; t++)
            for (int64_t r = r0; r < r1; r++) Y[t * ldy + r] = NAN;
    } else {
        for (int64_t t = 0; t < n; t++) qhx_ggml_round_x(w->gtype, X + t * ldx, w->cols, xr + t * w->cols);
        for (int64_t r = r0; r < r1; r++) {
            qhx_gguf_dequant_row(w->gtype, row_of(w, r), w->cols, deq);
            for (int64_t t = 0; t < n; t++) Y[t * ldy + r] = dot_f32(deq, xr + t * w->cols, w->cols);
        }
    }
    qhx_free(deq);
    qhx_free(xr);
}
