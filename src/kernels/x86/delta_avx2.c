/* kernels/x86/delta_avx2.c: the chunked delta rule (prefill; qhx_k_delta_chunked_f32_ref's
 * contract) with AVX2 + FMA. Built with -mavx2 -mfma -mf16c.
 *
 * The same body builds a second time from delta_avx512.c (QHX_DELTA_AVX512, AVX-512 flags) for
 * dk = dv = 128 (Qwen3.5): there the row updates y += a x over 128 floats, which here load and
 * store y 8 floats at a time for every term, keep the whole row in eight zmm registers and add
 * the terms in the same order, one fused multiply-add per element and term as here. So both
 * builds return the same bits; other head sizes take the AVX2 build. */
#include <immintrin.h>
#include <math.h>

#include "kernels/attn.h"
#include "kernels/x86/exp_avx2.h"
#include "kernels/x86/ops_x86.h"

#ifdef QHX_DELTA_AVX512
#define UNROLL _Pragma("GCC unroll 32")
#define NV 8 /* a row of 128 floats in zmm registers */

/* a row of 128 floats: acc = 0, acc = m * acc, acc += s x (fma per element, as axpy), y = acc */
AI void row_zero(__m512 acc[NV]) {
    UNROLL
    for (int j = 0; j < NV; j++) acc[j] = _mm512_setzero_ps();
}
AI void row_load_scaled(__m512 acc[NV], const float *y, float m) {
    __m512 mv = _mm512_set1_ps(m);
    UNROLL
    for (int j = 0; j < NV; j++) acc[j] = _mm512_mul_ps(_mm512_loadu_ps(y + 16 * j), mv);
}
AI void row_fma(__m512 acc[NV], float s, const float *x) {
    __m512 sv = _mm512_set1_ps(s);
    UNROLL
    for (int j = 0; j < NV; j++) acc[j] = _mm512_fmadd_ps(sv, _mm512_loadu_ps(x + 16 * j), acc[j]);
}
AI void row_store(float *y, const __m512 acc[NV]) {
    UNROLL
    for (int j = 0; j < NV; j++) _mm512_storeu_ps(y + 16 * j, acc[j]);
}
/* y = u - acc */
AI void row_store_sub(float *y, const float *u, const __m512 acc[NV]) {
    UNROLL
    for (int j = 0; j < NV; j++) _mm512_storeu_ps(y + 16 * j, _mm512_sub_ps(_mm512_loadu_ps(u + 16 * j), acc[j]));
}
#endif

/* y[0, n) += a * x[0, n), n a multiple of 8 */
AI void axpy(float *y, float a, const float *x, int64_t n) {
    __m256 av = _mm256_set1_ps(a);
    for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
}

AI float dot(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i < n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    return hsum(_mm256_add_ps(s0, s1));
}

/* One chunk of c <= C tokens: the algebra of kernels/ref/delta_ref.c's delta_chunk (spec §5.7)
 * with every inner loop over dk or dv in AVX2 and the decays exp(gam_r - gam_s) computed once.
 * work: qhx_k_delta_chunked_work floats (the reference's layout, then E and ek). */
static void delta_chunk_avx2(float *S, const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                             int64_t ldv, const float *beta, const float *g, int64_t ldg, float *o, int64_t ldo,
                             int64_t c, int64_t dk, int64_t dv, int64_t C, float *work) {
    float *gam = work;      /* (c,) */
    float *T = gam + C;     /* (c, c) strictly lower part */
    float *kb = T + C * C;  /* (c, dk) */
    float *W = kb + C * dk; /* (c, dk) */
    float *U = W + C * dk;  /* (c, dv) */
    float *vnew = U + C * dv;
    float *qe = vnew + C * dv; /* (dk,) */
    float *E = qe + dk;        /* (c, c) exp(gam_r - gam_s), s <= r */
    float *ek = E + C * C;     /* (c,) exp(gam_last - gam_r) */
    float row[256];            /* (c,) the original row of -A in the substitution */

    for (int64_t r = 0; r < c; r++) gam[r] = (r ? gam[r - 1] : 0.0f) + g[r * ldg];
    for (int64_t r = 0; r < c; r++) {
        __m256 gr = _mm256_set1_ps(gam[r]);
        int64_t s = 0;
        for (; s + 8 <= r + 1; s += 8)
            _mm256_storeu_ps(E + r * C + s, exp_neg(_mm256_sub_ps(gr, _mm256_loadu_ps(gam + s))));
        for (; s <= r; s++) E[r * C + s] = expf(gam[r] - gam[s]);
    }
    for (int64_t r = 0; r < c; r++) {
        __m256 b = _mm256_set1_ps(beta[r * ldg]);
        for (int64_t i = 0; i < dk; i += 8) _mm256_storeu_ps(kb + r * dk + i, _mm256_mul_ps(_mm256_loadu_ps(k + r * ldk + i), b));
    }
    for (int64_t r = 0; r < c; r++)
        for (int64_t s = 0; s < r; s++) T[r * C + s] = -(dot(kb + r * dk, k + s * ldk, dk) * E[r * C + s]);
    /* T <- (I + A)^-1 strictly lower part: row_i += row_i (original) . T[:i, :i] */
    for (int64_t i = 1; i < c; i++) {
        float *Ti = T + i * C;
        for (int64_t m = 0; m < i; m++) row[m] = Ti[m];
        for (int64_t m = 1; m < i; m++) {
            float a = row[m];
            const float *Tm = T + m * C;
            for (int64_t s = 0; s < m; s++) Ti[s] += a * Tm[s];
        }
    }
    /* W = T (beta exp(gam) K) */
    for (int64_t r = 0; r < c; r++) {
        float *Wr = W + r * dk;
#ifdef QHX_DELTA_AVX512
        __m512 acc[NV];
        row_zero(acc);
        for (int64_t s = 0; s <= r; s++) row_fma(acc, (s == r ? 1.0f : T[r * C + s]) * expf(gam[s]), kb + s * dk);
        row_store(Wr, acc);
#else
        for (int64_t i = 0; i < dk; i += 8) _mm256_storeu_ps(Wr + i, _mm256_setzero_ps());
        for (int64_t s = 0; s <= r; s++) axpy(Wr, (s == r ? 1.0f : T[r * C + s]) * expf(gam[s]), kb + s * dk, dk);
#endif
    }
    /* U = T (beta V); then T's space is free for qk[r][s] = (q_r . k_s) exp(gam_r - gam_s) */
    float *qk = T;
    for (int64_t r = 0; r < c; r++) {
        float *Ur = U + r * dv;
#ifdef QHX_DELTA_AVX512
        __m512 acc[NV];
        row_zero(acc);
        for (int64_t s = 0; s <= r; s++) row_fma(acc, (s == r ? 1.0f : T[r * C + s]) * beta[s * ldg], v + s * ldv);
        row_store(Ur, acc);
#else
        for (int64_t m = 0; m < dv; m += 8) _mm256_storeu_ps(Ur + m, _mm256_setzero_ps());
        for (int64_t s = 0; s <= r; s++) axpy(Ur, (s == r ? 1.0f : T[r * C + s]) * beta[s * ldg], v + s * ldv, dv);
#endif
    }
    for (int64_t r = 0; r < c; r++)
        for (int64_t s = 0; s <= r; s++) qk[r * C + s] = dot(q + r * ldq, k + s * ldk, dk) * E[r * C + s];
    /* vnew = U - W S */
    for (int64_t r = 0; r < c; r++) {
        float *vr = vnew + r * dv;
#ifdef QHX_DELTA_AVX512
        __m512 acc[NV];
        row_zero(acc);
        for (int64_t i = 0; i < dk; i++) row_fma(acc, W[r * dk + i], S + i * dv);
        row_store_sub(vr, U + r * dv, acc);
#else
        for (int64_t m = 0; m < dv; m += 8) _mm256_storeu_ps(vr + m, _mm256_setzero_ps());
        for (int64_t i = 0; i < dk; i++) axpy(vr, W[r * dk + i], S + i * dv, dv);
        for (int64_t m = 0; m < dv; m += 8)
            _mm256_storeu_ps(vr + m, _mm256_sub_ps(_mm256_loadu_ps(U + r * dv + m), _mm256_loadu_ps(vr + m)));
#endif
    }
    /* o_r = (q_r exp(gam_r)) S + sum_{s <= r} qk[r][s] vnew_s */
    for (int64_t r = 0; r < c; r++) {
        float *orow = o + r * ldo;
        float er = expf(gam[r]);
        for (int64_t i = 0; i < dk; i++) qe[i] = q[r * ldq + i] * er;
#ifdef QHX_DELTA_AVX512
        __m512 acc[NV];
        row_zero(acc);
        for (int64_t i = 0; i < dk; i++) row_fma(acc, qe[i], S + i * dv);
        for (int64_t s = 0; s <= r; s++) row_fma(acc, qk[r * C + s], vnew + s * dv);
        row_store(orow, acc);
#else
        for (int64_t m = 0; m < dv; m += 8) _mm256_storeu_ps(orow + m, _mm256_setzero_ps());
        for (int64_t i = 0; i < dk; i++) axpy(orow, qe[i], S + i * dv, dv);
        for (int64_t s = 0; s <= r; s++) axpy(orow, qk[r * C + s], vnew + s * dv, dv);
#endif
    }
    /* S <- exp(gam_last) S + sum_r (k_r exp(gam_last - gam_r)) vnew_r^T */
    float glast = gam[c - 1], elast = expf(glast);
    for (int64_t r = 0; r < c; r++) ek[r] = expf(glast - gam[r]);
#ifdef QHX_DELTA_AVX512
    for (int64_t i = 0; i < dk; i++) {
        float *Si = S + i * dv;
        __m512 acc[NV];
        row_load_scaled(acc, Si, elast);
        for (int64_t r = 0; r < c; r++) row_fma(acc, k[r * ldk + i] * ek[r], vnew + r * dv);
        row_store(Si, acc);
    }
#else
    __m256 el = _mm256_set1_ps(elast);
    for (int64_t i = 0; i < dk; i++) {
        float *Si = S + i * dv;
        for (int64_t m = 0; m < dv; m += 8) _mm256_storeu_ps(Si + m, _mm256_mul_ps(_mm256_loadu_ps(Si + m), el));
        for (int64_t r = 0; r < c; r++) axpy(Si, k[r * ldk + i] * ek[r], vnew + r * dv, dv);
    }
#endif
}

#ifdef QHX_DELTA_AVX512
void qhx_k_delta_chunked_f32_avx512(float *S, const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                                    int64_t ldv, const float *beta, const float *g, int64_t ldg, float *o, int64_t ldo,
                                    int64_t n, int64_t dk, int64_t dv, int64_t C, float *work) {
    if (dk != 16 * NV || dv != 16 * NV || C > 256) { /* the rows held in registers are 128 floats */
        qhx_k_delta_chunked_f32_avx2(S, q, ldq, k, ldk, v, ldv, beta, g, ldg, o, ldo, n, dk, dv, C, work);
        return;
    }
#else
void qhx_k_delta_chunked_f32_avx2(float *S, const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                                  int64_t ldv, const float *beta, const float *g, int64_t ldg, float *o, int64_t ldo,
                                  int64_t n, int64_t dk, int64_t dv, int64_t C, float *work) {
    if (dk % 8 || dv % 8 || C > 256) { /* the vector loops step by 8; row[] holds a chunk */
        qhx_k_delta_chunked_f32_ref(S, q, ldq, k, ldk, v, ldv, beta, g, ldg, o, ldo, n, dk, dv, C, work);
        return;
    }
#endif
    for (int64_t t0 = 0; t0 < n; t0 += C) {
        int64_t c = n - t0 < C ? n - t0 : C;
        delta_chunk_avx2(S, q + t0 * ldq, ldq, k + t0 * ldk, ldk, v + t0 * ldv, ldv, beta + t0 * ldg, g + t0 * ldg, ldg,
                         o + t0 * ldo, ldo, c, dk, dv, C, work);
    }
}

