/* models/vl_common: weight lookup and the linear layer of the Qwen3-VL code (vl_common.h). */
#include "models/vl_common.h"

#include "core/alloc.h"
#include "core/fp16.h"

#include <string.h>

static int bufs_add(qhx_vl_bufs *b, void *p) {
    if (b->n == b->cap) {
        int64_t cap = b->cap ? b->cap * 2 : 64;
        void **np = qhx_realloc(b->ptr, (size_t)cap * sizeof *np);
        if (!np) return -1;
        b->ptr = np;
        b->cap = cap;
    }
    b->ptr[b->n++] = p;
    return 0;
}

void qhx_vl_bufs_free(qhx_vl_bufs *b) {
    if (!b) return;
    for (int64_t i = 0; i < b->n; i++) qhx_aligned_free(b->ptr[i]);
    qhx_free(b->ptr);
    memset(b, 0, sizeof *b);
}

static qhx_status find(const qhx_st_set *st, const char *name, int64_t n, const qhx_st_tensor **t,
                       qhx_error *err) {
    *t = qhx_st_find(st, name);
    if (!*t) return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s' is missing", qhx_st_file_path(st, 0), name);
    const qhx_st_tensor *x = *t;
    if (x->dtype != QHX_DTYPE_F32 && x->dtype != QHX_DTYPE_F16 && x->dtype != QHX_DTYPE_BF16)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: tensor '%s': dtype %s (expected F32, F16 or BF16)",
                        qhx_st_file_path(st, x->file_index), name, qhx_dtype_name(x->dtype));
    if (x->n_elements != n)
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': %lld elements, expected %lld",
                        qhx_st_file_path(st, x->file_index), name, (long long)x->n_elements, (long long)n);
    return QHX_OK;
}

qhx_status qhx_vl_get_weight(const qhx_st_set *st, const char *name, int64_t rows, int64_t cols,
                             qhx_vl_bufs *b, qhx_weight *out, qhx_error *err) {
    const qhx_st_tensor *t;
    qhx_status rc = find(st, name, rows * cols, &t, err);
    if (rc) return rc;
    if (t->n_dims < 2 || t->shape[0] != rows)
        return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': expected %lld rows of %lld",
                        qhx_st_file_path(st, t->file_index), name, (long long)rows, (long long)cols);
    memset(out, 0, sizeof *out);
    out->fmt = t->dtype == QHX_DTYPE_F32 ? QHX_W_F32 : t->dtype == QHX_DTYPE_F16 ? QHX_W_F16 : QHX_W_BF16;
    out->rows = rows;
    out->cols = cols;
    size_t esz = qhx_dtype_size(t->dtype);
    if (((uintptr_t)t->data % esz) == 0) {
        out->data = t->data;
        return QHX_OK;
    }
    void *copy = qhx_aligned_alloc(t->size);
    if (!copy || bufs_add(b, copy)) {
        qhx_aligned_free(copy);
        return qhx_fail(err, QHX_E_NOMEM, "tensor '%s': out of memory for %zu bytes", name, t->size);
    }
    memcpy(copy, t->data, t->size);
    out->data = copy;
    return QHX_OK;
}

qhx_status qhx_vl_get_f32(const qhx_st_set *st, const char *name, int64_t n, qhx_vl_bufs *b,
                          float **out, qhx_error *err) {
    const qhx_st_tensor *t;
    qhx_status rc = find(st, name, n, &t, err);
    if (rc) return rc;
    float *f = qhx_aligned_alloc((size_t)n * sizeof *f);
    if (!f || bufs_add(b, f)) {
        qhx_aligned_free(f);
        return qhx_fail(err, QHX_E_NOMEM, "tensor '%s': out of memory", name);
    }
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *p = t->data + (size_t)i * qhx_dtype_size(t->dtype);
        if (t->dtype == QHX_DTYPE_F32) memcpy(&f[i], p, 4);
        else {
            uint16_t h;
            memcpy(&h, p, 2);
            f[i] = t->dtype == QHX_DTYPE_F16 ? qhx_f16_to_f32(h) : qhx_bf16_to_f32(h);
        }
    }
    *out = f;
    return QHX_OK;
}

void qhx_vl_weight_row(const qhx_weight *w, int64_t r, float *out) {
    const uint8_t *base = w->data;
    if (w->fmt == QHX_W_F32) {
        memcpy(out, base + (size_t)r * (size_t)w->cols * 4, (size_t)w->cols * 4);
        return;
    }
    const uint16_t *h = (const uint16_t *)(base + (size_t)r * (size_t)w->cols * 2);
    if (w->fmt == QHX_W_F16) qhx_f16_to_f32_row(h, out, w->cols);
    else qhx_bf16_to_f32_row(h, out, w->cols);
}

static float dot(const float *a, const float *b, int64_t n) {
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += a[i + k] * b[i + k];
    for (; i < n; i++) s[i & 7] += a[i] * b[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* Tokens are taken in blocks of TB so that a block of X stays in cache while every weight row
 * passes over it once. */
#define TB 32

void qhx_vl_linear(const qhx_weight *w, const float *bias, const float *X, int64_t ldx, float *Y,
                   int64_t ldy, int64_t n) {
    float row_buf[1024];
    float *row = row_buf;
    int heap = 0;
    if (w->fmt != QHX_W_F32 && w->cols > 1024) {
        if (!(row = qhx_malloc((size_t)w->cols * sizeof *row))) row = NULL;
        else heap = 1;
    }
    for (int64_t t0 = 0; t0 < n; t0 += TB) {
        int64_t t1 = t0 + TB < n ? t0 + TB : n;
        for (int64_t r = 0; r < w->rows; r++) {
            float b = bias ? bias[r] : 0.0f;
            if (w->fmt == QHX_W_F32 || row) {
                const float *wr = (const float *)w->data + r * w->cols;
                if (w->fmt != QHX_W_F32) {
                    qhx_vl_weight_row(w, r, row);
                    wr = row;
                }
                for (int64_t t = t0; t < t1; t++) Y[t * ldy + r] = dot(wr, X + t * ldx, w->cols) + b;
                continue;
            }
            /* No scratch for a converted row: convert in pieces. */
            for (int64_t t = t0; t < t1; t++) {
                float tmp[256], s = 0.0f;
                for (int64_t c0 = 0; c0 < w->cols; c0 += 256) {
                    int64_t m = w->cols - c0 < 256 ? w->cols - c0 : 256;
                    const uint16_t *h = (const uint16_t *)w->data + r * w->cols + c0;
                    if (w->fmt == QHX_W_F16) qhx_f16_to_f32_row(h, tmp, m);
                    else qhx_bf16_to_f32_row(h, tmp, m);
                    s += dot(tmp, X + t * ldx + c0, m);
                }
                Y[t * ldy + r] = s + b;
            }
        }
    }
    if (heap) qhx_free(row);
}
