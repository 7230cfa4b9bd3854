/* ops/weights.c: tensor -> qhx_weight / f32 vector binding (see weights.h). */
#include "ops/weights.h"

#include "core/ggml_type.h"

#include "core/alloc.h"
#include "core/file.h"
#include "core/fp16.h"
#include "ops/st_weight.h"

#include <string.h>

void qhx_wowned_free(qhx_wowned *o) {
    if (!o) return;
    for (int64_t i = 0; i < o->n; i++) qhx_aligned_free(o->bufs[i]);
    qhx_free(o->bufs);
    memset(o, 0, sizeof *o);
}

/* A new zeroed aligned buffer of `bytes`, recorded in o. NULL on allocation failure. */
static void *owned_alloc(qhx_wowned *o, size_t bytes) {
    if (o->n == o->cap) {
        int64_t cap = o->cap ? 2 * o->cap : 64;
        void **nb = qhx_realloc(o->bufs, (size_t)cap * sizeof *nb);
        if (!nb) return NULL;
        o->bufs = nb;
        o->cap = cap;
    }
    void *p = qhx_aligned_alloc(bytes ? bytes : 1);
    if (!p) return NULL;
    o->bufs[o->n++] = p;
    o->bytes += bytes;
    return p;
}

/* ---- non-finite values -----------------------------------------------------------------------
 * One NaN or Inf in a weight makes every logit NaN a few layers later; the sampler would then
 * see garbage. So every float tensor is checked once, at load, in its own dtype: a value is
 * non-finite when its exponent bits are all ones (f32 0x7f800000, f16 0x7c00, bf16 0x7f80).
 * Branch-free per block, so the compiler vectorizes it: about a memory pass over the weights. */

#define SCAN_BLOCK 4096

static int64_t first_bad_u16(const uint8_t *p, int64_t n, uint16_t exp_mask) {
    for (int64_t b = 0; b < n; b += SCAN_BLOCK) {
        int64_t e = b + SCAN_BLOCK < n ? b + SCAN_BLOCK : n;
        unsigned bad = 0;
        for (int64_t i = b; i < e; i++) {
            uint16_t v;
            memcpy(&v, p + 2 * i, 2);
            bad |= (v & exp_mask) == exp_mask;
        }
        if (!bad) continue;
        for (int64_t i = b; i < e; i++) {
            uint16_t v;
            memcpy(&v, p + 2 * i, 2);
            if ((v & exp_mask) == exp_mask) return i;
        }
    }
    return -1;
}

static int64_t first_bad_f32(const uint8_t *p, int64_t n) {
    for (int64_t b = 0; b < n; b += SCAN_BLOCK) {
        int64_t e = b + SCAN_BLOCK < n ? b + SCAN_BLOCK : n;
        unsigned bad = 0;
        for (int64_t i = b; i < e; i++) {
            uint32_t v;
            memcpy(&v, p + 4 * i, 4);
            bad |= (v & 0x7f800000u) == 0x7f800000u;
        }
        if (!bad) continue;
        for (int64_t i = b; i < e; i++) {
            uint32_t v;
            memcpy(&v, p + 4 * i, 4);
            if ((v & 0x7f800000u) == 0x7f800000u) return i;
        }
    }
    return -1;
}

qhx_status qhx_wcheck_finite(const qhx_st_set *set, const qhx_st_tensor *t, const char *name, qhx_error *err) {
    int64_t at = t->dtype == QHX_DTYPE_F32   ? first_bad_f32(t->data, t->n_elements)
                 : t->dtype == QHX_DTYPE_F16  ? first_bad_u16(t->data, t->n_elements, 0x7c00)
                 : t->dtype == QHX_DTYPE_BF16 ? first_bad_u16(t->data, t->n_elements, 0x7f80)
                                              : -1;
    if (at < 0) return QHX_OK;
    return qhx_fail(err, QHX_E_FORMAT, "%s: tensor '%s': element %lld is NaN or infinite", qhx_st_file_path(set, t->file_index),
                    name, (long long)at);
}

/* Q4_0 blocks (an f16 scale, then 16 bytes whose low nibbles are values 0..15 and high nibbles
 * 16..31, each (nibble - 8) * scale) are the Q4 format with groups of 32 (docs/formats.md) with
 * the scale moved out of the block: split into Q4's two arrays, every value bit for bit, they
 * run on Q4's kernels on a device that has no ggml kernels. The file's pages of the tensor are
 * then given back. */
static qhx_status repack_q4_0(const char *name, qhx_wowned *owned, qhx_weight *w, qhx_error *err) {
    const int64_t groups = w->cols / 32;
    size_t nib_bytes, scale_bytes;
    if (!qhx_size_mul((size_t)w->rows, (size_t)w->cols / 2, &nib_bytes) ||
        !qhx_size_mul((size_t)w->rows * (size_t)groups, 2, &scale_bytes))
        return qhx_fail(err, QHX_E_LIMIT, "tensor '%s': too large", name);
    uint8_t *q = owned_alloc(owned, nib_bytes);
    uint16_t *d = q ? owned_alloc(owned, scale_bytes) : NULL;
    if (!d) return qhx_fail(err, QHX_E_NOMEM, "tensor '%s': out of memory (%zu bytes)", name, nib_bytes + scale_bytes);
    const uint8_t *src = w->data;
    for (int64_t b = 0; b < w->rows * groups; b++) {
        memcpy(&d[b], src + 18 * b, 2);
        memcpy(q + 16 * b, src + 18 * b + 2, 16);
    }
    qhx_file_release(src, (size_t)(w->rows * w->row_bytes));
    *w = (qhx_weight){.fmt = QHX_W_Q4, .rows = w->rows, .cols = w->cols, .data = q, .gscales = d, .group = 32};
    return QHX_OK;
}

qhx_status qhx_wbind_linear(const qhx_st_set *set, const char *name, int64_t rows, int64_t cols,
                            const qhx_device *d, qhx_wowned *owned, qhx_weight *out,
                            qhx_error *err) {
    memset(out, 0, sizeof *out);
    const qhx_st_tensor *t = qhx_st_find(set, name);
    if (t && (t->dtype == QHX_DTYPE_I8 || t->dtype == QHX_DTYPE_U8 || t->dtype == QHX_DTYPE_GGML)) {
        /* Q8 / Q4 / Q6 / Q4A (docs/formats.md), or a GGUF tensor's ggml blocks */
        qhx_status rq = qhx_st_get_weight(set, name, rows, cols, out, err);
        if (rq) return rq;
        /* a device without ggml kernels (OpenCL) runs Q4_0 as Q4; the CPU keeps the blocks, whose
         * kernels round the activations as llama.cpp does (Q4's int8 path rounds them otherwise) */
        if (out->fmt == QHX_W_GGML && out->gtype == QHX_GGML_Q4_0 && !d->op->supports(d, QHX_W_GGML) &&
            d->op->supports(d, QHX_W_Q4) &&
            (rq = repack_q4_0(name, owned, out, err)))
            return rq;
        if (!d->op->supports(d, out->fmt))
            return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: tensor '%s': the %s device has no kernel for %s",
                            qhx_st_file_path(set, t->file_index), name, d->name,
                            out->fmt == QHX_W_GGML ? qhx_ggml_type_name(out->gtype) : "this quantized format");
        return d->op->weight_prepare(d, out, err);
    }
    int64_t shape[2] = {rows, cols};
    qhx_status rc = qhx_st_get(set, name, QHX_DT_FLOATS, 2, shape, &t, err);
    if (rc == QHX_OK) rc = qhx_wcheck_finite(set, t, name, err);
    if (rc) return rc;
    qhx_wfmt fmt = t->dtype == QHX_DTYPE_F32 ? QHX_W_F32 : t->dtype == QHX_DTYPE_F16 ? QHX_W_F16 : QHX_W_BF16;
    if (!d->op->supports(d, fmt))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: tensor '%s': no kernel for dtype %s",
                        qhx_st_file_path(set, t->file_index), name, qhx_dtype_name(t->dtype));
    const void *data = t->data;
    size_t esize = qhx_dtype_size(t->dtype);
    if ((uintptr_t)data % esize != 0) {
        void *copy = owned_alloc(owned, t->size);
        if (!copy)
            return qhx_fail(err, QHX_E_NOMEM, "tensor '%s': out of memory for an aligned copy (%zu bytes)",
                            name, t->size);
        memcpy(copy, t->data, t->size);
        data = copy;
    }
    out->fmt = fmt;
    out->rows = rows;
    out->cols = cols;
    out->data = data;
    return d->op->weight_prepare(d, out, err);
}

qhx_status qhx_wbind_embed_head(const qhx_st_set *set, const char *label, const char *embed_name, bool tied,
                                int64_t rows, int64_t cols, const qhx_device *d, qhx_wowned *owned,
                                qhx_weight *embed, qhx_weight *head, qhx_error *err) {
    const bool has_embed = qhx_st_find(set, embed_name) != NULL;
    const bool has_head = qhx_st_find(set, "lm_head.weight") != NULL;
    if (!has_embed && (!has_head || !tied))
        return qhx_fail(err, QHX_E_FORMAT, "%s: no text embedding: '%s' is missing%s", label, embed_name,
                        has_head ? " and the head is not tied to it (tie_word_embeddings is false)" : "");
    qhx_status rc;
    if (has_embed && (rc = qhx_wbind_linear(set, embed_name, rows, cols, d, owned, embed, err))) return rc;
    if ((has_head || !tied) && (rc = qhx_wbind_linear(set, "lm_head.weight", rows, cols, d, owned, head, err))) return rc;
    if (!has_head && tied) *head = *embed;
    if (!has_embed) *embed = *head;
    return QHX_OK;
}

qhx_status qhx_wload_f32(const qhx_st_set *set, const char *name, int n_dims,
                         const int64_t *shape, qhx_wowned *owned, float **out, int64_t *n_out,
                         qhx_error *err) {
    *out = NULL;
    const qhx_st_tensor *t;
    qhx_status rc = qhx_st_get(set, name, QHX_DT_FLOATS, n_dims, shape, &t, err);
    if (rc == QHX_OK) rc = qhx_wcheck_finite(set, t, name, err);
    if (rc) return rc;
    size_t bytes;
    if (!qhx_size_mul((size_t)t->n_elements, sizeof(float), &bytes))
        return qhx_fail(err, QHX_E_LIMIT, "tensor '%s': too large", name);
    float *dst = owned_alloc(owned, bytes);
    if (!dst) return qhx_fail(err, QHX_E_NOMEM, "tensor '%s': out of memory (%zu bytes)", name, bytes);
    /* element-wise through memcpy: the mapped bytes need not be aligned */
    for (int64_t i = 0; i < t->n_elements; i++) {
        if (t->dtype == QHX_DTYPE_F32) {
            memcpy(&dst[i], t->data + 4 * i, 4);
        } else {
            uint16_t h;
            memcpy(&h, t->data + 2 * i, 2);
            dst[i] = t->dtype == QHX_DTYPE_F16 ? qhx_f16_to_f32(h) : qhx_bf16_to_f32(h);
        }
    }
    *out = dst;
    if (n_out) *n_out = t->n_elements;
    return QHX_OK;
}
