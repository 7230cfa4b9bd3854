// ctest-labels: kernels
/* test_kernels_i8gemm: the prefill GEMM of Q8 and Q4 weights with int8 activations
 * (kernels/x86/gemm_i8_avx2.c, and its AVX-VNNI and AVX-512 VNNI builds gemm_i8_avxvnni.c and
 * gemm_i8_avx512.c where the CPU has them, which must also equal the AVX2 kernel bit for bit)
 * against the scalar reference matmul, within an error bound
 * computed per output from the activation rounding; bitwise independence of the row range, the
 * thread split and the token count; NaN/infinity/zero/tiny activation blocks; the shapes it
 * hands to the f32 GEMM; and the opt-in install. Exits 77 (skipped) without AVX2. */
#include "kernels_check.h"

#if defined(QHX_HAVE_X86)
#include "core/cpu.h"
#include "kernels/x86/ops_x86.h"
#include "kernels/x86/x86.h"
#include "backends/cpu.h"
#include "runtime/model.h"

#define KERN(m) qhx_backend_cpu_kernels((m)->graphs)

typedef struct i8_case {
    qhx_wfmt fmt;
    qhx_matmul_fn mm;
    const char *name;
    unsigned needs; /* QHX_CPU_* bits the variant runs on */
} i8_case;

/* X (n, ldx): random values whose size changes from block to block (each block of 32 gets its
 * own size in [0.01, 10]), so the per-block activation scales matter. */
static float *make_x(int64_t n, int64_t cols, int64_t ldx) {
    float *X = kc_nan((size_t)(n * ldx));
    for (int64_t t = 0; t < n; t++)
        for (int64_t b = 0; b < cols / 32; b++) {
            float mag = powf(10.0f, 3.0f * (kc_unif() + 1.0f) / 2.0f - 3.0f) * 10.0f;
            for (int i = 0; i < 32; i++) X[t * ldx + 32 * b + i] = mag * kc_unif();
        }
    return X;
}

/* The kernel's arithmetic redone in double on the codes the file head documents (dx = max|x| /
 * 127 in f32, q = nearbyintf(x * (1 / dx)), or x / dx below 2^-120): sum W'[r, c] q[c] dx[c / 32].
 * What separates it from the kernel is only f32 rounding of the block sums, so a wrong rounding
 * mode, scale or Q4 offset shows here even where the worst-case bound would let it pass.
 * *mag gets sum |W'[r, c] q[c] dx|, the scale of that rounding. */
static double emulate(const qhx_weight *w, const float *x, int64_t r, double *mag) {
    double y = 0.0, m = 0.0;
    for (int64_t b = 0; b < w->cols / 32; b++) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[32 * b + i]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int i = 0; i < 32; i++) {
            float v = x[32 * b + i], q = d >= 0x1p-120f ? nearbyintf(v * id) : d > 0.0f ? nearbyintf(v / d) : 0.0f;
            double t = (double)kc_wval(w, r, 32 * b + i) * q * d;
            y += t, m += fabs(t);
        }
    }
    *mag = m;
    return y;
}

/* Y (n, ldy) against the reference matmul: |got - ref| <= kc_i8x_bound + KC_REL_TOL sum|W' x|
 * (kernels_check.h: the float32 summation-order slack, here of both the kernel's block sums and
 * the reference's column-order sum); and against emulate() within KC_REL_TOL. Returns the worst
 * error against the reference as a fraction of the allowed. */
static double check_vs_ref(const i8_case *c, const qhx_weight *w, const float *X, int64_t ldx, const float *Y,
                           int64_t ldy, int64_t n) {
    float *Yr = kc_nan((size_t)(n * ldy));
    qhx_matmul_fn ref = c->fmt == QHX_W_Q8 ? qhx_k_matmul_q8_ref : qhx_k_matmul_q4_ref;
    ref(w, X, ldx, Yr, ldy, n, 0, w->rows);
    double worst = 0.0;
    int bad = 0;
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < w->rows; r++) {
            double got = Y[t * ldy + r], want = Yr[t * ldy + r];
            double allowed = kc_i8x_bound(w, X + t * ldx, r) + KC_REL_TOL * kc_mag(w, X + t * ldx, r) + 1e-30;
            double rel = fabs(got - want) / allowed;
            if (!(rel <= 1.0)) {
                if (bad++ < 3)
                    fprintf(stderr, "%s %lldx%lld n=%lld: Y[%lld, %lld] = %.9g, ref %.9g, allowed %.3g\n", c->name,
                            (long long)w->rows, (long long)w->cols, (long long)n, (long long)t, (long long)r, got,
                            want, allowed);
            }
            if (!(rel <= worst)) worst = isnan(rel) ? INFINITY : rel;
            double emag, emu = emulate(w, X + t * ldx, r, &emag);
            if (!(fabs(got - emu) <= KC_REL_TOL * emag + 1e-30)) {
                if (bad++ < 3)
                    fprintf(stderr, "%s %lldx%lld n=%lld: Y[%lld, %lld] = %.9g, emulated %.9g\n", c->name,
                            (long long)w->rows, (long long)w->cols, (long long)n, (long long)t, (long long)r, got, emu);
            }
        }
    CHECK_EQ(bad, 0);
    free(Yr);
    return worst;
}

/* Row ranges: two-way splits at several cuts, a three-way split, threads: all bitwise equal to
 * the one call over [0, rows), the padding of Y untouched. */
typedef struct mm_job {
    qhx_matmul_fn mm;
    const qhx_weight *w;
    const float *X;
    float *Y;
    int64_t ldx, ldy, n, r0, r1;
} mm_job;

static void *mm_job_run(void *p) {
    mm_job *j = p;
    j->mm(j->w, j->X, j->ldx, j->Y, j->ldy, j->n, j->r0, j->r1);
    return NULL;
}

static void check_splits(const i8_case *c, const qhx_weight *w, const float *X, int64_t ldx, const float *Y,
                         int64_t ldy, int64_t n) {
    const int64_t rows = w->rows;
    const size_t bytes = (size_t)(n * ldy) * sizeof(float);
    float *Z = kc_nan((size_t)(n * ldy));
    int64_t cuts[] = {1, 5, 8, 9, 16, 17, rows / 2, rows - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        int64_t a = cuts[i];
        if (a <= 0 || a >= rows) continue;
        for (size_t k = 0; k < (size_t)(n * ldy); k++) Z[k] = NAN;
        c->mm(w, X, ldx, Z, ldy, n, 0, a);
        int untouched = 1;
        for (int64_t t = 0; t < n; t++) untouched &= kc_all_nan(Z + t * ldy + a, ldy - a);
        CHECK(untouched);
        c->mm(w, X, ldx, Z, ldy, n, a, rows);
        CHECK(memcmp(Y, Z, bytes) == 0);
    }
    for (size_t k = 0; k < (size_t)(n * ldy); k++) Z[k] = NAN;
    int64_t a = rows / 3, b = 2 * rows / 3;
    c->mm(w, X, ldx, Z, ldy, n, b, rows);
    c->mm(w, X, ldx, Z, ldy, n, 0, a);
    c->mm(w, X, ldx, Z, ldy, n, a, b);
    CHECK(memcmp(Y, Z, bytes) == 0);

    for (size_t k = 0; k < (size_t)(n * ldy); k++) Z[k] = NAN;
    pthread_t th[KC_THREADS];
    mm_job jobs[KC_THREADS];
    for (int i = 0; i < KC_THREADS; i++) {
        jobs[i] = (mm_job){c->mm, w, X, Z, ldx, ldy, n, rows * i / KC_THREADS, rows * (i + 1) / KC_THREADS};
        if (pthread_create(&th[i], NULL, mm_job_run, &jobs[i]) != 0) mm_job_run(&jobs[i]), th[i] = 0;
    }
    for (int i = 0; i < KC_THREADS; i++)
        if (th[i]) pthread_join(th[i], NULL);
    CHECK(memcmp(Y, Z, bytes) == 0);
    free(Z);
}

/* A token's outputs do not depend on the other tokens of the call: one call per token, and a
 * call on tokens [2, n), give the same bits. */
static void check_tokens(const i8_case *c, const qhx_weight *w, const float *X, int64_t ldx, const float *Y,
                         int64_t ldy, int64_t n) {
    const int64_t rows = w->rows;
    float *Z = kc_nan((size_t)(n * ldy));
    for (int64_t t = 0; t < n; t++) c->mm(w, X + t * ldx, ldx, Z + t * ldy, ldy, 1, 0, rows);
    CHECK(memcmp(Y, Z, (size_t)(n * ldy) * sizeof(float)) == 0);
    if (n > 2) {
        for (size_t k = 0; k < (size_t)(n * ldy); k++) Z[k] = NAN;
        c->mm(w, X + 2 * ldx, ldx, Z + 2 * ldy, ldy, n - 2, 0, rows);
        CHECK(kc_all_nan(Z, 2 * ldy));
        CHECK(memcmp(Y + 2 * ldy, Z + 2 * ldy, (size_t)((n - 2) * ldy) * sizeof(float)) == 0);
    }
    free(Z);
}

/* The VNNI builds (AVX-VNNI, AVX-512 VNNI) compute the same integers and the same f32 operations
 * in the same order as the AVX2 kernel (gemm_i8_avx2.c, gemm_i8_avx512.c): their outputs must be
 * its outputs bit for bit. */
static void check_same_as_avx2(const i8_case *c, const qhx_weight *w, const float *X, int64_t ldx, const float *Y,
                               int64_t ldy, int64_t n) {
    qhx_matmul_fn avx2 = c->fmt == QHX_W_Q8 ? qhx_k_matmul_q8_i8gemm_avx2 : qhx_k_matmul_q4_i8gemm_avx2;
    if (c->mm == avx2) return;
    float *Z = kc_nan((size_t)(n * ldy));
    avx2(w, X, ldx, Z, ldy, n, 0, w->rows);
    int same = 1;
    for (int64_t t = 0; t < n; t++) same &= memcmp(Y + t * ldy, Z + t * ldy, (size_t)w->rows * sizeof(float)) == 0;
    if (!same)
        fprintf(stderr, "%s %lldx%lld n=%lld: differs from the AVX2 int8 GEMM\n", c->name, (long long)w->rows,
                (long long)w->cols, (long long)n);
    CHECK(same);
    free(Z);
}

static double check_shape(const i8_case *c, int64_t rows, int64_t cols, int64_t n) {
    qhx_weight w = kc_make_weight(c->fmt, rows, cols);
    int64_t ldx = cols + 5, ldy = rows + 3;
    float *X = make_x(n, cols, ldx), *Y = kc_nan((size_t)(n * ldy));
    c->mm(&w, X, ldx, Y, ldy, n, 0, rows);
    int pad_nan = 1;
    for (int64_t t = 0; t < n; t++) pad_nan &= kc_all_finite(Y + t * ldy, rows) && kc_all_nan(Y + t * ldy + rows, ldy - rows);
    CHECK(pad_nan);
    double worst = check_vs_ref(c, &w, X, ldx, Y, ldy, n);
    check_same_as_avx2(c, &w, X, ldx, Y, ldy, n);
    check_splits(c, &w, X, ldx, Y, ldy, n);
    check_tokens(c, &w, X, ldx, Y, ldy, n);
    free(X), free(Y);
    kc_free_weight(&w);
    return worst;
}

/* Blocks of zeros, of tiny (subnormal) values, and a NaN or an infinity in one token: zeros and
 * tiny values stay within the bound, a non-finite value makes every output of its token NaN and
 * leaves the other tokens as they were. */
static void check_special(const i8_case *c) {
    const int64_t rows = 19, cols = 96, n = 5, ldx = cols, ldy = rows;
    qhx_weight w = kc_make_weight(c->fmt, rows, cols);
    float *X = make_x(n, cols, ldx), *Y = kc_nan((size_t)(n * ldy)), *Z = kc_nan((size_t)(n * ldy));
    for (int i = 0; i < 32; i++) X[0 * ldx + 32 + i] = 0.0f;              /* token 0, block 1: zeros */
    for (int i = 0; i < 32; i++) X[1 * ldx + i] = 1e-40f * kc_unif();    /* token 1, block 0: subnormal */
    for (int i = 0; i < cols; i++) X[4 * ldx + i] = 0.0f;                 /* token 4: all zeros */
    c->mm(&w, X, ldx, Y, ldy, n, 0, rows);
    CHECK(kc_all_finite(Y, n * ldy));
    check_vs_ref(c, &w, X, ldx, Y, ldy, n);
    int zero = 1;
    for (int64_t r = 0; r < rows; r++) zero &= Y[4 * ldy + r] == 0.0f;
    CHECK(zero);
    for (int bad = 0; bad < 2; bad++) {
        float keep = X[2 * ldx + 70];
        X[2 * ldx + 70] = bad ? INFINITY : NAN;
        c->mm(&w, X, ldx, Z, ldy, n, 0, rows);
        CHECK(kc_all_nan(Z + 2 * ldy, rows));
        CHECK(memcmp(Y, Z, (size_t)(2 * ldy) * sizeof(float)) == 0);
        CHECK(memcmp(Y + 3 * ldy, Z + 3 * ldy, (size_t)(2 * ldy) * sizeof(float)) == 0);
        X[2 * ldx + 70] = keep;
    }
    free(X), free(Y), free(Z);
    kc_free_weight(&w);
}

/* Shapes the kernel hands to the f32 GEMM (cols not a multiple of 32, Q4 group 64): the f32
 * tolerance of kernels_check.h, and still independent of the row split. */
static void check_fallback(const i8_case *c) {
    const int64_t rows = 21, n = 9;
    int64_t cols = c->fmt == QHX_W_Q8 ? 40 : 128;
    kc_q4_group = 64;
    qhx_weight w = kc_make_weight(c->fmt, rows, cols);
    kc_q4_group = QHX_Q4_GROUP;
    float *X = make_x(n, cols - cols % 32, cols), *Y = kc_nan((size_t)(n * rows)), *Yr = kc_nan((size_t)(n * rows));
    for (int64_t t = 0; t < n; t++)
        for (int64_t k = cols - cols % 32; k < cols; k++) X[t * cols + k] = kc_unif();
    c->mm(&w, X, cols, Y, rows, n, 0, rows);
    (c->fmt == QHX_W_Q8 ? qhx_k_matmul_q8_ref : qhx_k_matmul_q4_ref)(&w, X, cols, Yr, rows, n, 0, rows);
    int bad = 0;
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = 0; r < rows; r++)
            bad += !(fabs((double)Y[t * rows + r] - Yr[t * rows + r]) <= KC_REL_TOL * kc_mag(&w, X + t * cols, r));
    CHECK_EQ(bad, 0);
    check_splits(c, &w, X, cols, Y, rows, n);
    free(X), free(Y), free(Yr);
    kc_free_weight(&w);
}

/* The build of the int8 kernels install_x86.c picks for a table of `isa` on this CPU: AVX-512
 * VNNI for prefill on AVX-512 tables, else AVX-VNNI, else AVX2; Q4 decode the EVEX build on
 * AVX-512 tables with VNNI, else AVX-VNNI, else AVX2. */
static qhx_matmul_fn want_prefill(const qhx_cpu_info *cpu, qhx_isa isa, qhx_wfmt f) {
    int q4 = f == QHX_W_Q4;
    if (isa == QHX_ISA_AVX512 && (cpu->features & QHX_CPU_AVX512_VNNI))
        return q4 ? qhx_k_matmul_q4_i8gemm_avx512 : qhx_k_matmul_q8_i8gemm_avx512;
    if (cpu->features & QHX_CPU_AVX_VNNI) return q4 ? qhx_k_matmul_q4_i8gemm_avxvnni : qhx_k_matmul_q8_i8gemm_avxvnni;
    return q4 ? qhx_k_matmul_q4_i8gemm_avx2 : qhx_k_matmul_q8_i8gemm_avx2;
}
static qhx_matvec_fn want_decode(const qhx_cpu_info *cpu, qhx_isa isa) {
    if (isa == QHX_ISA_AVX512 && (cpu->features & QHX_CPU_AVX512_VNNI)) return qhx_k_matvec_q4_i8x_evex;
    return cpu->features & QHX_CPU_AVX_VNNI ? qhx_k_matvec_q4_i8x_avxvnni : qhx_k_matvec_q4_i8x_avx2;
}

static void check_install(const qhx_cpu_info *cpu) {
    qhx_kernels k;
    qhx_kern_select(QHX_ISA_AVX2, &k);
    qhx_matmul_fn q8 = k.matmul[QHX_W_Q8], q4 = k.matmul[QHX_W_Q4];
    const unsigned both = 1u << QHX_W_Q8 | 1u << QHX_W_Q4;
    qhx_kern_install_x86_int8(&k, both, 0, QHX_ISA_REF, cpu); /* REF: nothing */
    CHECK(k.matmul[QHX_W_Q8] == q8 && k.matmul[QHX_W_Q4] == q4);
    qhx_cpu_info none = *cpu;
    none.features = 0;
    qhx_kern_install_x86_int8(&k, both, 0, QHX_ISA_BEST, &none); /* no AVX2: nothing */
    CHECK(k.matmul[QHX_W_Q8] == q8 && k.matmul[QHX_W_Q4] == q4);
    qhx_kern_use_int8(QHX_ISA_AVX2, 1u << QHX_W_Q4, 0, &k); /* Q4 only */
    CHECK(k.matmul[QHX_W_Q8] == q8 && k.matmul[QHX_W_Q4] == want_prefill(cpu, QHX_ISA_AVX2, QHX_W_Q4));
    qhx_kern_use_int8(QHX_ISA_AVX2, both, 0, &k);
    CHECK(k.matmul[QHX_W_Q8] == want_prefill(cpu, QHX_ISA_AVX2, QHX_W_Q8));
    CHECK(k.matmul[QHX_W_Q4] == want_prefill(cpu, QHX_ISA_AVX2, QHX_W_Q4));
    CHECK(k.matvec[QHX_W_Q8] == qhx_k_matvec_q8_x16_avx2); /* decode untouched */
    /* a CPU with AVX2 only gets the AVX2 builds, one with AVX-VNNI the VNNI ones */
    qhx_cpu_info plain = *cpu, vnni = *cpu;
    plain.features &= ~(QHX_CPU_AVX_VNNI | QHX_CPU_AVX512_VNNI);
    vnni.features |= QHX_CPU_AVX_VNNI;
    qhx_kern_select(QHX_ISA_AVX2, &k);
    qhx_kern_install_x86_int8(&k, both, 1u << QHX_W_Q4, QHX_ISA_AVX2, &plain);
    CHECK(k.matmul[QHX_W_Q8] == qhx_k_matmul_q8_i8gemm_avx2 && k.matvec[QHX_W_Q4] == qhx_k_matvec_q4_i8x_avx2);
    qhx_kern_install_x86_int8(&k, both, 1u << QHX_W_Q4, QHX_ISA_AVX2, &vnni);
    CHECK(k.matmul[QHX_W_Q4] == qhx_k_matmul_q4_i8gemm_avxvnni && k.matvec[QHX_W_Q4] == qhx_k_matvec_q4_i8x_avxvnni);
    /* an AVX-512 table gets the AVX-512 VNNI GEMM where the CPU has VNNI, and keeps its own
     * exact kernels for the formats not asked for */
    if ((cpu->features & QHX_CPU_GROUP_AVX512) == QHX_CPU_GROUP_AVX512) {
        qhx_kern_select(QHX_ISA_AVX512, &k);
        CHECK(k.isa == QHX_ISA_AVX512);
        qhx_kern_use_int8(QHX_ISA_AVX512, 1u << QHX_W_Q4, 1u << QHX_W_Q4, &k);
        CHECK(k.matmul[QHX_W_Q4] == want_prefill(cpu, QHX_ISA_AVX512, QHX_W_Q4));
        CHECK(k.matvec[QHX_W_Q4] == want_decode(cpu, QHX_ISA_AVX512));
        CHECK(k.matmul[QHX_W_Q8] == qhx_k_matmul_q8_avx512 && k.matvec[QHX_W_Q8] == qhx_k_matvec_q8_avx512);
    }
    qhx_kernels r;
    qhx_kern_select(QHX_ISA_REF, &r);
    qhx_kern_use_int8(QHX_ISA_REF, both, 0, &r);
    CHECK(r.matmul[QHX_W_Q8] == qhx_k_matmul_q8_ref);
}

/* Through the public parameters: an out-of-range prefill_math is refused, INT8 installs both
 * kernels in the model's table, the default only the Q4 one, F32 neither; then decode_math. */
static void check_model_params(void) {
    const char *dir = QHX_DATA_DIR "/fixtures/parity/qwen35-tiny-f32";
    qhx_model_params p = qhx_model_default_params();
    CHECK(p.prefill_math == QHX_PREFILL_MATH_DEFAULT);
    qhx_model *m = NULL;
    qhx_error err = {0};
    p.prefill_math = (qhx_prefill_math)7;
    CHECK(qhx_model_open(dir, &p, &m, &err) == QHX_E_ARG && m == NULL);
    p.prefill_math = QHX_PREFILL_MATH_INT8;
    if (qhx_model_open(dir, &p, &m, &err) != QHX_OK) {
        fprintf(stderr, "model params: %s (fixture missing?)\n", err.msg);
        return;
    }
    qhx_cpu_info cpu;
    qhx_cpu_detect(&cpu);
    qhx_isa isa = KERN(m)->isa;
    int avx2 = isa == QHX_ISA_AVX2 || isa == QHX_ISA_AVX512; /* a table the int8 kernels go into */
    if (avx2) CHECK(KERN(m)->matmul[QHX_W_Q8] == want_prefill(&cpu, isa, QHX_W_Q8));
    if (avx2) CHECK(KERN(m)->matmul[QHX_W_Q4] == want_prefill(&cpu, isa, QHX_W_Q4));
    qhx_model_free(m);
    m = NULL;
    p.prefill_math = QHX_PREFILL_MATH_DEFAULT;
    CHECK(qhx_model_open(dir, &p, &m, &err) == QHX_OK);
    if (m) CHECK(KERN(m)->matmul[QHX_W_Q8] != want_prefill(&cpu, isa, QHX_W_Q8));
    if (m && avx2) CHECK(KERN(m)->matmul[QHX_W_Q4] == want_prefill(&cpu, isa, QHX_W_Q4));
    qhx_model_free(m);
    m = NULL;
    p.prefill_math = QHX_PREFILL_MATH_F32;
    CHECK(qhx_model_open(dir, &p, &m, &err) == QHX_OK);
    if (m) CHECK(KERN(m)->matmul[QHX_W_Q8] != want_prefill(&cpu, isa, QHX_W_Q8));
    if (m) CHECK(KERN(m)->matmul[QHX_W_Q4] != want_prefill(&cpu, isa, QHX_W_Q4));
    /* decode_math: the default and INT8 put the int8-activation Q4 matvec in, F32 keeps the
     * int16 one; Q8 decode is never changed */
    if (m && avx2) CHECK(KERN(m)->matvec[QHX_W_Q4] == want_decode(&cpu, isa));
    if (m && isa == QHX_ISA_AVX2) CHECK(KERN(m)->matvec[QHX_W_Q8] == qhx_k_matvec_q8_x16_avx2);
    qhx_model_free(m);
    m = NULL;
    p.decode_math = (qhx_prefill_math)3;
    CHECK(qhx_model_open(dir, &p, &m, &err) == QHX_E_ARG && m == NULL);
    p.decode_math = QHX_PREFILL_MATH_F32;
    CHECK(qhx_model_open(dir, &p, &m, &err) == QHX_OK);
    if (m && isa == QHX_ISA_AVX2) CHECK(KERN(m)->matvec[QHX_W_Q4] == qhx_k_matvec_q4_x16_avx2);
    if (m && isa == QHX_ISA_AVX512) CHECK(KERN(m)->matvec[QHX_W_Q4] == qhx_k_matvec_q4_avx512);
    qhx_model_free(m);
    m = NULL;
    p.decode_math = QHX_PREFILL_MATH_INT8;
    p.max_isa = QHX_ISA_REF; /* the reference table stays the reference */
    CHECK(qhx_model_open(dir, &p, &m, &err) == QHX_OK);
    if (m) CHECK(KERN(m)->matvec[QHX_W_Q4] == qhx_k_matvec_q4_ref);
    qhx_model_free(m);
}

int main(void) {
    (void)kc_run_all; /* kernels_check.h's suite pairs a matvec with each matmul; here there is none */
    qhx_cpu_info cpu;
    qhx_cpu_detect(&cpu);
    if ((cpu.features & QHX_CPU_GROUP_AVX2) != QHX_CPU_GROUP_AVX2) {
        fprintf(stderr, "test_kernels_i8gemm: skipped, the CPU or OS lacks AVX2/FMA/F16C\n");
        return 77;
    }
    const unsigned vnni512 = QHX_CPU_GROUP_AVX512 | QHX_CPU_AVX512_VNNI;
    const unsigned avxvnni = QHX_CPU_GROUP_AVX2 | QHX_CPU_AVX_VNNI;
    const i8_case cases[] = {{QHX_W_Q8, qhx_k_matmul_q8_i8gemm_avx2, "q8_i8gemm_avx2", QHX_CPU_GROUP_AVX2},
                             {QHX_W_Q4, qhx_k_matmul_q4_i8gemm_avx2, "q4_i8gemm_avx2", QHX_CPU_GROUP_AVX2},
                             {QHX_W_Q8, qhx_k_matmul_q8_i8gemm_avxvnni, "q8_i8gemm_avxvnni", avxvnni},
                             {QHX_W_Q4, qhx_k_matmul_q4_i8gemm_avxvnni, "q4_i8gemm_avxvnni", avxvnni},
                             {QHX_W_Q8, qhx_k_matmul_q8_i8gemm_avx512, "q8_i8gemm_avx512", vnni512},
                             {QHX_W_Q4, qhx_k_matmul_q4_i8gemm_avx512, "q4_i8gemm_avx512", vnni512}};
    /* rows: partial panels of 16 (and of 32: 50 = 32 + 18); cols: partial and several column blocks of 256; n: partial
     * register tiles of 4 and (131) two token chunks of 128 */
    static const int64_t rows[] = {1, 7, 17, 33, 50};
    static const int64_t cols[] = {32, 96, 288, 544};
    static const int64_t ns[] = {1, 3, 6, 13};
    for (int ci = 0; ci < (int)(sizeof cases / sizeof cases[0]); ci++) {
        const i8_case *c = &cases[ci];
        if ((cpu.features & c->needs) != c->needs) {
            fprintf(stderr, "%-18s skipped: the CPU or OS lacks it\n", c->name);
            continue;
        }
        double worst = 0.0;
        int before = t_failures;
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 4; k++) worst = fmax(worst, check_shape(c, rows[i], cols[j], ns[k]));
        worst = fmax(worst, check_shape(c, 45, 2048, 131));
        worst = fmax(worst, check_shape(c, 130, 256, 7));
        check_special(c);
        check_fallback(c);
        fprintf(stderr, "%-18s %s  worst error %.3g of the allowed bound\n", c->name,
                t_failures == before ? "ok  " : "FAIL", worst);
    }
    check_install(&cpu);
    check_model_params();
    return t_done("test_kernels_i8gemm");
}
#else
int main(void) {
    fprintf(stderr, "test_kernels_i8gemm: no x86 variants on this architecture\n");
    return 77;
}
#endif
