/* kernels/ref/delta_ref.c: the gated delta rule of Gated DeltaNet, one value head at a time, in
 * the recurrent form (decode) and the chunked form (prefill). Everything fp32, as HF keeps the
 * recurrent state and the whole rule in float32 (torch_recurrent_gated_delta_rule,
 * torch_chunk_gated_delta_rule). State S is (dk, dv): row = key index, column = value index. */
#include "kernels/ref.h"

#include <math.h>

void qhx_k_delta_step_f32_ref(float *S, const float *q, const float *k, const float *v,
                              float beta, float g, float *o, int64_t dk, int64_t dv) {
    float decay = expf(g);
    for (int64_t i = 0; i < dk * dv; i++) S[i] *= decay;
    /* o doubles as the S^T k buffer, then holds d = beta (v - S^T k) */
    for (int64_t m = 0; m < dv; m++) o[m] = 0.0f;
    for (int64_t i = 0; i < dk; i++) {
        const float *Si = S + i * dv;
        for (int64_t m = 0; m < dv; m++) o[m] += Si[m] * k[i];
    }
    for (int64_t m = 0; m < dv; m++) o[m] = (v[m] - o[m]) * beta;
    for (int64_t i = 0; i < dk; i++) {
        float *Si = S + i * dv;
        for (int64_t m = 0; m < dv; m++) Si[m] += k[i] * o[m];
    }
    for (int64_t m = 0; m < dv; m++) o[m] = 0.0f;
    for (int64_t i = 0; i < dk; i++) {
        const float *Si = S + i * dv;
        for (int64_t m = 0; m < dv; m++) o[m] += Si[m] * q[i];
    }
}

int64_t qhx_k_delta_chunked_work(int64_t C, int64_t dk, int64_t dv) {
    /* gam (C), T (C, C), kb (C, dk), W (C, dk), U (C, dv), vnew (C, dv), qe (dk); then room the
     * SIMD variants use for the decay matrix (C, C) and a (C,) vector */
    return C + C * C + 2 * C * dk + 2 * C * dv + dk + C * C + C;
}

static float dot(const float *a, const float *b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* One chunk of c <= C tokens. Names follow spec §5.7: gam = cumulative log-decay, T = (I + A)^-1
 * with A[r][s] = beta_r (k_r . k_s) exp(gam_r - gam_s) (s < r), U = T diag(beta) V,
 * W = T diag(beta exp(gam)) K, vnew = U - W S, o = diag(exp(gam)) Q S + ((Q K^T) o Gamma) vnew,
 * S <- exp(gam_last) S + (diag(exp(gam_last - gam)) K)^T vnew. */
static void delta_chunk(float *S, const float *q, int64_t ldq, const float *k, int64_t ldk,
                        const float *v, int64_t ldv, const float *beta, const float *g, int64_t ldg,
                        float *o, int64_t ldo, int64_t c, int64_t dk, int64_t dv, int64_t C,
                        float *work) {
    float *gam = work;              /* (c,) */
    float *T = gam + C;             /* (c, c) strictly lower part; unit diagonal implied */
    float *kb = T + C * C;          /* (c, dk) k_r * beta_r */
    float *W = kb + C * dk;         /* (c, dk) */
    float *U = W + C * dk;          /* (c, dv) */
    float *vnew = U + C * dv;       /* (c, dv) */
    float *qe = vnew + C * dv;      /* (dk,) q_r * exp(gam_r) */

    for (int64_t r = 0; r < c; r++) gam[r] = (r ? gam[r - 1] : 0.0f) + g[r * ldg];
    for (int64_t r = 0; r < c; r++)
        for (int64_t i = 0; i < dk; i++) kb[r * dk + i] = k[r * ldk + i] * beta[r * ldg];

    /* T strictly lower = -A, then forward substitution row by row (HF's loop): the new row i is
     * row_i + sum_m row_i[m] T[m][:], over the finished rows m < i. Increasing s reads only
     * entries m > s of row i, which are still the original -A values. */
    for (int64_t r = 0; r < c; r++)
        for (int64_t s = 0; s < r; s++)
            T[r * C + s] = -(dot(kb + r * dk, k + s * ldk, dk) * expf(gam[r] - gam[s]));
    for (int64_t i = 1; i < c; i++)
        for (int64_t s = 0; s < i; s++) {
            float acc = T[i * C + s];
            for (int64_t m = s + 1; m < i; m++) acc += T[i * C + m] * T[m * C + s];
            T[i * C + s] = acc;
        }

    /* U = T (beta V), W = T (beta exp(gam) K), summing s = 0..r with T[r][r] = 1 */
    for (int64_t r = 0; r < c; r++) {
        float *Ur = U + r * dv, *Wr = W + r * dk;
        for (int64_t m = 0; m < dv; m++) Ur[m] = 0.0f;
        for (int64_t i = 0; i < dk; i++) Wr[i] = 0.0f;
        for (int64_t s = 0; s <= r; s++) {
            float t = s == r ? 1.0f : T[r * C + s];
            float eg = expf(gam[s]);
            for (int64_t m = 0; m < dv; m++) Ur[m] += t * (v[s * ldv + m] * beta[s * ldg]);
            for (int64_t i = 0; i < dk; i++) Wr[i] += t * (kb[s * dk + i] * eg);
        }
    }

    /* vnew = U - W S (old state) */
    for (int64_t r = 0; r < c; r++) {
        float *vr = vnew + r * dv;
        const float *Wr = W + r * dk;
        for (int64_t m = 0; m < dv; m++) vr[m] = 0.0f;
        for (int64_t i = 0; i < dk; i++) {
            const float *Si = S + i * dv;
            for (int64_t m = 0; m < dv; m++) vr[m] += Wr[i] * Si[m];
        }
        for (int64_t m = 0; m < dv; m++) vr[m] = U[r * dv + m] - vr[m];
    }

    /* o_r = (q_r exp(gam_r)) S + sum_{s <= r} (q_r . k_s) exp(gam_r - gam_s) vnew_s */
    for (int64_t r = 0; r < c; r++) {
        const float *qr = q + r * ldq;
        float *orow = o + r * ldo;
        float er = expf(gam[r]);
        for (int64_t i = 0; i < dk; i++) qe[i] = qr[i] * er;
        for (int64_t m = 0; m < dv; m++) orow[m] = 0.0f;
        for (int64_t i = 0; i < dk; i++) {
            const float *Si = S + i * dv;
            for (int64_t m = 0; m < dv; m++) orow[m] += qe[i] * Si[m];
        }
        for (int64_t s = 0; s <= r; s++) {
            float a = dot(qr, k + s * ldk, dk) * expf(gam[r] - gam[s]);
            const float *vs = vnew + s * dv;
            for (int64_t m = 0; m < dv; m++) orow[m] += a * vs[m];
        }
    }

    /* S <- exp(gam_last) S + sum_r (k_r exp(gam_last - gam_r)) vnew_r^T */
    float glast = gam[c - 1], elast = expf(glast);
    for (int64_t i = 0; i < dk * dv; i++) S[i] *= elast;
    for (int64_t r = 0; r < c; r++) {
        float e = expf(glast - gam[r]);
        const float *vr = vnew + r * dv;
        for (int64_t i = 0; i < dk; i++) {
            float ki = k[r * ldk + i] * e;
            float *Si = S + i * dv;
            for (int64_t m = 0; m < dv; m++) Si[m] += ki * vr[m];
        }
    }
}

void qhx_k_delta_chunked_f32_ref(float *S, const float *q, int64_t ldq, const float *k,
                                 int64_t ldk, const float *v, int64_t ldv, const float *beta,
                                 const float *g, int64_t ldg, float *o, int64_t ldo, int64_t n,
                                 int64_t dk, int64_t dv, int64_t C, float *work) {
    for (int64_t t0 = 0; t0 < n; t0 += C) {
        int64_t c = n - t0 < C ? n - t0 : C;
        delta_chunk(S, q + t0 * ldq, ldq, k + t0 * ldk, ldk, v + t0 * ldv, ldv, beta + t0 * ldg,
                    g + t0 * ldg, ldg, o + t0 * ldo, ldo, c, dk, dv, C, work);
    }
}
