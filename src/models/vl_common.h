/* models/vl_common.h: pieces shared by the Qwen3-VL vision tower (vit.c) and text decoder
 * (qwen3vl.c): weight lookup from a safetensors set into qhx_weight views or float32 copies
 * owned by a small arena, and a linear layer over any float weight format. */
#ifndef QHX_MODELS_VL_COMMON_H
#define QHX_MODELS_VL_COMMON_H

#include "io/safetensors.h"
#include "kernels/kernels.h"

#include <stdint.h>

/* Buffers a model owns (float32 copies of vectors, realigned weights); freed together. */
typedef struct qhx_vl_bufs {
    void **ptr;
    int64_t n, cap;
} qhx_vl_bufs;

void qhx_vl_bufs_free(qhx_vl_bufs *b);

/* A 2-D weight `name` of shape (rows, cols) (or any rank whose trailing dims multiply to cols,
 * as a Conv3d kernel [out, c, t, p, p]), dtype F32, F16 or BF16, viewed in place when the data is
 * aligned for its element type, else copied into b. */
qhx_status qhx_vl_get_weight(const qhx_st_set *st, const char *name, int64_t rows, int64_t cols,
                             qhx_vl_bufs *b, qhx_weight *out /* OUT */, qhx_error *err);

/* A tensor of n elements (any float dtype, any rank with that many elements) as a new float32
 * copy owned by b. */
qhx_status qhx_vl_get_f32(const qhx_st_set *st, const char *name, int64_t n, qhx_vl_bufs *b,
                          float **out /* OUT */, qhx_error *err);

/* Y[t, r] = bias[r] + sum_c W[r, c] X[t, c], t < n. X: (n, cols) stride ldx, Y: (n, rows) stride
 * ldy, bias (rows,) or NULL. f32 accumulation. */
void qhx_vl_linear(const qhx_weight *w, const float *bias, const float *X, int64_t ldx, float *Y,
                   int64_t ldy, int64_t n);

/* Row r of W as float32 into out (cols,). */
void qhx_vl_weight_row(const qhx_weight *w, int64_t r, float *out);

#endif
