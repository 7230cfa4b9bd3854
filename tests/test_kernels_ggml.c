// ctest-labels: unit;kernels
/* test_kernels_ggml: the AVX2 kernels over GGUF blocks in place (QHX_W_GGML, kernels/x86/ggml_avx2.c)
 * against the references (kernels/ref/gguf_linear.c), bit for bit (memcmp); the integer kernels
 * (kernels/x86/ggml_i8_avx2.c) against the integer reference (kernels/ref/gguf_dot.c) bit for bit,
 * and that reference within a derived bound of the f32 one (int_bound); for every type the
 * reference dequantizes: random block bytes under f16 scales that are ordinary, zero, subnormal,
 * at the f16 extremes (minimums included) and infinite; rows 1..67, cols up to 4096, blocks at odd
 * addresses; matvec over whole and partial row ranges (rows outside untouched), matmul with 1, 2,
 * 5 and 17 tokens at padded strides (the padding untouched, and each token's column equal to the
 * matvec's), and the row lookup. Then the op table: the AVX2 slots where the CPU has AVX2, the
 * references under QHX_ISA_REF. Exits 77 (skipped) without AVX2. */
#if defined(QHX_HAVE_X86)
#include "core/cpu.h"
#include "core/fp16.h"
#include "core/ggml_type.h"
#include "kernels/gguf_quant.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/x86/x86.h"
#include "t.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next_u32(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float unif(void) { return (float)((double)next_u32() / 4294967296.0 * 2.0 - 1.0); }

/* Where a type's f16 scales sit in its block: d, and the minimum's (or -1). Sub-scales and codes
 * are random bytes (every byte pattern is a valid block for them). */
typedef struct gtype_case {
    uint32_t type;
    int d_at, m_at;
    int fast; /* the AVX2 file has its own path (else it must call the reference) */
} gtype_case;

static const gtype_case cases[] = {
    {QHX_GGML_Q8_0, 0, -1, 1},    {QHX_GGML_Q4_K, 0, 2, 1},     {QHX_GGML_Q6_K, 208, -1, 1},
    {QHX_GGML_Q5_K, 0, 2, 1},     {QHX_GGML_Q5_0, 0, -1, 1},    {QHX_GGML_Q4_1, 0, 2, 1},
    {QHX_GGML_Q5_1, 0, 2, 1},     {QHX_GGML_Q3_K, 108, -1, 1},  {QHX_GGML_Q2_K, 80, 82, 1},
    {QHX_GGML_IQ4_NL, 0, -1, 1},  {QHX_GGML_IQ4_XS, 0, -1, 1},  {QHX_GGML_Q4_0, 0, -1, 1},
    {QHX_GGML_F32, -1, -1, 0},    {QHX_GGML_F16, -1, -1, 0},    {QHX_GGML_BF16, -1, -1, 0},
};

/* The scale regimes: ordinary, zero, subnormal, the f16 extremes (minimums as large as they go),
 * and infinite (products of 0 and infinity give NaN: the same NaN either way). */
enum { SC_NORMAL, SC_ZERO, SC_SUBNORMAL, SC_EXTREME, SC_INF, SC_COUNT };
static const char *const sc_names[] = {"normal", "zero", "subnormal", "extreme", "inf"};

static uint16_t scale_f16(int regime, int is_min) {
    uint16_t sign = next_u32() & 1 ? 0x8000 : 0;
    switch (regime) {
    case SC_ZERO: return sign;
    case SC_SUBNORMAL: return (uint16_t)(sign | (1 + next_u32() % 0x3ff));
    case SC_EXTREME: return is_min ? (uint16_t)(sign | 0x7bff) : (uint16_t)(sign | (next_u32() & 1 ? 0x7bff : 0x0001));
    case SC_INF: return (uint16_t)(sign | 0x7c00);
    default: return qhx_f32_to_f16(unif() * (is_min ? 0.05f : 0.02f));
    }
}

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* rows x cols of `type` at an odd address (blocks unaligned): *base is what to free. */
static uint8_t *make_blocks(const gtype_case *tc, int64_t rows, int64_t cols, int regime, int64_t *row_bytes,
                            uint8_t **base) {
    uint64_t rb = 0;
    CHECK_EQ(qhx_ggml_row_bytes(tc->type, cols, &rb), 0);
    size_t n = (size_t)rb * (size_t)rows;
    *base = malloc(n + 1);
    uint8_t *p = *base + 1;
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)next_u32();
    const int bb = qhx_ggml_type_block_bytes(tc->type);
    for (size_t k = 0; k < n / (size_t)bb; k++) {
        uint8_t *b = p + k * (size_t)bb;
        if (tc->type == QHX_GGML_F32) {
            float v = unif();
            memcpy(b, &v, 4);
        } else if (tc->type == QHX_GGML_F16) {
            put16(b, qhx_f32_to_f16(unif()));
        } else if (tc->type == QHX_GGML_BF16) {
            put16(b, qhx_f32_to_bf16(unif()));
        } else {
            put16(b + tc->d_at, scale_f16(regime, 0));
            if (tc->m_at >= 0) put16(b + tc->m_at, scale_f16(regime, 1));
        }
    }
    *row_bytes = (int64_t)rb;
    return p;
}

static float *filled(size_t n, float v) {
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++) a[i] = v;
    return a;
}

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

/* The activations' codes and scales: scale * code is qhx_ggml_round_x's value (the same float, up
 * to the sign of a zero: a small negative value rounds to -0 there, to the code 0 here), and the
 * per-16 sums are the codes' sums. */
static void check_quant_x(uint32_t type, const float *x, int64_t n) {
    void *buf = malloc(qhx_ggml_xq_size(n));
    float *xr = malloc((size_t)n * sizeof *xr);
    qhx_ggml_xq q = qhx_ggml_xq_at(buf, n);
    qhx_ggml_quant_x(type, x, n, q);
    qhx_ggml_round_x(type, x, n, xr);
    const int64_t B = qhx_ggml_type_block(type);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = q.d[i / B] * (float)q.q[i];
        bad += !(v == xr[i] && (v != 0 || q.q[i] == 0));
    }
    if (B == QHX_GGML_QK_K)
        for (int64_t g = 0; g < n / 16; g++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += q.q[16 * g + i];
            bad += s != q.bsum[g];
        }
    CHECK_EQ(bad, 0);
    free(buf), free(xr);
}

/* A bound on |integer form - f32 form| for row r and activations x (both finite): with u = 2^-24,
 * A = sum over values of (|scale part| + |min part|) * |rounded x| (each part of the weight as the
 * reference dequantizes it with the other's f16 scale zeroed), the f32 form is within
 * (cols / 8 + 8) u A of the exact sum of the same weights and activations (3 roundings in a weight,
 * 1 in x, 1 in the product, cols / 8 + 3 in the 8-lane sums) and the integer form within
 * (blocks + 8) u A (the scale product, the code sum's conversion, the product, the difference, the
 * block sums): so their distance is within (cols / 8 + blocks + 16) u A, and 1 % more for the
 * second-order terms. */
static double int_bound(const gtype_case *tc, const uint8_t *row, int64_t rb, int64_t cols, const float *x) {
    float *xr = malloc((size_t)cols * sizeof *xr), *ws = malloc((size_t)cols * sizeof *ws),
          *wm = malloc((size_t)cols * sizeof *wm);
    uint8_t *tmp = malloc((size_t)rb);
    const int64_t bb = qhx_ggml_type_block_bytes(tc->type), nb = cols / qhx_ggml_type_block(tc->type);
    qhx_ggml_round_x(tc->type, x, cols, xr);
    memcpy(tmp, row, (size_t)rb);
    if (tc->m_at >= 0)
        for (int64_t k = 0; k < nb; k++) put16(tmp + k * bb + tc->m_at, 0);
    qhx_gguf_dequant_row(tc->type, tmp, cols, ws);
    for (int64_t c = 0; c < cols; c++) wm[c] = 0;
    if (tc->m_at >= 0) {
        memcpy(tmp, row, (size_t)rb);
        for (int64_t k = 0; k < nb; k++) put16(tmp + k * bb + tc->d_at, 0);
        qhx_gguf_dequant_row(tc->type, tmp, cols, wm);
    }
    double A = 0;
    for (int64_t c = 0; c < cols; c++) A += (fabs((double)ws[c]) + fabs((double)wm[c])) * fabs((double)xr[c]);
    free(xr), free(ws), free(wm), free(tmp);
    return 1.01 * (double)(cols / 8 + nb + 16) * ldexp(1.0, -24) * A + 1e-30;
}

/* The integer kernels (Q8_0, Q5_0, Q4_K, Q5_K, Q6_K): the AVX2 ones bit for bit the integer
 * reference (matvec whole and partial, matmul at padded strides, split rows, each token's column
 * the matvec's), and the integer reference within int_bound of the f32 reference where finite. */
static void check_int(const gtype_case *tc, const qhx_weight *w, int regime) {
    const int64_t rows = w->rows, cols = w->cols;
    const size_t R = (size_t)rows;
    float *x = filled((size_t)cols, 0), *yr = filled(R, NAN), *ya = filled(R, NAN), *yf = filled(R, NAN);
    for (int64_t c = 0; c < cols; c++) x[c] = unif() * (float)(1 + c % 5);
    if (cols >= 512) x[cols / 2] = 0, x[3] = -x[3] * 40; /* a zero, a dominant negative value */
    check_quant_x(tc->type, x, cols);
    qhx_k_matvec_ggml_dot_ref(w, x, yr, 0, rows);
    qhx_k_matvec_ggml_i8_avx2(w, x, ya, 0, rows);
    CHECK(same(yr, ya, R));
    if (rows > 2) {
        float *yp = filled(R, -7.0f);
        qhx_k_matvec_ggml_i8_avx2(w, x, yp, 1, rows - 1);
        CHECK(same(yp + 1, yr + 1, R - 2));
        CHECK(yp[0] == -7.0f && yp[R - 1] == -7.0f);
        free(yp);
    }
    if (regime != SC_INF) {
        qhx_k_matvec_ggml_ref(w, x, yf, 0, rows);
        int outside = 0;
        for (int64_t r = 0; r < rows; r++) {
            double bound = int_bound(tc, (const uint8_t *)w->data + r * w->row_bytes, w->row_bytes, cols, x);
            if (!(fabs((double)yr[r] - (double)yf[r]) <= bound)) {
                if (!outside)
                    fprintf(stderr, "  row %lld: integer %.9g, f32 %.9g, bound %.3g\n", (long long)r, yr[r], yf[r],
                            bound);
                outside++;
            }
        }
        CHECK_EQ(outside, 0);
    }
    static const int64_t ns[] = {1, 2, 3, 8, 13};
    for (int ni = 0; ni < 5; ni++) {
        const int64_t n = ns[ni], ldx = cols + 3, ldy = rows + 2;
        float *X = filled((size_t)(n * ldx), 0), *Yr = filled((size_t)(n * ldy), -3.0f),
              *Ya = filled((size_t)(n * ldy), -3.0f), *yt = filled(R, NAN);
        for (int64_t i = 0; i < n * ldx; i++) X[i] = unif();
        qhx_k_matmul_ggml_dot_ref(w, X, ldx, Yr, ldy, n, 0, rows);
        qhx_k_matmul_ggml_i8_avx2(w, X, ldx, Ya, ldy, n, 0, rows);
        CHECK(same(Yr, Ya, (size_t)(n * ldy)));
        for (int64_t t = 0; t < n; t++) {
            qhx_k_matvec_ggml_i8_avx2(w, X + t * ldx, yt, 0, rows);
            CHECK(same(yt, Ya + t * ldy, R));
        }
        if (rows > 1) {
            float *Ys = filled((size_t)(n * ldy), -3.0f);
            qhx_k_matmul_ggml_i8_avx2(w, X, ldx, Ys, ldy, n, 0, rows / 2);
            qhx_k_matmul_ggml_i8_avx2(w, X, ldx, Ys, ldy, n, rows / 2, rows);
            CHECK(same(Ys, Ya, (size_t)(n * ldy)));
            free(Ys);
        }
        free(X), free(Yr), free(Ya), free(yt);
    }
    free(x), free(yr), free(ya), free(yf);
}

/* Every check for one weight. */
static void check_weight(const gtype_case *tc, int64_t rows, int64_t cols, int regime) {
    uint8_t *base;
    int64_t rb;
    const uint8_t *data = make_blocks(tc, rows, cols, regime, &rb, &base);
    qhx_weight w = {.fmt = QHX_W_GGML, .rows = rows, .cols = cols, .data = data, .gtype = tc->type, .row_bytes = rb};
    int fails = t_failures;
    const size_t R = (size_t)rows, C = (size_t)cols;

    /* matvec: the whole range, then [1, rows - 1) with the rows outside left alone */
    float *x = filled(C, 0), *yr = filled(R, NAN), *ya = filled(R, NAN);
    for (size_t c = 0; c < C; c++) x[c] = unif() * (float)(1 + c % 5);
    qhx_k_matvec_ggml_ref(&w, x, yr, 0, rows);
    qhx_k_matvec_ggml_avx2(&w, x, ya, 0, rows);
    CHECK(same(yr, ya, R));
    if (rows > 2) {
        float *yp = filled(R, -7.0f);
        qhx_k_matvec_ggml_avx2(&w, x, yp, 1, rows - 1);
        CHECK(same(yp + 1, yr + 1, R - 2));
        CHECK(yp[0] == -7.0f && yp[R - 1] == -7.0f);
        free(yp);
    }

    /* matmul: tokens at a padded stride, outputs at a padded stride */
    static const int64_t ns[] = {1, 2, 5, 17};
    for (int ni = 0; ni < 4; ni++) {
        const int64_t n = ns[ni], ldx = cols + 3, ldy = rows + 2;
        float *X = filled((size_t)(n * ldx), 0), *Yr = filled((size_t)(n * ldy), -3.0f),
              *Ya = filled((size_t)(n * ldy), -3.0f), *yt = filled(R, NAN);
        for (int64_t i = 0; i < n * ldx; i++) X[i] = unif();
        qhx_k_matmul_ggml_ref(&w, X, ldx, Yr, ldy, n, 0, rows);
        qhx_k_matmul_ggml_avx2(&w, X, ldx, Ya, ldy, n, 0, rows);
        CHECK(same(Yr, Ya, (size_t)(n * ldy))); /* the padding included: -3 on both sides */
        for (int64_t t = 0; t < n; t++) {
            qhx_k_matvec_ggml_avx2(&w, X + t * ldx, yt, 0, rows);
            CHECK(same(yt, Ya + t * ldy, R));
        }
        if (rows > 1) { /* a split of the rows gives the same bits */
            float *Ys = filled((size_t)(n * ldy), -3.0f);
            qhx_k_matmul_ggml_avx2(&w, X, ldx, Ys, ldy, n, 0, rows / 2);
            qhx_k_matmul_ggml_avx2(&w, X, ldx, Ys, ldy, n, rows / 2, rows);
            CHECK(same(Ys, Ya, (size_t)(n * ldy)));
            free(Ys);
        }
        free(X), free(Yr), free(Ya), free(yt);
    }

    /* row lookup: first, last and a middle row, nothing written past cols */
    const int64_t look[] = {0, rows / 2, rows - 1};
    for (int i = 0; i < 3; i++) {
        float *orr = filled(C + 1, 5.0f), *oa = filled(C + 1, 5.0f);
        qhx_k_row_ggml_ref(&w, look[i], orr);
        qhx_k_row_ggml_avx2(&w, look[i], oa);
        CHECK(same(orr, oa, C + 1));
        CHECK(oa[C] == 5.0f);
        free(orr), free(oa);
    }
    if (qhx_ggml_dot_has(tc->type))
        check_int(tc, &w, regime);
    else { /* the integer kernels are the f32 ones for the other types */
        float *yi = filled(R, NAN);
        qhx_k_matvec_ggml_i8_avx2(&w, x, yi, 0, rows);
        CHECK(same(yi, ya, R));
        free(yi);
    }
    if (t_failures != fails)
        fprintf(stderr, "  failed: %s %s, %lld x %lld\n", qhx_ggml_type_name(tc->type), sc_names[regime],
                (long long)rows, (long long)cols);
    free(x), free(yr), free(ya), free(base);
}

static void check_type(const gtype_case *tc) {
    const int64_t B = qhx_ggml_type_block(tc->type);
    CHECK_EQ(qhx_ggml_avx2_has(tc->type), tc->fast);
    /* (rows, blocks per row): single blocks, the row tiles' tails (1..3 rows past a multiple of
     * 4), and the widest rows */
    static const int64_t shapes[][2] = {{1, 1}, {2, 2}, {3, 1}, {4, 3}, {5, 2}, {7, 5}, {9, 4}, {67, 1}};
    const int64_t big_cols = B == 1 ? 64 : 4096;
    for (int regime = 0; regime < (tc->fast ? SC_COUNT : 1); regime++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            int64_t cols = shapes[s][1] * (B == 1 ? 8 : B);
            check_weight(tc, shapes[s][0], cols, regime);
        }
        check_weight(tc, regime == SC_NORMAL ? 67 : 6, big_cols, regime);
        check_weight(tc, 13, B == 1 ? 24 : B == 32 ? 1024 : 2048, regime);
        if (B == 1) check_weight(tc, 5, 13, regime); /* rows that end in part of 8 columns */
    }
}

/* The op table: the AVX2 kernels in the GGML slots where AVX2 runs (AVX-512 tables too), the
 * references under QHX_ISA_REF. */
static void check_install(void) {
    qhx_kernels k;
    qhx_kern_select(QHX_ISA_BEST, &k);
    CHECK(k.matvec[QHX_W_GGML] == qhx_k_matvec_ggml_i8_avx2);
    CHECK(k.matmul[QHX_W_GGML] == qhx_k_matmul_ggml_i8_avx2);
    CHECK(k.row[QHX_W_GGML] == qhx_k_row_ggml_avx2);
    CHECK(k.matvec_multi[QHX_W_GGML] == NULL);
    qhx_kern_select(QHX_ISA_AVX2, &k);
    CHECK(k.matvec[QHX_W_GGML] == qhx_k_matvec_ggml_i8_avx2);
    qhx_kern_use_int8(QHX_ISA_AVX2, 0, 0, &k); /* the GGML slots whatever the int8 switches say */
    CHECK(k.matvec[QHX_W_GGML] == qhx_k_matvec_ggml_i8_avx2);
    CHECK(k.matmul[QHX_W_GGML] == qhx_k_matmul_ggml_i8_avx2);
    qhx_kern_select(QHX_ISA_REF, &k);
    CHECK(k.matvec[QHX_W_GGML] == qhx_k_matvec_ggml_dot_ref);
    CHECK(k.matmul[QHX_W_GGML] == qhx_k_matmul_ggml_dot_ref);
    CHECK(k.row[QHX_W_GGML] == qhx_k_row_ggml_ref);
}

int main(void) {
    qhx_cpu_info cpu;
    qhx_cpu_detect(&cpu);
    if ((cpu.features & QHX_CPU_GROUP_AVX2) != QHX_CPU_GROUP_AVX2) {
        fprintf(stderr, "test_kernels_ggml: skipped, the CPU or OS lacks AVX2/FMA/F16C\n");
        return 77;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(qhx_gguf_can_dequant(cases[i].type));
        check_type(&cases[i]);
    }
    check_install();
    return t_done("test_kernels_ggml");
}
#else
#include <stdio.h>
int main(void) {
    fprintf(stderr, "test_kernels_ggml: no x86 kernels on this architecture\n");
    return 77;
}
#endif
