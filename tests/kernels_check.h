/* kernels_check.h: the checks every matvec/matmul variant goes through (used by
 * test_kernels_simd.c and test_kernels_avx512emu.c). For each weight format and shape:
 *   - matvec vs the _ref kernel of its format, outputs pre-filled with NaN, within KC_REL_TOL
 *     (worst element printed);
 *   - row-range splits [0,a) + [a,rows) and a run on KC_THREADS threads: bitwise equal to one call
 *     [0,rows), rows outside the range untouched;
 *   - matmul with odd token counts and padded strides: Y[t] bitwise equal to matvec(X[t]), the
 *     padding between rows of Y untouched; matmul row splits bitwise equal too. */
#ifndef QHX_TEST_KERNELS_CHECK_H
#define QHX_TEST_KERNELS_CHECK_H

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp16.h"
#include "kernels/gguf_quant.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/ref.h"
#include "kernels/vision.h"
#include "t.h"

/* Tolerance, relative to sum_c |W[r,c] * x[c]| (the scale of the rounding error of any
 * summation order). Float32 sums of n terms are off by at most ~n*2^-24 of that in the worst
 * case and by ~sqrt(n)*2^-24 (< 4e-6 at n = 2048) for random signs; 1e-5 leaves margin for the
 * reference's sequential order, yet a dropped or doubled term of an average size (1/n of the
 * sum, 5e-4 at n = 2048) is 50x over it. */
#define KC_REL_TOL 1e-5
#define KC_THREADS 3

typedef struct kc_variant {
    const char *name;
    qhx_wfmt fmt;
    qhx_matvec_fn matvec;
    qhx_matmul_fn matmul;
    int i8x; /* quantizes x to int8 per block of 32: allowed the extra error kc_i8x_bound() */
} kc_variant;

// ---- data -------------------------------------------------------------------------------------

static uint64_t kc_rng = 0x9e3779b97f4a7c15ull;
static uint32_t kc_next(void) {
    kc_rng ^= kc_rng << 13;
    kc_rng ^= kc_rng >> 7;
    kc_rng ^= kc_rng << 17;
    return (uint32_t)(kc_rng >> 16);
}
static float kc_unif(void) { return (float)((double)kc_next() / 4294967296.0 * 2.0 - 1.0); }

/* Bytes of data per element (Q4: per pair of elements). */
static size_t kc_esize(qhx_wfmt f) { return f == QHX_W_F32 ? 4 : f == QHX_W_F16 || f == QHX_W_BF16 ? 2 : 1; }

/* Q4 group size of the weights kc_make_weight makes (tests may change it between shapes). */
static int64_t kc_q4_group = QHX_Q4_GROUP;

/* A random weight; data is allocated at its exact size so ASan flags any read past a row end. */
static qhx_weight kc_make_weight(qhx_wfmt fmt, int64_t rows, int64_t cols) {
    qhx_weight w = {.fmt = fmt, .rows = rows, .cols = cols};
    size_t n = (size_t)(rows * cols);
    if (fmt == QHX_W_Q4) {
        uint8_t *q = malloc(n / 2);
        for (size_t i = 0; i < n / 2; i++) q[i] = (uint8_t)kc_next();
        size_t ns = n / (size_t)kc_q4_group;
        uint16_t *d = malloc(ns * sizeof(uint16_t));
        for (size_t i = 0; i < ns; i++) d[i] = qhx_f32_to_f16(0.02f * kc_unif()); /* either sign, as forge makes */
        w.data = q, w.gscales = d, w.group = kc_q4_group;
        return w;
    }
    if (fmt == QHX_W_Q6) { /* the Q4 group size too; random code planes */
        uint8_t *lo = malloc(n / 2), *hi = malloc(n / 4);
        for (size_t i = 0; i < n / 2; i++) lo[i] = (uint8_t)kc_next();
        for (size_t i = 0; i < n / 4; i++) hi[i] = (uint8_t)kc_next();
        size_t ns = n / (size_t)kc_q4_group;
        uint16_t *d = malloc(ns * sizeof(uint16_t));
        for (size_t i = 0; i < ns; i++) d[i] = qhx_f32_to_f16(0.005f * kc_unif());
        w.data = lo, w.high = hi, w.gscales = d, w.group = kc_q4_group;
        return w;
    }
    if (fmt == QHX_W_GGML) { /* Q8_0 blocks (needs cols % 32 == 0): an f16 scale, 32 int8 */
        const int64_t nb = cols / 32;
        uint8_t *q = malloc((size_t)(rows * nb * 34));
        for (int64_t b = 0; b < rows * nb; b++) {
            uint16_t d = qhx_f32_to_f16(0.001f * kc_unif());
            memcpy(q + 34 * b, &d, 2);
            for (int i = 0; i < 32; i++) q[34 * b + 2 + i] = (uint8_t)(kc_next() % 255 - 127);
        }
        w.data = q, w.gtype = QHX_GGML_Q8_0, w.row_bytes = nb * 34;
        return w;
    }
    if (fmt == QHX_W_Q4A) { /* quantized random rows (needs cols % 32 == 0) */
        const int64_t ns = qhx_q4a_row_supers(cols), nsub = qhx_q4a_row_sub_bytes(cols);
        uint8_t *q = malloc(n / 2), *sub = malloc((size_t)(rows * nsub));
        uint16_t *sup = malloc((size_t)(rows * ns) * sizeof(uint16_t));
        float *row = malloc((size_t)cols * sizeof(float));
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t c = 0; c < cols; c++) row[c] = 0.02f * kc_unif();
            if (qhx_quant_q4a_row(row, NULL, cols, q + r * cols / 2, sup + r * ns, sub + r * nsub) != 0) abort();
        }
        free(row);
        w.data = q, w.gscales = sup, w.sub = sub, w.group = QHX_Q4A_GROUP;
        return w;
    }
    void *d = malloc(n * kc_esize(fmt));
    for (size_t i = 0; i < n; i++) {
        float v = kc_unif();
        switch (fmt) {
        case QHX_W_F32: ((float *)d)[i] = v; break;
        case QHX_W_F16: ((uint16_t *)d)[i] = qhx_f32_to_f16(v); break;
        case QHX_W_BF16: ((uint16_t *)d)[i] = qhx_f32_to_bf16(v); break;
        case QHX_W_Q8: ((int8_t *)d)[i] = (int8_t)(kc_next() % 255 - 127); break;
        default: break;
        }
    }
    w.data = d;
    if (fmt == QHX_W_Q8) {
        float *s = malloc((size_t)rows * sizeof(float));
        for (int64_t r = 0; r < rows; r++) s[r] = 0.001f + 0.02f * (kc_unif() + 1.0f);
        w.scales = s;
    }
    return w;
}

/* The row kc_q4a_val keeps: the weight's data it came from (NULL: none). */
static const void *kc_q4a_key;

static void kc_free_weight(qhx_weight *w) {
    if (w->data == kc_q4a_key) kc_q4a_key = NULL; /* a new weight may get the same address */
    free((void *)w->data);
    free((void *)w->scales);
    free((void *)w->gscales);
    free((void *)w->high);
    free((void *)w->sub);
}

/* Row r of a Q4A weight, dequantized; the last row is kept, as callers walk a row's columns. It is
 * known by the weight's data pointer (not the qhx_weight's address: callers reuse one on the
 * stack for weight after weight), forgotten when that weight is freed. */
static float kc_q4a_val(const qhx_weight *w, int64_t r, int64_t c) {
    static int64_t key_r = -1, key_cols;
    static float *row;
    if (kc_q4a_key != w->data || key_r != r || key_cols != w->cols || !row) {
        free(row);
        row = malloc((size_t)w->cols * sizeof(float));
        qhx_dequant_q4a_row((const uint8_t *)w->data + r * w->cols / 2, w->gscales + r * qhx_q4a_row_supers(w->cols),
                            w->sub + r * qhx_q4a_row_sub_bytes(w->cols), w->cols, row);
        kc_q4a_key = w->data, key_r = r, key_cols = w->cols;
    }
    return row[c];
}

/* Element (r, c) of a ggml weight: its block dequantized. */
static float kc_ggml_val(const qhx_weight *w, int64_t r, int64_t c) {
    const int64_t B = qhx_ggml_type_block(w->gtype), bb = qhx_ggml_type_block_bytes(w->gtype);
    float blk[QHX_GGML_QK_K];
    qhx_gguf_dequant_row(w->gtype, (const uint8_t *)w->data + r * w->row_bytes + (c / B) * bb, B, blk);
    return blk[c % B];
}

static float kc_wval(const qhx_weight *w, int64_t r, int64_t c) {
    size_t i = (size_t)(r * w->cols + c);
    switch (w->fmt) {
    case QHX_W_F32: return ((const float *)w->data)[i];
    case QHX_W_F16: return qhx_f16_to_f32(((const uint16_t *)w->data)[i]);
    case QHX_W_BF16: return qhx_bf16_to_f32(((const uint16_t *)w->data)[i]);
    case QHX_W_Q8: return (float)((const int8_t *)w->data)[i] * w->scales[r];
    case QHX_W_Q4: {
        int64_t g = c / w->group, j = c % w->group, half = w->group / 2;
        uint8_t b = ((const uint8_t *)w->data)[(r * w->cols + g * w->group) / 2 + j % half];
        int nib = j < half ? b & 15 : b >> 4;
        return (float)(nib - 8) * qhx_f16_to_f32(w->gscales[r * (w->cols / w->group) + g]);
    }
    case QHX_W_Q6: { /* low 4 bits as Q4's nibble; high 2 bits: byte j % (G/4), bits 2 (j / (G/4)) */
        int64_t g = c / w->group, j = c % w->group, half = w->group / 2, quarter = w->group / 4;
        uint8_t b = ((const uint8_t *)w->data)[(r * w->cols + g * w->group) / 2 + j % half];
        int low = j < half ? b & 15 : b >> 4;
        int high = (w->high[(r * w->cols + g * w->group) / 4 + j % quarter] >> (2 * (j / quarter))) & 3;
        return (float)((low | high << 4) - 32) * qhx_f16_to_f32(w->gscales[r * (w->cols / w->group) + g]);
    }
    case QHX_W_Q4A: return kc_q4a_val(w, r, c);
    case QHX_W_GGML: return kc_ggml_val(w, r, c);
    default: return NAN;
    }
}

static qhx_matvec_fn kc_ref(qhx_wfmt f) {
    switch (f) {
    case QHX_W_F32: return qhx_k_matvec_f32_ref;
    case QHX_W_F16: return qhx_k_matvec_f16_ref;
    case QHX_W_BF16: return qhx_k_matvec_bf16_ref;
    case QHX_W_Q8: return qhx_k_matvec_q8_ref;
    case QHX_W_Q6: return qhx_k_matvec_q6_ref;
    case QHX_W_GGML: return qhx_k_matvec_ggml_ref;
    case QHX_W_Q4A: return qhx_k_matvec_q4a_ref;
    default: return qhx_k_matvec_q4_ref;
    }
}

/* sum_c |W[r, c] x[c]| in double: the scale the tolerance is relative to. */
static double kc_mag(const qhx_weight *w, const float *x, int64_t r) {
    double m = 0.0;
    for (int64_t c = 0; c < w->cols; c++) m += fabs((double)kc_wval(w, r, c) * x[c]);
    return m;
}

/* What rounding x to int8 per block of 32 (kernels/x86/quant_x_avx2.h: step max|x_b| / 127) may
 * add to row r of a product with any weight format: sum over blocks b of sum_{c in b} |W'[r, c]|
 * times half a step. Half a step is the exact-arithmetic rounding error; the f32 product
 * x * (1 / step) moves the rounding point by at most 127 * 2^-22 < 2^-15 of a step, so the half
 * step is taken as 0.5 + 2^-15. */
static double kc_i8x_bound(const qhx_weight *w, const float *x, int64_t r) {
    double bound = 0.0;
    for (int64_t b = 0; b < w->cols / 32; b++) {
        double amax = 0.0, wsum = 0.0;
        for (int i = 0; i < 32; i++) {
            amax = fmax(amax, fabs((double)x[32 * b + i]));
            wsum += fabs((double)kc_wval(w, r, 32 * b + i));
        }
        bound += wsum * amax / 127.0 * (0.5 + 0x1p-15);
    }
    return bound;
}

static float *kc_nan(size_t n) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}

// ---- threads ----------------------------------------------------------------------------------

typedef struct kc_job {
    const kc_variant *v;
    const qhx_weight *w;
    const float *x;
    float *y;
    int64_t r0, r1;
} kc_job;

static void *kc_job_run(void *arg) {
    kc_job *j = arg;
    j->v->matvec(j->w, j->x, j->y, j->r0, j->r1);
    return NULL;
}

static void kc_matvec_threads(const kc_variant *v, const qhx_weight *w, const float *x, float *y,
                              int nt) {
    pthread_t th[KC_THREADS];
    kc_job jobs[KC_THREADS];
    for (int i = 0; i < nt; i++) {
        jobs[i] = (kc_job){v, w, x, y, w->rows * i / nt, w->rows * (i + 1) / nt};
        if (pthread_create(&th[i], NULL, kc_job_run, &jobs[i]) != 0) kc_job_run(&jobs[i]), th[i] = 0;
    }
    for (int i = 0; i < nt; i++)
        if (th[i]) pthread_join(th[i], NULL);
}

// ---- the checks -------------------------------------------------------------------------------

static int kc_all_finite(const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(y[i])) return 0;
    return 1;
}
static int kc_all_nan(const float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isnan(y[i])) return 0;
    return 1;
}

/* Worst error seen over all shapes of one variant, as a fraction of what is allowed. */
typedef struct kc_worst {
    double rel;
    int64_t rows, cols, row;
    float got, want;
} kc_worst;

static void kc_check_shape(const kc_variant *v, int64_t rows, int64_t cols, const int *ns, int nn,
                           kc_worst *worst) {
    qhx_weight w = kc_make_weight(v->fmt, rows, cols);
    float *x = malloc((size_t)cols * sizeof(float));
    for (int64_t c = 0; c < cols; c++) x[c] = kc_unif();

    /* one call over all rows vs the reference */
    float *y = kc_nan((size_t)rows);
    v->matvec(&w, x, y, 0, rows);
    CHECK(kc_all_finite(y, rows));
    float *yref = kc_nan((size_t)rows);
    kc_ref(v->fmt)(&w, x, yref, 0, rows);
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        double mag = kc_mag(&w, x, r);
        float want = yref[r];
        double err = fabs((double)y[r] - want), allowed = KC_REL_TOL * mag;
        if (v->i8x && w.group == 32) allowed += kc_i8x_bound(&w, x, r);
        double rel = err / (allowed > 0 ? allowed : 1e-30); /* <= 1 passes */
        if (!(rel <= 1.0)) bad++;
        if (!(rel <= worst->rel) || isnan(rel))
            *worst = (kc_worst){isnan(rel) ? INFINITY : rel, rows, cols, r, y[r], want};
    }
    if (bad)
        fprintf(stderr, "%s: %lldx%lld: %d rows beyond tolerance\n", v->name, (long long)rows,
                (long long)cols, bad);
    CHECK_EQ(bad, 0);

    /* row splits: bitwise equal, rows outside the range untouched */
    int64_t cuts[] = {1, rows / 2, rows - 1, 5, 8, 9};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        int64_t a = cuts[i];
        if (a <= 0 || a >= rows) continue;
        float *z = kc_nan((size_t)rows);
        v->matvec(&w, x, z, 0, a);
        CHECK(kc_all_nan(z + a, rows - a));
        v->matvec(&w, x, z, a, rows);
        CHECK(memcmp(y, z, (size_t)rows * sizeof(float)) == 0);
        free(z);
    }

    /* threads */
    float *zt = kc_nan((size_t)rows);
    kc_matvec_threads(v, &w, x, zt, KC_THREADS);
    CHECK(memcmp(y, zt, (size_t)rows * sizeof(float)) == 0);
    free(zt);

    /* matmul: Y[t] == matvec(X[t]) bitwise, padded strides, padding untouched */
    for (int in = 0; in < nn; in++) {
        int64_t n = ns[in], ldx = cols + 3, ldy = rows + 5;
        float *X = malloc((size_t)(n * ldx) * sizeof(float));
        for (int64_t i = 0; i < n * ldx; i++) X[i] = kc_unif();
        float *Y = kc_nan((size_t)(n * ldy)), *Yr = kc_nan((size_t)(n * ldy));
        float *ym = kc_nan((size_t)rows);
        v->matmul(&w, X, ldx, Y, ldy, n, 0, rows);
        int64_t a = rows / 3 + 1 < rows ? rows / 3 + 1 : rows;
        v->matmul(&w, X, ldx, Yr, ldy, n, 0, a);
        v->matmul(&w, X, ldx, Yr, ldy, n, a, rows);
        int same = 1, pad_nan = 1, split_same = 1;
        for (int64_t t = 0; t < n; t++) {
            v->matvec(&w, X + t * ldx, ym, 0, rows);
            if (memcmp(ym, Y + t * ldy, (size_t)rows * sizeof(float)) != 0) same = 0;
            if (memcmp(Yr + t * ldy, Y + t * ldy, (size_t)rows * sizeof(float)) != 0) split_same = 0;
            if (!kc_all_nan(Y + t * ldy + rows, ldy - rows)) pad_nan = 0;
        }
        if (!same)
            fprintf(stderr, "%s: matmul %lldx%lld n=%lld differs from matvec\n", v->name,
                    (long long)rows, (long long)cols, (long long)n);
        CHECK(same);
        CHECK(split_same);
        CHECK(pad_nan);
        free(X), free(Y), free(Yr), free(ym);
    }
    free(y), free(yref), free(x);
    kc_free_weight(&w);
}

/* Every rows x cols pair of sizes; ns are the matmul token counts tried on each. */
static void kc_check_variant(const kc_variant *v, const int64_t *rows, int nrows, const int64_t *cols,
                             int ncols, const int *ns, int nn) {
    kc_worst worst = {.rel = -1};
    int before = t_failures;
    for (int i = 0; i < nrows; i++)
        for (int j = 0; j < ncols; j++) kc_check_shape(v, rows[i], cols[j], ns, nn, &worst);
    fprintf(stderr, "%-22s %s  worst error %.3g of allowed (%s) at %lldx%lld row %lld: %.9g vs ref %.9g\n",
            v->name, t_failures == before ? "ok  " : "FAIL", worst.rel,
            v->i8x ? "1e-5 sum|w x| + int8 x bound" : "1e-5 sum|w x|",
            (long long)worst.rows, (long long)worst.cols, (long long)worst.row, worst.got, worst.want);
}

/* The whole suite for a set of variants: for F32/F16/BF16/Q8 every rows x cols pair of sizes
 * (matmul with 13 tokens) plus small shapes at token counts 1..12; Q4 (whose cols are whole
 * groups) the same rows against group multiples, and group 64, which the variants hand to the
 * reference. */
static void kc_run_all(const kc_variant *vs, int nv, const int64_t *sizes, int nsizes,
                       const int64_t *q4cols, int nq4) {
    static const int ns[] = {13};
    static const int64_t small[] = {1, 7, 33};
    static const int64_t q4small[] = {32, 96};
    static const int64_t q4g64[] = {64, 192};
    static const int ns_all[] = {1, 2, 3, 4, 5, 6, 7, 8, 11, 12};
    for (int i = 0; i < nv; i++) {
        if (vs[i].fmt == QHX_W_Q4 || vs[i].fmt == QHX_W_Q6) {
            kc_q4_group = QHX_Q4_GROUP;
            kc_check_variant(&vs[i], sizes, nsizes, q4cols, nq4, ns, 1);
            kc_check_variant(&vs[i], small, 3, q4small, 2, ns_all, 10);
            kc_q4_group = 64;
            kc_check_variant(&vs[i], small, 3, q4g64, 2, ns, 1);
            kc_q4_group = QHX_Q4_GROUP;
        } else {
            kc_check_variant(&vs[i], sizes, nsizes, sizes, nsizes, ns, 1);
            kc_check_variant(&vs[i], small, 3, small, 3, ns_all, 10);
        }
    }
}

/* |a - b| within `ulps` float32 ulps of the larger magnitude, plus `abs_tol`. */
static inline int kc_close_ulps(float a, float b, float ulps, float abs_tol) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
    float m = fmaxf(fabsf(a), fabsf(b));
    return fabsf(a - b) <= ulps * m * FLT_EPSILON + abs_tol;
}

/* SIMD activations (the op table's silu, swiglu, gelu_tanh slots) against the references: random inputs over [-30, 30] and around 0, the
 * tails past exp's clamps, NaN; every length 0..40 (the tails of the vector loops) and one long
 * run; in place and, for SwiGLU, out of place. GELU's negative tail is compared to 1e-6 |x|:
 * there the float32 reference's 1 + tanh keeps only tanh's absolute accuracy. */
static inline void kc_check_activations(void (*silu)(float *, int64_t),
                                        void (*swiglu)(const float *, const float *, float *, int64_t),
                                        void (*gelu_tanh)(float *, int64_t)) {
    enum { N = 1000 };
    static float x[N], a[N], b[N], up[N];
    for (int i = 0; i < N; i++) {
        float u = kc_unif();
        x[i] = i % 3 == 0 ? 30.0f * u : i % 3 == 1 ? 3.0f * u : 1e-3f * u;
        up[i] = kc_unif();
    }
    x[5] = 0.0f, x[6] = -0.0f, x[7] = 95.0f, x[8] = -95.0f, x[9] = NAN, x[10] = 88.5f, x[11] = -88.5f;
    for (int len = 0; len <= N; len = len < 40 ? len + 1 : len == 40 ? N : N + 1) { /* 0..40, N */
        memcpy(a, x, sizeof a), memcpy(b, x, sizeof b);
        silu(a, len), qhx_k_silu_f32_ref(b, len);
        for (int i = 0; i < len; i++) CHECK(kc_close_ulps(a[i], b[i], 8, 0));
        swiglu(x, up, a, len), qhx_k_swiglu_f32_ref(x, up, b, len);
        for (int i = 0; i < len; i++) CHECK(kc_close_ulps(a[i], b[i], 8, 0));
        memcpy(a, x, sizeof a), memcpy(b, x, sizeof b);
        gelu_tanh(a, len), qhx_k_gelu_tanh_f32_ref(b, len);
        for (int i = 0; i < len; i++) CHECK(kc_close_ulps(a[i], b[i], 8, 1e-6f * fabsf(x[i])));
        for (int i = len; i < N; i++) CHECK(a[i] == x[i] || (isnan(a[i]) && isnan(x[i]))); /* nothing past n */
    }
    memcpy(a, x, sizeof a);
    silu(a, N);
    CHECK(isnan(a[9]) && a[5] == 0.0f && a[7] == 95.0f && a[8] > -1e-30f && a[8] <= 0.0f);
}

#endif
