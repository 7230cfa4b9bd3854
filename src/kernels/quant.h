/* kernels/quant: the quantized weight formats Q8 ("w8"), Q4 ("q4") and Q6 ("q6"): row quantizers, their
 * inverses, and the scalar reference matvec/matmul over them. Byte layouts, error bounds and the
 * measurements behind the choices are in docs/formats.md; this header is the C contract.
 *
 *   Q8: w[r, c] = scale[r] * q[r, c],  q int8 in [-127, 127],  scale[r] = max_c |w[r, c]| / 127
 *   Q4: w[r, c] = d[r, g] * (nib(r, c) - 8),  g = c / group,  d f16,  nibbles packed per group
 *   Q6: w[r, c] = d[r, g] * (code(r, c) - 32), the same, 6-bit codes as a Q4-shaped plane of their
 *       low 4 bits and a plane of their high 2 bits
 *
 * Quantizers are deterministic: plain float arithmetic and round-half-to-even (nearbyintf in the
 * default rounding mode), so the same input gives the same bytes on every conforming host. */
#ifndef QHX_KERNELS_QUANT_H
#define QHX_KERNELS_QUANT_H

#include "kernels/kernels.h"

#include <stdint.h>

/* Q4 group size used by qhx forge (values along cols sharing one scale). The kernels accept
 * any even group that divides cols; the writer and tests use this one. */
#define QHX_Q4_GROUP 32

/* The largest group the quantizers take (their per-group scratch). */
#define QHX_GROUP_MAX 256

/* ---- Q8: int8, symmetric, one f32 scale per row ----------------------------------------------
 * Quantize one row w[0..n) into q[0..n) and *scale. An all-zero row gets scale 0 and q = 0.
 * q may be NULL: only the scale is computed (the same value). Returns 0, or -1 if the row holds
 * a NaN or an infinity (q and *scale are then unspecified). */
int qhx_quant_q8_row(const float *w, int64_t n, int8_t *q /* OUT (n) */, float *scale /* OUT */);

/* out[c] = scale * q[c] for c in [0, n). */
void qhx_dequant_q8_row(const int8_t *q, float scale, int64_t n, float *out /* OUT (n) */);

/* ---- Q4: 4-bit, symmetric, one f16 scale per group of `group` values along the row ------------
 * Packed row: n/2 bytes. Group k covers values [k*group, (k+1)*group) and bytes
 * [k*group/2, (k+1)*group/2); inside a group, byte i holds value i in its low nibble and value
 * i + group/2 in its high nibble. Nibble v in [0, 15] means the integer v - 8 in [-8, 7].
 * Scale of a group: the f16 value d that minimises sum (w - d * (v - 8))^2 among a fixed set of
 * candidates (docs/formats.md, "Choosing the scale"), the codes rounded to nearest with d; d may
 * be negative. Needs group even and <= QHX_GROUP_MAX, n % group == 0. q may be NULL: only the scales are computed
 * (the same values). Returns 0; -1 on a NaN/infinity, a value too large for an f16 scale
 * (|w| > 8 * 65504) or a bad group/n (outputs then unspecified). */
int qhx_quant_q4_row(const float *w, int64_t n, int64_t group, uint8_t *q /* OUT (n/2) */,
                     uint16_t *scales /* OUT (n/group), f16 */);

/* qhx_quant_q4_row with each squared error of the scale search weighted by imp[c] (per column,
 * > 0; NULL = unweighted, the same bytes as qhx_quant_q4_row): the scale minimises
 * sum imp (w - d v)^2 among the same candidates, the codes are still nearest at that scale (so
 * qhx_quant_q4_codes gives them from the scales). */
int qhx_quant_q4_row_w(const float *w, const float *imp, int64_t n, int64_t group, uint8_t *q /* OUT (n/2) */,
                       uint16_t *scales /* OUT (n/group), f16 */);

/* out[c] = f32(scales[c / group]) * (nibble(c) - 8) for c in [0, n). Same preconditions. */
void qhx_dequant_q4_row(const uint8_t *q, const uint16_t *scales, int64_t n, int64_t group,
                        float *out /* OUT (n) */);

/* The codes qhx_quant_q4_row gives when its scale search returned `scales` (f16, as it wrote
 * them): the second pass of a writer that keeps the scales, without searching again. */
void qhx_quant_q4_codes(const float *w, int64_t n, int64_t group, const uint16_t *scales, uint8_t *q /* OUT (n/2) */);

/* ---- Q6: 6-bit, symmetric, one f16 scale per group (the tied head of q4 bundles) --------------
 * Codes u = v + 32 in [0, 63] for v in [-32, 31], chosen as Q4's (the same scale search over
 * [-32, 31]). Two planes per row: lo (n/2 bytes) holds u & 15 in exactly Q4's nibble layout;
 * hi (n/4 bytes) holds u >> 4: group k owns bytes [k*group/4, (k+1)*group/4), and byte j of a
 * group holds, in bits 2c..2c+1, the high bits of value j + c * group/4 (c = 0..3). Needs
 * group % 4 == 0, group <= QHX_GROUP_MAX, n % group == 0. lo may be NULL (hi is then unused):
 * only the scales are computed. Returns 0 or -1 as qhx_quant_q4_row. */
int qhx_quant_q6_row(const float *w, int64_t n, int64_t group, uint8_t *lo /* OUT (n/2) */,
                     uint8_t *hi /* OUT (n/4) */, uint16_t *scales /* OUT (n/group), f16 */);

/* The weighted search for Q6, as qhx_quant_q4_row_w. */
int qhx_quant_q6_row_w(const float *w, const float *imp, int64_t n, int64_t group, uint8_t *lo /* OUT (n/2) */,
                       uint8_t *hi /* OUT (n/4) */, uint16_t *scales /* OUT (n/group), f16 */);

/* The same for Q6 (see qhx_quant_q4_codes). */
void qhx_quant_q6_codes(const float *w, int64_t n, int64_t group, const uint16_t *scales, uint8_t *lo /* OUT (n/2) */,
                        uint8_t *hi /* OUT (n/4) */);

/* out[c] = f32(scales[c / group]) * (code(c) - 32) for c in [0, n). Same preconditions. */
void qhx_dequant_q6_row(const uint8_t *lo, const uint8_t *hi, const uint16_t *scales, int64_t n, int64_t group,
                        float *out /* OUT (n) */);

/* Bytes of one packed row / number of scales per row for a Q4 matrix of `cols` columns. */
static inline int64_t qhx_q4_row_bytes(int64_t cols) { return cols / 2; }
static inline int64_t qhx_q4_row_groups(int64_t cols, int64_t group) { return cols / group; }

/* ---- reference kernels (signatures of kernels.h; f32 activations, f32 accumulation) ----------
 * W (rows, cols) @ x (cols,) -> y (rows,) for rows [r0, r1). Q8 sums q*x per row, then scales;
 * Q4 sums (nib-8)*x per group, scales the group sum, adds groups in order. */
void qhx_k_matvec_q8_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matvec_q4_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
/* The multi-row twin of qhx_k_matvec_q4_ref (kernels.h qhx_matvec_multi_fn): each group's nibbles
 * unpacked once for all nb rows, y[b] bitwise qhx_k_matvec_q4_ref's for x[b]. */
void qhx_k_matvec_multi_q4_ref(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb, int64_t r0,
                               int64_t r1);
/* X (n, cols; stride ldx) @ W^T -> Y (n, rows; stride ldy) for rows [r0, r1); each token row is
 * computed exactly as the matvec above computes it (bitwise the same). */
void qhx_k_matmul_q8_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                         int64_t n, int64_t r0, int64_t r1);
void qhx_k_matmul_q4_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                         int64_t n, int64_t r0, int64_t r1);

/* Row r of W dequantized to f32 -> out (cols,): exactly qhx_dequant_q8_row / _q4_row of that row
 * (embedding lookup from a quantized table). */
void qhx_k_row_q8_ref(const qhx_weight *w, int64_t r, float *out);
void qhx_k_row_q4_ref(const qhx_weight *w, int64_t r, float *out);

/* Q6: per group s = sum_i (code - 32) * x[...] over the values in order, y[r] += d[r, g] * s. */
void qhx_k_matvec_q6_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matmul_q6_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                         int64_t n, int64_t r0, int64_t r1);
void qhx_k_row_q6_ref(const qhx_weight *w, int64_t r, float *out);

/* ---- Q4A: 4-bit codes with a per-group scale and zero point under a super-block scale --------
 * (kernels/ref/quant_q4a.c; docs/formats.md, "Q4A"). Groups of 32 values along the row, super-
 * blocks of 8 groups (the last one of a row may hold fewer). Per super-block an f16 d; per group
 * a byte s (scale, 0..255) and a byte z (zero point in 1/16 steps, 0..255); per value a code u in
 * [0, 15], in exactly Q4's nibble layout:
 *
 *   w = c * (16 u - z),   c = f32(d) * 2^-12 * s   (c exact in f32; the product rounded once)
 *
 * i.e. a step of d s / 256 and an offset of -z / 16 steps. The quantizer searches d and every
 * group's (s, z) for the least squared error, each term weighted by imp[c] when imp is given
 * (per column, >= 0; NULL = all 1). Needs n % 32 == 0. q may be NULL (the scales only). Returns 0,
 * or -1 on a NaN, an infinity, |w| > 1e6 or a bad n. */
#define QHX_Q4A_GROUP 32
#define QHX_Q4A_SUPER 8 /* groups per super-block */
static inline int64_t qhx_q4a_row_supers(int64_t cols) { return (cols / QHX_Q4A_GROUP + QHX_Q4A_SUPER - 1) / QHX_Q4A_SUPER; }
static inline int64_t qhx_q4a_row_sub_bytes(int64_t cols) { return 2 * (cols / QHX_Q4A_GROUP); }

int qhx_quant_q4a_row(const float *w, const float *imp, int64_t n, uint8_t *q /* OUT (n/2) */,
                      uint16_t *super /* OUT (supers), f16 */, uint8_t *sub /* OUT (n/16) */);

/* The codes qhx_quant_q4a_row gives for the scales it returned (super, sub): the second pass of a
 * writer that keeps the scales. */
void qhx_quant_q4a_codes(const float *w, int64_t n, const uint16_t *super, const uint8_t *sub, uint8_t *q /* OUT (n/2) */);

/* out[c] = the stored value of c, as above. */
void qhx_dequant_q4a_row(const uint8_t *q, const uint16_t *super, const uint8_t *sub, int64_t n, float *out /* OUT (n) */);

/* Reference kernels, f32 activations: per group s = sum_i (16 u - z) x[...] (the group's low
 * nibbles, then its high ones), y[r] += c * s, groups in order. */
void qhx_k_matvec_q4a_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matmul_q4a_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                          int64_t n, int64_t r0, int64_t r1);
void qhx_k_row_q4a_ref(const qhx_weight *w, int64_t r, float *out);

/* The scalar model of the int8-activation kernels (kernels/x86/q4i8x_avx2.c): x quantized per
 * block of 32 as the SIMD kernels do (dx = max|x| / 127, codes to nearest even), exact int32 lane
 * sums, then the SIMD kernels' f32 operations in their order, so their results equal these bit
 * for bit. Rows longer than QHX_Q4A_I8X_MAX_COLS take qhx_k_matvec_q4a_ref (as the SIMD ones do). */
#define QHX_Q4A_I8X_MAX_COLS 8192
void qhx_k_matvec_q4a_i8x_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matmul_q4a_i8x_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                              int64_t n, int64_t r0, int64_t r1);

/* The scalar model of the int8-activation prefill GEMM (kernels/x86/gemm_i8_avx2.c and its
 * AVX-VNNI / AVX-512 builds): x quantized per block of 32 as above; per group g the exact integer
 * isum = 16 sum u q - z sum q (|isum| < 2^21, so exact in f32 too), then one f32 FMA per group in
 * column order: y = fmaf((float)isum, c dx, y) from y = 0, c dx one f32 product. Not the per-token
 * model's order (its results differ from it by f32 rounding); any cols that is a multiple of 32,
 * others take qhx_k_matmul_q4a_ref. Output (t, r) depends on row r and token t only. */
void qhx_k_matmul_q4a_i8gemm_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                                 int64_t n, int64_t r0, int64_t r1);

/* GGUF tensors' ggml blocks in place (QHX_W_GGML; kernels/ref/gguf_linear.c): each block
 * dequantized by kernels/gguf_quant.h, f32 dots in linear_ref.c's lane order. */
void qhx_k_matvec_ggml_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matmul_ggml_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                           int64_t r0, int64_t r1);
void qhx_k_row_ggml_ref(const qhx_weight *w, int64_t r, float *out);
/* out[0..n) = x rounded as llama.cpp rounds activations for a weight of ggml type `type` (its
 * vec_dot format: Q8_K for the K-quants and IQ4_XS, else Q8_0; gguf_linear.c); n a whole number
 * of the type's blocks. The GGML kernels multiply these, not x. */
void qhx_ggml_round_x(uint32_t type, const float *x, int64_t n, float *out);

/* The integer form of the GGML matvec and matmul (kernels/ref/gguf_dot.c has the arithmetic and
 * its float order): the weight codes times the activations' int8 codes, the float scales once per
 * block, as llama.cpp's CPU backend computes. For Q8_0, Q5_0, Q4_K, Q5_K and Q6_K
 * (qhx_ggml_dot_has); other types run the f32 references above. */
int qhx_ggml_dot_has(uint32_t type);
/* The activations in the type's vec_dot form: codes q[n], scales d[n / 32 or n / 256], and for the
 * 256-value form the sum of each 16 codes bsum[n / 16]; q * d is qhx_ggml_round_x's value. */
typedef struct qhx_ggml_xq {
    int8_t *q;
    float *d;
    int16_t *bsum;
} qhx_ggml_xq;
/* Bytes of one buffer for n values (n a multiple of 32), and its parts (buf aligned for floats). */
size_t qhx_ggml_xq_size(int64_t n);
qhx_ggml_xq qhx_ggml_xq_at(void *buf, int64_t n);
void qhx_ggml_quant_x(uint32_t type, const float *x, int64_t n, qhx_ggml_xq q);
/* One row of cols values dotted with quantized activations (a type qhx_ggml_dot_has). */
float qhx_ggml_dot_row(uint32_t type, const uint8_t *row, int64_t cols, qhx_ggml_xq x);
void qhx_k_matvec_ggml_dot_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1);
void qhx_k_matmul_ggml_dot_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                               int64_t r0, int64_t r1);

/* Install the reference kernels above into k->matvec/matmul/row[QHX_W_Q8 / QHX_W_Q4 / QHX_W_Q6 / QHX_W_Q4A /
 * QHX_W_GGML].
 * Leaves every other slot as it is; qhx_kern_select calls this before any SIMD override. */
void qhx_kern_ref_quant(qhx_kernels *k);

#endif
