/* ops/kv.c: the KV cache layout and its element types (kv.h). */
#include "ops/kv.h"

#include "core/alloc.h"

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

bool qhx_kv_bytes(qhx_kv_type t, int64_t n_layers, int64_t n_ctx, int64_t width, size_t *out) {
    size_t a;
    return qhx_size_mul((size_t)n_layers * 2, (size_t)n_ctx, &a) && qhx_size_mul(a, qhx_kv_row_bytes(t, width), out);
}

/* Byte offset of row pos of layer's K (which 0) or V (1). */
static size_t row_offset(const qhx_kv_cache *c, int64_t layer, int which, int64_t pos) {
    return (((size_t)layer * 2 + (size_t)which) * (size_t)c->n_ctx + (size_t)pos) * qhx_kv_row_bytes(c->type, c->width);
}

int qhx_kv_regions(const qhx_device *d, const qhx_kv_cache *c, qhx_state_region *out, int cap) {
    const size_t row = qhx_kv_row_bytes(c->type, c->width);
    int n = 0;
    for (int64_t l = 0; l < c->n_layers; l++)
        for (int w = 0; w < 2 && n < cap; w++)
            out[n++] = (qhx_state_region){d, {c->at.b, c->at.off + row_offset(c, l, w, 0)}, row, c->n_ctx, true};
    return n;
}

qhx_status qhx_kv_check(qhx_kv_type t, int64_t hd, qhx_error *err) {
    if (t == QHX_KV_Q8 && hd % QHX_KV_Q8_BLOCK)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "state: a q8 KV cache needs head_dim a multiple of %d (it is %lld)",
                        QHX_KV_Q8_BLOCK, (long long)hd);
    return QHX_OK;
}
