/* test_vl_kernels: the Qwen3-VL reference kernels (kernels/vision.h) and rotary layout against
 * values written in spec/qwen3_vl.md (the 48 -> 32 position-table sampling of §3.3, the M-RoPE
 * slot pattern of §5.1) and against float64 formulas. */
#include "t.h"

#include "kernels/vision.h"
#include "ops/rope.h"

#include <math.h>
#include <string.h>

static void test_linspace(void) {
    /* spec §3.3: linspace(0, 47, 32) -> floor f and delta (float32) of a few entries */
    float v[32];
    qhx_k_linspace_f32_ref(0.0f, 47.0f, 32, v);
    static const struct { int i, f; double d; } want[] = {
        {0, 0, 0.0}, {1, 1, 0.5161290168762207}, {2, 3, 0.032258033752441406},
        {15, 22, 0.7419357299804688}, {16, 24, 0.25806427001953125}, {29, 43, 0.967742919921875},
        {30, 45, 0.4838714599609375}, {31, 47, 0.0},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        float x = v[want[k].i];
        int f = (int)x;
        CHECK_EQ(f, want[k].f);
        float d = x - (float)f;
        CHECK(d == (float)want[k].d);
    }
    float one;
    qhx_k_linspace_f32_ref(0.0f, 7.0f, 1, &one);
    CHECK(one == 0.0f);
}

static void test_pos_embed(void) {
    /* A grid the size of the table samples it exactly; a 2 x 2 grid picks the four corners. */
    enum { S = 5, D = 3 };
    float table[S * S * D], out[S * S * D], corners[4 * D];
    for (int i = 0; i < S * S * D; i++) table[i] = (float)((i * 37) % 101) / 7.0f;
    qhx_k_pos_embed_bilinear_f32_ref(table, S, D, S, S, out);
    CHECK(memcmp(out, table, sizeof table) == 0);
    qhx_k_pos_embed_bilinear_f32_ref(table, S, D, 2, 2, corners);
    static const int at[4] = {0, S - 1, (S - 1) * S, S * S - 1};
    for (int c = 0; c < 4; c++)
        for (int e = 0; e < D; e++) CHECK(corners[c * D + e] == table[at[c] * D + e]);
    /* A 3 x 3 grid of a 5 x 5 table: the middle samples row/col 2 exactly (linspace 0, 2, 4). */
    float mid[9 * D];
    qhx_k_pos_embed_bilinear_f32_ref(table, S, D, 3, 3, mid);
    for (int e = 0; e < D; e++) CHECK(mid[4 * D + e] == table[(2 * S + 2) * D + e]);
}

static void test_mrope_axes(void) {
    unsigned char ax[64];
    const int64_t real[3] = {24, 20, 20};
    qhx_rope_mrope_axes(real, true, 64, ax);
    int count[3] = {0, 0, 0};
    for (int j = 0; j < 64; j++) count[ax[j]]++;
    CHECK_EQ(count[0], 24);
    CHECK_EQ(count[1], 20);
    CHECK_EQ(count[2], 20);
    CHECK_EQ(ax[0], 0);
    CHECK_EQ(ax[1], 1);
    CHECK_EQ(ax[2], 2);
    CHECK_EQ(ax[58], 1);
    CHECK_EQ(ax[59], 2);
    for (int j = 60; j < 64; j++) CHECK_EQ(ax[j], 0); /* the tail is T, as HF */
    const int64_t tiny[3] = {6, 5, 5};
    static const unsigned char want_tiny[16] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0};
    qhx_rope_mrope_axes(tiny, true, 16, ax);
    CHECK(memcmp(ax, want_tiny, 16) == 0);
    const int64_t odd[3] = {4, 2, 2}; /* 8 slots: slot 7 (>= 3 * 2) falls back to T */
    qhx_rope_mrope_axes(odd, true, 8, ax);
    static const unsigned char want_odd[8] = {0, 1, 2, 0, 1, 2, 0, 0};
    CHECK(memcmp(ax, want_odd, 8) == 0);
    qhx_rope_mrope_axes(odd, false, 8, ax);
    static const unsigned char want_chunk[8] = {0, 0, 0, 0, 1, 1, 2, 2};
    CHECK(memcmp(ax, want_chunk, 8) == 0);
}

static void test_norms_and_gelu(void) {
    float x[7] = {0.5f, -1.25f, 2.0f, 0.0f, 3.5f, -0.75f, 1.0f}, w[7], b[7], y[7];
    for (int i = 0; i < 7; i++) {
        w[i] = 0.5f + 0.1f * (float)i;
        b[i] = 0.01f * (float)i - 0.02f;
    }
    double mean = 0, var = 0, ss = 0;
    for (int i = 0; i < 7; i++) mean += x[i] / 7.0;
    for (int i = 0; i < 7; i++) var += (x[i] - mean) * (x[i] - mean) / 7.0;
    for (int i = 0; i < 7; i++) ss += (double)x[i] * x[i] / 7.0;
    qhx_k_layernorm_f32_ref(x, w, b, y, 7, 1e-6f);
    for (int i = 0; i < 7; i++) CHECK_NEAR(y[i], (x[i] - mean) / sqrt(var + 1e-6) * w[i] + b[i], 1e-6);
    qhx_k_rmsnorm_f32_ref(x, w, y, 7, 1e-6f);
    for (int i = 0; i < 7; i++) CHECK_NEAR(y[i], x[i] / sqrt(ss + 1e-6) * w[i], 1e-6); /* x̂ w, not x̂ (1 + w) */
    float t[7], e[7];
    memcpy(t, x, sizeof x);
    memcpy(e, x, sizeof x);
    qhx_k_gelu_tanh_f32_ref(t, 7);
    qhx_k_gelu_erf_f32_ref(e, 7);
    for (int i = 0; i < 7; i++) {
        double v = x[i];
        CHECK_NEAR(t[i], 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))), 1e-6);
        CHECK_NEAR(e[i], 0.5 * v * (1 + erf(v / sqrt(2.0))), 1e-6);
    }
}

int main(void) {
    test_linspace();
    test_pos_embed();
    test_mrope_axes();
    test_norms_and_gelu();
    return t_done("test_vl_kernels");
}
