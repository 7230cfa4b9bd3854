/* kernels/vision.h: scalar reference kernels of the Qwen3-VL path (kernels/ref/vision_ref.c):
 * LayerNorm with bias, the two GELUs, the bilinear resampling of a learned position table, and
 * the plain RMSNorm of the Qwen3 text decoder. Rotary, attention and linear layers are the shared
 * ones of kernels/ref.h. Plain loops that follow the Hugging Face reference's
 * float32 arithmetic; they never allocate. SIMD twins, when they come, are tested against them. */
#ifndef QHX_KERNELS_VISION_H
#define QHX_KERNELS_VISION_H

#include <stdint.h>

/* y = (x - mean) / sqrt(var + eps) * w + b over one row of n; biased variance (torch
 * layer_norm). Statistics in double, output float. x: (n,), w, b: (n,) (b may be NULL), y: (n,);
 * y may alias x. */
void qhx_k_layernorm_f32_ref(const float *x, const float *w, const float *b, float *y, int64_t n,
                             float eps);

/* In place, x: (n,). tanh approximation (gelu_pytorch_tanh):
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void qhx_k_gelu_tanh_f32_ref(float *x, int64_t n);
/* In place, x: (n,). Exact GELU (nn.GELU()): 0.5 x (1 + erf(x / sqrt(2))). */
void qhx_k_gelu_erf_f32_ref(float *x, int64_t n);

/* Plain RMSNorm (HF Qwen3RMSNorm / Qwen3VLTextRMSNorm): y = w * (x * 1/sqrt(mean(x^2) + eps)),
 * sum of squares in double. Not the zero-centred (1 + w) form of Qwen3.5. x, y (n,) (may alias);
 * w (n,). */
void qhx_k_rmsnorm_f32_ref(const float *x, const float *w, float *y, int64_t n, float eps);

/* HF Qwen3-VL fast_pos_embed_interpolate for one (gh, gw) grid: the side x side table
 * (row-major, index r * side + c, rows of dim floats) is sampled at
 * linspace(0, side - 1, gh) x linspace(0, side - 1, gw) (float32, PyTorch's linspace rule),
 * floor / floor + 1 clamped to side - 1, weights (1 - dh)(1 - dw), (1 - dh) dw, dh (1 - dw),
 * dh dw as float32 products, summed in that order. out: (gh * gw, dim), row-major (pr, pc). */
void qhx_k_pos_embed_bilinear_f32_ref(const float *table, int64_t side, int64_t dim, int64_t gh,
                                      int64_t gw, float *out);

/* torch.linspace(start, end, n) in float32 on the CPU: step = fl32((end - start) / (n - 1)),
 * the first half counted up from start, the second half down from end. out: (n,). */
void qhx_k_linspace_f32_ref(float start, float end, int64_t n, float *out);

#endif
