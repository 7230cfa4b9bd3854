/* ops/rope.h: rotary position tables shared by the families (Hugging Face default RoPE and the
 * multimodal M-RoPE layout of Qwen3-VL and Qwen3.5). */
#ifndef QHX_OPS_ROPE_H
#define QHX_OPS_ROPE_H

#include <stdbool.h>
#include <stdint.h>

/* inv_freq (rot / 2,): 1 / theta^(2 j / rot), the exponent and the power in float32 as HF's
 * default rope init computes them (rot = the rotated dims of a head). */
void qhx_rope_inv_freq(double theta, int64_t rot, float *inv_freq);

/* Which position axis (0 T, 1 H, 2 W) each of the half = rot / 2 frequency slots reads.
 * Interleaved (HF apply_interleaved_mrope): slot j with j % 3 == 1 below 3 * section[1] is H,
 * j % 3 == 2 below 3 * section[2] is W, every other slot is T, including the tail at or past
 * 3 * section (llama.cpp gives those to a fourth axis; HF does not). Chunked (Qwen2-VL):
 * section[0] slots of T, then H, then W. axis: (half,). */
void qhx_rope_mrope_axes(const int64_t section[3], bool interleaved, int64_t half, unsigned char *axis);

/* cos / sin (half,) of one token: angle_j = pos[axis[j]] * inv_freq[j] in float32 (HF's float32
 * path); axis NULL: 1-D RoPE, pos[0] for every slot. */
void qhx_rope_angles(const int64_t pos[3], const unsigned char *axis, const float *inv_freq, int64_t half,
                     float *cos_out, float *sin_out);

#endif
