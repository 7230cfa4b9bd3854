/* bench_multi: one decode step's Q4 linear layer (and the Q6 tied head of q4 bundles) for nb sequences at once, at the Qwen3.5-2B
 * shapes, through the runtime's qhx_par_linears_multi with the op table qhx serve uses
 * (qhx_kern_select + the int8-activation Q4 decode kernel): once with the multi-row kernel
 * (matvec_multi, each weight row unpacked once for all rows) and once without it (the same
 * table with matvec_multi[Q4] = NULL: the single-row kernel per row over cache-sized
 * sub-blocks). Both give the same bits (test_kernels_multi); this prints their speed.
 *
 *   qhx_bench_multi [--threads N] [--reps N]
 *
 * Each rep walks enough copies of the matrix (>= 512 MiB) that the weights come from DRAM, as
 * in decode. Figures: median microseconds per layer call, and the speedup. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/pool.h"
#include "core/fp16.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "devices/cpu/par.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 20);
}

enum { MAX_COPIES = 256, MAX_NB = 8 };

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Microseconds of one layer call over the copies with table k. */
static double walk_copies(qhx_pool *pool, const qhx_kernels *k, const qhx_weight *w, int ncopies,
                          const float *const *X, float *const *Y, int nb) {
    double t0 = now_s();
    for (int c = 0; c < ncopies; c++) {
        qhx_par_lin_multi l = {&w[c], Y};
        qhx_par_linears_multi(pool, k, &l, 1, X, nb, 0);
    }
    return (now_s() - t0) / ncopies * 1e6;
}

/* Medians for both tables, their reps interleaved so that a busy neighbour slows both alike. */
static void time_both(qhx_pool *pool, const qhx_kernels *rows, const qhx_kernels *multi, const qhx_weight *w,
                      int ncopies, const float *const *X, float *const *Y, int nb, int reps, double *t_rows,
                      double *t_multi) {
    double tr[64], tm[64];
    walk_copies(pool, rows, w, ncopies, X, Y, nb); /* warm-up */
    walk_copies(pool, multi, w, ncopies, X, Y, nb);
    for (int r = 0; r < reps; r++) {
        tr[r] = walk_copies(pool, rows, w, ncopies, X, Y, nb);
        tm[r] = walk_copies(pool, multi, w, ncopies, X, Y, nb);
    }
    *t_rows = median(tr, reps);
    *t_multi = median(tm, reps);
}

static int bench_shape(qhx_pool *pool, const qhx_kernels *multi, const qhx_kernels *rows, const char *name,
                       qhx_wfmt fmt, int64_t nr, int64_t nc, int reps) {
    const size_t bytes = fmt == QHX_W_Q8    ? (size_t)(nr * nc)
                         : fmt == QHX_W_F16 ? (size_t)(nr * nc * 2)
                                            : (size_t)(nr * nc / 2) + (fmt == QHX_W_Q6 ? (size_t)(nr * nc / 4) : 0);
    const size_t ns = (size_t)(nr * nc / QHX_Q4_GROUP);
    int ncopies = (int)((512u << 20) / (bytes + 4 * ns)) + 1;
    if (ncopies > MAX_COPIES) ncopies = MAX_COPIES;
    qhx_weight *w = calloc((size_t)ncopies, sizeof *w);
    uint16_t *scales = malloc(ns * sizeof(uint16_t));
    float *rscales = malloc((size_t)nr * sizeof(float)); /* Q8: one per row */
    if (!w || !scales || !rscales) return -1;
    for (size_t i = 0; i < ns; i++) scales[i] = qhx_f32_to_f16(0.01f * (float)(1 + rnd() % 7));
    for (int64_t i = 0; i < nr; i++) rscales[i] = 1e-3f * (float)(1 + rnd() % 7);
    for (int c = 0; c < ncopies; c++) {
        uint8_t *q = malloc(bytes);
        if (!q) return -1;
        for (size_t i = 0; i < bytes; i++) q[i] = (uint8_t)rnd();
        if (fmt == QHX_W_F16) /* finite halves: random bits would hold NaNs */
            for (size_t i = 0; i < bytes / 2; i++) ((uint16_t *)q)[i] = qhx_f32_to_f16(1e-3f * (float)(rnd() % 2001) - 1.0f);
        w[c] = (qhx_weight){.fmt = fmt, .rows = nr, .cols = nc, .data = q, .gscales = scales, .group = QHX_Q4_GROUP};
        if (fmt == QHX_W_Q6) w[c].high = q + nr * nc / 2; /* the high plane after the nibbles */
        if (fmt == QHX_W_Q8) w[c].scales = rscales, w[c].gscales = NULL, w[c].group = 0;
        if (fmt == QHX_W_F16) w[c].gscales = NULL, w[c].group = 0;
    }
    float *xs[MAX_NB], *ys[MAX_NB];
    for (int b = 0; b < MAX_NB; b++) {
        xs[b] = malloc((size_t)nc * sizeof(float)), ys[b] = malloc((size_t)nr * sizeof(float));
        if (!xs[b] || !ys[b]) return -1;
        for (int64_t i = 0; i < nc; i++) xs[b][i] = (float)(rnd() % 2001) * 1e-3f - 1.0f;
    }
    static const int nbs[] = {1, 2, 4, 8};
    for (int i = 0; i < 4; i++) {
        int nb = nbs[i];
        double t_rows, t_multi;
        time_both(pool, rows, multi, w, ncopies, (const float *const *)xs, ys, nb, reps, &t_rows, &t_multi);
        printf("%-10s %5lld x %-5lld nb %d   single-row kernel %8.1f us   multi-row %8.1f us   %.2fx\n", name,
               (long long)nr, (long long)nc, nb, t_rows, t_multi, t_rows / t_multi);
        fflush(stdout);
    }
    for (int b = 0; b < MAX_NB; b++) free(xs[b]), free(ys[b]);
    for (int c = 0; c < ncopies; c++) free((void *)w[c].data);
    free(w);
    free(scales);
    free(rscales);
    return 0;
}

int main(int argc, char **argv) {
    int threads = 2, reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--w8-f16") && i == argc - 1) continue;
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps N] [--w8-f16]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    qhx_kernels multi, rows;
    qhx_kern_select(QHX_ISA_BEST, &multi);
    qhx_kern_use_int8(QHX_ISA_BEST, 0, 1u << QHX_W_Q4 | 1u << QHX_W_Q6, &multi);
    if (!multi.matvec_multi[QHX_W_Q4] || !multi.matvec_multi[QHX_W_Q6] || !multi.matvec_multi[QHX_W_Q8] ||
        !multi.matvec_multi[QHX_W_F16]) {
        fprintf(stderr, "this CPU's table has no multi-row Q4 / Q6 / Q8 / F16 kernel\n");
        return 77;
    }
    rows = multi;
    rows.matvec_multi[QHX_W_Q4] = rows.matvec_multi[QHX_W_Q6] = rows.matvec_multi[QHX_W_Q8] =
        rows.matvec_multi[QHX_W_F16] = NULL;
    qhx_pool *pool = NULL;
    qhx_error err;
    if (qhx_pool_create(threads, &pool, &err) != QHX_OK) {
        fprintf(stderr, "pool: %s\n", err.msg);
        return 1;
    }
    printf("decode linear (Q4 / Q6 on int8 activations; Q8 and F16 as the %s table decodes them), %d threads, median "
           "of %d reps, weights from DRAM\n", qhx_isa_name(multi.isa), threads, reps);
    int only = argc > 1 && !strcmp(argv[argc - 1], "--w8-f16");
    int rc = only ? 0 : bench_shape(pool, &multi, &rows, "gate/up", QHX_W_Q4, 6144, 2048, reps) ||
             bench_shape(pool, &multi, &rows, "down", QHX_W_Q4, 2048, 6144, reps) ||
             bench_shape(pool, &multi, &rows, "attn", QHX_W_Q4, 2048, 2048, reps) ||
             bench_shape(pool, &multi, &rows, "q6 head", QHX_W_Q6, 248320, 2048, reps);
    rc = rc || bench_shape(pool, &multi, &rows, "w8 gate/up", QHX_W_Q8, 6144, 2048, reps) ||
         bench_shape(pool, &multi, &rows, "w8 head", QHX_W_Q8, 248320, 2048, reps) ||
         bench_shape(pool, &multi, &rows, "f16 gate/up", QHX_W_F16, 6144, 2048, reps);
    qhx_pool_free(pool);
    return rc ? 1 : 0;
}
