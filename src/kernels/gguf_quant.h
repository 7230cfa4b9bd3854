/* kernels/gguf_quant: the reference dequantization of ggml's block formats, the types found in
 * the GGUF files published for the Qwen3.5 and Qwen3-VL models. Each type's block layout is in
 * docs/formats.md ("GGUF"). The values are bit-identical to ggml's own dequantization (and to
 * the `gguf` Python package's, which the tests use as the oracle): the same float32 operations
 * in the same order, each rounded on its own (no fused multiply-add). */
#ifndef QHX_KERNELS_GGUF_QUANT_H
#define QHX_KERNELS_GGUF_QUANT_H

#include "core/ggml_type.h"

#include <stdint.h>

/* Whether qhx_gguf_dequant_row has a reference for this type id: F32, F16, BF16, Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS. */
int qhx_gguf_can_dequant(uint32_t type);

/* out[0..n) = the n values stored at src in `type`; n a whole number of the type's blocks.
 * Returns 0, or -1 (nothing written) for a type without a reference or a bad n. */
int qhx_gguf_dequant_row(uint32_t type, const uint8_t *src, int64_t n, float *out /* OUT (n) */);

#endif
