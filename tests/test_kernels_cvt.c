// ctest-labels: unit;kernels
/* The kernels under the f16 KV cache (ops/kv.h):
 *   - the op table's f16 <-> f32 conversions equal core/fp16's, bit for bit, for the references
 *     and the SIMD variants this CPU runs (every f16 value, a million random f32 patterns, ties
 *     and range edges, odd lengths that end in the scalar tails, nothing written past n);
 *   - attention over an f16 view (kernels/attn.h qhx_attn_group_kv) equals attention over the
 *     widened f32 values, and over an f32 view equals qhx_attn_group, bit for bit. */
#include "core/alloc.h"
#include "core/fp16.h"
#include "kernels/attn.h"
#include "t.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float next_f(void) { return (float)((double)(next_u64() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

/* ---- conversions ------------------------------------------------------------------------------ */

static bool is_signalling_f16(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) && !(h & 0x200u); }

static void check_widen(const qhx_kernels *k) {
    /* every f16 pattern but the signalling NaNs (kernels.h: F16C quiets them; the cache never
     * holds one), in one call and in short odd runs that end in the scalar tail */
    enum { N = 65536 };
    uint16_t *h = qhx_malloc(N * sizeof *h);
    float *got = qhx_malloc(N * sizeof *got);
    int64_t n = 0;
    for (uint32_t i = 0; i < N; i++)
        if (!is_signalling_f16((uint16_t)i)) h[n++] = (uint16_t)i;
    k->f16_to_f32(h, got, n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += qhx_f32_bits(got[i]) != qhx_f32_bits(qhx_f16_to_f32(h[i]));
    for (int64_t len = 0; len <= 19; len++) {
        memset(got, 0xff, 32 * sizeof *got);
        k->f16_to_f32(h + 1000 + 3 * len, got + 1, len);
        for (int64_t i = 0; i < len; i++) bad += qhx_f32_bits(got[1 + i]) != qhx_f32_bits(qhx_f16_to_f32(h[1000 + 3 * len + i]));
        bad += qhx_f32_bits(got[1 + len]) != 0xffffffffu; /* nothing past n */
    }
    CHECK_EQ(bad, 0);
    qhx_free(h);
    qhx_free(got);
}

static void check_narrow(const qhx_kernels *k) {
    enum { N = 1 << 20 };
    float *x = qhx_malloc(N * sizeof *x);
    uint16_t *got = qhx_malloc(N * sizeof *got);
    int64_t n = 0;
    /* every f16 value widened, the f32 neighbours of it and the exact midpoints to the next one
     * (ties to even), then range edges, then random bit patterns */
    for (uint32_t i = 0; i < 0x7c00u; i++) {
        float v = qhx_f16_to_f32((uint16_t)i), w = qhx_f16_to_f32((uint16_t)(i + 1));
        uint32_t b = qhx_f32_bits(v);
        float mid = (float)(((double)v + (double)w) / 2.0);
        x[n++] = v, x[n++] = -mid, x[n++] = mid, x[n++] = qhx_bits_f32(b + 1), x[n++] = -qhx_bits_f32(b ? b - 1 : 0);
    }
    const float edges[] = {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, -65520.0f, 1e9f, 5.96e-8f, 2.98e-8f, 2.99e-8f,
                           INFINITY, -INFINITY, NAN, -NAN, qhx_bits_f32(0x7f800001u), qhx_bits_f32(0xffc12345u)};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) x[n++] = edges[i];
    while (n < N) x[n++] = qhx_bits_f32((uint32_t)next_u64());
    k->f32_to_f16(x, got, n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += got[i] != qhx_f32_to_f16(x[i]);
    for (int64_t len = 0; len <= 19; len++) {
        memset(got, 0xff, 32 * sizeof *got);
        k->f32_to_f16(x + 5 * len, got + 1, len);
        for (int64_t i = 0; i < len; i++) bad += got[1 + i] != qhx_f32_to_f16(x[5 * len + i]);
        bad += got[1 + len] != 0xffffu;
    }
    CHECK_EQ(bad, 0);
    qhx_free(x);
    qhx_free(got);
}

static void test_conversions(void) {
    qhx_kernels ref, best;
    qhx_kern_select(QHX_ISA_REF, &ref);
    qhx_kern_select(QHX_ISA_BEST, &best);
    printf("conversions: ref and %s\n", qhx_isa_name(best.isa));
    check_widen(&ref);
    check_narrow(&ref);
    check_widen(&best);
    check_narrow(&best);
}

/* ---- attention over views --------------------------------------------------------------------- */

static void test_attn_views(void) {
    qhx_kernels k;
    qhx_kern_select(QHX_ISA_BEST, &k);
    const int64_t n_kv = 600, n_heads = 3, hd = 40, rep = 2, ld = n_heads * hd, g = 1; /* 3 blocks, the last short */
    const size_t cells = (size_t)(n_kv * ld);
    float *K = qhx_malloc(cells * sizeof *K), *V = qhx_malloc(cells * sizeof *V);
    float *Kw = qhx_malloc(cells * sizeof *Kw), *Vw = qhx_malloc(cells * sizeof *Vw);
    uint16_t *K16 = qhx_malloc(cells * sizeof *K16), *V16 = qhx_malloc(cells * sizeof *V16);
    float q[2 * 40], a[2 * 40], b[2 * 40];
    for (size_t i = 0; i < cells; i++) K[i] = 2.0f * next_f(), V[i] = next_f();
    for (int64_t i = 0; i < rep * hd; i++) q[i] = next_f();
    qhx_f32_to_f16_row(K, K16, (int64_t)cells);
    qhx_f32_to_f16_row(V, V16, (int64_t)cells);
    qhx_f16_to_f32_row(K16, Kw, (int64_t)cells);
    qhx_f16_to_f32_row(V16, Vw, (int64_t)cells);
    const float scale = 0.158f;
    const int64_t nw = qhx_attn_group_kv_work(n_kv, rep, hd, QHX_KV_F16);
    float *work = qhx_malloc((size_t)nw * sizeof *work);
    for (int64_t n = 1; n <= n_kv; n += 137) { /* 1, 138, 275, 412, 549: one to three blocks */
        qhx_attn_group(&k, q, Kw + g * hd, Vw + g * hd, ld, n, rep, hd, scale, work, a);
        qhx_kv_view v16 = {K16 + g * hd, V16 + g * hd, ld, QHX_KV_F16, 0, 0};
        qhx_attn_group_kv(&k, q, &v16, n, rep, hd, scale, work, b);
        CHECK(memcmp(a, b, sizeof a) == 0);
        qhx_attn_group(&k, q, K + g * hd, V + g * hd, ld, n, rep, hd, scale, work, a);
        qhx_kv_view v32 = {K + g * hd, V + g * hd, ld, QHX_KV_F32, 0, 0};
        qhx_attn_group_kv(&k, q, &v32, n, rep, hd, scale, work, b);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    qhx_free(work);
    qhx_free(K), qhx_free(V), qhx_free(Kw), qhx_free(Vw), qhx_free(K16), qhx_free(V16);
}

/* q8 rows (kernels/attn.h): per row the scales of every block of 32 values, then the int8
 * values; attention over the view equals attention over scale * q computed here. */
static void test_attn_q8_view(void) {
    qhx_kernels k;
    qhx_kern_select(QHX_ISA_BEST, &k);
    enum { NKV = 300, HEADS = 2, HD = 64, REP = 3, W = HEADS * HD, NS = W / QHX_KV_Q8_BLOCK };
    const int64_t row = NS * (int64_t)sizeof(float) + W, g = 1;
    char *K = qhx_malloc((size_t)(NKV * row)), *V = qhx_malloc((size_t)(NKV * row));
    float *Kw = qhx_malloc(NKV * W * sizeof(float)), *Vw = qhx_malloc(NKV * W * sizeof(float));
    float q[REP * HD], a[REP * HD], b[REP * HD];
    for (int64_t t = 0; t < NKV; t++)
        for (int m = 0; m < 2; m++) {
            char *r = (m ? V : K) + t * row;
            float *w = (m ? Vw : Kw) + t * W, d[NS];
            for (int j = 0; j < NS; j++) d[j] = 0.01f + 0.02f * (float)(next_u64() % 64);
            memcpy(r, d, sizeof d);
            for (int j = 0; j < W; j++) {
                int8_t v = (int8_t)((int)(next_u64() % 255) - 127);
                r[NS * (int64_t)sizeof(float) + j] = (char)v;
                w[j] = d[j / QHX_KV_Q8_BLOCK] * (float)v;
            }
        }
    for (int i = 0; i < REP * HD; i++) q[i] = next_f();
    float *work = qhx_malloc((size_t)qhx_attn_group_kv_work(NKV, REP, HD, QHX_KV_Q8) * sizeof(float));
    qhx_kv_view v8 = {K, V, row, QHX_KV_Q8, g * HD / QHX_KV_Q8_BLOCK * (int64_t)sizeof(float),
                      NS * (int64_t)sizeof(float) + g * HD};
    for (int64_t n = 1; n <= NKV; n += 99) {
        qhx_attn_group(&k, q, Kw + g * HD, Vw + g * HD, W, n, REP, HD, 0.125f, work, a);
        qhx_attn_group_kv(&k, q, &v8, n, REP, HD, 0.125f, work, b);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    qhx_free(work), qhx_free(K), qhx_free(V), qhx_free(Kw), qhx_free(Vw);
}

int main(void) {
    test_conversions();
    test_attn_views();
    test_attn_q8_view();
    return t_done("test_kernels_cvt");
}
