/* models/kv.c: the KV cache layout and its element types (kv.h). */
#include "models/kv.h"

#include "core/alloc.h"

#include <string.h>

const char *qhx_kv_type_name(qhx_kv_type t) {
    switch (t) {
    case QHX_KV_F32: return "f32";
    case QHX_KV_F16: return "f16";
    case QHX_KV_DEFAULT: break;
    }
    return NULL;
}

int qhx_kv_type_from_name(const char *s, qhx_kv_type *out) {
    if (!strcmp(s, "f32")) *out = QHX_KV_F32;
    else if (!strcmp(s, "f16")) *out = QHX_KV_F16;
    else return -1;
    return 0;
}

bool qhx_kv_bytes(qhx_kv_type t, int64_t n_layers, int64_t n_ctx, int64_t width, size_t *out) {
    size_t a, b;
    return qhx_size_mul((size_t)n_layers * 2, (size_t)n_ctx, &a) && qhx_size_mul(a, (size_t)width, &b) &&
           qhx_size_mul(b, qhx_kv_elem_bytes(t), out);
}

/* Element offset of row pos of layer's K (which 0) or V (1). */
static size_t row_offset(const qhx_kv_cache *c, int64_t layer, int which, int64_t pos) {
    return (((size_t)layer * 2 + (size_t)which) * (size_t)c->n_ctx + (size_t)pos) * (size_t)c->width;
}

void qhx_kv_store(const qhx_kernels *k, const qhx_kv_cache *c, int64_t layer, int which, int64_t pos,
                  const float *src, int64_t n) {
    size_t off = row_offset(c, layer, which, pos), count = (size_t)(n * c->width);
    if (c->type == QHX_KV_F16) k->f32_to_f16(src, (uint16_t *)c->data + off, (int64_t)count);
    else memcpy((float *)c->data + off, src, count * sizeof(float));
}

qhx_kv_view qhx_kv_head(const qhx_kv_cache *c, int64_t layer, int64_t g, int64_t hd) {
    size_t k = row_offset(c, layer, 0, 0) + (size_t)(g * hd), v = row_offset(c, layer, 1, 0) + (size_t)(g * hd);
    if (c->type == QHX_KV_F16) {
        const uint16_t *d = c->data;
        return (qhx_kv_view){d + k, d + v, c->width, true};
    }
    const float *d = c->data;
    return (qhx_kv_view){d + k, d + v, c->width, false};
}

int qhx_kv_regions(const qhx_kv_cache *c, qhx_state_region *out, int cap) {
    const size_t elem = qhx_kv_elem_bytes(c->type), row = (size_t)c->width * elem;
    int n = 0;
    for (int64_t l = 0; l < c->n_layers; l++)
        for (int w = 0; w < 2 && n < cap; w++)
            out[n++] = (qhx_state_region){(char *)c->data + row_offset(c, l, w, 0) * elem, row, c->n_ctx, true};
    return n;
}
