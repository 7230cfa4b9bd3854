/* kernels/x86/ops_avx2.c: blocked attention (kernels/attn.h), the recurrent delta-rule step and the activations
 * with AVX2 + FMA. Built with -mavx2 -mfma -mf16c; installed by kernels/select.c only when the
 * table holds AVX2 (or better) kernels, i.e. after the CPU check. */
#include <immintrin.h>
#include <math.h>

#include "kernels/attn.h"
#include "kernels/vision.h"
#include "kernels/x86/cvt_x86.h"
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

/* Eight keys' or values' elements from row p at column d: f32, or f16 widened on the load
 * (exact, so an f16 row gives the same bits here as the same row widened beforehand). */
AI __m256 load8(const void *p, int64_t d, bool f16) {
    if (f16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + d)));
    return _mm256_loadu_ps((const float *)p + d);
}

AI const void *row_at(const void *base, int64_t t, int64_t ld, bool f16) {
    return f16 ? (const void *)((const uint16_t *)base + t * ld) : (const void *)((const float *)base + t * ld);
}

/* s[j] = (q_j . k) * scale for up to 4 heads (R), hd a multiple of 8. */
AI void dots(const float *q, int64_t hd, const void *k, bool f16, int R, float scale, float *s) {
    __m256 a[4];
    for (int j = 0; j < R; j++) a[j] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) {
        __m256 kv = load8(k, d, f16);
        for (int j = 0; j < R; j++) a[j] = _mm256_fmadd_ps(_mm256_loadu_ps(q + j * hd + d), kv, a[j]);
    }
    for (int j = 0; j < R; j++) s[j] = hsum(a[j]) * scale;
}

/* The same for two keys at once: s0 for k0, s1 for k1. Each (head, key) keeps its own chain in
 * dots' order; two keys make 2R independent chains, so the FMA latency (one chain per head and
 * key, hd / 8 long) no longer bounds a pass over the keys. */
AI void dots2(const float *q, int64_t hd, const void *k0, const void *k1, bool f16, int R, float scale, float *s0,
              float *s1) {
    __m256 a[4], b[4];
    for (int j = 0; j < R; j++) a[j] = b[j] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) {
        __m256 kv0 = load8(k0, d, f16), kv1 = load8(k1, d, f16);
        for (int j = 0; j < R; j++) {
            __m256 qv = _mm256_loadu_ps(q + j * hd + d);
            a[j] = _mm256_fmadd_ps(qv, kv0, a[j]);
            b[j] = _mm256_fmadd_ps(qv, kv1, b[j]);
        }
    }
    for (int j = 0; j < R; j++) s0[j] = hsum(a[j]) * scale, s1[j] = hsum(b[j]) * scale;
}

/* o_j[d0 .. d0 + 8 NV) = sum_t p_j[t] V[t][d0 ..] for up to 4 heads, NV vectors of 8 columns:
 * R * NV chains, one per (head, vector), each summing over t in order. */
AI void pv(const void *V, bool f16, int64_t ld, int64_t n, const float *p, int64_t pn, int R, int NV, int64_t d0,
           float *o, int64_t hd) {
    __m256 a[4][4];
    for (int j = 0; j < R; j++)
        for (int v = 0; v < NV; v++) a[j][v] = _mm256_setzero_ps();
    for (int64_t t = 0; t < n; t++) {
        const void *vt = row_at(V, t, ld, f16);
        __m256 vv[4];
        for (int v = 0; v < NV; v++) vv[v] = load8(vt, d0 + 8 * v, f16);
        for (int j = 0; j < R; j++) {
            __m256 pj = _mm256_broadcast_ss(p + j * pn + t);
            for (int v = 0; v < NV; v++) a[j][v] = _mm256_fmadd_ps(pj, vv[v], a[j][v]);
        }
    }
    for (int j = 0; j < R; j++)
        for (int v = 0; v < NV; v++) _mm256_storeu_ps(o + j * hd + d0 + 8 * v, a[j][v]);
}

/* A cache row holds every KV head, so one head's part of consecutive rows is not contiguous and
 * the hardware prefetchers, which stop at page ends, miss much of it: fetch key row t + 16, and
 * value row t, which the weighted sum after the scores will want. */
AI void prefetch_kv(const void *K, const void *V, int64_t t, int64_t n, int64_t ld, int64_t hd, bool f16) {
    const int64_t row_bytes = hd * (f16 ? 2 : 4);
    if (t + 16 < n) {
        const char *kn = row_at(K, t + 16, ld, f16);
        for (int64_t b = 0; b < row_bytes; b += 64) _mm_prefetch(kn + b, _MM_HINT_T0);
    }
    const char *vt = row_at(V, t, ld, f16);
    for (int64_t b = 0; b < row_bytes; b += 64) _mm_prefetch(vt + b, _MM_HINT_T1);
}

/* One body for f32 and f16 rows: with f16 a compile-time constant at each call, the two
 * instances differ only in their loads, so their results are bitwise equal on equal values. */
AI void attn_heads(const float *q, const void *K, const void *V, bool f16, int64_t ld, int64_t n, int R, int64_t hd,
                   float scale, float *scores, float *o, float *ml) {
    float s[4], s2[4];
    for (int64_t t = 0; t < n; t += 2) { /* keys in pairs: dots2 */
        prefetch_kv(K, V, t, n, ld, hd, f16);
        if (t + 1 < n) {
            prefetch_kv(K, V, t + 1, n, ld, hd, f16);
            dots2(q, hd, row_at(K, t, ld, f16), row_at(K, t + 1, ld, f16), f16, R, scale, s, s2);
            for (int j = 0; j < R; j++) scores[j * n + t] = s[j], scores[j * n + t + 1] = s2[j];
        } else {
            dots(q, hd, row_at(K, t, ld, f16), f16, R, scale, s);
            for (int j = 0; j < R; j++) scores[j * n + t] = s[j];
        }
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
    /* 8 chains where the columns allow (R heads x NV vectors), in passes over the block's V rows */
    int64_t d0 = 0;
    if (R <= 2)
        for (; d0 + 32 <= hd; d0 += 32) pv(V, f16, ld, n, scores, n, R, 4, d0, o, hd);
    for (; d0 < hd; d0 += 16) pv(V, f16, ld, n, scores, n, R, 2, d0, o, hd);
}

/* Up to 4 heads in one pass over the block's rows, R a constant in each instance (registers);
 * a head's arithmetic does not depend on R, so how the heads are grouped does not change bits. */
AI void heads_of(const float *q, const void *K, const void *V, bool f16, int64_t ld, int64_t n, int R, int64_t hd,
                 float scale, float *scores, float *o, float *ml) {
    switch (R) {
    case 4: attn_heads(q, K, V, f16, ld, n, 4, hd, scale, scores, o, ml); break;
    case 3: attn_heads(q, K, V, f16, ld, n, 3, hd, scale, scores, o, ml); break;
    case 2: attn_heads(q, K, V, f16, ld, n, 2, hd, scale, scores, o, ml); break;
    default: attn_heads(q, K, V, f16, ld, n, 1, hd, scale, scores, o, ml); break;
    }
}

void qhx_k_attn_block_f32_avx2(const float *q, const float *K, const float *V, int64_t ld, int64_t n, int64_t rep,
                               int64_t hd, float scale, float *scores, float *o, float *ml) {
    if (hd % 16) {
        qhx_k_attn_block_f32_ref(q, K, V, ld, n, rep, hd, scale, scores, o, ml);
        return;
    }
    for (int64_t r = 0; r < rep; r += 4)
        heads_of(q + r * hd, K, V, false, ld, n, rep - r < 4 ? (int)(rep - r) : 4, hd, scale, scores + r * n, o + r * hd,
                 ml + 2 * r);
}

/* The f16 cache read in place: no widened tile to write and read back (at hd 256 a block's K and
 * V tiles are 512 KiB, an L2's worth, so the tile cost more than the arithmetic). */
void qhx_k_attn_block_f16_avx2(const float *q, const uint16_t *K, const uint16_t *V, int64_t ld, int64_t n,
                               int64_t rep, int64_t hd, float scale, float *scores, float *tile, float *o,
                               float *ml) {
    if (hd % 16) {
        for (int64_t t = 0; t < n; t++) {
            qhx_k_f16_to_f32_f16c(K + t * ld, tile + t * hd, hd);
            qhx_k_f16_to_f32_f16c(V + t * ld, tile + (n + t) * hd, hd);
        }
        qhx_k_attn_block_f32_avx2(q, tile, tile + n * hd, hd, n, rep, hd, scale, scores, o, ml);
        return;
    }
    for (int64_t r = 0; r < rep; r += 4)
        heads_of(q + r * hd, K, V, true, ld, n, rep - r < 4 ? (int)(rep - r) : 4, hd, scale, scores + r * n, o + r * hd,
                 ml + 2 * r);
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
