/* kernels/ref/vision_ref: scalar reference kernels of the Qwen3-VL path (contracts in
 * kernels/vision.h). */
#include "kernels/vision.h"

#include <math.h>

void qhx_k_layernorm_f32_ref(const float *x, const float *w, const float *b, float *y, int64_t n,
                             float eps) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    double mean = s / (double)n, v = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = x[i] - mean;
        v += d * d;
    }
    float inv = (float)(1.0 / sqrt(v / (double)n + (double)eps));
    float m = (float)mean;
    for (int64_t i = 0; i < n; i++) {
        float t = (x[i] - m) * inv * w[i];
        y[i] = b ? t + b[i] : t;
    }
}

void qhx_k_gelu_tanh_f32_ref(float *x, int64_t n) {
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
    }
}

void qhx_k_gelu_erf_f32_ref(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

void qhx_k_rmsnorm_f32_ref(const float *x, const float *w, float *y, int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    for (int64_t i = 0; i < n; i++) y[i] = w[i] * (x[i] * inv);
}

void qhx_k_linspace_f32_ref(float start, float end, int64_t n, float *out) {
    if (n == 1) {
        out[0] = start;
        return;
    }
    float step = (end - start) / (float)(n - 1);
    int64_t half = n / 2;
    for (int64_t i = 0; i < n; i++)
        out[i] = i < half ? start + step * (float)i : end - step * (float)(n - 1 - i);
}

void qhx_k_pos_embed_bilinear_f32_ref(const float *table, int64_t side, int64_t dim, int64_t gh,
                                      int64_t gw, float *out) {
    for (int64_t r = 0; r < gh; r++) {
        float ys;
        /* Element r of linspace(0, side - 1, gh), recomputed per row to avoid a buffer. */
        if (gh == 1) ys = 0.0f;
        else {
            float step = (float)(side - 1) / (float)(gh - 1);
            ys = r < gh / 2 ? step * (float)r : (float)(side - 1) - step * (float)(gh - 1 - r);
        }
        int64_t fh = (int64_t)ys, chh = fh + 1 > side - 1 ? side - 1 : fh + 1;
        float dh = ys - (float)fh;
        for (int64_t c = 0; c < gw; c++) {
            float xs;
            if (gw == 1) xs = 0.0f;
            else {
                float step = (float)(side - 1) / (float)(gw - 1);
                xs = c < gw / 2 ? step * (float)c : (float)(side - 1) - step * (float)(gw - 1 - c);
            }
            int64_t fw = (int64_t)xs, cw = fw + 1 > side - 1 ? side - 1 : fw + 1;
            float dw = xs - (float)fw;
            float w00 = (1.0f - dh) * (1.0f - dw), w01 = (1.0f - dh) * dw;
            float w10 = dh * (1.0f - dw), w11 = dh * dw;
            const float *t00 = table + (fh * side + fw) * dim, *t01 = table + (fh * side + cw) * dim;
            const float *t10 = table + (chh * side + fw) * dim, *t11 = table + (chh * side + cw) * dim;
            float *o = out + (r * gw + c) * dim;
            for (int64_t i = 0; i < dim; i++)
                o[i] = ((t00[i] * w00 + t01[i] * w01) + t10[i] * w10) + t11[i] * w11;
        }
    }
}
