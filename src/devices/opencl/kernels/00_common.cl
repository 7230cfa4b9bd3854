/* The OpenCL device's kernels (OpenCL C 1.2): what every file shares. Built as one program
 * with -DWG=<work-group size> (a power of two, the local size of every reducing kernel).
 * Buffers are passed as (global uchar *, byte offset) pairs, the device interface's views.
 * f16 data is read with vload_half / written with vstore_half (core OpenCL C: no cl_khr_fp16
 * needed) and computed in f32. Contraction is off so that a separate multiply and add stay two
 * roundings, as in the host reference kernels. */
#pragma OPENCL FP_CONTRACT OFF

#ifndef WG
#define WG 64
#endif
#define HD_MAX 256 /* the largest attention head (values per work-item: HD_MAX / WG) */

#define F(buf, off) ((global float *)((buf) + (off)))
#define CF(buf, off) ((global const float *)((buf) + (off)))

/* The sum of v over the work-group (every work-item gets it), a fixed tree: the result does not
 * depend on timing. scratch: WG floats of local memory. */
float wg_sum(float v, local float *scratch) {
    const int lid = get_local_id(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

float wg_max(float v, local float *scratch) {
    const int lid = get_local_id(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) scratch[lid] = fmax(scratch[lid], scratch[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

float sigmoid_f(float x) { return 1.0f / (1.0f + exp(-x)); }
float silu_f(float x) { return x / (1.0f + exp(-x)); }
float softplus_f(float x) { return x > 20.0f ? x : log1p(exp(x)); }

/* f32 -> f16 bits, round to nearest even, in integer arithmetic: the bits the host's
 * conversion (core/fp16.c) gives, whatever a driver's vstore_half does near ties */
ushort f16_bits(float f) {
    const uint u = as_uint(f), a = u & 0x7fffffffu;
    const ushort sign = (ushort)((u >> 16) & 0x8000u);
    if (a > 0x7f800000u) return (ushort)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (ushort)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        if (a < 0x33000000u) return sign;
        const uint e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126u - e;
        uint r = m >> shift;
        const uint rem = m & ((1u << shift) - 1u), half_v = 1u << (shift - 1u);
        if (rem > half_v || (rem == half_v && (r & 1u))) r++;
        return (ushort)(sign | r);
    }
    uint r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return (ushort)(sign | (r >> 13));
}

/* bf16 bits -> f32 (exact) */
float bf16_f(ushort b) { return as_float((uint)b << 16); }

/* Simple element-wise kernels. */
kernel void k_add(global uchar *xb, ulong xo, global const uchar *ab, ulong ao, long count) {
    const long i = get_global_id(0);
    if (i < count) F(xb, xo)[i] += CF(ab, ao)[i];
}

kernel void k_bias_rows(global uchar *yb, ulong yo, long ldy, global const uchar *bb, ulong bo, long cols) {
    const long c = get_global_id(0), t = get_global_id(1);
    if (c < cols) F(yb, yo)[t * ldy + c] += CF(bb, bo)[c];
}

/* a: 0 GELU tanh, 1 GELU erf, 2 SiLU */
kernel void k_act(global uchar *xb, ulong xo, long count, int a) {
    const long i = get_global_id(0);
    if (i >= count) return;
    global float *x = F(xb, xo);
    const float v = x[i];
    if (a == 0) x[i] = 0.5f * v * (1.0f + tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    else if (a == 1) x[i] = 0.5f * v * (1.0f + erf(v * 0.70710678118654752f));
    else x[i] = silu_f(v);
}

/* G[t, c] = silu(G[t, c]) * U[t, c] for c < cols, rows of stride ld: global (cols, n) */
kernel void k_silu_mul(global uchar *gb, ulong go, global const uchar *ub, ulong uo, long ld, long cols) {
    const long c = get_global_id(0), t = get_global_id(1);
    if (c < cols) F(gb, go)[t * ld + c] = silu_f(F(gb, go)[t * ld + c]) * CF(ub, uo)[t * ld + c];
}

/* src (n, nh 2 hd) -> a, b (n, nh hd) */
kernel void k_split_heads(global const uchar *sb, ulong so, global uchar *ab, ulong ao, global uchar *bb, ulong bo,
                          long nh, long hd) {
    const long e = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
    if (e >= hd) return;
    global const float *s = CF(sb, so) + t * 2 * nh * hd + h * 2 * hd;
    F(ab, ao)[t * nh * hd + h * hd + e] = s[e];
    F(bb, bo)[t * nh * hd + h * hd + e] = s[hd + e];
}
