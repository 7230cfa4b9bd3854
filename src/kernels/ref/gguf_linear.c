/* kernels/ref/gguf_linear.c: matvec, matmul and row lookup over a GGUF tensor's ggml blocks as the
 * file stores them (QHX_W_GGML), f32 activations. Each block is dequantized with the reference of
 * kernels/gguf_quant.h (bit-identical to ggml's values) and dotted in the 8-lane order of
 * kernels/ref/linear_ref.c (lane j takes columns j, j + 8, ...; blocks hold a multiple of 8 values,
 * so the lanes run on across blocks), so a ggml row gives the bits its dequantized f32 row gives
 * through the f32 reference. */
#include "core/alloc.h"
#include "kernels/gguf_quant.h"
#include "kernels/quant.h"

#include <math.h>
#include <string.h>

#define LANES 8

static inline float reduce8(const float *s) {
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
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
    for (int64_t r = r0; r < r1; r++) y[r] = dot_ggml(w, row_of(w, r), x);
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
    float *deq = qhx_malloc((size_t)w->cols * sizeof *deq);
    for (int64_t r = r0; r < r1; r++) {
        if (!deq) {
            for (int64_t t = 0; t < n; t++) Y[t * ldy + r] = dot_ggml(w, row_of(w, r), X + t * ldx);
            continue;
        }
        qhx_gguf_dequant_row(w->gtype, row_of(w, r), w->cols, deq);
        for (int64_t t = 0; t < n; t++) Y[t * ldy + r] = dot_f32(deq, X + t * ldx, w->cols);
    }
    qhx_free(deq);
}
