/* kernels/arm/ops_neon.c: blocked attention (kernels/attn.h), the recurrent delta-rule step and
 * the chunked delta rule with baseline ARMv8-A Advanced SIMD. Installed by qhx_kern_install_arm
 * only after the hwcap check. Shapes the vector loops do not cover (a head or state width that
 * is not a multiple of 4) go to the _ref kernels. */
#include <arm_neon.h>
#include <math.h>

#include "kernels/arm/arm.h"
#include "kernels/attn.h"
#include "kernels/ref.h"
#include "kernels/vision.h"

#define AI static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 32")

/* The core of exp, four lanes: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two parts so
 * n ln2 is exact), e^r by the degree-5 polynomial of kernels/x86/ops_avx2.c (~2 ulp); returns e^r
 * and sets *n. */
AI float32x4_t exp_reduce(float32x4_t x, int32x4_t *n) {
    const float32x4_t fn = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    float32x4_t r = vfmsq_f32(x, fn, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, fn, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    *n = vcvtq_s32_f32(fn);
    return vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
}

/* 2^n built in the exponent bits, n in [-126, 127]. */
AI float32x4_t pow2i(int32x4_t n) { return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n, vdupq_n_s32(127)), 23)); }

/* exp(x) for x <= 0. Inputs below -87.3 give 0 (2^n would leave the normal range). */
AI float32x4_t exp_neg(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(-87.3f);
    const uint32x4_t under = vcltq_f32(x, lo);
    int32x4_t n;
    const float32x4_t p = exp_reduce(vmaxq_f32(x, lo), &n);
    const uint32x4_t v = vreinterpretq_u32_f32(vmulq_f32(p, pow2i(n)));
    return vreinterpretq_f32_u32(vbicq_u32(v, under));
}

/* exp(x) over the whole float range, as exp_any in kernels/x86/ops_avx2.c: 2^n applied as two
 * factors, so results overflow to +inf and underflow gradually as expf's do; inputs clamped to
 * [-104, 88.8]. NaN in gives a finite value; the callers carry NaN through x itself. */
AI float32x4_t exp_any(float32x4_t x) {
    int32x4_t n;
    const float32x4_t p = exp_reduce(vminq_f32(vmaxq_f32(x, vdupq_n_f32(-104.0f)), vdupq_n_f32(88.8f)), &n);
    const int32x4_t n1 = vshrq_n_s32(n, 1);
    return vmulq_f32(vmulq_f32(p, pow2i(n1)), pow2i(vsubq_s32(n, n1)));
}

/* ---- activations ------------------------------------------------------------------------- */

/* silu(x) = x / (1 + exp(-x)), the reference's order of operations. */
AI float32x4_t silu4(float32x4_t x) { return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), exp_any(vnegq_f32(x)))); }

void qhx_k_silu_f32_neon(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, silu4(vld1q_f32(x + i)));
    if (i < n) qhx_k_silu_f32_ref(x + i, n - i);
}

void qhx_k_swiglu_f32_neon(const float *gate, const float *up, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(out + i, vmulq_f32(silu4(vld1q_f32(gate + i)), vld1q_f32(up + i)));
    if (i < n) qhx_k_swiglu_f32_ref(gate + i, up + i, out + i, n - i);
}

/* gelu_pytorch_tanh as x / (1 + exp(-2y)), y = sqrt(2 / pi) (x + 0.044715 x^3): see
 * qhx_k_gelu_tanh_f32_avx2. */
void qhx_k_gelu_tanh_f32_neon(float *x, int64_t n) {
    const float32x4_t k2 = vdupq_n_f32(-2.0f * 0.7978845608028654f), c = vdupq_n_f32(0.044715f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        const float32x4_t inner = vfmaq_f32(v, vmulq_f32(c, v), vmulq_f32(v, v)); /* v + 0.044715 v^3 */
        vst1q_f32(x + i, vdivq_f32(v, vaddq_f32(vdupq_n_f32(1.0f), exp_any(vmulq_f32(k2, inner)))));
    }
    if (i < n) qhx_k_gelu_tanh_f32_ref(x + i, n - i);
}

/* ---- attention block --------------------------------------------------------------------- */

/* s[j] = (q_j . k) * scale for R (1..4) heads, hd a multiple of 4. */
AI void dots(const float *q, int64_t hd, const float *k, int R, float scale, float *s) {
    float32x4_t a[4];
    UNROLL
    for (int j = 0; j < R; j++) a[j] = vdupq_n_f32(0.0f);
    for (int64_t d = 0; d < hd; d += 4) {
        float32x4_t kv = vld1q_f32(k + d);
        UNROLL
        for (int j = 0; j < R; j++) a[j] = vfmaq_f32(a[j], vld1q_f32(q + j * hd + d), kv);
    }
    UNROLL
    for (int j = 0; j < R; j++) s[j] = vaddvq_f32(a[j]) * scale;
}

/* o_j[d0 .. d0 + 4W) = sum_t p_j[t] V[t][d0 ..] for R (1..4) heads, W (1 or 4) vectors. */
AI void pv(const float *V, int64_t ld, int64_t n, const float *p, int64_t pn, int R, int64_t d0, int W,
           float *o, int64_t hd) {
    float32x4_t a[4][4];
    UNROLL
    for (int j = 0; j < R; j++)
        UNROLL
        for (int w = 0; w < W; w++) a[j][w] = vdupq_n_f32(0.0f);
    for (int64_t t = 0; t < n; t++) {
        float32x4_t v[4];
        UNROLL
        for (int w = 0; w < W; w++) v[w] = vld1q_f32(V + t * ld + d0 + 4 * w);
        UNROLL
        for (int j = 0; j < R; j++) {
            float pj = p[j * pn + t];
            UNROLL
            for (int w = 0; w < W; w++) a[j][w] = vfmaq_n_f32(a[j][w], v[w], pj);
        }
    }
    UNROLL
    for (int j = 0; j < R; j++)
        UNROLL
        for (int w = 0; w < W; w++) vst1q_f32(o + j * hd + d0 + 4 * w, a[j][w]);
}

/* Scores row sr (n,) <- exp(sr - max); returns the max and the sum in ml (2,). */
static void softmax_parts(float *sr, int64_t n, float *ml) {
    float32x4_t mv = vdupq_n_f32(-INFINITY);
    int64_t t = 0;
    for (; t + 4 <= n; t += 4) mv = vmaxq_f32(mv, vld1q_f32(sr + t));
    float mx = vmaxvq_f32(mv);
    for (; t < n; t++) mx = sr[t] > mx ? sr[t] : mx;
    const float32x4_t mb = vdupq_n_f32(mx);
    float32x4_t sv = vdupq_n_f32(0.0f);
    for (t = 0; t + 4 <= n; t += 4) {
        float32x4_t e = exp_neg(vsubq_f32(vld1q_f32(sr + t), mb));
        vst1q_f32(sr + t, e);
        sv = vaddq_f32(sv, e);
    }
    float sum = vaddvq_f32(sv);
    for (; t < n; t++) {
        sr[t] = expf(sr[t] - mx);
        sum += sr[t];
    }
    ml[0] = mx;
    ml[1] = sum;
}

AI void attn_heads(const float *q, const float *K, const float *V, int64_t ld, int64_t n, int R, int64_t hd,
                   float scale, float *scores, float *o, float *ml) {
    float s[4];
    for (int64_t t = 0; t < n; t++) {
        dots(q, hd, K + t * ld, R, scale, s);
        UNROLL
        for (int j = 0; j < R; j++) scores[j * n + t] = s[j];
    }
    for (int j = 0; j < R; j++) softmax_parts(scores + j * n, n, ml + 2 * j);
    int64_t d0 = 0;
    for (; d0 + 16 <= hd; d0 += 16) pv(V, ld, n, scores, n, R, d0, 4, o, hd);
    for (; d0 < hd; d0 += 4) pv(V, ld, n, scores, n, R, d0, 1, o, hd);
}

void qhx_k_attn_block_f32_neon(const float *q, const float *K, const float *V, int64_t ld, int64_t n, int64_t rep,
                               int64_t hd, float scale, float *scores, float *o, float *ml) {
    if (hd % 4) {
        qhx_k_attn_block_f32_ref(q, K, V, ld, n, rep, hd, scale, scores, o, ml);
        return;
    }
    int64_t r = 0;
    for (; r + 4 <= rep; r += 4)
        attn_heads(q + r * hd, K, V, ld, n, 4, hd, scale, scores + r * n, o + r * hd, ml + 2 * r);
    for (; r < rep; r++) attn_heads(q + r * hd, K, V, ld, n, 1, hd, scale, scores + r * n, o + r * hd, ml + 2 * r);
}

/* ---- delta rule: one recurrent step -------------------------------------------------------- */

/* The step in two passes over S instead of the reference's four: the first decays S and forms
 * S^T k, the second adds k d^T and forms S^T q. Every element sees the reference's operations in
 * the reference's order, with a separate multiply and add (no fused multiply-add; this file is
 * built with -ffp-contract=off), so S and o are bitwise the reference's. */
void qhx_k_delta_step_f32_neon(float *S, const float *q, const float *k, const float *v, float beta, float g,
                               float *o, int64_t dk, int64_t dv) {
    if (dv % 4 || dv > 512) {
        qhx_k_delta_step_f32_ref(S, q, k, v, beta, g, o, dk, dv);
        return;
    }
    float d[512]; /* S^T k, then beta (v - S^T k) */
    const float32x4_t decay = vdupq_n_f32(expf(g));
    for (int64_t m = 0; m < dv; m += 4) vst1q_f32(d + m, vdupq_n_f32(0.0f));
    for (int64_t i = 0; i < dk; i++) {
        float *Si = S + i * dv;
        for (int64_t m = 0; m < dv; m += 4) {
            float32x4_t s = vmulq_f32(vld1q_f32(Si + m), decay);
            vst1q_f32(Si + m, s);
            vst1q_f32(d + m, vaddq_f32(vld1q_f32(d + m), vmulq_n_f32(s, k[i])));
        }
    }
    for (int64_t m = 0; m < dv; m += 4)
        vst1q_f32(d + m, vmulq_n_f32(vsubq_f32(vld1q_f32(v + m), vld1q_f32(d + m)), beta));
    for (int64_t m = 0; m < dv; m += 4) vst1q_f32(o + m, vdupq_n_f32(0.0f));
    for (int64_t i = 0; i < dk; i++) {
        float *Si = S + i * dv;
        for (int64_t m = 0; m < dv; m += 4) {
            float32x4_t s = vaddq_f32(vld1q_f32(Si + m), vmulq_n_f32(vld1q_f32(d + m), k[i]));
            vst1q_f32(Si + m, s);
            vst1q_f32(o + m, vaddq_f32(vld1q_f32(o + m), vmulq_n_f32(s, q[i])));
        }
    }
}

/* ---- delta rule: chunked form (prefill) ----------------------------------------------------- */

/* y[0, n) += a * x[0, n), n a multiple of 4 */
AI void axpy(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
}

/* y[0, n) = 0, n a multiple of 4 */
AI void zero(float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 4) vst1q_f32(y + i, vdupq_n_f32(0.0f));
}

/* a . b over n (a multiple of 4) values, two accumulators */
AI float dot(const float *a, const float *b, int64_t n) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
        s1 = vfmaq_f32(s1, vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
    }
    for (; i < n; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(a + i), vld1q_f32(b + i));
    return vaddvq_f32(vaddq_f32(s0, s1));
}

/* One chunk of c <= C tokens: the algebra of kernels/ref/delta_ref.c's delta_chunk (spec §5.7),
 * with the loops over dk and dv in NEON and the decays exp(gam_r - gam_s) computed once into E.
 * work: qhx_k_delta_chunked_work floats (the reference's layout, then E and ek). */
static void delta_chunk_neon(float *S, const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                             int64_t ldv, const float *beta, const float *g, int64_t ldg, float *o, int64_t ldo,
                             int64_t c, int64_t dk, int64_t dv, int64_t C, float *work) {
    float *gam = work;         /* (c,) cumulative log-decay */
    float *T = gam + C;        /* (c, c) strictly lower part; unit diagonal implied */
    float *kb = T + C * C;     /* (c, dk) k_r beta_r */
    float *W = kb + C * dk;    /* (c, dk) */
    float *U = W + C * dk;     /* (c, dv) */
    float *vnew = U + C * dv;  /* (c, dv) */
    float *qe = vnew + C * dv; /* (dk,) q_r exp(gam_r) */
    float *E = qe + dk;        /* (c, c) exp(gam_r - gam_s), s <= r */
    float *ek = E + C * C;     /* (c,) exp(gam_last - gam_r) */
    float row[256];            /* (c,) the original row of -A during the substitution */

    for (int64_t r = 0; r < c; r++) gam[r] = (r ? gam[r - 1] : 0.0f) + g[r * ldg];
    for (int64_t r = 0; r < c; r++) {
        const float32x4_t gr = vdupq_n_f32(gam[r]);
        int64_t s = 0;
        for (; s + 4 <= r + 1; s += 4) vst1q_f32(E + r * C + s, exp_neg(vsubq_f32(gr, vld1q_f32(gam + s))));
        for (; s <= r; s++) E[r * C + s] = expf(gam[r] - gam[s]);
    }
    for (int64_t r = 0; r < c; r++)
        for (int64_t i = 0; i < dk; i += 4)
            vst1q_f32(kb + r * dk + i, vmulq_n_f32(vld1q_f32(k + r * ldk + i), beta[r * ldg]));
    for (int64_t r = 0; r < c; r++)
        for (int64_t s = 0; s < r; s++) T[r * C + s] = -(dot(kb + r * dk, k + s * ldk, dk) * E[r * C + s]);
    /* T <- (I + A)^-1 strictly lower part: row i += sum_m row_i[m] (original) T[m][:m], over the
     * finished rows m < i, as the reference's forward substitution */
    for (int64_t i = 1; i < c; i++) {
        float *Ti = T + i * C;
        for (int64_t m = 0; m < i; m++) row[m] = Ti[m];
        for (int64_t m = 1; m < i; m++) {
            const float a = row[m], *Tm = T + m * C;
            for (int64_t s = 0; s < m; s++) Ti[s] += a * Tm[s];
        }
    }
    /* W = T (beta exp(gam) K), U = T (beta V), summing s = 0..r with T[r][r] = 1 */
    for (int64_t r = 0; r < c; r++) {
        float *Wr = W + r * dk, *Ur = U + r * dv;
        zero(Wr, dk);
        zero(Ur, dv);
        for (int64_t s = 0; s <= r; s++) {
            float t = s == r ? 1.0f : T[r * C + s];
            axpy(Wr, t * expf(gam[s]), kb + s * dk, dk);
            axpy(Ur, t * beta[s * ldg], v + s * ldv, dv);
        }
    }
    /* T is free now: qk[r][s] = (q_r . k_s) exp(gam_r - gam_s) */
    float *qk = T;
    for (int64_t r = 0; r < c; r++)
        for (int64_t s = 0; s <= r; s++) qk[r * C + s] = dot(q + r * ldq, k + s * ldk, dk) * E[r * C + s];
    /* vnew = U - W S (the state before this chunk) */
    for (int64_t r = 0; r < c; r++) {
        float *vr = vnew + r * dv;
        zero(vr, dv);
        for (int64_t i = 0; i < dk; i++) axpy(vr, W[r * dk + i], S + i * dv, dv);
        for (int64_t m = 0; m < dv; m += 4)
            vst1q_f32(vr + m, vsubq_f32(vld1q_f32(U + r * dv + m), vld1q_f32(vr + m)));
    }
    /* o_r = (q_r exp(gam_r)) S + sum_{s <= r} qk[r][s] vnew_s */
    for (int64_t r = 0; r < c; r++) {
        float *orow = o + r * ldo;
        const float er = expf(gam[r]);
        for (int64_t i = 0; i < dk; i++) qe[i] = q[r * ldq + i] * er;
        zero(orow, dv);
        for (int64_t i = 0; i < dk; i++) axpy(orow, qe[i], S + i * dv, dv);
        for (int64_t s = 0; s <= r; s++) axpy(orow, qk[r * C + s], vnew + s * dv, dv);
    }
    /* S <- exp(gam_last) S + sum_r (k_r exp(gam_last - gam_r)) vnew_r^T */
    const float glast = gam[c - 1];
    const float32x4_t elast = vdupq_n_f32(expf(glast));
    for (int64_t r = 0; r < c; r++) ek[r] = expf(glast - gam[r]);
    for (int64_t i = 0; i < dk; i++) {
        float *Si = S + i * dv;
        for (int64_t m = 0; m < dv; m += 4) vst1q_f32(Si + m, vmulq_f32(vld1q_f32(Si + m), elast));
        for (int64_t r = 0; r < c; r++) axpy(Si, k[r * ldk + i] * ek[r], vnew + r * dv, dv);
    }
}

void qhx_k_delta_chunked_f32_neon(float *S, const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                                  int64_t ldv, const float *beta, const float *g, int64_t ldg, float *o, int64_t ldo,
                                  int64_t n, int64_t dk, int64_t dv, int64_t C, float *work) {
    if (dk % 4 || dv % 4 || C > 256) { /* the vector loops step by 4; row[] holds a chunk */
        qhx_k_delta_chunked_f32_ref(S, q, ldq, k, ldk, v, ldv, beta, g, ldg, o, ldo, n, dk, dv, C, work);
        return;
    }
    for (int64_t t0 = 0; t0 < n; t0 += C) {
        int64_t c = n - t0 < C ? n - t0 : C;
        delta_chunk_neon(S, q + t0 * ldq, ldq, k + t0 * ldk, ldk, v + t0 * ldv, ldv, beta + t0 * ldg, g + t0 * ldg,
                         ldg, o + t0 * ldo, ldo, c, dk, dv, C, work);
    }
}
