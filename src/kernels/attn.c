/* kernels/attn.c: the block loop and the combine of blocked attention (attn.h), and the scalar
 * block kernel. */
#include "kernels/attn.h"

#include <math.h>

static float dot8(const float *a, const float *b, int64_t n) {
    /* eight running sums (so the compiler may vectorise), then a fixed tree */
    float s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    for (int j = 0; i < n; i++, j++) s[j] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

void qhx_k_attn_block_f32_ref(const float *q, const float *K, const float *V, int64_t ld, int64_t n,
                              int64_t rep, int64_t hd, float scale, float *scores, float *o, float *ml) {
    for (int64_t r = 0; r < rep; r++) {
        const float *qr = q + r * hd;
        float *sr = scores + r * n, *or = o + r * hd;
        float mx = -INFINITY;
        for (int64_t t = 0; t < n; t++) {
            float s = dot8(qr, K + t * ld, hd) * scale;
            sr[t] = s;
            mx = s > mx ? s : mx;
        }
        float sum = 0.0f;
        for (int64_t t = 0; t < n; t++) {
            sr[t] = expf(sr[t] - mx);
            sum += sr[t];
        }
        for (int64_t d = 0; d < hd; d++) or[d] = 0.0f;
        for (int64_t t = 0; t < n; t++) {
            const float *vt = V + t * ld;
            float p = sr[t];
            for (int64_t d = 0; d < hd; d++) or[d] += p * vt[d];
        }
        ml[2 * r] = mx;
        ml[2 * r + 1] = sum;
    }
}

void qhx_attn_block(const qhx_kernels *k, const float *q, const float *K, const float *V, int64_t ld,
                    int64_t n_kv, int64_t b, int64_t rep, int64_t hd, float scale, float *scores, float *part) {
    int64_t t0 = b * QHX_ATTN_BLOCK, n = n_kv - t0 < QHX_ATTN_BLOCK ? n_kv - t0 : QHX_ATTN_BLOCK;
    k->attn_block(q, K + t0 * ld, V + t0 * ld, ld, n, rep, hd, scale, scores, part, part + rep * hd);
}

void qhx_attn_combine(const float *part, int64_t n_blocks, int64_t rep, int64_t hd, float *out) {
    const int64_t pf = qhx_attn_part_floats(rep, hd);
    for (int64_t r = 0; r < rep; r++) {
        float *or = out + r * hd;
        float M = -INFINITY;
        for (int64_t b = 0; b < n_blocks; b++) {
            float m = part[b * pf + rep * hd + 2 * r];
            M = m > M ? m : M;
        }
        float L = 0.0f;
        for (int64_t d = 0; d < hd; d++) or[d] = 0.0f;
        for (int64_t b = 0; b < n_blocks; b++) {
            const float *pb = part + b * pf;
            float e = expf(pb[rep * hd + 2 * r] - M);
            L += pb[rep * hd + 2 * r + 1] * e;
            const float *ob = pb + r * hd;
            for (int64_t d = 0; d < hd; d++) or[d] += ob[d] * e;
        }
        float inv = 1.0f / L;
        for (int64_t d = 0; d < hd; d++) or[d] *= inv;
    }
}

int64_t qhx_attn_group_work(int64_t n_kv, int64_t rep, int64_t hd) {
    return rep * QHX_ATTN_BLOCK + qhx_attn_n_blocks(n_kv) * qhx_attn_part_floats(rep, hd);
}

void qhx_attn_group(const qhx_kernels *k, const float *q, const float *K, const float *V, int64_t ld,
                    int64_t n_kv, int64_t rep, int64_t hd, float scale, float *work, float *out) {
    const int64_t nb = qhx_attn_n_blocks(n_kv), pf = qhx_attn_part_floats(rep, hd);
    float *scores = work, *part = work + rep * QHX_ATTN_BLOCK;
    for (int64_t b = 0; b < nb; b++) qhx_attn_block(k, q, K, V, ld, n_kv, b, rep, hd, scale, scores, part + b * pf);
    qhx_attn_combine(part, nb, rep, hd, out);
}

/* ---- f32 or f16 views ---- */

int64_t qhx_attn_block_kv_work(int64_t rep, int64_t hd, qhx_kv_type type) {
    return rep * QHX_ATTN_BLOCK + (type != QHX_KV_F32 ? 2 * QHX_ATTN_BLOCK * hd : 0);
}

int64_t qhx_attn_group_kv_work(int64_t n_kv, int64_t rep, int64_t hd, qhx_kv_type type) {
    return qhx_attn_block_kv_work(rep, hd, type) + qhx_attn_n_blocks(n_kv) * qhx_attn_part_floats(rep, hd);
}

/* Rows [t0, t0 + n) of one head of K or V (base: the view's K or V) widened into tile (n, hd). */
static void widen_rows(const qhx_kernels *k, const qhx_kv_view *kv, const void *base, int64_t t0, int64_t n,
                       int64_t hd, float *tile) {
    if (kv->type == QHX_KV_F16) {
        for (int64_t t = 0; t < n; t++) k->f16_to_f32((const uint16_t *)base + (t0 + t) * kv->ld, tile + t * hd, hd);
        return;
    }
    for (int64_t t = 0; t < n; t++) { /* q8 */
        const char *row = (const char *)base + (t0 + t) * kv->ld;
        const float *d = (const float *)(row + kv->q8_scales);
        const int8_t *q = (const int8_t *)(row + kv->q8_values);
        float *out = tile + t * hd;
        for (int64_t j = 0; j < hd; j++) out[j] = d[j / QHX_KV_Q8_BLOCK] * (float)q[j];
    }
}

void qhx_attn_block_kv(const qhx_kernels *k, const float *q, const qhx_kv_view *kv, int64_t n_kv, int64_t b,
                       int64_t rep, int64_t hd, float scale, float *work, float *part) {
    float *scores = work;
    if (kv->type == QHX_KV_F32) {
        qhx_attn_block(k, q, kv->K, kv->V, kv->ld, n_kv, b, rep, hd, scale, scores, part);
        return;
    }
    int64_t t0 = b * QHX_ATTN_BLOCK, n = n_kv - t0 < QHX_ATTN_BLOCK ? n_kv - t0 : QHX_ATTN_BLOCK;
    float *Kt = work + rep * QHX_ATTN_BLOCK, *Vt = Kt + QHX_ATTN_BLOCK * hd;
    if (kv->type == QHX_KV_F16 && k->attn_block_f16) {
        k->attn_block_f16(q, (const uint16_t *)kv->K + t0 * kv->ld, (const uint16_t *)kv->V + t0 * kv->ld, kv->ld, n,
                          rep, hd, scale, scores, Kt, part, part + rep * hd);
        return;
    }
    widen_rows(k, kv, kv->K, t0, n, hd, Kt);
    widen_rows(k, kv, kv->V, t0, n, hd, Vt);
    k->attn_block(q, Kt, Vt, hd, n, rep, hd, scale, scores, part, part + rep * hd);
}

void qhx_attn_group_kv(const qhx_kernels *k, const float *q, const qhx_kv_view *kv, int64_t n_kv, int64_t rep,
                       int64_t hd, float scale, float *work, float *out) {
    const int64_t nb = qhx_attn_n_blocks(n_kv), pf = qhx_attn_part_floats(rep, hd);
    float *part = work + qhx_attn_block_kv_work(rep, hd, kv->type);
    for (int64_t b = 0; b < nb; b++) qhx_attn_block_kv(k, q, kv, n_kv, b, rep, hd, scale, work, part + b * pf);
    qhx_attn_combine(part, nb, rep, hd, out);
}
