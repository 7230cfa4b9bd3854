// ctest-labels: kernels
/* Blocked attention (kernels/attn.h) against the one-pass reference attention, for the scalar
 * and the selected (SIMD) block kernels, over one and several key blocks and GQA groups; the
 * selected delta-rule step against the reference step (bitwise: the two-pass form keeps every
 * operation of the reference). */
#include "core/alloc.h"
#include "core/rng.h"
#include "kernels/attn.h"
#include "kernels/ref.h"
#include "t.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *rnd(qhx_rng *r, int64_t n, float scale) {
    float *v = qhx_malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = (2.0f * qhx_rng_f32(r) - 1.0f) * scale;
    return v;
}

static void test_attention(const qhx_kernels *k, const char *name) {
    qhx_rng r;
    qhx_rng_seed(&r, 3);
    const int64_t shapes[][4] = {/* n_kv, heads, kv heads, head dim */
                                 {1, 4, 2, 32},   {37, 8, 2, 256}, {256, 4, 4, 64},
                                 {257, 8, 2, 64}, {700, 6, 3, 48}, {513, 2, 1, 20}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n_kv = shapes[si][0], nh = shapes[si][1], nkv = shapes[si][2], hd = shapes[si][3];
        int64_t ld = nkv * hd + 3, rep = nh / nkv;
        float *q = rnd(&r, nh * hd, 1.0f), *K = rnd(&r, n_kv * ld, 1.0f), *V = rnd(&r, n_kv * ld, 1.0f);
        float *want = qhx_malloc((size_t)(nh * hd) * sizeof(float)), *got = qhx_malloc((size_t)(nh * hd) * sizeof(float));
        float *scores = qhx_malloc((size_t)n_kv * sizeof(float));
        float *work = qhx_malloc((size_t)qhx_attn_group_work(n_kv, rep, hd) * sizeof(float));
        float scale = 1.0f / sqrtf((float)hd);
        qhx_k_attention_f32_ref(q, K, V, ld, n_kv, nh, nkv, hd, scale, scores, want, 0, nh);
        for (int64_t g = 0; g < nkv; g++)
            qhx_attn_group(k, q + g * rep * hd, K + g * hd, V + g * hd, ld, n_kv, rep, hd, scale, work, got + g * rep * hd);
        double worst = 0.0;
        for (int64_t i = 0; i < nh * hd; i++) {
            double d = fabs((double)want[i] - (double)got[i]);
            if (!(d <= worst)) worst = d;
        }
        if (!(worst < 2e-6)) fprintf(stderr, "%s: n_kv %lld hd %lld: max |diff| %g\n", name, (long long)n_kv, (long long)hd, worst);
        CHECK(worst < 2e-6);
        qhx_free(q);
        qhx_free(K);
        qhx_free(V);
        qhx_free(want);
        qhx_free(got);
        qhx_free(scores);
        qhx_free(work);
    }
}

static void test_delta(const qhx_kernels *k) {
    qhx_rng r;
    qhx_rng_seed(&r, 5);
    const int64_t shapes[][2] = {{16, 16}, {128, 128}, {32, 24}, {8, 12}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t dk = shapes[si][0], dv = shapes[si][1];
        float *S1 = rnd(&r, dk * dv, 0.5f), *S2 = qhx_malloc((size_t)(dk * dv) * sizeof(float));
        memcpy(S2, S1, (size_t)(dk * dv) * sizeof(float));
        float *o1 = qhx_malloc((size_t)dv * sizeof(float)), *o2 = qhx_malloc((size_t)dv * sizeof(float));
        for (int step = 0; step < 3; step++) {
            float *q = rnd(&r, dk, 0.3f), *kk = rnd(&r, dk, 0.3f), *v = rnd(&r, dv, 1.0f);
            float beta = qhx_rng_f32(&r), g = -qhx_rng_f32(&r);
            qhx_k_delta_step_f32_ref(S1, q, kk, v, beta, g, o1, dk, dv);
            k->delta_step(S2, q, kk, v, beta, g, o2, dk, dv);
            CHECK(!memcmp(S1, S2, (size_t)(dk * dv) * sizeof(float)));
            CHECK(!memcmp(o1, o2, (size_t)dv * sizeof(float)));
            qhx_free(q);
            qhx_free(kk);
            qhx_free(v);
        }
        qhx_free(S1);
        qhx_free(S2);
        qhx_free(o1);
        qhx_free(o2);
    }
}

int main(void) {
    qhx_kernels ref, best;
    qhx_kern_select(QHX_ISA_REF, &ref);
    qhx_kern_select(QHX_ISA_BEST, &best);
    CHECK(ref.attn_block == qhx_k_attn_block_f32_ref && ref.delta_step == qhx_k_delta_step_f32_ref);
    test_attention(&ref, "ref");
    test_attention(&best, qhx_isa_name(best.isa));
    test_delta(&best);
    return t_done("test_kernels_attn");
}
