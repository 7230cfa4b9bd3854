/* Linear layers: one work-group per (output row, token); each work-item sums a strided share of
 * the row (columns, or whole quantization groups for the blocked formats, each group summed in
 * the reference's order), then a fixed tree over the work-group. So a row's value depends only
 * on the row and the token's input: a decode step, a prompt batch and several sequences'
 * rows get the same bits. Weight planes: wd (values / codes), w1 (q8 row scales, q4 / q6 / q4a
 * f16 group scales), w2 (q6 high bits, q4a group bytes). */

#define WARGS global const uchar *wd, ulong wo, global const uchar *w1, ulong o1, global const uchar *w2, ulong o2
#define WPASS wd, wo, w1, o1, w2, o2

float part_f32(WARGS, long r, long cols, long group, global const float *x) {
    global const float *w = CF(wd, wo) + r * cols;
    float s = 0.0f;
    for (long c = get_local_id(0); c < cols; c += WG) s += w[c] * x[c];
    return s;
}

float part_f16(WARGS, long r, long cols, long group, global const float *x) {
    global const half *w = (global const half *)(wd + wo) + r * cols;
    float s = 0.0f;
    for (long c = get_local_id(0); c < cols; c += WG) s += vload_half(c, w) * x[c];
    return s;
}

float part_bf16(WARGS, long r, long cols, long group, global const float *x) {
    global const ushort *w = (global const ushort *)(wd + wo) + r * cols;
    float s = 0.0f;
    for (long c = get_local_id(0); c < cols; c += WG) s += bf16_f(w[c]) * x[c];
    return s;
}

/* the row scale multiplies the finished sum (post_q8) */
float part_q8(WARGS, long r, long cols, long group, global const float *x) {
    global const char *q = (global const char *)(wd + wo) + r * cols;
    float s = 0.0f;
    for (long c = get_local_id(0); c < cols; c += WG) s += (float)q[c] * x[c];
    return s;
}

float part_q4(WARGS, long r, long cols, long group, global const float *x) {
    const long half_g = group / 2, ng = cols / group;
    global const uchar *q = wd + wo + r * (cols / 2);
    global const half *d = (global const half *)(w1 + o1) + r * ng;
    float acc = 0.0f;
    for (long g = get_local_id(0); g < ng; g += WG) {
        global const uchar *qg = q + g * half_g;
        global const float *xg = x + g * group;
        float s = 0.0f;
        for (long i = 0; i < half_g; i++) {
            s += (float)((int)(qg[i] & 15) - 8) * xg[i];
            s += (float)((int)(qg[i] >> 4) - 8) * xg[i + half_g];
        }
        acc += vload_half(g, d) * s;
    }
    return acc;
}

int q6_code(global const uchar *lo, global const uchar *hi, long group, long i) {
    const long half_g = group / 2, quarter = group / 4;
    const int low = i < half_g ? lo[i] & 15 : lo[i - half_g] >> 4;
    const int high = (hi[i % quarter] >> (2 * (i / quarter))) & 3;
    return low | high << 4;
}

float part_q6(WARGS, long r, long cols, long group, global const float *x) {
    const long ng = cols / group;
    global const uchar *lo = wd + wo + r * (cols / 2), *hi = w2 + o2 + r * (cols / 4);
    global const half *d = (global const half *)(w1 + o1) + r * ng;
    float acc = 0.0f;
    for (long g = get_local_id(0); g < ng; g += WG) {
        float s = 0.0f;
        for (long i = 0; i < group; i++)
            s += (float)(q6_code(lo + g * group / 2, hi + g * group / 4, group, i) - 32) * x[g * group + i];
        acc += vload_half(g, d) * s;
    }
    return acc;
}

/* q4a: groups of 32 under super-blocks of 8 groups; w = c (16 u - z), c = d 2^-12 s */
float part_q4a(WARGS, long r, long cols, long group, global const float *x) {
    const long ng = cols / 32, ns = (ng + 7) / 8;
    global const uchar *q = wd + wo + r * (cols / 2), *sub = w2 + o2 + r * 2 * ng;
    global const half *d = (global const half *)(w1 + o1) + r * ns;
    float acc = 0.0f;
    for (long g = get_local_id(0); g < ng; g += WG) {
        global const uchar *qg = q + g * 16;
        global const float *xg = x + g * 32;
        const int z = sub[2 * g + 1];
        float s = 0.0f;
        for (int i = 0; i < 16; i++) s += (float)(16 * (qg[i] & 15) - z) * xg[i];
        for (int i = 0; i < 16; i++) s += (float)(16 * (qg[i] >> 4) - z) * xg[i + 16];
        acc += vload_half(g / 8, d) * 0x1p-12f * (float)sub[2 * g] * s;
    }
    return acc;
}

float post_q8(WARGS, long r, float s) { return s * CF(w1, o1)[r]; }
float post_none(WARGS, long r, float s) { return s; }

/* Y[t, r] = W[r] . X[t]: global (rows WG, n), local (WG, 1) */
#define DEF_LINEAR(FMT, POST)                                                                             \
    kernel void k_linear_##FMT(WARGS, long cols, long group, global const uchar *xb, ulong xo, long ldx,  \
                               global uchar *yb, ulong yo, long ldy) {                                     \
        local float scratch[WG];                                                                          \
        const long r = get_group_id(0), t = get_global_id(1);                                             \
        float s = wg_sum(part_##FMT(WPASS, r, cols, group, CF(xb, xo) + t * ldx), scratch);               \
        if (get_local_id(0) == 0) F(yb, yo)[t * ldy + r] = POST(WPASS, r, s);                             \
    }

/* G[t, r] = silu(gate[r] . X[t]) * (up[r] . X[t]), U[t, r] = up[r] . X[t] */
#define GARGS global const uchar *gd, ulong go, global const uchar *g1, ulong go1, global const uchar *g2, ulong go2
#define GPASS gd, go, g1, go1, g2, go2
#define DEF_SWIGLU(FMT, POST)                                                                             \
    kernel void k_swiglu_##FMT(GARGS, WARGS, long cols, long group, global const uchar *xb, ulong xo,     \
                               long ldx, global uchar *gb, ulong gbo, global uchar *ub, ulong ubo, long ld) { \
        local float scratch[WG];                                                                          \
        const long r = get_group_id(0), t = get_global_id(1);                                             \
        global const float *x = CF(xb, xo) + t * ldx;                                                     \
        float g = POST(GPASS, r, wg_sum(part_##FMT(GPASS, r, cols, group, x), scratch));                  \
        float u = POST(WPASS, r, wg_sum(part_##FMT(WPASS, r, cols, group, x), scratch));                  \
        if (get_local_id(0) == 0) {                                                                       \
            F(gb, gbo)[t * ld + r] = silu_f(g) * u;                                                       \
            F(ub, ubo)[t * ld + r] = u;                                                                   \
        }                                                                                                 \
    }

DEF_LINEAR(f32, post_none)
DEF_LINEAR(f16, post_none)
DEF_LINEAR(bf16, post_none)
DEF_LINEAR(q8, post_q8)
DEF_LINEAR(q4, post_none)
DEF_LINEAR(q6, post_none)
DEF_LINEAR(q4a, post_none)
DEF_SWIGLU(f32, post_none)
DEF_SWIGLU(f16, post_none)
DEF_SWIGLU(bf16, post_none)
DEF_SWIGLU(q8, post_q8)
DEF_SWIGLU(q4, post_none)
DEF_SWIGLU(q6, post_none)
DEF_SWIGLU(q4a, post_none)

/* One weight value, as the reference's row dequantization gives it. */
float wval(int fmt, WARGS, long r, long c, long cols, long group) {
    switch (fmt) {
    case 0: return CF(wd, wo)[r * cols + c];
    case 1: return vload_half(r * cols + c, (global const half *)(wd + wo));
    case 2: return bf16_f(((global const ushort *)(wd + wo))[r * cols + c]);
    case 3: return CF(w1, o1)[r] * (float)((global const char *)(wd + wo))[r * cols + c];
    case 4: {
        const long g = c / group, i = c % group, half_g = group / 2;
        const uchar b = (wd + wo)[r * (cols / 2) + g * half_g + (i < half_g ? i : i - half_g)];
        const int v = (i < half_g ? b & 15 : b >> 4) - 8;
        return vload_half(r * (cols / group) + g, (global const half *)(w1 + o1)) * (float)v;
    }
    case 5: {
        const long g = c / group;
        const int u = q6_code(wd + wo + r * (cols / 2) + g * group / 2, w2 + o2 + r * (cols / 4) + g * group / 4,
                              group, c % group);
        return vload_half(r * (cols / group) + g, (global const half *)(w1 + o1)) * (float)(u - 32);
    }
    default: {
        const long g = c / 32, i = c % 32, ng = cols / 32;
        const uchar b = (wd + wo)[r * (cols / 2) + g * 16 + (i < 16 ? i : i - 16)];
        const int u = i < 16 ? b & 15 : b >> 4;
        global const uchar *sub = w2 + o2 + r * 2 * ng;
        const float cf = vload_half(r * ((ng + 7) / 8) + g / 8, (global const half *)(w1 + o1)) * 0x1p-12f * (float)sub[2 * g];
        return cf * (float)(16 * u - (int)sub[2 * g + 1]);
    }
    }
}

/* out[t, c] = W[ids[t], c]: global (cols, n) */
kernel void k_embed(int fmt, WARGS, long cols, long group, global const uchar *ib, ulong io, global uchar *ob, ulong oo) {
    const long c = get_global_id(0), t = get_global_id(1);
    if (c >= cols) return;
    const long r = ((global const int *)(ib + io))[t];
    F(ob, oo)[t * cols + c] = wval(fmt, WPASS, r, c, cols, group);
}
