/* kernels/x86/ops_avx2.c: blocked attention (kernels/attn.h), the recurrent delta-rule step and the activations
 * with AVX2 + FMA. Built with -mavx2 -mfma -mf16c; installed by kernels/select.c only when the
 * table holds AVX2 (or better) kernels, i.e. after the CPU check. */
#include <immintrin.h>
#include <math.h>

#include "kernels/attn.h"
#include "kernels/vision.h"
#include "kernels/x86/exp_avx2.h"
#include "kernels/x86/ops_x86.h"

#define AI static inline __attribute__((always_inline))

/* silu(x) = x / (1 + exp(-x)), the reference's order of operations. */
AI __m256 silu8(__m256 x) {
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp_any(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

void qhx_k_silu_f32_avx2(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, silu8(_mm256_loadu_ps(x + i)));
    if (i < n) qhx_k_silu_f32_ref(x + i, n - i);
}

void qhx_k_swiglu_f32_avx2(const float *gate, const float *up, float *out, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
    if (i < n) qhx_k_swiglu_f32_ref(gate + i, up + i, out + i, n - i);
}

/* gelu_pytorch_tanh: 0.5 x (1 + tanh(y)), y = sqrt(2 / pi) (x + 0.044715 x^3), computed as the
 * equal x / (1 + exp(-2y)): no tanh, and no cancellation in 1 + tanh(y) for negative y (where
 * the float32 reference keeps only the absolute accuracy of tanh, ~6e-8 |x|). */
void qhx_k_gelu_tanh_f32_avx2(float *x, int64_t n) {
    const __m256 k2 = _mm256_set1_ps(-2.0f * 0.7978845608028654f), c = _mm256_set1_ps(0.044715f);
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(c, v), _mm256_mul_ps(v, v), v); /* v + 0.044715 v^3 */
        _mm256_storeu_ps(x + i, _mm256_div_ps(v, _mm256_add_ps(one, exp_any(_mm256_mul_ps(k2, inner)))));
    }
    if (i < n) qhx_k_gelu_tanh_f32_ref(x + i, n - i);
}

/* s[j] = (q_j . k) * scale for up to 4 heads (R), hd a multiple of 8. */
AI void dots(const float *q, int64_t hd, const float *k, int R, float scale, float *s) {
    __m256 a[4];
    for (int j = 0; j < R; j++) a[j] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) {
        __m256 kv = _mm256_loadu_ps(k + d);
        for (int j = 0; j < R; j++) a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(q + j * hd + d), kv, a[j]);
    }
    for (int j = 0; j < R; j++) s[j] = hsum(a[j]) * scale;
}

/* o_j[d0 .. d0+16) = sum_t p_j[t] V[t][d0 ..] for up to 4 heads. */
AI void pv16(const float *V, int64_t ld, int64_t n, const float *p, int64_t pn, int R, int64_t d0, float *o,
             int64_t hd) {
    __m256 a[4][2];
    for (int j = 0; j < R; j++) a[j][0] = a[j][1] = _mm256_setzero_ps();
    for (int64_t t = 0; t < n; t++) {
        __m256 v0 = _mm256_loadu_ps(V + t * ld + d0), v1 = _mm256_loadu_ps(V + t * ld + d0 + 8);
        for (int j = 0; j < R; j++) {
            __m256 pj = _mm256_broadcast_ss(p + j * pn + t);
            a[j][0] = _mm256_fmadd_ps(pj, v0, a[j][0]);
            a[j][1] = _mm256_fmadd_ps(pj, v1, a[j][1]);
        }
    }
    for (int j = 0; j < R; j++) {
        _mm256_storeu_ps(o + j * hd + d0, a[j][0]);
        _mm256_storeu_ps(o + j * hd + d0 + 8, a[j][1]);
    }
}

AI void attn_heads(const float *q, const float *K, const float *V, int64_t ld, int64_t n, int R, int64_t hd,
                   float scale, float *scores, float *o, float *ml) {
    float s[4];
    for (int64_t t = 0; t < n; t++) {
        dots(q, hd, K + t * ld, R, scale, s);
        for (int j = 0; j < R; j++) scores[j * n + t] = s[j];
    }
    for (int j = 0; j < R; j++) {
        float *sr = scores + j * n;
        __m256 mv = _mm256_set1_ps(-INFINITY);
        int64_t t = 0;
        for (; t + 8 <= n; t += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(sr + t));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float mx = _mm_cvtss_f32(m4);
        for (; t < n; t++) mx = sr[t] > mx ? sr[t] : mx;
        __m256 mb = _mm256_set1_ps(mx), sv = _mm256_setzero_ps();
        for (t = 0; t + 8 <= n; t += 8) {
            __m256 e = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(sr + t), mb));
            _mm256_storeu_ps(sr + t, e);
            sv = _mm256_add_ps(sv, e);
        }
        float sum = hsum(sv);
        for (; t < n; t++) {
            sr[t] = expf(sr[t] - mx);
            sum += sr[t];
        }
        ml[2 * j] = mx;
        ml[2 * j + 1] = sum;
    }
    for (int64_t d0 = 0; d0 < hd; d0 += 16) pv16(V, ld, n, scores, n, R, d0, o, hd);
}

void qhx_k_attn_block_f32_avx2(const float *q, const float *K, const float *V, int64_t ld, int64_t n, int64_t rep,
                               int64_t hd, float scale, float *scores, float *o, float *ml) {
    if (hd % 16) {
        qhx_k_attn_block_f32_ref(q, K, V, ld, n, rep, hd, scale, scores, o, ml);
        return;
    }
    int64_t r = 0;
    for (; r + 4 <= rep; r += 4)
        attn_heads(q + r * hd, K, V, ld, n, 4, hd, scale, scores + r * n, o + r * hd, ml + 2 * r);
    for (; r < rep; r++) attn_heads(q + r * hd, K, V, ld, n, 1, hd, scale, scores + r * n, o + r * hd, ml + 2 * r);
}

/* The recurrent step in two passes over S instead of four: the first decays S and forms S^T k,
 * the second adds k d^T and forms S^T q. Per element the same operations as the reference, in
 * the same order, without fused multiply-adds, so the result is bitwise the reference's. */
void qhx_k_delta_step_f32_avx2(float *S, const float *q, const float *k, const float *v, float beta, float g,
                               float *o, int64_t dk, int64_t dv) {
    if (dv % 8 || dv > 512) {
        qhx_k_delta_step_f32_ref(S, q, k, v, beta, g, o, dk, dv);
        return;
    }
    _Alignas(32) float d[512];
    const __m256 decay = _mm256_set1_ps(expf(g));
    for (int64_t m = 0; m < dv; m += 8) _mm256_store_ps(d + m, _mm256_setzero_ps());
    for (int64_t i = 0; i < dk; i++) {
        float *Si = S + i * dv;
        __m256 ki = _mm256_set1_ps(k[i]);
        for (int64_t m = 0; m < dv; m += 8) {
            __m256 s = _mm256_mul_ps(_mm256_loadu_ps(Si + m), decay);
            _mm256_storeu_ps(Si + m, s);
            _mm256_store_ps(d + m, _mm256_add_ps(_mm256_load_ps(d + m), _mm256_mul_ps(s, ki)));
        }
    }
    const __m256 b = _mm256_set1_ps(beta);
    for (int64_t m = 0; m < dv; m += 8)
        _mm256_store_ps(d + m, _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + m), _mm256_load_ps(d + m)), b));
    for (int64_t m = 0; m < dv; m += 8) _mm256_storeu_ps(o + m, _mm256_setzero_ps());
    for (int64_t i = 0; i < dk; i++) {
        float *Si = S + i * dv;
        __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
        for (int64_t m = 0; m < dv; m += 8) {
            __m256 s = _mm256_add_ps(_mm256_loadu_ps(Si + m), _mm256_mul_ps(ki, _mm256_load_ps(d + m)));
            _mm256_storeu_ps(Si + m, s);
            _mm256_storeu_ps(o + m, _mm256_add_ps(_mm256_loadu_ps(o + m), _mm256_mul_ps(s, qi)));
        }
    }
}

/* ---- streaming read (bandwidth probes) --------------------------------------------------------- */

/* XOR is associative and commutative, so four 256-bit chains folded at the end give exactly the
 * reference's word-by-word XOR. */
uint64_t qhx_k_read_fold_avx2(const void *p, size_t n) {
    const uint8_t *b = p;
    size_t blocks = n / 128, i = 0;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (; i < blocks; i++) {
        const __m256i *v = (const __m256i *)(b + 128 * i);
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256(v));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256(v + 1));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256(v + 2));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256(v + 3));
    }
    __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    __m128i h = _mm_xor_si128(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    uint64_t r = (uint64_t)_mm_cvtsi128_si64(h) ^ (uint64_t)_mm_extract_epi64(h, 1);
    return r ^ qhx_k_read_fold_ref(b + 128 * blocks, n - 128 * blocks);
}
