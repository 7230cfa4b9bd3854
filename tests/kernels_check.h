/* kernels_check.h: the checks every matvec/matmul variant goes through (used by
 * test_kernels_simd.c and test_kernels_avx512emu.c). For each weight format and shape:
 *   - matvec vs a scalar reference, outputs pre-filled with NaN, within KC_REL_TOL (worst printed);
 *   - row-range splits [0,a) + [a,rows) and a run on KC_THREADS threads: bitwise equal to one call
 *     [0,rows), rows outside the range untouched;
 *   - matmul with odd token counts and padded strides: Y[t] bitwise equal to matvec(X[t]), the
 *     padding between rows of Y untouched; matmul row splits bitwise equal too. */
#ifndef QHX_TEST_KERNELS_CHECK_H
#define QHX_TEST_KERNELS_CHECK_H

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fp16.h"
#include "kernels/kernels.h"
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

static size_t kc_esize(qhx_wfmt f) { return f == QHX_W_F32 ? 4 : f == QHX_W_Q8 ? 1 : 2; }

/* A random weight; data is allocated at its exact size so ASan flags any read past a row end. */
static qhx_weight kc_make_weight(qhx_wfmt fmt, int64_t rows, int64_t cols) {
    qhx_weight w = {.fmt = fmt, .rows = rows, .cols = cols};
    size_t n = (size_t)(rows * cols);
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

static void kc_free_weight(qhx_weight *w) {
    free((void *)w->data);
    free((void *)w->scales);
}

static float kc_wval(const qhx_weight *w, int64_t r, int64_t c) {
    size_t i = (size_t)(r * w->cols + c);
    switch (w->fmt) {
    case QHX_W_F32: return ((const float *)w->data)[i];
    case QHX_W_F16: return qhx_f16_to_f32(((const uint16_t *)w->data)[i]);
    case QHX_W_BF16: return qhx_bf16_to_f32(((const uint16_t *)w->data)[i]);
    case QHX_W_Q8: return (float)((const int8_t *)w->data)[i];
    default: return NAN;
    }
}

/* Scalar reference: sequential float sum (the order a plain C loop uses); *mag gets
 * sum |w x| in double, the scale the tolerance is relative to. */
static float kc_ref_row(const qhx_weight *w, const float *x, int64_t r, double *mag) {
    float acc = 0.0f;
    double m = 0.0;
    float s = w->fmt == QHX_W_Q8 ? w->scales[r] : 1.0f;
    for (int64_t c = 0; c < w->cols; c++) {
        float v = kc_wval(w, r, c);
        acc += v * x[c];
        m += fabs((double)v * s * x[c]);
    }
    *mag = m;
    return acc * s;
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

/* Worst relative error seen over all shapes of one variant. */
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
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        double mag;
        float want = kc_ref_row(&w, x, r, &mag);
        double err = fabs((double)y[r] - want), rel = err / (mag > 0 ? mag : 1e-30);
        if (!(rel <= KC_REL_TOL)) bad++;
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
    free(y), free(x);
    kc_free_weight(&w);
}

/* Every rows x cols pair of sizes; ns are the matmul token counts tried on each. */
static void kc_check_variant(const kc_variant *v, const int64_t *sizes, int ns_sizes, const int *ns,
                             int nn) {
    kc_worst worst = {0};
    int before = t_failures;
    for (int i = 0; i < ns_sizes; i++)
        for (int j = 0; j < ns_sizes; j++) kc_check_shape(v, sizes[i], sizes[j], ns, nn, &worst);
    fprintf(stderr, "%-22s %s  worst rel err %.3g (tol %g) at %lldx%lld row %lld: %.9g vs ref %.9g\n",
            v->name, t_failures == before ? "ok  " : "FAIL", worst.rel, KC_REL_TOL,
            (long long)worst.rows, (long long)worst.cols, (long long)worst.row, worst.got, worst.want);
}

#endif
