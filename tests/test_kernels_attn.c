// ctest-labels: kernels
/* Kernels that kernels/select.c installs beside the SIMD linear variants:
 *   - blocked attention (kernels/attn.h) against the one-pass reference attention, for the
 *     scalar and the selected (SIMD) block kernels, over one and several key blocks and GQA
 *     groups;
 *   - the f16 cache read in place (attn_block_f16) against the same rows widened into a tile
 *     and run through attn_block: bitwise;
 *   - the selected delta-rule step against the reference step (bitwise: the two-pass form keeps
 *     every operation of the reference);
 *   - the selected Q8 / Q4 matvec (int16 activations on AVX2) against the references, within the
 *     int16 rounding of x, and independent of the row range.
 * "Selected" is what qhx_kern_select(QHX_ISA_BEST) installs: AVX2 / AVX-512 on x86, NEON on
 * aarch64 (make test-arm runs this file under qemu-aarch64). */
#include "core/alloc.h"
#include "core/fp16.h"
#include "core/rng.h"
#include "kernels/attn.h"
#include "kernels/quant.h"
#include "kernels/ref.h"
#if defined(QHX_HAVE_X86)
#include "kernels/x86/ops_x86.h"
#endif
#if defined(QHX_HAVE_ARM) && defined(__aarch64__)
#include "kernels/arm/arm.h"
#endif
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

/* qhx_attn_group_kv over an f16 view: the table's in-place f16 kernel against the same table
 * with the slot cleared (the rows widened into a tile, then attn_block), bit for bit; head dims
 * that are not a multiple of 16 take the kernel's own widening path. */
static void test_attention_f16(const qhx_kernels *k) {
    qhx_kernels widen = *k;
    widen.attn_block_f16 = NULL;
    qhx_rng r;
    qhx_rng_seed(&r, 5);
    const int64_t shapes[][4] = {/* n_kv, heads, kv heads, head dim */
                                 {1, 8, 2, 256}, {300, 8, 2, 256}, {513, 6, 3, 64}, {70, 5, 1, 32}, {260, 4, 2, 48}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n_kv = shapes[si][0], nh = shapes[si][1], nkv = shapes[si][2], hd = shapes[si][3];
        int64_t ld = nkv * hd + 5, rep = nh / nkv;
        float *q = rnd(&r, nh * hd, 1.0f), *Kf = rnd(&r, n_kv * ld, 1.0f), *Vf = rnd(&r, n_kv * ld, 1.0f);
        uint16_t *K = qhx_malloc((size_t)(n_kv * ld) * sizeof(uint16_t)), *V = qhx_malloc((size_t)(n_kv * ld) * sizeof(uint16_t));
        qhx_f32_to_f16_row(Kf, K, n_kv * ld);
        qhx_f32_to_f16_row(Vf, V, n_kv * ld);
        const int64_t wf = qhx_attn_group_kv_work(n_kv, rep, hd, QHX_KV_F16);
        float *work = qhx_malloc((size_t)wf * sizeof(float));
        float *want = qhx_malloc((size_t)(rep * hd) * sizeof(float)), *got = qhx_malloc((size_t)(rep * hd) * sizeof(float));
        for (int64_t g = 0; g < nkv; g++) {
            qhx_kv_view kv = {K + g * hd, V + g * hd, ld, QHX_KV_F16, 0, 0};
            qhx_attn_group_kv(&widen, q + g * rep * hd, &kv, n_kv, rep, hd, 0.0625f, work, want);
            qhx_attn_group_kv(k, q + g * rep * hd, &kv, n_kv, rep, hd, 0.0625f, work, got);
            if (memcmp(want, got, (size_t)(rep * hd) * sizeof(float)))
                fprintf(stderr, "attn f16: n_kv %lld hd %lld group %lld differs\n", (long long)n_kv, (long long)hd,
                        (long long)g);
            CHECK(memcmp(want, got, (size_t)(rep * hd) * sizeof(float)) == 0);
        }
        qhx_free(q);
        qhx_free(Kf);
        qhx_free(Vf);
        qhx_free(K);
        qhx_free(V);
        qhx_free(work);
        qhx_free(want);
        qhx_free(got);
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

static void test_quant_matvec(const qhx_kernels *k) {
    qhx_rng r;
    qhx_rng_seed(&r, 11);
    const int64_t shapes[][2] = {{37, 64}, {9, 2048}, {20, 6144}, {5, 40}, {3, 32}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t R = shapes[si][0], C = shapes[si][1];
        float *W = rnd(&r, R * C, 1.0f), *x = rnd(&r, C, 2.0f);
        x[C / 2] = 40.0f; /* an outlier */
        int8_t *q8 = qhx_malloc((size_t)(R * C));
        float *s8 = qhx_malloc((size_t)R * sizeof(float));
        for (int64_t i = 0; i < R; i++) qhx_quant_q8_row(W + i * C, C, q8 + i * C, s8 + i);
        qhx_weight w8 = {.fmt = QHX_W_Q8, .rows = R, .cols = C, .data = q8, .scales = s8};
        int q4ok = C % 32 == 0;
        uint8_t *q4 = qhx_malloc((size_t)(R * C / 2 + 1));
        uint16_t *s4 = qhx_malloc((size_t)(R * (C / 32 + 1)) * sizeof(uint16_t));
        for (int64_t i = 0; q4ok && i < R; i++) qhx_quant_q4_row(W + i * C, C, 32, q4 + i * C / 2, s4 + i * (C / 32));
        qhx_weight w4 = {.fmt = QHX_W_Q4, .rows = R, .cols = C, .data = q4, .gscales = s4, .group = 32};
        float *want = qhx_malloc((size_t)R * sizeof(float)), *got = qhx_malloc((size_t)R * sizeof(float));
        float *split = qhx_malloc((size_t)R * sizeof(float));
        for (int f = 0; f < 2; f++) {
            const qhx_weight *w = f ? &w4 : &w8;
            if (f && !q4ok) continue;
            if (f) qhx_k_matvec_q4_ref(w, x, want, 0, R);
            else qhx_k_matvec_q8_ref(w, x, want, 0, R);
            k->matvec[w->fmt](w, x, got, 0, R);
            k->matvec[w->fmt](w, x, split, 0, R / 2);
            k->matvec[w->fmt](w, x, split, R / 2, R);
            CHECK(!memcmp(got, split, (size_t)R * sizeof(float)));
            for (int64_t i = 0; i < R; i++) {
                /* bound: sum |w x| times the int16 step (relative 1 / 32767 of a block's max) */
                double mag = 0.0;
                for (int64_t c = 0; c < C; c++) mag += fabs((double)W[i * C + c]) * 40.0;
                double tol = mag / 32767.0 + 1e-4;
                if (!(fabs((double)got[i] - (double)want[i]) <= tol)) {
                    fprintf(stderr, "%s %lldx%lld row %lld: %g vs %g (tol %g)\n", f ? "q4" : "q8", (long long)R,
                            (long long)C, (long long)i, got[i], want[i], tol);
                    CHECK(0);
                    break;
                }
            }
        }
        qhx_free(W);
        qhx_free(x);
        qhx_free(q8);
        qhx_free(s8);
        qhx_free(q4);
        qhx_free(s4);
        qhx_free(want);
        qhx_free(got);
        qhx_free(split);
    }
}

/* max |a[i] - b[i]|, or NaN if any difference is NaN (fmax would skip it) */
static double max_abs_diff(const float *a, const float *b, int64_t n) {
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d)) return d;
        if (d > worst) worst = d;
    }
    return worst;
}

/* the selected chunked delta rule against the reference's, and against n recurrent steps */
static void test_delta_chunked(const qhx_kernels *k) {
    qhx_rng r;
    qhx_rng_seed(&r, 9);
    const int64_t shapes[][4] = {/* n, dk, dv, C */ {150, 128, 128, 64}, {7, 16, 16, 64}, {64, 32, 24, 16}, {33, 16, 16, 8}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t n = shapes[si][0], dk = shapes[si][1], dv = shapes[si][2], C = shapes[si][3];
        float *q = rnd(&r, n * dk, 1.0f), *kk = rnd(&r, n * dk, 1.0f), *v = rnd(&r, n * dv, 1.0f);
        float *beta = rnd(&r, n, 1.0f), *g = rnd(&r, n, 1.0f);
        for (int64_t t = 0; t < n; t++) {
            qhx_k_l2norm_f32_ref(q + t * dk, dk, 1e-6f);
            qhx_k_l2norm_f32_ref(kk + t * dk, dk, 1e-6f);
            beta[t] = 0.5f + 0.5f * beta[t] * beta[t];
            g[t] = -0.1f * fabsf(g[t]);
        }
        float *S1 = rnd(&r, dk * dv, 0.2f), *S2 = qhx_malloc((size_t)(dk * dv) * sizeof(float));
        memcpy(S2, S1, (size_t)(dk * dv) * sizeof(float));
        float *o1 = qhx_malloc((size_t)(n * dv) * sizeof(float)), *o2 = qhx_malloc((size_t)(n * dv) * sizeof(float));
        float *work = qhx_malloc((size_t)qhx_k_delta_chunked_work(C, dk, dv) * sizeof(float));
        qhx_k_delta_chunked_f32_ref(S1, q, dk, kk, dk, v, dv, beta, g, 1, o1, dv, n, dk, dv, C, work);
        k->delta_chunked(S2, q, dk, kk, dk, v, dv, beta, g, 1, o2, dv, n, dk, dv, C, work);
        double wo = max_abs_diff(o1, o2, n * dv), ws = max_abs_diff(S1, S2, dk * dv);
        if (!(wo < 1e-4 && ws < 1e-4))
            fprintf(stderr, "delta chunked n %lld dk %lld dv %lld C %lld: max |do| %g, |dS| %g\n", (long long)n,
                    (long long)dk, (long long)dv, (long long)C, wo, ws);
        CHECK(wo < 1e-4 && ws < 1e-4);
        qhx_free(q);
        qhx_free(kk);
        qhx_free(v);
        qhx_free(beta);
        qhx_free(g);
        qhx_free(S1);
        qhx_free(S2);
        qhx_free(o1);
        qhx_free(o2);
        qhx_free(work);
    }
}

/* the selected matmul and the packed-panel GEMM of every format against the reference matmul,
 * with partial row panels, token tiles and column blocks; and independent of the row range */
static void test_matmul(const qhx_kernels *sel) {
    qhx_kernels gk = *sel, *k = &gk;
#if defined(QHX_HAVE_X86)
    if (sel->isa == QHX_ISA_AVX2) {
        gk.matmul[QHX_W_F32] = qhx_k_matmul_f32_gemm_avx2;
        gk.matmul[QHX_W_F16] = qhx_k_matmul_f16_gemm_avx2;
        gk.matmul[QHX_W_BF16] = qhx_k_matmul_bf16_gemm_avx2;
        gk.matmul[QHX_W_Q8] = qhx_k_matmul_q8_gemm_avx2;
        gk.matmul[QHX_W_Q4] = qhx_k_matmul_q4_gemm_avx2;
    }
#endif
    qhx_rng r;
    qhx_rng_seed(&r, 13);
    const int64_t shapes[][3] = {/* rows, cols, n */ {37, 64, 9}, {16, 512, 8}, {50, 288, 13}, {7, 40, 20}, {5, 44, 10}, {33, 2048, 31}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t R = shapes[si][0], C = shapes[si][1], n = shapes[si][2];
        float *W = rnd(&r, R * C, 1.0f), *X = rnd(&r, n * (C + 3), 1.0f);
        uint16_t *wh = qhx_malloc((size_t)(R * C) * 2), *wb = qhx_malloc((size_t)(R * C) * 2);
        qhx_f32_to_f16_row(W, wh, R * C);
        qhx_f32_to_bf16_row(W, wb, R * C);
        int8_t *q8 = qhx_malloc((size_t)(R * C));
        float *s8 = qhx_malloc((size_t)R * sizeof(float));
        uint8_t *q4 = qhx_malloc((size_t)(R * C / 2 + 1));
        uint16_t *s4 = qhx_malloc((size_t)(R * (C / 32 + 1)) * sizeof(uint16_t));
        for (int64_t i = 0; i < R; i++) {
            qhx_quant_q8_row(W + i * C, C, q8 + i * C, s8 + i);
            if (C % 32 == 0) qhx_quant_q4_row(W + i * C, C, 32, q4 + i * C / 2, s4 + i * (C / 32));
        }
        qhx_weight ws[5] = {{.fmt = QHX_W_F32, .rows = R, .cols = C, .data = W},
                            {.fmt = QHX_W_F16, .rows = R, .cols = C, .data = wh},
                            {.fmt = QHX_W_BF16, .rows = R, .cols = C, .data = wb},
                            {.fmt = QHX_W_Q8, .rows = R, .cols = C, .data = q8, .scales = s8},
                            {.fmt = QHX_W_Q4, .rows = R, .cols = C, .data = q4, .gscales = s4, .group = 32}};
        int64_t ldy = R + 5;
        float *want = qhx_malloc((size_t)(n * ldy) * sizeof(float)), *got = qhx_malloc((size_t)(n * ldy) * sizeof(float));
        float *split = qhx_malloc((size_t)(n * ldy) * sizeof(float));
        qhx_kernels ref;
        qhx_kern_select(QHX_ISA_REF, &ref);
        for (int f = 0; f < 5; f++) {
            if (f == 4 && C % 32) continue;
            const qhx_weight *w = &ws[f];
            for (int64_t i = 0; i < n * ldy; i++) want[i] = got[i] = split[i] = -7.0f;
            ref.matmul[w->fmt](w, X, C + 3, want, ldy, n, 0, R);
            k->matmul[w->fmt](w, X, C + 3, got, ldy, n, 0, R);
            k->matmul[w->fmt](w, X, C + 3, split, ldy, n, 0, R / 3);
            k->matmul[w->fmt](w, X, C + 3, split, ldy, n, R / 3, R);
            CHECK(!memcmp(got, split, (size_t)(n * ldy) * sizeof(float)));
            double worst = 0.0;
            for (int64_t t = 0; t < n; t++)
                for (int64_t i = 0; i < ldy; i++) {
                    double d = fabs((double)got[t * ldy + i] - (double)want[t * ldy + i]);
                    if (i >= R) d = got[t * ldy + i] == -7.0f ? 0.0 : 1e9; /* padding untouched */
                    if (!(d <= worst)) worst = d;
                }
            if (!(worst < 1e-3)) fprintf(stderr, "matmul fmt %d %lldx%lld n %lld: max |diff| %g\n", f, (long long)R, (long long)C, (long long)n, worst);
            CHECK(worst < 1e-3);
        }
        qhx_free(W);
        qhx_free(X);
        qhx_free(wh);
        qhx_free(wb);
        qhx_free(q8);
        qhx_free(s8);
        qhx_free(q4);
        qhx_free(s4);
        qhx_free(want);
        qhx_free(got);
        qhx_free(split);
    }
}

int main(void) {
    qhx_kernels ref, best;
    qhx_kern_select(QHX_ISA_REF, &ref);
    qhx_kern_select(QHX_ISA_BEST, &best);
    CHECK(ref.attn_block == qhx_k_attn_block_f32_ref && ref.delta_step == qhx_k_delta_step_f32_ref);
#if defined(QHX_HAVE_ARM) && defined(__aarch64__)
    /* on aarch64 "best" is NEON (test_kernels_neon says why it must be), so the NEON variants
     * of these slots are what the tests below check */
    CHECK(best.isa == QHX_ISA_NEON && best.attn_block == qhx_k_attn_block_f32_neon &&
          best.delta_step == qhx_k_delta_step_f32_neon && best.delta_chunked == qhx_k_delta_chunked_f32_neon);
#endif
    test_attention(&ref, "ref");
    test_attention(&best, qhx_isa_name(best.isa));
#if defined(QHX_HAVE_X86)
    /* where the AVX2 block kernel runs, its f16 twin must too (or the check below is vacuous) */
    CHECK(best.attn_block != qhx_k_attn_block_f32_avx2 || best.attn_block_f16 == qhx_k_attn_block_f16_avx2);
#endif
    test_attention_f16(&best);
    test_delta(&best);
    test_quant_matvec(&best);
    test_delta_chunked(&best);
    test_matmul(&best);
    return t_done("test_kernels_attn");
}
