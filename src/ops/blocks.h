/* ops/blocks.h: the decoder pieces both families use, written once over the device interface
 * (devices/device.h): the SwiGLU MLP, the lm-head (after the final norm) and the loop that cuts
 * a prompt into batches. Norms, residual adds and attention over the KV cache are device ops
 * the families call directly (d->op->rmsnorm, ->add_rmsnorm, ->add, ->attention). */
#ifndef QHX_OPS_BLOCKS_H
#define QHX_OPS_BLOCKS_H

#include "core/status.h"
#include "devices/device.h"
#include "ops/kv.h"

#include <stdbool.h>
#include <stdint.h>

/* out (n, H) = down(silu(gate(xn)) * up(xn)); mg, mu: (n, I) scratch. */
void qhx_op_swiglu_mlp(const qhx_device *d, const qhx_weight *gate, const qhx_weight *up, const qhx_weight *down,
                       qhx_dv xn, int64_t H, qhx_dv mg, qhx_dv mu, int64_t I, qhx_dv out, int64_t n);

/* logits = head(norm(x)) for the last of n rows, or every row when all: logits (1 or n, V);
 * xn: (n, H) scratch. */
void qhx_op_lm_head(const qhx_device *d, qhx_norm_kind kind, qhx_dv x, const float *final_norm, float eps, qhx_dv xn,
                    const qhx_weight *head, qhx_dv logits, int64_t H, int64_t V, int64_t n, bool all);

/* The lm-head graph alone: logits (n, V) = head(norm(hidden (n, H))) for every row, both host
 * arrays, with its scratch allocated on d here (n checked against overflow). QHX_E_NOMEM,
 * QHX_E_LIMIT. */
qhx_status qhx_op_lm_head_rows(const qhx_device *d, qhx_norm_kind kind, const float *hidden, const float *final_norm,
                               float eps, const qhx_weight *head, float *logits, int64_t H, int64_t V, int64_t n,
                               qhx_error *err);

/* The final norm alone: out (n, H) = norm(hidden (n, H)), both host arrays (what an embedding
 * pools: the rows the lm-head reads). QHX_E_LIMIT for n out of range. */
qhx_status qhx_op_final_norm_rows(const qhx_device *d, qhx_norm_kind kind, const float *hidden, const float *final_norm,
                                  float eps, float *out, int64_t H, int64_t n, qhx_error *err);

/* Rows x (n, H) handed to a host callback (a family's layer_cb): in place where the device's
 * memory is host memory, else read into a temporary host copy first (heap only while a
 * callback is set; an allocation failure skips the call). */
typedef void (*qhx_op_rows_cb)(void *user, int64_t layer, int64_t pos0, const float *x, int64_t n);
void qhx_op_rows_cb_call(const qhx_device *d, qhx_op_rows_cb cb, void *user, int64_t layer, int64_t pos0, qhx_dv x,
                         int64_t n, int64_t H);

/* The batch loop of a prompt: tokens [0, n) in steps of at most `step`, each through
 * fn(ctx, t0, nt, logits of that step or NULL); with all, step t0's logits start at row t0 of
 * logits (n, V), else only the last step gets logits (V). Stops at the first error. */
typedef qhx_status (*qhx_op_step_fn)(void *ctx, int64_t t0, int64_t nt, float *logits, qhx_error *err);
qhx_status qhx_op_batches(int64_t n, int64_t step, int64_t V, float *logits, bool all, qhx_op_step_fn fn, void *ctx,
                          qhx_error *err);

#endif
