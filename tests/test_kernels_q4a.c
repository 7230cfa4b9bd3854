// ctest-labels: kernels
/* test_kernels_q4a: the Q4A format (docs/formats.md, "Q4A"). The quantizer (its error against
 * Q4's at the same rows, the scale pass and the codes pass agreeing, refusals, the importance
 * weights), the f32 reference kernels against a double-precision product of the dequantized
 * matrix, the scalar model of the int8-activation kernels within its rounding bound, and every
 * x86 build of the int8-activation kernels bit for bit against that model (matvec, matmul,
 * multi-row, row splits), plus the table install. The SIMD part exits 77 without AVX2. The
 * prefill GEMM that the table installs for Q4A on x86 has its own test, test_kernels_q4a_gemm. */
#include "kernels_check.h"

#if defined(QHX_HAVE_X86)
#include "core/cpu.h"
#include "kernels/x86/x86.h"
#define HAVE_Q4A_SIMD 1
#elif defined(QHX_HAVE_ARM) && defined(__aarch64__)
#include "core/cpu.h"
#include "kernels/arm/arm.h"
#define HAVE_Q4A_SIMD 1
#endif

static uint64_t rng = 0x243f6a8885a308d3ull;
static double unif01(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}
static float gauss(void) { return (float)(sqrt(-2.0 * log(unif01() + 1e-300)) * cos(6.283185307179586 * unif01())); }

/* Row r of kind: 0 Gaussian, 1 Laplace, 2 Gaussian with 0.1 % outliers x10, 3 a shifted Gaussian
 * (all of one sign in most groups: what the zero point is for). */
static void fill_row(float *w, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) {
        float v = gauss();
        if (kind == 1) v = (float)(-log(unif01() + 1e-300) * (unif01() < 0.5 ? -1.0 : 1.0));
        if (kind == 2 && unif01() < 0.001) v *= 10.0f;
        if (kind == 3) v = 0.3f * v + 1.0f;
        w[i] = 0.02f * v;
    }
}

// ---- the quantizer -----------------------------------------------------------------------------

/* The squared error of Q4A is well below Q4's on the same rows (both at about 4.5 bits: Q4A
 * 4.56 at 2048 columns): the asymmetric groups and the search buy it. 0.85 is far above the
 * measured ratios (0.64-0.74), so the check is about the format, not a tuned figure. */
static void check_error_vs_q4(void) {
    enum { N = 2048, ROWS = 48 };
    static float w[N], o[N];
    static uint8_t q[N / 2], sub[N / 16];
    static uint16_t sc[N / 32], sup[N / 256];
    for (int kind = 0; kind < 4; kind++) {
        double e4 = 0, ea = 0, ww = 0;
        for (int r = 0; r < ROWS; r++) {
            fill_row(w, N, kind);
            CHECK_EQ(qhx_quant_q4_row(w, N, 32, q, sc), 0);
            qhx_dequant_q4_row(q, sc, N, 32, o);
            for (int i = 0; i < N; i++) e4 += ((double)o[i] - w[i]) * ((double)o[i] - w[i]), ww += (double)w[i] * w[i];
            CHECK_EQ(qhx_quant_q4a_row(w, NULL, N, q, sup, sub), 0);
            qhx_dequant_q4a_row(q, sup, sub, N, o);
            for (int i = 0; i < N; i++) ea += ((double)o[i] - w[i]) * ((double)o[i] - w[i]);
        }
        fprintf(stderr, "q4a: kind %d: relative rms q4 %.4f, q4a %.4f (squared error ratio %.3f)\n", kind, sqrt(e4 / ww),
                sqrt(ea / ww), ea / e4);
        CHECK(ea < 0.85 * e4);
    }
}

/* The scales pass (q NULL) gives the same scales; the codes pass from those scales the same
 * codes; every length with a partial last super-block too; zeros stay exact. */
static void check_passes(void) {
    static const int64_t ns[] = {32, 64, 96, 256, 288, 544, 2048};
    for (int k = 0; k < 7; k++) {
        const int64_t n = ns[k];
        float *w = malloc((size_t)n * 4), *o = malloc((size_t)n * 4);
        uint8_t *q = malloc((size_t)n / 2), *q2 = malloc((size_t)n / 2), *sub = malloc((size_t)n / 16), *sub2 = malloc((size_t)n / 16);
        uint16_t sup[16], sup2[16];
        fill_row(w, n, k % 4);
        w[n / 2] = 0.0f;
        CHECK_EQ(qhx_quant_q4a_row(w, NULL, n, q, sup, sub), 0);
        CHECK_EQ(qhx_quant_q4a_row(w, NULL, n, NULL, sup2, sub2), 0);
        CHECK(memcmp(sup, sup2, (size_t)qhx_q4a_row_supers(n) * 2) == 0);
        CHECK(memcmp(sub, sub2, (size_t)qhx_q4a_row_sub_bytes(n)) == 0);
        qhx_quant_q4a_codes(w, n, sup, sub, q2);
        CHECK(memcmp(q, q2, (size_t)n / 2) == 0);
        /* all zeros: stored exactly */
        memset(w, 0, (size_t)n * 4);
        CHECK_EQ(qhx_quant_q4a_row(w, NULL, n, q, sup, sub), 0);
        qhx_dequant_q4a_row(q, sup, sub, n, o);
        for (int64_t i = 0; i < n; i++) CHECK(o[i] == 0.0f);
        /* a constant row: within a step of the value */
        for (int64_t i = 0; i < n; i++) w[i] = 0.25f;
        CHECK_EQ(qhx_quant_q4a_row(w, NULL, n, q, sup, sub), 0);
        qhx_dequant_q4a_row(q, sup, sub, n, o);
        for (int64_t i = 0; i < n; i++) CHECK(fabsf(o[i] - 0.25f) < 0.25f / 15.0f);
        free(w), free(o), free(q), free(q2), free(sub), free(sub2);
    }
}

static void check_refusals(void) {
    float w[64];
    uint8_t q[32], sub[4];
    uint16_t sup[1];
    fill_row(w, 64, 0);
    CHECK_EQ(qhx_quant_q4a_row(w, NULL, 48, q, sup, sub), -1); /* not whole groups */
    w[7] = NAN;
    CHECK_EQ(qhx_quant_q4a_row(w, NULL, 64, q, sup, sub), -1);
    w[7] = INFINITY;
    CHECK_EQ(qhx_quant_q4a_row(w, NULL, 64, q, sup, sub), -1);
    w[7] = 2e6f;
    CHECK_EQ(qhx_quant_q4a_row(w, NULL, 64, q, sup, sub), -1);
    w[7] = 1e5f; /* large but within reach of an f16 super-block scale */
    CHECK_EQ(qhx_quant_q4a_row(w, NULL, 64, q, sup, sub), 0);
}

/* Importance weights: the error weighted by imp is lower when the quantizer is given imp than
 * when it is not (columns with weight 100 against 1). */
static void check_importance(void) {
    enum { N = 1024, ROWS = 32 };
    static float w[N], o[N], imp[N];
    static uint8_t q[N / 2], sub[N / 16];
    static uint16_t sup[N / 256];
    for (int i = 0; i < N; i++) imp[i] = i % 5 == 0 ? 100.0f : 1.0f;
    double with = 0, without = 0;
    for (int r = 0; r < ROWS; r++) {
        fill_row(w, N, r % 4);
        CHECK_EQ(qhx_quant_q4a_row(w, NULL, N, q, sup, sub), 0);
        qhx_dequant_q4a_row(q, sup, sub, N, o);
        for (int i = 0; i < N; i++) without += imp[i] * ((double)o[i] - w[i]) * ((double)o[i] - w[i]);
        CHECK_EQ(qhx_quant_q4a_row(w, imp, N, q, sup, sub), 0);
        qhx_dequant_q4a_row(q, sup, sub, N, o);
        for (int i = 0; i < N; i++) with += imp[i] * ((double)o[i] - w[i]) * ((double)o[i] - w[i]);
    }
    fprintf(stderr, "q4a: importance-weighted error with / without the weights: %.3f\n", with / without);
    CHECK(with < 0.9 * without);
}

// ---- kernels -----------------------------------------------------------------------------------

/* A quantized random matrix (rows of mixed kinds), allocated at its exact sizes. */
static qhx_weight make_q4a(int64_t rows, int64_t cols) {
    qhx_weight w = {.fmt = QHX_W_Q4A, .rows = rows, .cols = cols, .group = QHX_Q4A_GROUP};
    uint8_t *q = malloc((size_t)(rows * cols / 2)), *sub = malloc((size_t)(rows * qhx_q4a_row_sub_bytes(cols)));
    uint16_t *sup = malloc((size_t)(rows * qhx_q4a_row_supers(cols)) * 2);
    float *row = malloc((size_t)cols * 4);
    for (int64_t r = 0; r < rows; r++) {
        fill_row(row, cols, (int)(r % 4));
        CHECK_EQ(qhx_quant_q4a_row(row, NULL, cols, q + r * cols / 2, sup + r * qhx_q4a_row_supers(cols),
                                   sub + r * qhx_q4a_row_sub_bytes(cols)), 0);
    }
    free(row);
    w.data = q, w.gscales = sup, w.sub = sub;
    return w;
}

static void free_q4a(qhx_weight *w) {
    free((void *)w->data), free((void *)w->gscales), free((void *)w->sub);
}

static float *rand_x(int64_t n, float scale) {
    float *x = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = scale * (float)(2.0 * unif01() - 1.0) * (float)(1 + i % 7);
    return x;
}

/* The f32 reference against a double product of the dequantized rows (within KC_REL_TOL of
 * sum |w x|), matmul bitwise matvec, the row kernel bitwise the dequantizer; the int8 model
 * within the int8 rounding bound of the exact product. */
static void check_ref_kernels(void) {
    static const int64_t cols[] = {32, 64, 96, 256, 288, 2048};
    for (int k = 0; k < 6; k++) {
        const int64_t R = 19, C = cols[k];
        qhx_weight w = make_q4a(R, C);
        float *x = rand_x(C, 0.5f), *y = kc_nan(R), *yi = kc_nan(R), *row = malloc((size_t)C * 4), *d = malloc((size_t)C * 4);
        qhx_k_matvec_q4a_ref(&w, x, y, 0, R);
        qhx_k_matvec_q4a_i8x_ref(&w, x, yi, 0, R);
        for (int64_t r = 0; r < R; r++) {
            qhx_k_row_q4a_ref(&w, r, row);
            qhx_dequant_q4a_row((const uint8_t *)w.data + r * C / 2, w.gscales + r * qhx_q4a_row_supers(C),
                                w.sub + r * qhx_q4a_row_sub_bytes(C), C, d);
            CHECK(memcmp(row, d, (size_t)C * 4) == 0);
            double exact = 0, mag = 0, i8 = 0;
            for (int64_t c = 0; c < C; c++) exact += (double)d[c] * x[c], mag += fabs((double)d[c] * x[c]);
            for (int64_t b = 0; b < C / 32; b++) { /* the int8 rounding bound of kc_i8x_bound */
                double amax = 0, ws = 0;
                for (int i = 0; i < 32; i++) amax = fmax(amax, fabs((double)x[32 * b + i])), ws += fabs((double)d[32 * b + i]);
                i8 += ws * amax / 127.0 * (0.5 + 0x1p-15);
            }
            CHECK(fabs((double)y[r] - exact) <= KC_REL_TOL * mag + 1e-30);
            CHECK(fabs((double)yi[r] - exact) <= KC_REL_TOL * mag + i8 + 1e-30);
        }
        float *X = malloc((size_t)(3 * (C + 1)) * 4), *Y = kc_nan((size_t)(3 * (R + 2)));
        for (int64_t i = 0; i < 3 * (C + 1); i++) X[i] = (float)(unif01() - 0.5);
        qhx_k_matmul_q4a_i8x_ref(&w, X, C + 1, Y, R + 2, 3, 0, R);
        for (int t = 0; t < 3; t++) {
            qhx_k_matvec_q4a_i8x_ref(&w, X + t * (C + 1), yi, 0, R);
            CHECK(memcmp(yi, Y + t * (R + 2), (size_t)R * 4) == 0);
        }
        free(X), free(Y), free(x), free(y), free(yi), free(row), free(d);
        free_q4a(&w);
    }
}

#if defined(HAVE_Q4A_SIMD)
/* One SIMD build against the scalar model: bit for bit on every shape (whole and partial
 * super-blocks, odd group counts, the 4-row blocks of long rows, the widest quantized row and
 * the first that falls back), row splits, matmul per token, multi-row per row; NaN blocks. */
static void check_simd(const char *name, qhx_matvec_fn mv, qhx_matmul_fn mm, qhx_matvec_multi_fn multi) {
    static const int64_t cols[] = {32, 64, 96, 256, 288, 544, 2048, 6144, 8192, 8224};
    static const int64_t rows[] = {1, 5, 13};
    int before = t_failures;
    for (int k = 0; k < 10; k++)
        for (int j = 0; j < 3; j++) {
            const int64_t R = rows[j], C = cols[k];
            qhx_weight w = make_q4a(R, C);
            float *x = rand_x(C, 0.3f), *y = kc_nan(R), *want = kc_nan(R), *z = kc_nan(R);
            mv(&w, x, y, 0, R);
            if (C <= QHX_Q4A_I8X_MAX_COLS) qhx_k_matvec_q4a_i8x_ref(&w, x, want, 0, R);
            else qhx_k_matvec_q4a_ref(&w, x, want, 0, R);
            for (int64_t r = 0; r < R; r++)
                if (memcmp(&y[r], &want[r], 4)) {
                    fprintf(stderr, "%s: %lldx%lld row %lld: %.9g, the model %.9g\n", name, (long long)R, (long long)C,
                            (long long)r, y[r], want[r]);
                    break;
                }
            CHECK(memcmp(y, want, (size_t)R * 4) == 0);
            int64_t a = R / 2;
            mv(&w, x, z, 0, a);
            CHECK(kc_all_nan(z + a, R - a));
            mv(&w, x, z, a, R);
            CHECK(memcmp(y, z, (size_t)R * 4) == 0);
            /* matmul: 4 tokens, padded strides */
            const int64_t n = 4, ldx = C + 3, ldy = R + 5;
            float *X = malloc((size_t)(n * ldx) * 4), *Y = kc_nan((size_t)(n * ldy));
            for (int64_t i = 0; i < n * ldx; i++) X[i] = (float)(unif01() - 0.5);
            mm(&w, X, ldx, Y, ldy, n, 0, R);
            /* multi-row: up to 9 rows (past QHX_MATVEC_MULTI_MAX) */
            const float *xs[9];
            float *ys[9];
            for (int b = 0; b < 9; b++) xs[b] = X + (b % n) * ldx, ys[b] = kc_nan((size_t)R);
            if (multi) multi(&w, xs, ys, 9, 0, R);
            else
                for (int b = 0; b < 9; b++) mv(&w, xs[b], ys[b], 0, R);
            for (int64_t t = 0; t < n; t++) {
                mv(&w, X + t * ldx, z, 0, R);
                CHECK(memcmp(z, Y + t * ldy, (size_t)R * 4) == 0);
                CHECK(kc_all_nan(Y + t * ldy + R, ldy - R));
            }
            for (int b = 0; b < 9; b++) {
                mv(&w, xs[b], z, 0, R);
                CHECK(memcmp(z, ys[b], (size_t)R * 4) == 0);
                free(ys[b]);
            }
            /* a NaN or an infinity in x: every output NaN */
            if (C <= QHX_Q4A_I8X_MAX_COLS) {
                x[C / 2 + 1] = k % 2 ? NAN : INFINITY;
                mv(&w, x, y, 0, R);
                CHECK(kc_all_nan(y, R));
            }
            free(X), free(Y), free(x), free(y), free(want), free(z);
            free_q4a(&w);
        }
    fprintf(stderr, "%-24s %s (bit for bit against qhx_k_matvec_q4a_i8x_ref)\n", name, t_failures == before ? "ok" : "FAIL");
}
#endif

#if defined(QHX_HAVE_X86)
static void check_x86(void) {
    qhx_cpu_info cpu;
    qhx_cpu_detect(&cpu);
    if ((cpu.features & QHX_CPU_GROUP_AVX2) != QHX_CPU_GROUP_AVX2) {
        fprintf(stderr, "avx2: skipped, the CPU or OS lacks AVX2\n");
        return;
    }
    check_simd("q4a_i8x_avx2", qhx_k_matvec_q4a_i8x_avx2, qhx_k_matmul_q4a_i8x_avx2, qhx_k_matvec_multi_q4a_i8x_avx2);
    if (cpu.features & QHX_CPU_AVX_VNNI)
        check_simd("q4a_i8x_avxvnni", qhx_k_matvec_q4a_i8x_avxvnni, qhx_k_matmul_q4a_i8x_avxvnni,
                   qhx_k_matvec_multi_q4a_i8x_avxvnni);
    else
        fprintf(stderr, "avx-vnni: skipped, the CPU or OS lacks AVX-VNNI\n");
    const unsigned vnni512 = QHX_CPU_GROUP_AVX512 | QHX_CPU_AVX512_VNNI;
    if ((cpu.features & vnni512) == vnni512)
        check_simd("q4a_i8x_evex", qhx_k_matvec_q4a_i8x_evex, qhx_k_matmul_q4a_i8x_evex, qhx_k_matvec_multi_q4a_i8x_evex);
    else
        fprintf(stderr, "avx-512 vnni: skipped, the CPU or OS lacks it\n");
    /* the table: Q4A follows Q4's int8 switches; without them it keeps the reference */
    qhx_kernels k;
    qhx_kern_select(QHX_ISA_BEST, &k);
    CHECK(k.matvec[QHX_W_Q4A] == qhx_k_matvec_q4a_ref && k.matmul[QHX_W_Q4A] == qhx_k_matmul_q4a_ref);
    CHECK(k.row[QHX_W_Q4A] == qhx_k_row_q4a_ref && k.matvec_multi[QHX_W_Q4A] == NULL);
    qhx_kern_use_int8(QHX_ISA_BEST, 1u << QHX_W_Q4, 1u << QHX_W_Q4, &k);
    int vnni = (cpu.features & QHX_CPU_AVX_VNNI) != 0;
    int evex = k.isa == QHX_ISA_AVX512 && (cpu.features & QHX_CPU_AVX512_VNNI);
    CHECK(k.matvec[QHX_W_Q4A] == (evex   ? qhx_k_matvec_q4a_i8x_evex
                                  : vnni ? qhx_k_matvec_q4a_i8x_avxvnni
                                         : qhx_k_matvec_q4a_i8x_avx2));
    /* prefill: the int8 GEMM (test_kernels_q4a_gemm), not these per-token kernels */
    qhx_matmul_fn gemm = k.isa == QHX_ISA_AVX512 && (cpu.features & QHX_CPU_AVX512_VNNI) ? qhx_k_matmul_q4a_i8gemm_avx512
                         : vnni                                                       ? qhx_k_matmul_q4a_i8gemm_avxvnni
                                                                                      : qhx_k_matmul_q4a_i8gemm_avx2;
    CHECK(k.matmul[QHX_W_Q4A] == gemm);
    CHECK(k.matvec_multi[QHX_W_Q4A] == (evex   ? qhx_k_matvec_multi_q4a_i8x_evex
                                        : vnni ? qhx_k_matvec_multi_q4a_i8x_avxvnni
                                               : qhx_k_matvec_multi_q4a_i8x_avx2));
    qhx_kern_select(QHX_ISA_BEST, &k);
    qhx_kern_use_int8(QHX_ISA_BEST, 1u << QHX_W_Q8, 0, &k); /* Q4's bits absent: Q4A untouched */
    CHECK(k.matvec[QHX_W_Q4A] == qhx_k_matvec_q4a_ref && k.matmul[QHX_W_Q4A] == qhx_k_matmul_q4a_ref);
}
#endif

#if defined(QHX_HAVE_ARM) && defined(__aarch64__)
/* The NEON prefill matmul in the x86 int8 GEMM's order, bit for bit against its scalar model
 * qhx_k_matmul_q4a_i8gemm_ref (the x86 builds equal it in test_kernels_q4a_gemm): odd group
 * counts, partial last super-blocks, rows past one quantized row buffer (8192), row pieces, a
 * NaN in one token. */
static void check_gemm_order(const char *name, qhx_matmul_fn mm) {
    static const int64_t cols[] = {32, 96, 288, 2080, 8224};
    static const int64_t rows[] = {1, 5, 13};
    static const int64_t ns[] = {1, 3, 7};
    int before = t_failures;
    for (int k = 0; k < 5; k++)
        for (int j = 0; j < 3; j++)
            for (int m = 0; m < 3; m++) {
                const int64_t R = rows[j], C = cols[k], n = ns[m], ldx = C + 3, ldy = R + 5;
                qhx_weight w = make_q4a(R, C);
                float *X = malloc((size_t)(n * ldx) * 4), *Y = kc_nan((size_t)(n * ldy)), *Z = kc_nan((size_t)(n * ldy));
                for (int64_t i = 0; i < n * ldx; i++) X[i] = (float)(unif01() - 0.5) * (float)(1 + i % 5);
                mm(&w, X, ldx, Y, ldy, n, 0, R);
                qhx_k_matmul_q4a_i8gemm_ref(&w, X, ldx, Z, ldy, n, 0, R);
                CHECK(memcmp(Y, Z, (size_t)(n * ldy) * 4) == 0); /* the padding stays NaN in both */
                for (size_t i = 0; i < (size_t)(n * ldy); i++) Z[i] = NAN;
                mm(&w, X, ldx, Z, ldy, n, R / 2, R);
                mm(&w, X, ldx, Z, ldy, n, 0, R / 2);
                CHECK(memcmp(Y, Z, (size_t)(n * ldy) * 4) == 0);
                X[(n - 1) * ldx + C - 7] = NAN;
                mm(&w, X, ldx, Z, ldy, n, 0, R);
                CHECK(kc_all_nan(Z + (n - 1) * ldy, R));
                CHECK(memcmp(Y, Z, (size_t)((n - 1) * ldy) * 4) == 0);
                free(X), free(Y), free(Z);
                free_q4a(&w);
            }
    fprintf(stderr, "%-24s %s (bit for bit against qhx_k_matmul_q4a_i8gemm_ref)\n", name, t_failures == before ? "ok" : "FAIL");
}

/* The NEON build (no multi-row twin: the batched step calls it per row) bit for bit against the
 * scalar model, and the table: Q4A follows Q4's int8 switches, as on x86 (prefill: the GEMM
 * order's kernel). */
static void check_arm(void) {
    check_simd("q4a_i8x_neon", qhx_k_matvec_q4a_i8x_neon, qhx_k_matmul_q4a_i8x_neon, NULL);
    check_gemm_order("q4a_i8gemm_neon", qhx_k_matmul_q4a_i8gemm_neon);
    qhx_kernels k;
    qhx_kern_select(QHX_ISA_BEST, &k);
    CHECK(k.matvec[QHX_W_Q4A] == qhx_k_matvec_q4a_ref && k.matmul[QHX_W_Q4A] == qhx_k_matmul_q4a_ref);
    qhx_kern_use_int8(QHX_ISA_BEST, 1u << QHX_W_Q4, 1u << QHX_W_Q4, &k);
    CHECK(k.matvec[QHX_W_Q4A] == qhx_k_matvec_q4a_i8x_neon && k.matmul[QHX_W_Q4A] == qhx_k_matmul_q4a_i8gemm_neon);
    qhx_kern_select(QHX_ISA_BEST, &k);
    qhx_kern_use_int8(QHX_ISA_BEST, 1u << QHX_W_Q8, 0, &k); /* Q4's bits absent: Q4A untouched */
    CHECK(k.matvec[QHX_W_Q4A] == qhx_k_matvec_q4a_ref && k.matmul[QHX_W_Q4A] == qhx_k_matmul_q4a_ref);
    qhx_kern_select(QHX_ISA_REF, &k); /* a reference table gets no NEON kernel */
    qhx_kern_use_int8(QHX_ISA_REF, 1u << QHX_W_Q4, 1u << QHX_W_Q4, &k);
    CHECK(k.matvec[QHX_W_Q4A] == qhx_k_matvec_q4a_ref);
}
#endif

int main(void) {
    (void)kc_run_all; /* kernels_check.h's suite is for the table formats; Q4A has its own above */
    check_error_vs_q4();
    check_passes();
    check_refusals();
    check_importance();
    check_ref_kernels();
#if defined(QHX_HAVE_X86)
    check_x86();
#elif defined(QHX_HAVE_ARM) && defined(__aarch64__)
    check_arm();
#endif
    return t_done("test_kernels_q4a");
}
