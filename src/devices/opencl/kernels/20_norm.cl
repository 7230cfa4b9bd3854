/* Row norms: one work-group per row, each work-item its strided share of the row, a fixed tree
 * for the sums. kind 0: x r w (Qwen3-VL); kind 1: x r (1 + w) (Qwen3.5). */

/* x (n, H) [+= add]; out = norm(x) with w; out may be x (each work-item rewrites what it read) */
kernel void k_rmsnorm(int kind, global uchar *xb, ulong xo, global const uchar *ab, ulong ao, int has_add,
                      global const uchar *wb, ulong wo, global uchar *ob, ulong oo, long H, float eps) {
    local float scratch[WG];
    const long t = get_group_id(0);
    global float *x = F(xb, xo) + t * H, *out = F(ob, oo) + t * H;
    global const float *w = CF(wb, wo);
    float ss = 0.0f;
    for (long i = get_local_id(0); i < H; i += WG) {
        float v = x[i];
        if (has_add) x[i] = v = v + CF(ab, ao)[t * H + i];
        ss += v * v;
    }
    ss = wg_sum(ss, scratch);
    const float r = kind ? 1.0f / sqrt(ss / (float)H + eps) : (float)(1.0f / sqrt(ss / (float)H + eps));
    for (long i = get_local_id(0); i < H; i += WG) {
        const float v = x[i];
        out[i] = kind ? (v * r) * (1.0f + w[i]) : w[i] * (v * r);
    }
}

/* LayerNorm of n rows of width values: y = (x - mean) inv w (+ b) */
kernel void k_layernorm(global const uchar *xb, ulong xo, global const uchar *wb, ulong wo, global const uchar *bb,
                        ulong bo, int has_b, global uchar *yb, ulong yo, long width, float eps) {
    local float scratch[WG];
    const long t = get_group_id(0);
    global const float *x = CF(xb, xo) + t * width, *w = CF(wb, wo);
    global float *y = F(yb, yo) + t * width;
    float s = 0.0f;
    for (long i = get_local_id(0); i < width; i += WG) s += x[i];
    const float mean = wg_sum(s, scratch) / (float)width;
    float v = 0.0f;
    for (long i = get_local_id(0); i < width; i += WG) {
        const float d = x[i] - mean;
        v += d * d;
    }
    const float inv = 1.0f / sqrt(wg_sum(v, scratch) / (float)width + eps);
    for (long i = get_local_id(0); i < width; i += WG) {
        const float tt = (x[i] - mean) * inv * w[i];
        y[i] = has_b ? tt + CF(bb, bo)[i] : tt;
    }
}

/* NeoX rotary of the first rot dims of n rows of nh heads of hd (row stride ld): global (rot / 2, nh, n) */
kernel void k_rope_rows(global uchar *xb, ulong xo, long ld, long hd, long rot, global const uchar *cb, ulong co,
                        global const uchar *sb, ulong so) {
    const long i = get_global_id(0), h = get_global_id(1), t = get_global_id(2), half_r = rot / 2;
    if (i >= half_r) return;
    global float *v = F(xb, xo) + t * ld + h * hd;
    const float c = CF(cb, co)[t * half_r + i], s = CF(sb, so)[t * half_r + i];
    const float x0 = v[i], x1 = v[i + half_r];
    v[i] = x0 * c - x1 * s;
    v[i + half_r] = x1 * c + x0 * s;
}
