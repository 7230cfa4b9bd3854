/* ops/weights.h: binding checkpoint tensors to what model code uses. A linear layer becomes a
 * qhx_weight that points into the mapping (copied into an aligned model-owned buffer only when
 * its bytes are misaligned for the element type); small vectors (norm weights, conv taps, decay
 * parameters) are widened to model-owned f32 copies. Quantized formats plug in at
 * qhx_wbind_linear: a bundle tensor in a Q8/Q4/Q6 layout binds data + scales the same way, and
 * model code does not change. */
#ifndef QHX_OPS_WEIGHTS_H
#define QHX_OPS_WEIGHTS_H

#include "core/status.h"
#include "io/safetensors.h"
#include "devices/device.h"

#include <stdbool.h>
#include <stdint.h>

/* Buffers a model owns (aligned copies); freed together. */
typedef struct qhx_wowned {
    void **bufs;
    int64_t n, cap;
    size_t bytes; /* total, for reporting */
} qhx_wowned;

void qhx_wowned_free(qhx_wowned *o); /* frees every buffer; o itself is caller storage */

/* Bind tensor `name` as a linear weight (rows, cols) = (out_features, in_features). Accepts
 * F32, F16, BF16 storage (finite only); refuses a format the device d does not run
 * (its supports entry), and lets it prepare the weight (weight_prepare).
 * *out views the mapping (lifetime: the set) or an aligned copy owned by `owned`. */
qhx_status qhx_wbind_linear(const qhx_st_set *set, const char *name, int64_t rows, int64_t cols,
                            const qhx_device *d, qhx_wowned *owned, qhx_weight *out /* OUT */,
                            qhx_error *err);

/* QHX_E_FORMAT naming the file, tensor and element when an F32/F16/BF16 tensor holds a NaN or an
 * Inf (other dtypes pass). Both binders below call it, so no model loads non-finite weights. */
qhx_status qhx_wcheck_finite(const qhx_st_set *set, const qhx_st_tensor *t, const char *name, qhx_error *err);

/* The embedding table and the LM head, both (rows, cols). A checkpoint carries the table (and
 * lm_head.weight when untied); a bundle of a tied checkpoint carries the matrix once, as
 * lm_head.weight in the head's precision, and the embedding is that matrix (the lookup
 * dequantizes its rows: the values the head multiplies with; docs/bundle.md). Without
 * lm_head.weight a tied model's head is the table; an untied model needs both. `label` names
 * the checkpoint in messages. */
qhx_status qhx_wbind_embed_head(const qhx_st_set *set, const char *label, const char *embed_name, bool tied,
                                int64_t rows, int64_t cols, const qhx_device *d, qhx_wowned *owned,
                                qhx_weight *embed /* OUT */, qhx_weight *head /* OUT */, qhx_error *err);

/* Load tensor `name` of rank n_dims and the given shape (-1 = any), any float dtype, as a new
 * f32 array of its n_elements values owned by `owned`. *n_out (may be NULL) gets the count. */
qhx_status qhx_wload_f32(const qhx_st_set *set, const char *name, int n_dims,
                         const int64_t *shape, qhx_wowned *owned, float **out /* OUT */,
                         int64_t *n_out, qhx_error *err);

#endif
