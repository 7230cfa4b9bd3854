/* kernels/ref/ops_ref.c: element-wise and row kernels (norms, activations, causal conv, rotary,
 * softmax, attention), scalar fp32. Each mirrors the Hugging Face function named in ref.h in its
 * order of operations; reductions run in plain index order. */
#include "kernels/ref.h"

#include <math.h>

/* ---- normalisation ------------------------------------------------------------------------ */

void qhx_k_rmsnorm_zc_f32_ref(const float *x, const float *w, float *y, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * r) * (1.0f + w[i]);
}

void qhx_k_rmsnorm_gated_f32_ref(const float *x, const float *z, const float *w, float *y,
                                 int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = (w[i] * (x[i] * r)) * qhx_k_silu_ref(z[i]);
}

void qhx_k_l2norm_f32_ref(float *x, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss + eps);
    for (int64_t i = 0; i < n; i++) x[i] *= r;
}

/* ---- activations -------------------------------------------------------------------------- */

float qhx_k_sigmoid_ref(float x) { return 1.0f / (1.0f + expf(-x)); }
float qhx_k_silu_ref(float x) { return x / (1.0f + expf(-x)); }
float qhx_k_softplus_ref(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

void qhx_k_silu_f32_ref(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = qhx_k_silu_ref(x[i]);
}

void qhx_k_swiglu_f32_ref(const float *gate, const float *up, float *out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = qhx_k_silu_ref(gate[i]) * up[i];
}

void qhx_k_mul_sigmoid_f32_ref(float *x, const float *gate, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= qhx_k_sigmoid_ref(gate[i]);
}

void qhx_k_add_f32_ref(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

/* ---- causal depthwise convolution --------------------------------------------------------- */

void qhx_k_conv1d_causal_f32_ref(const float *u, const float *w, float *y, int64_t n, int64_t C,
                                 int64_t K) {
    for (int64_t t = 0; t < n; t++) {
        float *yt = y + t * C;
        for (int64_t c = 0; c < C; c++) {
            float s = 0.0f;
            for (int64_t j = 0; j < K; j++) s += w[c * K + j] * u[(t + j) * C + c];
            yt[c] = s;
        }
    }
}

/* ---- rotary embedding, softmax, attention ------------------------------------------------- */

void qhx_k_rope_neox_f32_ref(float *x, int64_t n_heads, int64_t hd, int64_t n_rot,
                             const float *cos, const float *sin) {
    int64_t half = n_rot / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *v = x + h * hd;
        for (int64_t i = 0; i < half; i++) {
            float x0 = v[i], x1 = v[i + half];
            v[i] = x0 * cos[i] - x1 * sin[i];
            v[i + half] = x1 * cos[i] + x0 * sin[i];
        }
    }
}

void qhx_k_softmax_f32_ref(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void qhx_k_attention_f32_ref(const float *q, const float *K, const float *V, int64_t ld,
                             int64_t n_kv, int64_t n_heads, int64_t n_kv_heads, int64_t hd,
                             float scale, float *scores, float *out, int64_t h0, int64_t h1) {
    int64_t group = n_heads / n_kv_heads;
    for (int64_t h = h0; h < h1; h++) {
        const float *qh = q + h * hd;
        int64_t off = (h / group) * hd;
        for (int64_t t = 0; t < n_kv; t++) {
            const float *kt = K + t * ld + off;
            float s = 0.0f;
            for (int64_t d = 0; d < hd; d++) s += qh[d] * kt[d];
            scores[t] = s * scale;
        }
        qhx_k_softmax_f32_ref(scores, n_kv);
        float *oh = out + h * hd;
        for (int64_t d = 0; d < hd; d++) oh[d] = 0.0f;
        for (int64_t t = 0; t < n_kv; t++) {
            const float *vt = V + t * ld + off;
            float p = scores[t];
            for (int64_t d = 0; d < hd; d++) oh[d] += p * vt[d];
        }
    }
}

uint64_t qhx_k_read_fold_ref(const void *p, size_t n) {
    const uint64_t *w = p;
    uint64_t a[8] = {0};
    size_t words = n / 8, i = 0;
    for (; i + 8 <= words; i += 8)
        for (int j = 0; j < 8; j++) a[j] ^= w[i + j]; /* eight chains, so the loads overlap */
    for (; i < words; i++) a[0] ^= w[i];
    return a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
}
