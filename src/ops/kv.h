/* ops/kv.h: the KV cache of the attention layers, shared by the families: per attention layer
 * the keys of every position, then the values, each a row of `width` = KV heads x head_dim
 * values, in f32, f16 or q8 (qhx_kv_type, include/qhx.h; q8 rows: the f32 scales of every
 * block of QHX_KV_Q8_BLOCK values, then the int8 values, kernels/attn.h).
 *
 * Keys and values are computed in f32 (after the q/k norm and the rotary, as the reference) and
 * stored by the device's attention op: f16 rounds to nearest even, q8 takes scale = max |x| /
 * 127 per block and rounds x / scale half away from zero (devices/cpu/cpu_attn.c). The rows
 * live in a buffer of the sequence's device; this file sizes and describes them. */
#ifndef QHX_OPS_KV_H
#define QHX_OPS_KV_H

#include "devices/device.h"
#include "core/status.h"
#include "ops/state.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QHX_KV_BUILTIN QHX_KV_F16 /* what QHX_KV_DEFAULT means when no plan says otherwise */

/* qhx_kv_cache and qhx_kv_row_bytes: devices/device.h (the device owns the rows). */

/* "f32", "f16", "q8" (NULL for anything else); and back (0 ok, -1 unknown name). */
const char *qhx_kv_type_name(qhx_kv_type t);
int qhx_kv_type_from_name(const char *s, qhx_kv_type *out);

/* QHX_E_UNSUPPORTED when heads of hd values cannot be stored as t (q8: hd % 32). */
qhx_status qhx_kv_check(qhx_kv_type t, int64_t hd, qhx_error *err);

/* Bytes of the whole cache, false on overflow. */
bool qhx_kv_bytes(qhx_kv_type t, int64_t n_layers, int64_t n_ctx, int64_t width, size_t *out);

/* Session regions: K then V of each layer, per token, rows of qhx_kv_row_bytes. Returns the
 * count written (at most cap). */
int qhx_kv_regions(const qhx_device *d, const qhx_kv_cache *c, qhx_state_region *out, int cap);

#endif
