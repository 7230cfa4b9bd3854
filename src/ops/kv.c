/* ops/kv.c: the KV cache layout and its element types (kv.h). */
#include "ops/kv.h"

#include "core/alloc.h"

#include <math.h>
#include <string.h>

const char *qhx_kv_type_name(qhx_kv_type t) {
    switch (t) {
    case QHX_KV_F32: return "f32";
    case QHX_KV_F16: return "f16";
    case QHX_KV_Q8: return "q8";
    case QHX_KV_DEFAULT: break;
    }
    return NULL;
}

int qhx_kv_type_from_name(const char *s, qhx_kv_type *out) {
    if (!strcmp(s, "f32")) *out = QHX_KV_F32;
    else if (!strcmp(s, "f16")) *out = QHX_KV_F16;
    else if (!strcmp(s, "q8")) *out = QHX_KV_Q8;
    else return -1;
    return 0;
}

size_t qhx_kv_row_bytes(qhx_kv_type t, int64_t width) {
    if (t == QHX_KV_Q8) return (size_t)width + (size_t)(width / QHX_KV_Q8_BLOCK) * sizeof(float);
    return (size_t)width * (t == QHX_KV_F16 ? 2 : 4);
}

bool qhx_kv_bytes(qhx_kv_type t, int64_t n_layers, int64_t n_ctx, int64_t width, size_t *out) {
    size_t a;
    return qhx_size_mul((size_t)n_layers * 2, (size_t)n_ctx, &a) && qhx_size_mul(a, qhx_kv_row_bytes(t, width), out);
}

/* Byte offset of row pos of layer's K (which 0) or V (1). */
static size_t row_offset(const qhx_kv_cache *c, int64_t layer, int which, int64_t pos) {
    return (((size_t)layer * 2 + (size_t)which) * (size_t)c->n_ctx + (size_t)pos) * qhx_kv_row_bytes(c->type, c->width);
}

/* One row of width values as q8: per block of QHX_KV_Q8_BLOCK, scale = max |x| / 127 and
 * q = round(x / scale) (halves away from zero, as llama.cpp's q8_0), computed as x * (127 / max). */
static void quantize_row_q8(const float *x, int64_t width, char *row) {
    float *d = (float *)row;
    int8_t *q = (int8_t *)(row + (width / QHX_KV_Q8_BLOCK) * (int64_t)sizeof(float));
    for (int64_t b = 0; b < width / QHX_KV_Q8_BLOCK; b++) {
        const float *xb = x + b * QHX_KV_Q8_BLOCK;
        float amax = 0.0f;
        for (int j = 0; j < QHX_KV_Q8_BLOCK; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        d[b] = amax / 127.0f;
        for (int j = 0; j < QHX_KV_Q8_BLOCK; j++) q[b * QHX_KV_Q8_BLOCK + j] = (int8_t)roundf(xb[j] * id);
    }
}

void qhx_kv_store(const qhx_kernels *k, const qhx_kv_cache *c, int64_t layer, int which, int64_t pos,
                  const float *src, int64_t n) {
    char *dst = (char *)c->data + row_offset(c, layer, which, pos);
    const size_t count = (size_t)(n * c->width);
    switch (c->type) {
    case QHX_KV_F16: k->f32_to_f16(src, (uint16_t *)dst, (int64_t)count); break;
    case QHX_KV_Q8:
        for (int64_t t = 0; t < n; t++)
            quantize_row_q8(src + t * c->width, c->width, dst + (size_t)t * qhx_kv_row_bytes(c->type, c->width));
        break;
    default: memcpy(dst, src, count * sizeof(float)); break;
    }
}

qhx_kv_view qhx_kv_head(const qhx_kv_cache *c, int64_t layer, int64_t g, int64_t hd) {
    const char *K = (const char *)c->data + row_offset(c, layer, 0, 0);
    const char *V = (const char *)c->data + row_offset(c, layer, 1, 0);
    if (c->type == QHX_KV_Q8) {
        const int64_t n_scales = c->width / QHX_KV_Q8_BLOCK;
        return (qhx_kv_view){K, V, (int64_t)qhx_kv_row_bytes(c->type, c->width), QHX_KV_Q8,
                             (g * hd / QHX_KV_Q8_BLOCK) * (int64_t)sizeof(float),
                             n_scales * (int64_t)sizeof(float) + g * hd};
    }
    const size_t off = (size_t)(g * hd) * (c->type == QHX_KV_F16 ? 2 : 4);
    return (qhx_kv_view){K + off, V + off, c->width, c->type, 0, 0};
}

int qhx_kv_regions(const qhx_kv_cache *c, qhx_state_region *out, int cap) {
    const size_t row = qhx_kv_row_bytes(c->type, c->width);
    int n = 0;
    for (int64_t l = 0; l < c->n_layers; l++)
        for (int w = 0; w < 2 && n < cap; w++)
            out[n++] = (qhx_state_region){(char *)c->data + row_offset(c, l, w, 0), row, c->n_ctx, true};
    return n;
}

qhx_status qhx_kv_check(qhx_kv_type t, int64_t hd, qhx_error *err) {
    if (t == QHX_KV_Q8 && hd % QHX_KV_Q8_BLOCK)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "state: a q8 KV cache needs head_dim a multiple of %d (it is %lld)",
                        QHX_KV_Q8_BLOCK, (long long)hd);
    return QHX_OK;
}
