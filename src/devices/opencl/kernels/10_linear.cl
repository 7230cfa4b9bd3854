/* Linear layers: one work-group per (output row, tile of up to TT tokens); each work-item sums a
 * strided share of the row (columns, or whole quantization groups for the blocked formats, each
 * group summed in the reference's order) for every token of the tile, then a fixed tree over
 * the work-group per token. So a row's value depends only on the row and the token's input: a
 * decode step, a prompt batch and several sequences' rows get the same bits. Weight planes: wd (values / codes), w1 (q8 row scales, q4 / q6 / q4a
 * f16 group scales), w2 (q6 high bits, q4a group bytes). */

#define WARGS global const uchar *wd, ulong wo, global const uchar *w1, ulong o1, global const uchar *w2, ulong o2
#define WPASS wd, wo, w1, o1, w2, o2

/* Each part_ function adds the work-item's share of row r against nt <= TT token rows x, x +
 * ldx, ... into s[0 .. nt): every weight value is read once for all of them, and each token's
 * sum runs in the same order whatever nt is, so a token's bits do not depend on its tile. */
#define TT 8 /* tokens per work-group */

/* The plain formats read four columns per work-item at a time (vload4 / vload_half4: 8- or
 * 16-byte loads, adjacent work-items adjacent chunks), then the last cols % 4 columns one
 * each. The four products are added in column order. */
#define PART_VEC4(LOAD4, LOAD1)                                                                  \
    const long c4 = cols / 4;                                                                     \
    for (long j = get_local_id(0); j < c4; j += WG) {                                             \
        const float4 wv = LOAD4;                                                                  \
        for (int k = 0; k < nt; k++) {                                                            \
            const float4 xv = vload4(j, x + k * ldx);                                             \
            float a = s[k];                                                                       \
            a += wv.x * xv.x;                                                                     \
            a += wv.y * xv.y;                                                                     \
            a += wv.z * xv.z;                                                                     \
            a += wv.w * xv.w;                                                                     \
            s[k] = a;                                                                             \
        }                                                                                         \
    }                                                                                             \
    for (long c = 4 * c4 + get_local_id(0); c < cols; c += WG) {                                  \
        const float wv = LOAD1;                                                                   \
        for (int k = 0; k < nt; k++) s[k] += wv * x[k * ldx + c];                                 \
    }

void part_f32(WARGS, long r, long cols, long group, global const float *x, long ldx, int nt, float *s) {
    global const float *w = CF(wd, wo) + r * cols;
    PART_VEC4(vload4(j, w), w[c])
}

void part_f16(WARGS, long r, long cols, long group, global const float *x, long ldx, int nt, float *s) {
    global const half *w = (global const half *)(wd + wo) + r * cols;
    PART_VEC4(vload_half4(j, w), vload_half(c, w))
}

float4 bf16_4(global const ushort *w, long j) {
    const ushort4 b = vload4(j, w);
    return (float4)(bf16_f(b.x), bf16_f(b.y), bf16_f(b.z), bf16_f(b.w));
}

void part_bf16(WARGS, long r, long cols, long group, global const float *x, long ldx, int nt, float *s) {
    global const ushort *w = (global const ushort *)(wd + wo) + r * cols;
    PART_VEC4(bf16_4(w, j), bf16_f(w[c]))
}

/* the row scale multiplies the finished sum (post_q8) */
void part_q8(WARGS, long r, long cols, long group, global const float *x, long ldx, int nt, float *s) {
    global const char *q = (global const char *)(wd + wo) + r * cols;
    PART_VEC4(convert_float4(vload4(j, q)), (float)q[c])
}

void part_q4(WARGS, long r, long cols, long group, global const float *x, long ldx, int nt, float *s) {
    const long half_g = group / 2, ng = cols / group;
    global const uchar *q = wd + wo + r * (cols / 2);
    global const half *d = (global const half *)(w1 + o1) + r * ng;
    for (long g = get_local_id(0); g < ng; g += WG) {
        global const uchar *qg = q + g * half_g;
        float sg[TT];
        for (int k = 0; k < TT; k++) sg[k] = 0.0f;
        for (long i = 0; i < half_g; i++) {
            const float lo = (float)((int)(qg[i] & 15) - 8), hi = (float)((int)(qg[i] >> 4) - 8);
            for (int k = 0; k < nt; k++) {
                global const float *xg = x + k * ldx + g * group;
                sg[k] += lo * xg[i];
                sg[k] += hi * xg[i + half_g];
            }
        }
        const float dg = vload_half(g, d);
        for (int k = 0; k < nt; k++) s[k] += dg * sg[k];
    }
}

int q6_code(global const uchar *lo, global const uchar *hi, long group, long i) {
    const long half_g = group / 2, quarter = group / 4;
    const int low = i < half_g ? lo[i] & 15 : lo[i - half_g] >> 4;
    const int high = (hi[i % quarter] >> (2 * (i / quarter))) & 3;
    return low | high << 4;
}

void part_q6(WARGS, long r, long cols, long group, global const float *x, long ldx, int nt, float *s) {
    const long ng = cols / group;
    global const uchar *lo = wd + wo + r * (cols / 2), *hi = w2 + o2 + r * (cols / 4);
    global const half *d = (global const half *)(w1 + o1) + r * ng;
    for (long g = get_local_id(0); g < ng; g += WG) {
        float sg[TT];
        for (int k = 0; k < TT; k++) sg[k] = 0.0f;
        for (long i = 0; i < group; i++) {
            const float wv = (float)(q6_code(lo + g * group / 2, hi + g * group / 4, group, i) - 32);
            for (int k = 0; k < nt; k++) sg[k] += wv * x[k * ldx + g * group + i];
        }
        const float dg = vload_half(g, d);
        for (int k = 0; k < nt; k++) s[k] += dg * sg[k];
    }
}

/* q4a: groups of 32 under super-blocks of 8 groups; w = c (16 u - z), c = d 2^-12 s */
void part_q4a(WARGS, long r, long cols, long group, global const float *x, long ldx, int nt, float *s) {
    const long ng = cols / 32, ns = (ng + 7) / 8;
    global const uchar *q = wd + wo + r * (cols / 2), *sub = w2 + o2 + r * 2 * ng;
    global const half *d = (global const half *)(w1 + o1) + r * ns;
    for (long g = get_local_id(0); g < ng; g += WG) {
        global const uchar *qg = q + g * 16;
        const int z = sub[2 * g + 1];
        float sg[TT];
        for (int k = 0; k < TT; k++) sg[k] = 0.0f;
        for (int i = 0; i < 16; i++) {
            const float wv = (float)(16 * (qg[i] & 15) - z);
            for (int k = 0; k < nt; k++) sg[k] += wv * x[k * ldx + g * 32 + i];
        }
        for (int i = 0; i < 16; i++) {
            const float wv = (float)(16 * (qg[i] >> 4) - z);
            for (int k = 0; k < nt; k++) sg[k] += wv * x[k * ldx + g * 32 + i + 16];
        }
        const float cf = vload_half(g / 8, d) * 0x1p-12f * (float)sub[2 * g];
        for (int k = 0; k < nt; k++) s[k] += cf * sg[k];
    }
}

float post_q8(WARGS, long r, float s) { return s * CF(w1, o1)[r]; }
float post_none(WARGS, long r, float s) { return s; }

/* s[k] (k < TT) summed over the work-group, one fixed tree per token (the tree of wg_sum):
 * the results in s of work-item 0. scratch: TT WG floats. */
void wg_sum_tt(float *s, local float *scratch) {
    const int lid = get_local_id(0);
    for (int k = 0; k < TT; k++) scratch[k * WG + lid] = s[k];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int st = WG / 2; st > 0; st >>= 1) {
        if (lid < st)
            for (int k = 0; k < TT; k++) scratch[k * WG + lid] += scratch[k * WG + lid + st];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int k = 0; k < TT; k++) s[k] = scratch[k * WG];
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* Y[t, r] = W[r] . X[t] for TT tokens from t0: global (rows WG, ceil(n / TT)), local (WG, 1) */
#define DEF_LINEAR(FMT, POST)                                                                             \
    kernel void k_linear_##FMT(WARGS, long cols, long group, global const uchar *xb, ulong xo, long ldx,  \
                               global uchar *yb, ulong yo, long ldy, long n) {                            \
        local float scratch[TT * WG];                                                                     \
        const long r = get_group_id(0), t0 = get_group_id(1) * TT;                                        \
        const int nt = n - t0 < TT ? (int)(n - t0) : TT;                                                  \
        float s[TT];                                                                                      \
        for (int k = 0; k < TT; k++) s[k] = 0.0f;                                                         \
        part_##FMT(WPASS, r, cols, group, CF(xb, xo) + t0 * ldx, ldx, nt, s);                             \
        wg_sum_tt(s, scratch);                                                                            \
        if (get_local_id(0) == 0)                                                                         \
            for (int k = 0; k < nt; k++) F(yb, yo)[(t0 + k) * ldy + r] = POST(WPASS, r, s[k]);            \
    }

/* G[t, r] = silu(gate[r] . X[t]) * (up[r] . X[t]), U[t, r] = up[r] . X[t] */
#define GARGS global const uchar *gd, ulong go, global const uchar *g1, ulong go1, global const uchar *g2, ulong go2
#define GPASS gd, go, g1, go1, g2, go2
#define DEF_SWIGLU(FMT, POST)                                                                             \
    kernel void k_swiglu_##FMT(GARGS, WARGS, long cols, long group, global const uchar *xb, ulong xo,     \
                               long ldx, global uchar *gb, ulong gbo, global uchar *ub, ulong ubo, long ld, \
                               long n) {                                                                  \
        local float scratch[TT * WG];                                                                     \
        const long r = get_group_id(0), t0 = get_group_id(1) * TT;                                        \
        const int nt = n - t0 < TT ? (int)(n - t0) : TT;                                                  \
        global const float *x = CF(xb, xo) + t0 * ldx;                                                    \
        float g[TT], u[TT];                                                                               \
        for (int k = 0; k < TT; k++) g[k] = u[k] = 0.0f;                                                  \
        part_##FMT(GPASS, r, cols, group, x, ldx, nt, g);                                                 \
        part_##FMT(WPASS, r, cols, group, x, ldx, nt, u);                                                 \
        wg_sum_tt(g, scratch);                                                                            \
        wg_sum_tt(u, scratch);                                                                            \
        if (get_local_id(0) == 0)                                                                         \
            for (int k = 0; k < nt; k++) {                                                                \
                const float gv = POST(GPASS, r, g[k]), uv = POST(WPASS, r, u[k]);                         \
                F(gb, gbo)[(t0 + k) * ld + r] = silu_f(gv) * uv;                                          \
                F(ub, ubo)[(t0 + k) * ld + r] = uv;                                                       \
            }                                                                                             \
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
