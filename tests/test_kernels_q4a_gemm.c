// ctest-labels: kernels
/* test_kernels_q4a_gemm: the int8-activation prefill GEMM of Q4A weights (kernels/x86/
 * gemm_i8_avx2.c and its AVX-VNNI and AVX-512 VNNI builds). Its scalar model
 * qhx_k_matmul_q4a_i8gemm_ref against a double product of the dequantized matrix (within the
 * int8 rounding bound of x) and against the per-token model qhx_k_matmul_q4a_i8x_ref (the same
 * quantized product, so only f32 rounding apart); every SIMD build bit for bit against the model
 * on partial panels, odd group counts, partial last super-blocks, rows past the per-token limit,
 * token counts across register tiles and token chunks; bitwise independence of row pieces and
 * token subsets; NaN / infinity blocks; the shape that falls back; and the table install (by
 * default for prefill, decode untouched). The SIMD part exits 77 without AVX2. */
#include "kernels_check.h"

#if defined(QHX_HAVE_X86)
#include "core/cpu.h"
#include "kernels/x86/x86.h"
#include "backends/cpu.h"
#include "runtime/model.h"

#define KERN(m) qhx_backend_cpu_kernels((m)->graphs)

typedef struct gemm_case {
    qhx_matmul_fn mm;
    const char *name;
    unsigned needs; /* QHX_CPU_* bits the build runs on */
} gemm_case;

/* X (n, ldx): each block of 32 gets its own magnitude in [0.01, 10] (the per-block scales
 * matter), and the padding past cols is NaN (a kernel that read it would show). */
static float *make_x(int64_t n, int64_t cols, int64_t ldx) {
    float *X = kc_nan((size_t)(n * ldx));
    for (int64_t t = 0; t < n; t++)
        for (int64_t b = 0; b < cols / 32; b++) {
            float mag = powf(10.0f, 3.0f * (kc_unif() + 1.0f) / 2.0f - 3.0f) * 10.0f;
            for (int i = 0; i < 32; i++) X[t * ldx + 32 * b + i] = mag * kc_unif();
        }
    return X;
}

/* The model itself: within the rounding bound of x (kc_i8x_bound's: per block, the sum of |W'|
 * times half a step, 0.5 + 2^-15) plus the f32 slack of the exact product of the dequantized
 * rows, and within the f32 slack of the per-token model (both compute sum W' q dx on the same
 * codes, in different f32 orders). The rows are dequantized here, once per matrix (the shared
 * helper's one-row cache is keyed by the weight's address, which repeats across matrices). */
static void check_model(const qhx_weight *w, const float *X, int64_t ldx, const float *Y, int64_t ldy, int64_t n) {
    const int64_t R = w->rows, C = w->cols;
    int bad = 0;
    float *Yt = NULL, *Wd = malloc((size_t)(R * C) * sizeof(float));
    for (int64_t r = 0; r < R; r++)
        qhx_dequant_q4a_row((const uint8_t *)w->data + r * C / 2, w->gscales + r * qhx_q4a_row_supers(C),
                            w->sub + r * qhx_q4a_row_sub_bytes(C), C, Wd + r * C);
    if (C <= QHX_Q4A_I8X_MAX_COLS) {
        Yt = kc_nan((size_t)(n * ldy));
        qhx_k_matmul_q4a_i8x_ref(w, X, ldx, Yt, ldy, n, 0, R);
    }
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < R; r++) {
            const float *x = X + t * ldx, *wr = Wd + r * C;
            double exact = 0.0, mag = 0.0, i8 = 0.0;
            for (int64_t b = 0; b < C / 32; b++) {
                double amax = 0.0, ws = 0.0;
                for (int64_t c = 32 * b; c < 32 * b + 32; c++) {
                    exact += (double)wr[c] * x[c], mag += fabs((double)wr[c] * x[c]);
                    amax = fmax(amax, fabs((double)x[c])), ws += fabs((double)wr[c]);
                }
                i8 += ws * amax / 127.0 * (0.5 + 0x1p-15);
            }
            double got = Y[t * ldy + r];
            bad += !(fabs(got - exact) <= i8 + KC_REL_TOL * mag + 1e-30);
            if (Yt) bad += !(fabs(got - (double)Yt[t * ldy + r]) <= 2 * KC_REL_TOL * mag + 1e-30);
        }
    if (bad) fprintf(stderr, "model %lldx%lld n=%lld: %d outputs out of bounds\n", (long long)R, (long long)C, (long long)n, bad);
    CHECK_EQ(bad, 0);
    free(Yt), free(Wd);
}

/* Bit for bit the model, the padding of Y (past row R) untouched. */
static int same_as_model(const gemm_case *c, const qhx_weight *w, const float *X, int64_t ldx, const float *Y,
                         const float *Ym, int64_t ldy, int64_t n) {
    int same = 1, pad = 1;
    for (int64_t t = 0; t < n; t++) {
        same &= memcmp(Y + t * ldy, Ym + t * ldy, (size_t)w->rows * sizeof(float)) == 0;
        pad &= kc_all_nan(Y + t * ldy + w->rows, ldy - w->rows);
    }
    if (!same)
        for (int64_t t = 0, shown = 0; t < n && !shown; t++)
            for (int64_t r = 0; r < w->rows && !shown; r++)
                if (memcmp(&Y[t * ldy + r], &Ym[t * ldy + r], 4))
                    fprintf(stderr, "%s %lldx%lld n=%lld: Y[%lld, %lld] = %.9g, the model %.9g\n", c->name,
                            (long long)w->rows, (long long)w->cols, (long long)n, (long long)t, (long long)r,
                            Y[t * ldy + r], Ym[t * ldy + r]),
                        shown = 1;
    (void)X, (void)ldx;
    CHECK(same);
    CHECK(pad);
    return same && pad;
}

/* Row pieces (two-way cuts, a three-way cut out of order, the pool's 128-row pieces) and token
 * subsets (one call per token, tokens [2, n)) give the bits of the one call. */
static void check_pieces(const gemm_case *c, const qhx_weight *w, const float *X, int64_t ldx, const float *Y,
                         int64_t ldy, int64_t n) {
    const int64_t R = w->rows;
    const size_t bytes = (size_t)(n * ldy) * sizeof(float);
    float *Z = kc_nan((size_t)(n * ldy));
    const int64_t cuts[] = {1, 9, 16, 17, R / 2, R - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        int64_t a = cuts[i];
        if (a <= 0 || a >= R) continue;
        for (size_t k = 0; k < (size_t)(n * ldy); k++) Z[k] = NAN;
        c->mm(w, X, ldx, Z, ldy, n, 0, a);
        c->mm(w, X, ldx, Z, ldy, n, a, R);
        CHECK(memcmp(Y, Z, bytes) == 0);
    }
    for (size_t k = 0; k < (size_t)(n * ldy); k++) Z[k] = NAN;
    c->mm(w, X, ldx, Z, ldy, n, 2 * R / 3, R);
    c->mm(w, X, ldx, Z, ldy, n, 0, R / 3);
    c->mm(w, X, ldx, Z, ldy, n, R / 3, 2 * R / 3);
    CHECK(memcmp(Y, Z, bytes) == 0);
    for (size_t k = 0; k < (size_t)(n * ldy); k++) Z[k] = NAN;
    for (int64_t a = 0; a < R; a += 128) c->mm(w, X, ldx, Z, ldy, n, a, a + 128 < R ? a + 128 : R);
    CHECK(memcmp(Y, Z, bytes) == 0);
    for (size_t k = 0; k < (size_t)(n * ldy); k++) Z[k] = NAN;
    for (int64_t t = 0; t < n; t++) c->mm(w, X + t * ldx, ldx, Z + t * ldy, ldy, 1, 0, R);
    CHECK(memcmp(Y, Z, bytes) == 0);
    if (n > 2) {
        for (size_t k = 0; k < (size_t)(n * ldy); k++) Z[k] = NAN;
        c->mm(w, X + 2 * ldx, ldx, Z + 2 * ldy, ldy, n - 2, 0, R);
        CHECK(kc_all_nan(Z, 2 * ldy));
        CHECK(memcmp(Y + 2 * ldy, Z + 2 * ldy, (size_t)((n - 2) * ldy) * sizeof(float)) == 0);
    }
    free(Z);
}

/* One shape: the build against the model (bitwise), the model against the exact product where
 * `model` asks (once per shape, not per build), the pieces where `pieces` asks. */
static void check_shape(const gemm_case *c, int64_t R, int64_t C, int64_t n, int model, int pieces) {
    qhx_weight w = kc_make_weight(QHX_W_Q4A, R, C);
    const int64_t ldx = C + 5, ldy = R + 3;
    float *X = make_x(n, C, ldx), *Y = kc_nan((size_t)(n * ldy)), *Ym = kc_nan((size_t)(n * ldy));
    qhx_k_matmul_q4a_i8gemm_ref(&w, X, ldx, Ym, ldy, n, 0, R);
    int finite = 1;
    for (int64_t t = 0; t < n; t++) finite &= kc_all_finite(Ym + t * ldy, R);
    CHECK(finite);
    if (model) check_model(&w, X, ldx, Ym, ldy, n);
    c->mm(&w, X, ldx, Y, ldy, n, 0, R);
    if (same_as_model(c, &w, X, ldx, Y, Ym, ldy, n) && pieces) check_pieces(c, &w, X, ldx, Y, ldy, n);
    free(X), free(Y), free(Ym);
    kc_free_weight(&w);
}

/* Zeros, subnormal values, an all-zero token, then a NaN or an infinity in one token: that
 * token's outputs all NaN, the others' bits as before (and the model's). */
static void check_special(const gemm_case *c) {
    const int64_t R = 19, C = 288, n = 7, ldx = C, ldy = R;
    qhx_weight w = kc_make_weight(QHX_W_Q4A, R, C);
    float *X = make_x(n, C, ldx), *Y = kc_nan((size_t)(n * ldy)), *Z = kc_nan((size_t)(n * ldy));
    float *Ym = kc_nan((size_t)(n * ldy));
    for (int i = 0; i < 32; i++) X[0 * ldx + 32 + i] = 0.0f;           /* token 0, block 1: zeros */
    for (int i = 0; i < 32; i++) X[1 * ldx + i] = 1e-40f * kc_unif(); /* token 1, block 0: subnormal */
    for (int i = 0; i < C; i++) X[4 * ldx + i] = 0.0f;                 /* token 4: all zeros */
    c->mm(&w, X, ldx, Y, ldy, n, 0, R);
    qhx_k_matmul_q4a_i8gemm_ref(&w, X, ldx, Ym, ldy, n, 0, R);
    CHECK(memcmp(Y, Ym, (size_t)(n * ldy) * sizeof(float)) == 0);
    check_model(&w, X, ldx, Ym, ldy, n);
    int zero = 1;
    for (int64_t r = 0; r < R; r++) zero &= Y[4 * ldy + r] == 0.0f;
    CHECK(zero);
    for (int bad = 0; bad < 2; bad++) {
        for (int at = 0; at < 2; at++) { /* a whole super-block's group, the partial one's */
            const int64_t col = at ? 262 : 70;
            float keep = X[2 * ldx + col];
            X[2 * ldx + col] = bad ? INFINITY : NAN;
            c->mm(&w, X, ldx, Z, ldy, n, 0, R);
            CHECK(kc_all_nan(Z + 2 * ldy, R));
            CHECK(memcmp(Y, Z, (size_t)(2 * ldy) * sizeof(float)) == 0);
            CHECK(memcmp(Y + 3 * ldy, Z + 3 * ldy, (size_t)(4 * ldy) * sizeof(float)) == 0);
            qhx_k_matmul_q4a_i8gemm_ref(&w, X, ldx, Ym, ldy, n, 0, R);
            CHECK(kc_all_nan(Ym + 2 * ldy, R));
            X[2 * ldx + col] = keep;
        }
    }
    free(X), free(Y), free(Z), free(Ym);
    kc_free_weight(&w);
}

/* A row length no Q4A matrix has (not a multiple of 32) goes to the f32 reference: its bits. */
static void check_fallback(const gemm_case *c) {
    const int64_t R = 9, C = 40, n = 5;
    qhx_weight w = {.fmt = QHX_W_Q4A, .rows = R, .cols = C, .group = QHX_Q4A_GROUP};
    uint8_t *q = malloc((size_t)(R * C / 2)), *sub = malloc((size_t)(R * qhx_q4a_row_sub_bytes(C)));
    uint16_t *sup = malloc((size_t)(R * qhx_q4a_row_supers(C)) * 2);
    for (int64_t i = 0; i < R * C / 2; i++) q[i] = (uint8_t)(kc_next() & 0xff);
    for (int64_t i = 0; i < R * qhx_q4a_row_sub_bytes(C); i++) sub[i] = (uint8_t)(kc_next() & 0xff);
    for (int64_t i = 0; i < R * qhx_q4a_row_supers(C); i++) sup[i] = 0x2000; /* f16 2^-7 */
    w.data = q, w.gscales = sup, w.sub = sub;
    float *X = malloc((size_t)(n * C) * 4), *Y = kc_nan((size_t)(n * R)), *Yr = kc_nan((size_t)(n * R));
    for (int64_t i = 0; i < n * C; i++) X[i] = kc_unif();
    c->mm(&w, X, C, Y, R, n, 0, R);
    qhx_k_matmul_q4a_ref(&w, X, C, Yr, R, n, 0, R);
    CHECK(memcmp(Y, Yr, (size_t)(n * R) * 4) == 0);
    for (size_t k = 0; k < (size_t)(n * R); k++) Y[k] = NAN;
    qhx_k_matmul_q4a_i8gemm_ref(&w, X, C, Y, R, n, 0, R);
    CHECK(memcmp(Y, Yr, (size_t)(n * R) * 4) == 0);
    free(X), free(Y), free(Yr), free(q), free(sub), free(sup);
}

/* The build install_x86.c picks for Q4A prefill on a table of `isa`: the Q4 GEMM's rule. */
static qhx_matmul_fn want_prefill(const qhx_cpu_info *cpu, qhx_isa isa) {
    if (isa == QHX_ISA_AVX512 && (cpu->features & QHX_CPU_AVX512_VNNI)) return qhx_k_matmul_q4a_i8gemm_avx512;
    if (cpu->features & QHX_CPU_AVX_VNNI) return qhx_k_matmul_q4a_i8gemm_avxvnni;
    return qhx_k_matmul_q4a_i8gemm_avx2;
}
static qhx_matvec_fn want_decode(const qhx_cpu_info *cpu, qhx_isa isa) {
    if (isa == QHX_ISA_AVX512 && (cpu->features & QHX_CPU_AVX512_VNNI)) return qhx_k_matvec_q4a_i8x_evex;
    return cpu->features & QHX_CPU_AVX_VNNI ? qhx_k_matvec_q4a_i8x_avxvnni : qhx_k_matvec_q4a_i8x_avx2;
}

static void check_install(const qhx_cpu_info *cpu) {
    qhx_kernels k;
    const unsigned q4 = 1u << QHX_W_Q4;
    for (int i = 0; i < 2; i++) {
        qhx_isa isa = i ? QHX_ISA_AVX512 : QHX_ISA_AVX2;
        qhx_kern_select(isa, &k);
        if (k.isa != isa) continue; /* no AVX-512 here */
        CHECK(k.matmul[QHX_W_Q4A] == qhx_k_matmul_q4a_ref);
        qhx_kern_use_int8(isa, q4, q4, &k);
        CHECK(k.matmul[QHX_W_Q4A] == want_prefill(cpu, isa));
        CHECK(k.matvec[QHX_W_Q4A] == want_decode(cpu, isa)); /* decode: the per-token kernel, as before */
        qhx_kern_select(isa, &k);
        qhx_kern_use_int8(isa, q4, 0, &k); /* prefill only */
        CHECK(k.matmul[QHX_W_Q4A] == want_prefill(cpu, isa) && k.matvec[QHX_W_Q4A] == qhx_k_matvec_q4a_ref);
        qhx_kern_select(isa, &k);
        qhx_kern_use_int8(isa, 1u << QHX_W_Q8, 0, &k); /* Q4's bit absent: Q4A untouched */
        CHECK(k.matmul[QHX_W_Q4A] == qhx_k_matmul_q4a_ref);
    }
    /* an AVX2-only CPU gets the AVX2 build, one with AVX-VNNI the AVX-VNNI build */
    qhx_cpu_info plain = *cpu, vnni = *cpu;
    plain.features &= ~(QHX_CPU_AVX_VNNI | QHX_CPU_AVX512_VNNI);
    vnni.features |= QHX_CPU_AVX_VNNI;
    qhx_kern_select(QHX_ISA_AVX2, &k);
    qhx_kern_install_x86_int8(&k, q4, q4, QHX_ISA_AVX2, &plain);
    CHECK(k.matmul[QHX_W_Q4A] == qhx_k_matmul_q4a_i8gemm_avx2);
    qhx_kern_install_x86_int8(&k, q4, q4, QHX_ISA_AVX2, &vnni);
    CHECK(k.matmul[QHX_W_Q4A] == qhx_k_matmul_q4a_i8gemm_avxvnni);
    qhx_kern_select(QHX_ISA_REF, &k); /* the reference table stays the reference */
    qhx_kern_use_int8(QHX_ISA_REF, q4, q4, &k);
    CHECK(k.matmul[QHX_W_Q4A] == qhx_k_matmul_q4a_ref);
    /* through the model's parameters: the default prefill_math installs it, F32 does not */
    const char *dir = QHX_DATA_DIR "/fixtures/parity/qwen35-tiny-f32";
    qhx_model_params p = qhx_model_default_params();
    qhx_model *m = NULL;
    qhx_error err = {0};
    if (qhx_model_open(dir, &p, &m, &err) != QHX_OK) {
        fprintf(stderr, "model params: %s (fixture missing?)\n", err.msg);
        CHECK(0);
        return;
    }
    qhx_isa isa = KERN(m)->isa;
    if (isa == QHX_ISA_AVX2 || isa == QHX_ISA_AVX512) {
        CHECK(KERN(m)->matmul[QHX_W_Q4A] == want_prefill(cpu, isa));
        CHECK(KERN(m)->matvec[QHX_W_Q4A] == want_decode(cpu, isa));
    }
    qhx_model_free(m);
    m = NULL;
    p.prefill_math = QHX_PREFILL_MATH_F32;
    CHECK(qhx_model_open(dir, &p, &m, &err) == QHX_OK);
    if (m) CHECK(KERN(m)->matmul[QHX_W_Q4A] == qhx_k_matmul_q4a_ref);
    qhx_model_free(m);
}

int main(void) {
    (void)kc_run_all; /* kernels_check.h's suite pairs a matvec with each matmul; here there is none */
    qhx_cpu_info cpu;
    qhx_cpu_detect(&cpu);
    if ((cpu.features & QHX_CPU_GROUP_AVX2) != QHX_CPU_GROUP_AVX2) {
        fprintf(stderr, "test_kernels_q4a_gemm: skipped, the CPU or OS lacks AVX2/FMA/F16C\n");
        return 77;
    }
    const unsigned vnni512 = QHX_CPU_GROUP_AVX512 | QHX_CPU_AVX512_VNNI;
    const unsigned avxvnni = QHX_CPU_GROUP_AVX2 | QHX_CPU_AVX_VNNI;
    const gemm_case cases[] = {{qhx_k_matmul_q4a_i8gemm_avx2, "q4a_i8gemm_avx2", QHX_CPU_GROUP_AVX2},
                               {qhx_k_matmul_q4a_i8gemm_avxvnni, "q4a_i8gemm_avxvnni", avxvnni},
                               {qhx_k_matmul_q4a_i8gemm_avx512, "q4a_i8gemm_avx512", vnni512}};
    /* rows: partial panels of 16 and of 32; cols: one group, odd group counts, a partial last
     * super-block (288 = 9 groups, 2080 = 65), whole ones, several column blocks of 256; n:
     * partial register tiles of 4 and 6 */
    static const int64_t rows[] = {1, 7, 17, 50};
    static const int64_t cols[] = {32, 96, 288, 2080};
    static const int64_t ns[] = {1, 2, 3, 5, 7, 13, 20};
    for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
        const gemm_case *c = &cases[ci];
        if ((cpu.features & c->needs) != c->needs) {
            fprintf(stderr, "%-20s skipped: the CPU or OS lacks it\n", c->name);
            continue;
        }
        int before = t_failures, model = ci == 0; /* the model's own checks once */
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 7; k++) check_shape(c, rows[i], cols[j], ns[k], model && k < 3, 1);
        check_shape(c, 45, 2048, 131, model, 1);   /* two token chunks of 128 */
        check_shape(c, 300, 256, 9, 0, 1);         /* the pool's 128-row pieces */
        check_shape(c, 33, 6144, 23, model, 1);    /* the 2B MLP's down projection width */
        check_shape(c, 18, 8224, 4, model, 0);     /* past the per-token kernels' 8192 limit */
        check_special(c);
        check_fallback(c);
        fprintf(stderr, "%-20s %s (bit for bit against qhx_k_matmul_q4a_i8gemm_ref)\n", c->name,
                t_failures == before ? "ok" : "FAIL");
    }
    check_install(&cpu);
    return t_done("test_kernels_q4a_gemm");
}
#else
int main(void) {
    fprintf(stderr, "test_kernels_q4a_gemm: no x86 variants on this architecture\n");
    return 77;
}
#endif
