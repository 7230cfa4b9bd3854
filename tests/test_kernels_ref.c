// ctest-labels: kernels
/* The scalar reference kernels against straightforward float64 formulas on small random inputs;
 * F16/BF16 matvec against F32 on the converted weights; the chunked delta rule against the
 * recurrent one. Outputs are pre-filled with NaN so an unwritten element shows. */
#include "core/alloc.h"
#include "core/fp16.h"
#include "kernels/kernels.h"
#include "kernels/ref.h"
#include "t.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *fvec(int64_t n, float scale) {
    float *p = qhx_malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = frand() * scale;
    return p;
}

static float *nanvec(int64_t n) {
    float *p = qhx_malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

/* largest |a - b| over n, NaN counts as infinite */
static double maxdiff_fd(const float *a, const double *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d != d) return INFINITY;
        if (d > m) m = d;
    }
    return m;
}

static double maxdiff_ff(const float *a, const float *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d != d) return INFINITY;
        if (d > m) m = d;
    }
    return m;
}

static double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }

/* ---- linear layers ------------------------------------------------------------------------ */

static void test_linear(void) {
    qhx_kernels k;
    qhx_kern_select(QHX_ISA_BEST, &k);
    CHECK(k.matvec[QHX_W_F32] && k.matvec[QHX_W_F16] && k.matvec[QHX_W_BF16]);
    CHECK(k.matvec[QHX_W_Q8] == NULL && k.matvec[QHX_W_Q4] == NULL);
    const int64_t shapes[][2] = {{1, 1}, {7, 13}, {33, 64}, {5, 130}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t R = shapes[si][0], Cc = shapes[si][1], n = 3;
        float *W = fvec(R * Cc, 1.0f), *X = fvec(n * Cc, 1.0f);
        uint16_t *Wh = qhx_malloc((size_t)(R * Cc) * 2), *Wb = qhx_malloc((size_t)(R * Cc) * 2);
        float *Wh32 = nanvec(R * Cc), *Wb32 = nanvec(R * Cc);
        qhx_f32_to_f16_row(W, Wh, R * Cc);
        qhx_f32_to_bf16_row(W, Wb, R * Cc);
        qhx_f16_to_f32_row(Wh, Wh32, R * Cc);
        qhx_bf16_to_f32_row(Wb, Wb32, R * Cc);
        qhx_weight w32 = {.fmt = QHX_W_F32, .rows = R, .cols = Cc, .data = W};
        qhx_weight wh = {.fmt = QHX_W_F16, .rows = R, .cols = Cc, .data = Wh};
        qhx_weight wb = {.fmt = QHX_W_BF16, .rows = R, .cols = Cc, .data = Wb};
        qhx_weight wh32 = {.fmt = QHX_W_F32, .rows = R, .cols = Cc, .data = Wh32};
        qhx_weight wb32 = {.fmt = QHX_W_F32, .rows = R, .cols = Cc, .data = Wb32};

        /* matvec f32 against float64 */
        double *ref = qhx_malloc((size_t)R * sizeof(double));
        for (int64_t r = 0; r < R; r++) {
            double s = 0.0;
            for (int64_t c = 0; c < Cc; c++) s += (double)W[r * Cc + c] * X[c];
            ref[r] = s;
        }
        float *y = nanvec(R), *y2 = nanvec(R);
        k.matvec[QHX_W_F32](&w32, X, y, 0, R);
        CHECK(maxdiff_fd(y, ref, R) <= 1e-5 * sqrt((double)Cc));

        /* any row split gives the same bits */
        float *ys = nanvec(R);
        int64_t mid = R / 2;
        k.matvec[QHX_W_F32](&w32, X, ys, 0, mid);
        k.matvec[QHX_W_F32](&w32, X, ys, mid, R);
        CHECK(maxdiff_ff(y, ys, R) == 0.0);

        /* f16 / bf16 storage against f32 on the same (converted) values: same order, same bits */
        k.matvec[QHX_W_F16](&wh, X, y, 0, R);
        k.matvec[QHX_W_F32](&wh32, X, y2, 0, R);
        CHECK(maxdiff_ff(y, y2, R) == 0.0);
        k.matvec[QHX_W_BF16](&wb, X, y, 0, R);
        k.matvec[QHX_W_F32](&wb32, X, y2, 0, R);
        CHECK(maxdiff_ff(y, y2, R) == 0.0);

        /* matmul rows equal matvec, for each format, with padded strides */
        const qhx_weight *ws[3] = {&w32, &wh, &wb};
        for (int f = 0; f < 3; f++) {
            int64_t ldy = R + 3;
            float *Y = nanvec(n * ldy);
            k.matmul[ws[f]->fmt](ws[f], X, Cc, Y, ldy, n, 0, R);
            for (int64_t t = 0; t < n; t++) {
                k.matvec[ws[f]->fmt](ws[f], X + t * Cc, y, 0, R);
                CHECK(maxdiff_ff(Y + t * ldy, y, R) == 0.0);
            }
            /* row lookup */
            float *row = nanvec(Cc);
            k.row[ws[f]->fmt](ws[f], R - 1, row);
            const float *want = f == 0 ? W : f == 1 ? Wh32 : Wb32;
            CHECK(maxdiff_ff(row, want + (R - 1) * Cc, Cc) == 0.0);
            qhx_free(row);
            qhx_free(Y);
        }
        qhx_free(ref);
        qhx_free(y);
        qhx_free(y2);
        qhx_free(ys);
        qhx_free(W);
        qhx_free(X);
        qhx_free(Wh);
        qhx_free(Wb);
        qhx_free(Wh32);
        qhx_free(Wb32);
    }
}

/* ---- norms and activations ---------------------------------------------------------------- */

static void test_norms(void) {
    const int64_t sizes[] = {1, 7, 64, 129};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int64_t n = sizes[si];
        float *x = fvec(n, 2.0f), *w = fvec(n, 0.5f), *z = fvec(n, 3.0f), *y = nanvec(n);
        double *ref = qhx_malloc((size_t)n * sizeof(double));
        const double eps = 1e-6;
        double ss = 0.0;
        for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];

        for (int64_t i = 0; i < n; i++) ref[i] = x[i] / sqrt(ss / n + eps) * (1.0 + w[i]);
        qhx_k_rmsnorm_zc_f32_ref(x, w, y, n, (float)eps);
        CHECK(maxdiff_fd(y, ref, n) <= 1e-5);

        for (int64_t i = 0; i < n; i++) ref[i] = w[i] * (x[i] / sqrt(ss / n + eps)) * (z[i] * sigmoid_d(z[i]));
        qhx_k_rmsnorm_gated_f32_ref(x, z, w, y, n, (float)eps);
        CHECK(maxdiff_fd(y, ref, n) <= 1e-5);

        for (int64_t i = 0; i < n; i++) {
            ref[i] = x[i] / sqrt(ss + eps);
            y[i] = x[i];
        }
        qhx_k_l2norm_f32_ref(y, n, (float)eps);
        CHECK(maxdiff_fd(y, ref, n) <= 1e-6);
        qhx_free(x);
        qhx_free(w);
        qhx_free(z);
        qhx_free(y);
        qhx_free(ref);
    }
    /* eps sits on the sum for L2 (HF l2norm): a tiny vector is not blown up to unit length */
    float tiny[2] = {1e-4f, 0.0f};
    qhx_k_l2norm_f32_ref(tiny, 2, 1e-6f);
    CHECK_NEAR(tiny[0], 1e-4 / sqrt(1e-8 + 1e-6), 1e-6);
}

static void test_activations(void) {
    const float xs[] = {-30.0f, -5.0f, -0.5f, 0.0f, 1e-3f, 0.7f, 5.0f, 19.9f, 20.0f, 20.5f, 40.0f};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double x = xs[i];
        CHECK_NEAR(qhx_k_sigmoid_ref(xs[i]), sigmoid_d(x), 1e-7);
        CHECK_NEAR(qhx_k_silu_ref(xs[i]), x * sigmoid_d(x), 1e-6 * (1.0 + fabs(x)));
        double sp = x > 20.0 ? x : log1p(exp(x)); /* torch softplus, threshold 20 */
        CHECK_NEAR(qhx_k_softplus_ref(xs[i]), sp, 1e-6 * (1.0 + fabs(x)));
    }
    /* above the threshold softplus returns its input exactly */
    CHECK(qhx_k_softplus_ref(20.5f) == 20.5f);

    int64_t n = 37;
    float *g = fvec(n, 4.0f), *u = fvec(n, 1.0f), *o = nanvec(n), *x = fvec(n, 1.0f), *x0 = qhx_malloc(37 * 4);
    double *ref = qhx_malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) ref[i] = g[i] * sigmoid_d(g[i]) * u[i];
    qhx_k_swiglu_f32_ref(g, u, o, n);
    CHECK(maxdiff_fd(o, ref, n) <= 1e-5);
    for (int64_t i = 0; i < n; i++) {
        x0[i] = x[i];
        ref[i] = x[i] * sigmoid_d(g[i]);
    }
    qhx_k_mul_sigmoid_f32_ref(x, g, n);
    CHECK(maxdiff_fd(x, ref, n) <= 1e-6);
    for (int64_t i = 0; i < n; i++) ref[i] = (double)x[i] + u[i];
    qhx_k_add_f32_ref(x, u, n);
    CHECK(maxdiff_fd(x, ref, n) <= 1e-6);
    for (int64_t i = 0; i < n; i++) ref[i] = x0[i] * sigmoid_d(x0[i]);
    qhx_k_silu_f32_ref(x0, n);
    CHECK(maxdiff_fd(x0, ref, n) <= 1e-6);
    qhx_free(g);
    qhx_free(u);
    qhx_free(o);
    qhx_free(x);
    qhx_free(x0);
    qhx_free(ref);
}

/* ---- causal conv -------------------------------------------------------------------------- */

static void test_conv(void) {
    const int64_t C = 11, K = 4, n = 6;
    float *u = fvec((n + K - 1) * C, 1.0f), *w = fvec(C * K, 1.0f), *y = nanvec(n * C);
    double *ref = qhx_malloc((size_t)(n * C) * sizeof(double));
    /* PyTorch conv1d with left padding: out(t) = sum_j w[j] in(t - (K-1) + j); in(-3..-1) = FIFO */
    for (int64_t t = 0; t < n; t++)
        for (int64_t c = 0; c < C; c++) {
            double s = 0.0;
            for (int64_t j = 0; j < K; j++) s += (double)w[c * K + j] * u[(t + j) * C + c];
            ref[t * C + c] = s;
        }
    qhx_k_conv1d_causal_f32_ref(u, w, y, n, C, K);
    CHECK(maxdiff_fd(y, ref, n * C) <= 1e-6);
    /* tap K-1 multiplies the current token: with only that tap set, y == current input */
    for (int64_t i = 0; i < C * K; i++) w[i] = (i % K == K - 1) ? 1.0f : 0.0f;
    qhx_k_conv1d_causal_f32_ref(u, w, y, n, C, K);
    CHECK(maxdiff_ff(y, u + (K - 1) * C, n * C) == 0.0);
    qhx_free(u);
    qhx_free(w);
    qhx_free(y);
    qhx_free(ref);
}

/* ---- gated delta rule --------------------------------------------------------------------- */

/* float64 recurrence over n tokens: S (dk, dv) in/out, o (n, dv) */
static void delta_ref_d(double *S, const float *q, const float *k, const float *v, const float *beta,
                        const float *g, double *o, int64_t n, int64_t dk, int64_t dv) {
    double *kv = qhx_malloc((size_t)dv * sizeof(double));
    for (int64_t t = 0; t < n; t++) {
        const float *qt = q + t * dk, *kt = k + t * dk, *vt = v + t * dv;
        double dec = exp((double)g[t]);
        for (int64_t i = 0; i < dk * dv; i++) S[i] *= dec;
        for (int64_t m = 0; m < dv; m++) {
            double s = 0.0;
            for (int64_t i = 0; i < dk; i++) s += S[i * dv + m] * kt[i];
            kv[m] = beta[t] * (vt[m] - s);
        }
        for (int64_t i = 0; i < dk; i++)
            for (int64_t m = 0; m < dv; m++) S[i * dv + m] += (double)kt[i] * kv[m];
        for (int64_t m = 0; m < dv; m++) {
            double s = 0.0;
            for (int64_t i = 0; i < dk; i++) s += S[i * dv + m] * qt[i];
            o[t * dv + m] = s;
        }
    }
    qhx_free(kv);
}

static void unit_rows(float *x, int64_t n, int64_t d, float scale) {
    for (int64_t t = 0; t < n; t++) {
        qhx_k_l2norm_f32_ref(x + t * d, d, 1e-6f);
        for (int64_t i = 0; i < d; i++) x[t * d + i] *= scale;
    }
}

static void test_delta(void) {
    const int64_t dk = 16, dv = 12;
    const int64_t lens[] = {1, 5, 64, 130};
    const int64_t chunks[] = {64, 7};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int64_t n = lens[li];
        float *q = fvec(n * dk, 1.0f), *k = fvec(n * dk, 1.0f), *v = fvec(n * dv, 1.0f);
        float *beta = qhx_malloc((size_t)n * 4), *g = qhx_malloc((size_t)n * 4);
        /* k correlated with q so S^T q is not a near-total cancellation (fixtures README 4.2) */
        for (int64_t i = 0; i < n * dk; i++) k[i] = 0.8f * q[i] + 0.2f * k[i];
        unit_rows(q, n, dk, 0.25f);
        unit_rows(k, n, dk, 1.0f);
        for (int64_t t = 0; t < n; t++) {
            beta[t] = qhx_k_sigmoid_ref(2.0f * frand());
            g[t] = -0.3f * qhx_k_softplus_ref(frand());
        }
        float *S0 = fvec(dk * dv, 0.5f); /* a non-zero incoming state */
        double *Sd = qhx_malloc((size_t)(dk * dv) * sizeof(double));
        double *od = qhx_malloc((size_t)(n * dv) * sizeof(double));
        for (int64_t i = 0; i < dk * dv; i++) Sd[i] = S0[i];
        delta_ref_d(Sd, q, k, v, beta, g, od, n, dk, dv);

        /* recurrent form, token by token */
        float *S = qhx_malloc((size_t)(dk * dv) * 4), *o = nanvec(n * dv);
        for (int64_t i = 0; i < dk * dv; i++) S[i] = S0[i];
        for (int64_t t = 0; t < n; t++)
            qhx_k_delta_step_f32_ref(S, q + t * dk, k + t * dk, v + t * dv, beta[t], g[t], o + t * dv, dk, dv);
        CHECK(maxdiff_fd(o, od, n * dv) <= 1e-5);
        CHECK(maxdiff_fd(S, Sd, dk * dv) <= 1e-5);
        float *o_rec = o, *S_rec = S;

        /* chunked form, several chunk sizes (partial last chunks included) */
        for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
            int64_t C = chunks[ci];
            float *work = nanvec(qhx_k_delta_chunked_work(C, dk, dv));
            float *S2 = qhx_malloc((size_t)(dk * dv) * 4), *o2 = nanvec(n * dv);
            for (int64_t i = 0; i < dk * dv; i++) S2[i] = S0[i];
            qhx_k_delta_chunked_f32_ref(S2, q, dk, k, dk, v, dv, beta, g, 1, o2, dv, n, dk, dv, C, work);
            double e_o = maxdiff_fd(o2, od, n * dv), e_s = maxdiff_fd(S2, Sd, dk * dv);
            double a_o = maxdiff_ff(o2, o_rec, n * dv), a_s = maxdiff_ff(S2, S_rec, dk * dv);
            if (!(e_o <= 1e-5 && e_s <= 1e-5 && a_o <= 1e-5 && a_s <= 1e-5))
                fprintf(stderr, "delta n=%lld C=%lld: chunked vs f64 o %.3g S %.3g, vs recurrent o %.3g S %.3g\n",
                        (long long)n, (long long)C, e_o, e_s, a_o, a_s);
            CHECK(e_o <= 1e-5);
            CHECK(e_s <= 1e-5);
            CHECK(a_o <= 1e-5);
            CHECK(a_s <= 1e-5);
            qhx_free(work);
            qhx_free(S2);
            qhx_free(o2);
        }
        qhx_free(q);
        qhx_free(k);
        qhx_free(v);
        qhx_free(beta);
        qhx_free(g);
        qhx_free(S0);
        qhx_free(Sd);
        qhx_free(od);
        qhx_free(S);
        qhx_free(o);
    }

    /* strided inputs (q, k, v interleaved in one row as the model lays them out) */
    {
        const int64_t n = 9, ld = 2 * dk + dv, C = 4;
        float *row = fvec(n * ld, 1.0f), *bg = qhx_malloc((size_t)(2 * n) * 4);
        for (int64_t t = 0; t < n; t++) {
            qhx_k_l2norm_f32_ref(row + t * ld, dk, 1e-6f);
            qhx_k_l2norm_f32_ref(row + t * ld + dk, dk, 1e-6f);
            bg[2 * t] = 0.6f;
            bg[2 * t + 1] = -0.1f;
        }
        float *S1 = qhx_calloc((size_t)(dk * dv), 4), *S2 = qhx_calloc((size_t)(dk * dv), 4);
        float *o1 = nanvec(n * dv), *o2 = nanvec(n * 2 * dv), *work = nanvec(qhx_k_delta_chunked_work(C, dk, dv));
        for (int64_t t = 0; t < n; t++)
            qhx_k_delta_step_f32_ref(S1, row + t * ld, row + t * ld + dk, row + t * ld + 2 * dk, bg[2 * t],
                                     bg[2 * t + 1], o1 + t * dv, dk, dv);
        qhx_k_delta_chunked_f32_ref(S2, row, ld, row + dk, ld, row + 2 * dk, ld, bg, bg + 1, 2, o2, 2 * dv, n, dk,
                                    dv, C, work);
        double e = 0.0;
        for (int64_t t = 0; t < n; t++) {
            double d = maxdiff_ff(o1 + t * dv, o2 + t * 2 * dv, dv);
            e = d > e ? d : e;
        }
        CHECK(e <= 1e-5);
        CHECK(maxdiff_ff(S1, S2, dk * dv) <= 1e-5);
        qhx_free(row);
        qhx_free(bg);
        qhx_free(S1);
        qhx_free(S2);
        qhx_free(o1);
        qhx_free(o2);
        qhx_free(work);
    }
}

/* ---- rotary, softmax, attention ------------------------------------------------------------ */

static void test_rope(void) {
    const int64_t nh = 3, hd = 10, rot = 6, half = 3;
    float *x = fvec(nh * hd, 1.0f), *x0 = qhx_malloc((size_t)(nh * hd) * 4);
    for (int64_t i = 0; i < nh * hd; i++) x0[i] = x[i];
    float cs[3], sn[3];
    double ang[3];
    for (int64_t i = 0; i < half; i++) {
        ang[i] = 17.0 * pow(10000.0, -2.0 * i / rot);
        cs[i] = (float)cos(ang[i]);
        sn[i] = (float)sin(ang[i]);
    }
    qhx_k_rope_neox_f32_ref(x, nh, hd, rot, cs, sn);
    double *ref = qhx_malloc((size_t)(nh * hd) * sizeof(double));
    for (int64_t h = 0; h < nh; h++) {
        const float *v = x0 + h * hd;
        for (int64_t i = 0; i < hd; i++) ref[h * hd + i] = v[i];
        for (int64_t i = 0; i < half; i++) {
            ref[h * hd + i] = v[i] * cos(ang[i]) - v[i + half] * sin(ang[i]);
            ref[h * hd + i + half] = v[i + half] * cos(ang[i]) + v[i] * sin(ang[i]);
        }
    }
    CHECK(maxdiff_fd(x, ref, nh * hd) <= 1e-6);
    /* pass-through dims are untouched bit for bit */
    for (int64_t h = 0; h < nh; h++) CHECK(maxdiff_ff(x + h * hd + rot, x0 + h * hd + rot, hd - rot) == 0.0);
    qhx_free(x);
    qhx_free(x0);
    qhx_free(ref);
}

static void test_softmax_attention(void) {
    int64_t n = 13;
    float *x = fvec(n, 8.0f);
    double *ref = qhx_malloc((size_t)n * sizeof(double)), mx = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int64_t i = 0; i < n; i++) sum += exp(x[i] - mx);
    for (int64_t i = 0; i < n; i++) ref[i] = exp(x[i] - mx) / sum;
    qhx_k_softmax_f32_ref(x, n);
    CHECK(maxdiff_fd(x, ref, n) <= 1e-6);
    qhx_free(x);
    qhx_free(ref);

    const int64_t nh = 6, nkv = 2, hd = 8, T = 9, ld = nkv * hd + 5;
    const float scale = 0.35355339f;
    float *q = fvec(nh * hd, 1.0f), *K = fvec(T * ld, 1.0f), *V = fvec(T * ld, 1.0f);
    float *out = nanvec(nh * hd), *sc = nanvec(T);
    double *want = qhx_malloc((size_t)(nh * hd) * sizeof(double)), *p = qhx_malloc((size_t)T * sizeof(double));
    for (int64_t h = 0; h < nh; h++) {
        int64_t g = h / (nh / nkv); /* heads 0-2 -> kv 0, 3-5 -> kv 1 */
        double m = -INFINITY, s = 0.0;
        for (int64_t t = 0; t < T; t++) {
            double d = 0.0;
            for (int64_t i = 0; i < hd; i++) d += (double)q[h * hd + i] * K[t * ld + g * hd + i];
            p[t] = d * scale;
            m = p[t] > m ? p[t] : m;
        }
        for (int64_t t = 0; t < T; t++) s += (p[t] = exp(p[t] - m));
        for (int64_t i = 0; i < hd; i++) {
            double acc = 0.0;
            for (int64_t t = 0; t < T; t++) acc += p[t] / s * V[t * ld + g * hd + i];
            want[h * hd + i] = acc;
        }
    }
    /* two head ranges, as a pool would split them */
    qhx_k_attention_f32_ref(q, K, V, ld, T, nh, nkv, hd, scale, sc, out, 0, 4);
    qhx_k_attention_f32_ref(q, K, V, ld, T, nh, nkv, hd, scale, sc, out, 4, nh);
    CHECK(maxdiff_fd(out, want, nh * hd) <= 1e-6);
    qhx_free(q);
    qhx_free(K);
    qhx_free(V);
    qhx_free(out);
    qhx_free(sc);
    qhx_free(want);
    qhx_free(p);
}

int main(void) {
    CHECK_STR(qhx_isa_name(QHX_ISA_REF), "ref");
    test_linear();
    test_norms();
    test_activations();
    test_conv();
    test_delta();
    test_rope();
    test_softmax_attention();
    return t_done("test_kernels_ref");
}
