/* Attention over a KV cache (and over an image's patches): the q / k head norms and rotary, the
 * cache store in f32 / f16 / q8, and the attention itself: one work-group per (query head,
 * token) with an online softmax over tiles of WG keys (each work-item one key's score, then each
 * work-item its value dimensions). A token's result depends on its query and the keys it sees,
 * never on how many tokens came in the same call. KV types: 0 f32, 1 f16, 2 q8 (per block of 32
 * values an f32 scale, the scales of a row first, then its int8 values). */

#define Q8_BLOCK 32

float kv_load(int type, global const uchar *row, long width, long idx) {
    if (type == 0) return ((global const float *)row)[idx];
    if (type == 1) return vload_half(idx, (global const half *)row);
    return ((global const float *)row)[idx / Q8_BLOCK] * (float)((global const char *)(row + (width / Q8_BLOCK) * 4))[idx];
}

/* q (n, nh hd) and k (n, nkv hd) in place: each head RMS-normed with its weights (kind as
 * k_rmsnorm), then NeoX-rotated over its first rot dims. global (WG (nh + nkv), n) */
kernel void k_attn_prep(global uchar *qb, ulong qo, global uchar *kb, ulong ko, long nh, long nkv, long hd, long rot,
                        int kind, global const uchar *qnb, ulong qno, global const uchar *knb, ulong kno, float eps,
                        global const uchar *cb, ulong co, global const uchar *sb, ulong so) {
    local float scratch[WG];
    local float v[HD_MAX];
    const long hh = get_group_id(0), t = get_global_id(1), half_r = rot / 2;
    const int is_q = hh < nh;
    global float *x = is_q ? F(qb, qo) + t * nh * hd + hh * hd : F(kb, ko) + t * nkv * hd + (hh - nh) * hd;
    global const float *w = is_q ? CF(qnb, qno) : CF(knb, kno);
    float ss = 0.0f;
    for (long i = get_local_id(0); i < hd; i += WG) {
        v[i] = x[i];
        ss += v[i] * v[i];
    }
    ss = wg_sum(ss, scratch); /* its barriers also publish v */
    const float r = 1.0f / sqrt(ss / (float)hd + eps);
    for (long i = get_local_id(0); i < hd; i += WG) v[i] = kind ? (v[i] * r) * (1.0f + w[i]) : w[i] * (v[i] * r);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long i = get_local_id(0); i < hd; i += WG) {
        float o = v[i];
        if (i < half_r) o = v[i] * CF(cb, co)[t * half_r + i] - v[i + half_r] * CF(sb, so)[t * half_r + i];
        else if (i < rot) o = v[i] * CF(cb, co)[t * half_r + i - half_r] + v[i - half_r] * CF(sb, so)[t * half_r + i - half_r];
        x[i] = o;
    }
}

/* rows [pos, pos + n) of a layer's keys (z 0, from kb) and values (z 1, from vb), f32 / f16:
 * global (width, n, 2) */
kernel void k_kv_store(int type, global const uchar *kb, ulong ko, global const uchar *vb, ulong vo,
                       global uchar *cb, ulong kdst, ulong vdst, ulong rowb, long width) {
    const long e = get_global_id(0), t = get_global_id(1), z = get_global_id(2);
    if (e >= width) return;
    const float x = (z ? CF(vb, vo) : CF(kb, ko))[t * width + e];
    global uchar *row = cb + (z ? vdst : kdst) + t * rowb;
    if (type == 0) ((global float *)row)[e] = x;
    else ((global ushort *)row)[e] = f16_bits(x);
}

/* the same in q8: global (width / 32, n, 2), one block per work-item: scale = max |x| / 127,
 * q = round(x 127 / max) (halves away from zero) */
kernel void k_kv_store_q8(global const uchar *kb, ulong ko, global const uchar *vb, ulong vo, global uchar *cb,
                          ulong kdst, ulong vdst, ulong rowb, long width) {
    const long blk = get_global_id(0), t = get_global_id(1), z = get_global_id(2);
    if (blk >= width / Q8_BLOCK) return;
    global const float *x = (z ? CF(vb, vo) : CF(kb, ko)) + t * width + blk * Q8_BLOCK;
    global uchar *row = cb + (z ? vdst : kdst) + t * rowb;
    float amax = 0.0f;
    for (int j = 0; j < Q8_BLOCK; j++) amax = fabs(x[j]) > amax ? fabs(x[j]) : amax;
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    ((global float *)row)[blk] = amax / 127.0f;
    global char *q = (global char *)(row + (width / Q8_BLOCK) * 4) + blk * Q8_BLOCK;
    for (int j = 0; j < Q8_BLOCK; j++) q[j] = (char)round(x[j] * id);
}

/* out[t, h] = softmax(scale q[t, h] . K[0 .. nk)) V over the keys token t sees (causal: n_past
 * + t + 1, else all n_past), then times sigmoid(gate) where there is one. K and V rows of rowb
 * bytes from kbase / vbase of cb; head h reads KV head h / rep at element (h / rep) hd.
 * global (WG nh, n) */
kernel void k_attn(global const uchar *qb, ulong qo, long ldq, global const uchar *cb, ulong kbase, ulong vbase,
                   ulong rowb, int type, long width, long hd, long rep, long n_past, int causal, float scale,
                   global const uchar *gb, ulong go, int has_gate, global uchar *ob, ulong oo, long ldo) {
    local float scratch[WG];
    local float qv[HD_MAX];
    local float p[WG];
    const int lid = get_local_id(0);
    const long h = get_group_id(0), t = get_global_id(1), nk = causal ? n_past + t + 1 : n_past;
    const long idx = (h / rep) * hd;
    global const float *q = CF(qb, qo) + t * ldq + h * hd;
    for (long d = lid; d < hd; d += WG) qv[d] = q[d];
    barrier(CLK_LOCAL_MEM_FENCE);
    float m = -INFINITY, l = 0.0f, acc[HD_MAX / WG];
    for (int k = 0; k < HD_MAX / WG; k++) acc[k] = 0.0f;
    for (long j0 = 0; j0 < nk; j0 += WG) {
        const long j = j0 + lid;
        float s = -INFINITY;
        if (j < nk) {
            global const uchar *row = cb + kbase + j * rowb;
            float dot = 0.0f;
            for (long d = 0; d < hd; d++) dot += qv[d] * kv_load(type, row, width, idx + d);
            s = dot * scale;
        }
        const float m_new = fmax(m, wg_max(s, scratch));
        const float corr = exp(m - m_new), e = j < nk ? exp(s - m_new) : 0.0f;
        p[lid] = e;
        l = l * corr + wg_sum(e, scratch);
        const long nt = nk - j0 < WG ? nk - j0 : WG;
        for (int k = 0; k < HD_MAX / WG; k++) {
            const long d = lid + k * WG;
            if (d >= hd) break;
            float a = acc[k] * corr;
            for (long jj = 0; jj < nt; jj++) a += p[jj] * kv_load(type, cb + vbase + (j0 + jj) * rowb, width, idx + d);
            acc[k] = a;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        m = m_new;
    }
    global float *o = F(ob, oo) + t * ldo + h * hd;
    for (int k = 0; k < HD_MAX / WG; k++) {
        const long d = lid + k * WG;
        if (d >= hd) break;
        float r = acc[k] / l;
        if (has_gate) r *= sigmoid_f(CF(gb, go)[t * ldo + h * hd + d]);
        o[d] = r;
    }
}
