/* kernels/ref/linear_ref.c: matvec, matmul and row lookup for F32, F16 and BF16 weights, f32
 * accumulation. The dot product keeps 8 partial sums (lane j takes columns j, j+8, ...) and adds
 * them pairwise at the end: a fixed order, so matvec, matmul and every row split agree bit for
 * bit, and the shape SIMD variants naturally take (they are compared with a tolerance anyway). */
#include "core/fp16.h"
#include "kernels/ref.h"

#define LANES 8

static inline float reduce8(const float *s) {
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* dot of an f32 row w (n,) and x (n,) */
static float dot_f32(const float *w, const float *x, int64_t n) {
    float s[LANES] = {0};
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int j = 0; j < LANES; j++) s[j] += w[c + j] * x[c + j];
    for (int j = 0; c < n; c++, j++) s[j] += w[c] * x[c];
    return reduce8(s);
}

/* dot of an f16 row w (n,) and x (n,) */
static float dot_f16(const uint16_t *w, const float *x, int64_t n) {
    float s[LANES] = {0};
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int j = 0; j < LANES; j++) s[j] += qhx_f16_to_f32(w[c + j]) * x[c + j];
    for (int j = 0; c < n; c++, j++) s[j] += qhx_f16_to_f32(w[c]) * x[c];
    return reduce8(s);
}

/* dot of a bf16 row w (n,) and x (n,) */
static float dot_bf16(const uint16_t *w, const float *x, int64_t n) {
    float s[LANES] = {0};
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int j = 0; j < LANES; j++) s[j] += qhx_bf16_to_f32(w[c + j]) * x[c + j];
    for (int j = 0; c < n; c++, j++) s[j] += qhx_bf16_to_f32(w[c]) * x[c];
    return reduce8(s);
}

/* ---- matvec: W (rows, cols) @ x (cols,) -> y (rows,) ---------------------------------------- */

void qhx_k_matvec_f32_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    const float *W = (const float *)w->data; /* (rows, cols) */
    for (int64_t r = r0; r < r1; r++) y[r] = dot_f32(W + r * w->cols, x, w->cols);
}

void qhx_k_matvec_f16_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    const uint16_t *W = (const uint16_t *)w->data; /* (rows, cols) */
    for (int64_t r = r0; r < r1; r++) y[r] = dot_f16(W + r * w->cols, x, w->cols);
}

void qhx_k_matvec_bf16_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    const uint16_t *W = (const uint16_t *)w->data; /* (rows, cols) */
    for (int64_t r = r0; r < r1; r++) y[r] = dot_bf16(W + r * w->cols, x, w->cols);
}

/* ---- matmul: X (n, cols) @ W^T -> Y (n, rows); the weight row stays hot across tokens ------- */

void qhx_k_matmul_f32_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                          int64_t n, int64_t r0, int64_t r1) {
    const float *W = (const float *)w->data; /* (rows, cols) */
    for (int64_t r = r0; r < r1; r++)
        for (int64_t t = 0; t < n; t++) Y[t * ldy + r] = dot_f32(W + r * w->cols, X + t * ldx, w->cols);
}

void qhx_k_matmul_f16_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                          int64_t n, int64_t r0, int64_t r1) {
    const uint16_t *W = (const uint16_t *)w->data; /* (rows, cols) */
    for (int64_t r = r0; r < r1; r++)
        for (int64_t t = 0; t < n; t++) Y[t * ldy + r] = dot_f16(W + r * w->cols, X + t * ldx, w->cols);
}

void qhx_k_matmul_bf16_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                           int64_t n, int64_t r0, int64_t r1) {
    const uint16_t *W = (const uint16_t *)w->data; /* (rows, cols) */
    for (int64_t r = r0; r < r1; r++)
        for (int64_t t = 0; t < n; t++)
            Y[t * ldy + r] = dot_bf16(W + r * w->cols, X + t * ldx, w->cols);
}

/* ---- row lookup: W[r, :] -> out (cols,) ------------------------------------------------------ */

void qhx_k_row_f32_ref(const qhx_weight *w, int64_t r, float *out) {
    const float *W = (const float *)w->data + r * w->cols;
    for (int64_t c = 0; c < w->cols; c++) out[c] = W[c];
}

void qhx_k_row_f16_ref(const qhx_weight *w, int64_t r, float *out) {
    qhx_f16_to_f32_row((const uint16_t *)w->data + r * w->cols, out, w->cols);
}

void qhx_k_row_bf16_ref(const qhx_weight *w, int64_t r, float *out) {
    qhx_bf16_to_f32_row((const uint16_t *)w->data + r * w->cols, out, w->cols);
}
