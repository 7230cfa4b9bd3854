/* The Gated DeltaNet mixer's middle steps (Qwen3.5). C = 2 nk dk + nv dv channels per token. */

/* cv[t, c] = silu(sum_j w[c, j] ext[t + j, c]): global (C, n) */
kernel void k_gdn_conv(global const uchar *eb, ulong eo, global const uchar *wb, ulong wo, global uchar *cb, ulong co,
                       long C, long K) {
    const long c = get_global_id(0), t = get_global_id(1);
    if (c >= C) return;
    global const float *ext = CF(eb, eo), *w = CF(wb, wo);
    float s = 0.0f;
    for (long j = 0; j < K; j++) s += w[c * K + j] * ext[(t + j) * C + c];
    F(cb, co)[t * C + c] = silu_f(s);
}

/* the q heads (then scaled by qscale) and k heads of cv L2-normed: global (WG 2 nk, n) */
kernel void k_gdn_l2(global uchar *cb, ulong co, long C, long nk, long dk, float qscale) {
    local float scratch[WG];
    const long hh = get_group_id(0), t = get_global_id(1);
    global float *x = F(cb, co) + t * C + hh * dk; /* the k heads follow the q heads */
    float ss = 0.0f;
    for (long i = get_local_id(0); i < dk; i += WG) ss += x[i] * x[i];
    const float r = 1.0f / sqrt(wg_sum(ss, scratch) + 1e-6f);
    for (long i = get_local_id(0); i < dk; i += WG) {
        float v = x[i] * r;
        if (hh < nk) v *= qscale;
        x[i] = v;
    }
}

/* beta = sigmoid(beta), g = A softplus(g + dt_bias): global (nv, n) */
kernel void k_gdn_gates(global uchar *bb, ulong bo, global uchar *gb, ulong go, global const uchar *ab, ulong ao,
                        global const uchar *db, ulong dbo, long nv) {
    const long v = get_global_id(0), t = get_global_id(1);
    if (v >= nv) return;
    global float *beta = F(bb, bo) + t * nv, *g = F(gb, go) + t * nv;
    beta[v] = sigmoid_f(beta[v]);
    g[v] = CF(ab, ao)[v] * softplus_f(g[v] + CF(db, dbo)[v]);
}

/* The delta rule of value head v over the n tokens in order, the state S (dk, dv) in place:
 * each work-item owns value columns m (lid + k WG) and walks the key rows in order, as the
 * reference step does per column. global (WG nv), local WG */
kernel void k_gdn_delta(global const uchar *cb, ulong co, global const uchar *bb, ulong bo, global const uchar *gb,
                        ulong go, global uchar *sb, ulong so, global uchar *ob, ulong oo, long n, long C, long nk,
                        long nv, long dk, long dv, long rep) { /* rep < 0: value head v reads key head v % nk */
    local float qk[2 * HD_MAX];
    const int lid = get_local_id(0);
    const long v = get_group_id(0), kh = rep > 0 ? v / rep : v % nk, key_dim = nk * dk;
    global float *S = F(sb, so) + v * dk * dv;
    for (long t = 0; t < n; t++) {
        global const float *row = CF(cb, co) + t * C;
        for (long i = lid; i < dk; i += WG) {
            qk[i] = row[kh * dk + i];
            qk[HD_MAX + i] = row[key_dim + kh * dk + i];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const float decay = exp(CF(gb, go)[t * nv + v]), beta = CF(bb, bo)[t * nv + v];
        for (long m = lid; m < dv; m += WG) {
            float mem = 0.0f;
            for (long i = 0; i < dk; i++) {
                const float s = S[i * dv + m] * decay;
                S[i * dv + m] = s;
                mem += s * qk[HD_MAX + i];
            }
            const float d = (row[2 * key_dim + v * dv + m] - mem) * beta;
            float o = 0.0f;
            for (long i = 0; i < dk; i++) {
                const float s = S[i * dv + m] + qk[HD_MAX + i] * d;
                S[i * dv + m] = s;
                o += s * qk[i];
            }
            F(ob, oo)[t * nv * dv + v * dv + m] = o;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* out[t, v] = (w (x r)) silu(z) per value head: global (WG nv, n) */
kernel void k_gated_norm(global uchar *ob, ulong oo, global const uchar *zb, ulong zo, global const uchar *wb, ulong wo,
                         long nv, long dv, float eps) {
    local float scratch[WG];
    const long v = get_group_id(0), t = get_global_id(1);
    global float *x = F(ob, oo) + t * nv * dv + v * dv;
    global const float *z = CF(zb, zo) + t * nv * dv + v * dv, *w = CF(wb, wo);
    float ss = 0.0f;
    for (long i = get_local_id(0); i < dv; i += WG) ss += x[i] * x[i];
    const float r = 1.0f / sqrt(wg_sum(ss, scratch) / (float)dv + eps);
    for (long i = get_local_id(0); i < dv; i += WG) x[i] = (w[i] * (x[i] * r)) * silu_f(z[i]);
}
