// ctest-labels: unit;kernels
/* quant: Q8/Q4 quantize -> dequantize error bounds, the RMS errors docs/formats.md quotes, and
 * the reference matvec/matmul against an f32 matvec over the dequantized weights. */
#include "core/alloc.h"
#include "core/fp16.h"
#include "io/safetensors.h"
#include "kernels/quant.h"
#include "t.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- helpers ---------------------------------------------------------------------------------

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double u01(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
static double gauss(void) { return sqrt(-2.0 * log(u01())) * cos(6.283185307179586 * u01()); }
static double laplace(void) {
    double u = u01() - 0.5;
    return -copysign(1.0, u) * log(1.0 - 2.0 * fabs(u)) / sqrt(2.0);
}

enum { DIST_GAUSS, DIST_LAPLACE, DIST_OUTLIERS };
static void fill(float *w, int64_t n, int dist) {
    for (int64_t i = 0; i < n; i++) {
        double v = dist == DIST_LAPLACE ? laplace() : gauss();
        if (dist == DIST_OUTLIERS && u01() < 0.001) v *= 10.0;
        w[i] = (float)v;
    }
}

/* Plain f32 matvec over an f32 matrix, the comparison target. Also returns sum |w||x| per row. */
static void matvec_f32(const float *W, int64_t rows, int64_t cols, const float *x, double *y, double *mag) {
    for (int64_t r = 0; r < rows; r++) {
        double acc = 0, m = 0;
        for (int64_t c = 0; c < cols; c++) {
            acc += (double)W[r * cols + c] * x[c];
            m += fabs((double)W[r * cols + c] * x[c]);
        }
        y[r] = acc;
        mag[r] = m;
    }
}

// ---- error bounds ----------------------------------------------------------------------------

static void test_q8_bounds(void) {
    const int64_t lens[] = {1, 7, 64, 2048};
    for (int li = 0; li < 4; li++) {
        int64_t n = lens[li];
        float *w = qhx_malloc((size_t)n * 4), *back = qhx_malloc((size_t)n * 4);
        int8_t *q = qhx_malloc((size_t)n);
        for (int dist = 0; dist < 3; dist++) {
            fill(w, n, dist);
            float s;
            CHECK_EQ(qhx_quant_q8_row(w, n, q, &s), 0);
            qhx_dequant_q8_row(q, s, n, back);
            float amax = 0;
            int worst_ok = 1, hit_max = 0;
            for (int64_t c = 0; c < n; c++) {
                amax = fmaxf(amax, fabsf(w[c]));
                /* half a step, plus the rounding of scale * q itself */
                if (fabsf(back[c] - w[c]) > s * 0.5f * (1 + 1e-6f) + fabsf(w[c]) * 1e-6f) worst_ok = 0;
                if (q[c] == 127 || q[c] == -127) hit_max = 1;
                if (q[c] < -127) worst_ok = 0;
            }
            CHECK(worst_ok);
            CHECK(hit_max);
            CHECK_NEAR(s, amax / 127.0f, 0);
            float s_only = -1;
            CHECK_EQ(qhx_quant_q8_row(w, n, NULL, &s_only), 0);
            CHECK(memcmp(&s_only, &s, 4) == 0);
        }
        qhx_free(w);
        qhx_free(back);
        qhx_free(q);
    }
    /* zero row, tiny row, non-finite row */
    float z[5] = {0, 0, 0, 0, 0}, s = -1;
    int8_t q[5];
    CHECK_EQ(qhx_quant_q8_row(z, 5, q, &s), 0);
    CHECK(s == 0 && q[0] == 0 && q[4] == 0);
    float tiny[2] = {1e-44f, -1e-45f};
    CHECK_EQ(qhx_quant_q8_row(tiny, 2, q, &s), 0);
    CHECK(q[0] == 0 && q[1] == 0);
    float bad[3] = {1, NAN, 2};
    CHECK_EQ(qhx_quant_q8_row(bad, 3, q, &s), -1);
    bad[1] = INFINITY;
    CHECK_EQ(qhx_quant_q8_row(bad, 3, q, &s), -1);
    /* round half to even: 0.5 steps go to the even integer */
    float h[4] = {127.0f, 0.5f, 1.5f, -2.5f};
    CHECK_EQ(qhx_quant_q8_row(h, 4, q, &s), 0);
    CHECK(s == 1.0f && q[1] == 0 && q[2] == 2 && q[3] == -2);
}

/* The squared error of one group quantized the plain way (ggml Q4_0's choice, here with the f16
 * rounding of the scale): d = f16(m / -8) for the signed extreme m, codes rounded to nearest. */
static double plain_q4_sq_err(const float *w, int64_t G) {
    float m = 0;
    for (int64_t i = 0; i < G; i++)
        if (fabsf(w[i]) > fabsf(m)) m = w[i];
    float d = qhx_f16_to_f32(qhx_f32_to_f16(m / -8.0f)), se = 0;
    for (int64_t i = 0; i < G; i++) {
        float v = d != 0.0f ? fminf(fmaxf(nearbyintf(w[i] / d), -8.0f), 7.0f) : 0.0f, e = w[i] - d * v;
        se += e * e;
    }
    return se;
}

static void test_q4_bounds(void) {
    const int64_t groups[] = {32, 64};
    for (int gi = 0; gi < 2; gi++) {
        int64_t G = groups[gi], n = 64 * G;
        float w[64 * 64], back[64 * 64];
        uint16_t sc[64];
        uint8_t q[64 * 32];
        for (int dist = 0; dist < 3; dist++) {
            fill(w, n, dist);
            CHECK_EQ(qhx_quant_q4_row(w, n, G, q, sc), 0);
            qhx_dequant_q4_row(q, sc, n, G, back);
            /* per group: never worse than the plain choice, which is one of the candidates (a
             * tolerance of f32 summation order only); in total clearly better */
            int ok = 1;
            double se = 0, se_plain = 0;
            for (int64_t g = 0; g < n / G; g++) {
                double e = 0, e0 = plain_q4_sq_err(w + g * G, G);
                for (int64_t i = 0; i < G; i++) {
                    double d = (double)back[g * G + i] - w[g * G + i];
                    e += d * d;
                }
                if (e > e0 * (1 + 1e-5) + 1e-30) ok = 0;
                se += e, se_plain += e0;
            }
            CHECK(ok);
            CHECK(se < 0.97 * se_plain);
            uint16_t sc_only[64];
            CHECK_EQ(qhx_quant_q4_row(w, n, G, NULL, sc_only), 0);
            CHECK(memcmp(sc_only, sc, (size_t)(n / G) * 2) == 0);
        }
    }
    /* nibble order: value i in the low nibble of byte i, value i + G/2 in the high nibble; the
     * group is exact at d = 1 (the first candidate), which no other scale beats */
    float w[32] = {0};
    w[0] = -8;
    w[1] = 3;
    w[16] = 7;
    w[17] = -2;
    uint16_t sc;
    uint8_t q[16];
    CHECK_EQ(qhx_quant_q4_row(w, 32, 32, q, &sc), 0);
    CHECK_EQ(sc, qhx_f32_to_f16(1.0f));
    CHECK_EQ(q[0], (-8 + 8) | ((7 + 8) << 4));
    CHECK_EQ(q[1], (3 + 8) | ((-2 + 8) << 4));
    CHECK_EQ(q[2], 8 | (8 << 4));
    /* an all-zero group: scale 0, every code 0 */
    float z[32] = {0};
    CHECK_EQ(qhx_quant_q4_row(z, 32, 32, q, &sc), 0);
    CHECK(qhx_f16_to_f32(sc) == 0.0f && q[0] == 0x88 && q[15] == 0x88);
    /* refusals: shape, NaN, a value no f16 scale can reach */
    CHECK_EQ(qhx_quant_q4_row(w, 30, 32, q, &sc), -1);
    CHECK_EQ(qhx_quant_q4_row(w, 32, 31, q, &sc), -1);
    w[3] = 1e6f;
    CHECK_EQ(qhx_quant_q4_row(w, 32, 32, q, &sc), -1);
    w[5] = NAN;
    CHECK_EQ(qhx_quant_q4_row(w, 32, 32, q, &sc), -1);
}

/* Q6: the same search over [-32, 31] (never worse than the plain m / -32), the documented layout
 * of the two planes, the refusals. */
static void test_q6(void) {
    const int64_t G = 32, n = 64 * G;
    float w[64 * 32], back[64 * 32];
    uint16_t sc[64], sc_only[64];
    uint8_t lo[64 * 16], hi[64 * 8];
    for (int dist = 0; dist < 3; dist++) {
        fill(w, n, dist);
        CHECK_EQ(qhx_quant_q6_row(w, n, G, lo, hi, sc), 0);
        qhx_dequant_q6_row(lo, hi, sc, n, G, back);
        int ok = 1;
        double se = 0, se4 = 0, ss = 0;
        for (int64_t g = 0; g < n / G; g++) {
            float m = 0;
            for (int64_t i = 0; i < G; i++)
                if (fabsf(w[g * G + i]) > fabsf(m)) m = w[g * G + i];
            float d0 = qhx_f16_to_f32(qhx_f32_to_f16(m / -32.0f));
            double e = 0, e0 = 0;
            for (int64_t i = 0; i < G; i++) {
                float v = fminf(fmaxf(nearbyintf(w[g * G + i] / d0), -32.0f), 31.0f);
                double d = (double)back[g * G + i] - w[g * G + i], d_0 = (double)d0 * v - w[g * G + i];
                e += d * d, e0 += d_0 * d_0, ss += (double)w[g * G + i] * w[g * G + i];
            }
            if (e > e0 * (1 + 1e-5) + 1e-30) ok = 0;
            se += e, se4 += plain_q4_sq_err(w + g * G, G);
        }
        CHECK(ok);
        CHECK(se < se4 / 12); /* two more bits: about 16x less squared error than plain Q4 */
        CHECK_EQ(qhx_quant_q6_row(w, n, G, NULL, NULL, sc_only), 0);
        CHECK(memcmp(sc_only, sc, sizeof sc) == 0);
        (void)ss;
    }
    /* layout: codes u = v + 32; low nibbles as Q4's, byte j of the high plane holds the high bits
     * of values j, j + 8, j + 16, j + 24 in bits 0-1, 2-3, 4-5, 6-7 */
    float g[32] = {0};
    g[0] = -32; /* u 0: the extreme, d = 1 */
    g[1] = 31;  /* u 63 */
    g[9] = 5;   /* u 37 = 0b100101 */
    g[16] = -17; /* u 15 */
    g[25] = 16; /* u 48 = 0b110000 */
    CHECK_EQ(qhx_quant_q6_row(g, 32, 32, lo, hi, sc), 0);
    CHECK_EQ(sc[0], qhx_f32_to_f16(1.0f));
    CHECK_EQ(lo[0], 0x0 | (15 << 4));        /* values 0 and 16 */
    CHECK_EQ(lo[1], 15 | (0 << 4));          /* values 1 and 17 (u 32: low 0, high 2) */
    CHECK_EQ(lo[9], 5 | (0 << 4));           /* values 9 and 25 */
    CHECK_EQ(hi[0], 0 | (2 << 2) | (0 << 4) | (2 << 6)); /* values 0, 8, 16, 24 */
    CHECK_EQ(hi[1], 3 | (2 << 2) | (2 << 4) | (3 << 6)); /* values 1, 9, 17, 25 */
    /* refusals */
    CHECK_EQ(qhx_quant_q6_row(g, 32, 30, lo, hi, sc), -1);
    CHECK_EQ(qhx_quant_q6_row(g, 30, 32, lo, hi, sc), -1);
    g[3] = 3e6f;
    CHECK_EQ(qhx_quant_q6_row(g, 32, 32, lo, hi, sc), -1);
    g[3] = NAN;
    CHECK_EQ(qhx_quant_q6_row(g, 32, 32, lo, hi, sc), -1);
}

// ---- measured RMS error (the table in docs/formats.md) ------------------------------------------

/* The zero-point alternative that docs/formats.md compares against (not a qhexrt format):
 * per group min m and step d = (max - min) / 15, w ~ m + d * round((w - m) / d). Returns the
 * summed squared error. */
static double asym_sq_err(const float *w, int64_t n, int64_t G) {
    double se = 0;
    for (int64_t g = 0; g < n; g += G) {
        float mn = w[g], mx = w[g];
        for (int64_t i = g; i < g + G; i++) {
            mn = fminf(mn, w[i]);
            mx = fmaxf(mx, w[i]);
        }
        float d = (mx - mn) / 15.0f;
        for (int64_t i = g; i < g + G; i++) {
            float v = d != 0.0f ? fminf(fmaxf(nearbyintf((w[i] - mn) / d), 0.0f), 15.0f) : 0.0f;
            double e = (double)(mn + d * v) - w[i];
            se += e * e;
        }
    }
    return se;
}

/* Relative RMS error (rms(dequant - w) / rms(w)) of Q8 (rows of `cols`) or Q4 (group G);
 * G < 0: the zero-point alternative with group -G. */
static double rel_rms(const float *w, int64_t rows, int64_t cols, int64_t G) {
    if (G < 0) {
        double se = 0, ss = 0;
        for (int64_t i = 0; i < rows * cols; i++) ss += (double)w[i] * w[i];
        for (int64_t r = 0; r < rows; r++) se += asym_sq_err(w + r * cols, cols, -G);
        return sqrt(se / ss);
    }
    float *back = qhx_malloc((size_t)cols * 4), *sc = qhx_malloc((size_t)cols * 4);
    uint16_t *gsc = qhx_malloc((size_t)cols * 2);
    uint8_t *q = qhx_malloc((size_t)cols);
    double se = 0, ss = 0;
    for (int64_t r = 0; r < rows; r++) {
        const float *wr = w + r * cols;
        if (G == 0) {
            qhx_quant_q8_row(wr, cols, (int8_t *)q, sc);
            qhx_dequant_q8_row((int8_t *)q, sc[0], cols, back);
        } else {
            qhx_quant_q4_row(wr, cols, G, q, gsc);
            qhx_dequant_q4_row(q, gsc, cols, G, back);
        }
        for (int64_t c = 0; c < cols; c++) {
            se += ((double)back[c] - wr[c]) * ((double)back[c] - wr[c]);
            ss += (double)wr[c] * wr[c];
        }
    }
    qhx_free(back);
    qhx_free(sc);
    qhx_free(gsc);
    qhx_free(q);
    return sqrt(se / ss);
}

static void report(const char *what, const float *w, int64_t rows, int64_t cols, double lim8, double lim32,
                   double lim64) {
    double e8 = rel_rms(w, rows, cols, 0), e32 = rel_rms(w, rows, cols, 32), e64 = rel_rms(w, rows, cols, 64);
    fprintf(stderr, "  %-30s q8 %.4f  q4/g32 %.4f  q4/g64 %.4f  | zero-point g32 %.4f g64 %.4f\n", what, e8,
            e32, e64, rel_rms(w, rows, cols, -32), rel_rms(w, rows, cols, -64));
    CHECK(e8 < lim8);
    CHECK(e32 < lim32);
    CHECK(e64 < lim64);
    CHECK(e32 < e64);
}

static void test_rms_table(void) {
    fprintf(stderr, "relative RMS error of quantize -> dequantize:\n");
    const int64_t rows = 512, cols = 2048;
    float *w = qhx_malloc((size_t)rows * cols * 4);
    fill(w, rows * cols, DIST_GAUSS);
    report("gaussian [512, 2048]", w, rows, cols, 0.010, 0.087, 0.096);
    fill(w, rows * cols, DIST_LAPLACE);
    report("laplace [512, 2048]", w, rows, cols, 0.016, 0.108, 0.125);
    fill(w, rows * cols, DIST_OUTLIERS);
    report("gaussian, 0.1% x10 outliers", w, rows, cols, 0.035, 0.102, 0.123);
    qhx_free(w);

    /* the linear weights of the tiny Qwen3.5 fixture (every 2-D F32 tensor but the embedding) */
    qhx_st_set *set = NULL;
    qhx_error err;
    if (qhx_st_open(QHX_DATA_DIR "/fixtures/parity/qwen35-tiny-f32", &set, &err) != QHX_OK) {
        fprintf(stderr, "FAIL: fixture not available (%s)\n", err.msg);
        CHECK(0);
        return;
    }
    double se8 = 0, se32 = 0, se64 = 0, sez32 = 0, sez64 = 0, ss = 0;
    for (int64_t i = 0; i < qhx_st_n_tensors(set); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        if (t->n_dims != 2 || t->dtype != QHX_DTYPE_F32 || strstr(t->name, "embed_tokens")) continue;
        int64_t r = t->shape[0], c = t->shape[1];
        float *m = qhx_malloc(t->size);
        memcpy(m, t->data, t->size);
        double s2 = 0;
        for (int64_t k = 0; k < r * c; k++) s2 += (double)m[k] * m[k];
        double e;
        e = rel_rms(m, r, c, 0); se8 += e * e * s2;
        e = rel_rms(m, r, c, 32); se32 += e * e * s2;
        e = rel_rms(m, r, c, 64); se64 += e * e * s2;
        e = rel_rms(m, r, c, -32); sez32 += e * e * s2;
        e = rel_rms(m, r, c, -64); sez64 += e * e * s2;
        ss += s2;
        qhx_free(m);
    }
    fprintf(stderr, "  %-30s q8 %.4f  q4/g32 %.4f  q4/g64 %.4f  | zero-point g32 %.4f g64 %.4f\n",
            "qwen35-tiny-f32 linear weights", sqrt(se8 / ss), sqrt(se32 / ss), sqrt(se64 / ss), sqrt(sez32 / ss),
            sqrt(sez64 / ss));
    CHECK(sqrt(se8 / ss) < 0.010);
    CHECK(sqrt(se32 / ss) < 0.087);
    CHECK(sqrt(se64 / ss) < 0.096);
    qhx_st_free(set);
}

// ---- reference kernels -----------------------------------------------------------------------

static void check_kernel(qhx_wfmt fmt, int64_t rows, int64_t cols, int64_t G) {
    float *W = qhx_malloc((size_t)(rows * cols) * 4), *Wd = qhx_malloc((size_t)(rows * cols) * 4);
    uint8_t *q = qhx_malloc((size_t)(rows * cols));
    float *sc = qhx_malloc((size_t)(rows * cols) * 4);
    uint16_t *gsc = qhx_malloc((size_t)(rows * cols) * 2);
    fill(W, rows * cols, DIST_GAUSS);
    for (int64_t r = 0; r < rows; r++) {
        if (fmt == QHX_W_Q8) {
            qhx_quant_q8_row(W + r * cols, cols, (int8_t *)q + r * cols, sc + r);
            qhx_dequant_q8_row((int8_t *)q + r * cols, sc[r], cols, Wd + r * cols);
        } else if (fmt == QHX_W_Q4) {
            int64_t ng = cols / G;
            qhx_quant_q4_row(W + r * cols, cols, G, q + r * cols / 2, gsc + r * ng);
            qhx_dequant_q4_row(q + r * cols / 2, gsc + r * ng, cols, G, Wd + r * cols);
        } else { /* Q6: the low plane in the first rows * cols / 2 bytes of q, the high one after it */
            int64_t ng = cols / G;
            uint8_t *hi = q + rows * cols / 2;
            qhx_quant_q6_row(W + r * cols, cols, G, q + r * cols / 2, hi + r * cols / 4, gsc + r * ng);
            qhx_dequant_q6_row(q + r * cols / 2, hi + r * cols / 4, gsc + r * ng, cols, G, Wd + r * cols);
        }
    }
    qhx_weight w = {.fmt = fmt, .rows = rows, .cols = cols, .data = q, .group = fmt != QHX_W_Q8 ? G : 0};
    if (fmt != QHX_W_Q8) w.gscales = gsc;
    else w.scales = sc;
    if (fmt == QHX_W_Q6) w.high = q + rows * cols / 2;
    qhx_kernels k;
    memset(&k, 0, sizeof k);
    qhx_kern_ref_quant(&k);
    const int64_t n = 3;
    float *X = qhx_malloc((size_t)(n * (cols + 3)) * 4), *Y = qhx_malloc((size_t)(n * (rows + 2)) * 4);
    fill(X, n * (cols + 3), DIST_GAUSS);
    double *yref = qhx_malloc((size_t)rows * 8), *mag = qhx_malloc((size_t)rows * 8);
    for (int64_t i = 0; i < n * (rows + 2); i++) Y[i] = NAN;
    /* matvec over a sub-range, then the rest: rows outside [r0, r1) stay untouched */
    int64_t r0 = rows / 3, r1 = rows - rows / 4;
    k.matvec[fmt](&w, X, Y, r0, r1);
    int untouched = 1;
    for (int64_t r = 0; r < rows; r++)
        if ((r < r0 || r >= r1) && !isnan(Y[r])) untouched = 0;
    CHECK(untouched);
    k.matvec[fmt](&w, X, Y, 0, r0);
    k.matvec[fmt](&w, X, Y, r1, rows);
    matvec_f32(Wd, rows, cols, X, yref, mag);
    double worst = 0;
    int64_t worst_r = 0;
    for (int64_t r = 0; r < rows; r++) {
        double e = fabs(Y[r] - yref[r]) / (mag[r] + 1e-30);
        if (!(e <= worst)) { worst = e; worst_r = r; }
    }
    /* f32 accumulation over cols terms, relative to sum |w x|: a few ulp times sqrt(cols)
     * (measured worst: 1.7e-7 over these shapes) */
    double tol = 3e-7 * (1.0 + sqrt((double)cols));
    if (!(worst <= tol))
        fprintf(stderr, "fmt %d [%lld, %lld]: worst row %lld: %.9g vs %.9g (rel %.3g)\n", (int)fmt,
                (long long)rows, (long long)cols, (long long)worst_r, Y[worst_r], yref[worst_r], worst);
    CHECK(worst <= tol);
    /* matmul: token t equals the matvec of row t, bit for bit; strides honoured */
    int64_t ldx = cols + 3, ldy = rows + 2;
    for (int64_t i = 0; i < n * ldy; i++) Y[i] = NAN;
    k.matmul[fmt](&w, X, ldx, Y, ldy, n, 0, rows);
    float *y1 = qhx_malloc((size_t)rows * 4);
    int same = 1, pad_nan = 1;
    for (int64_t t = 0; t < n; t++) {
        k.matvec[fmt](&w, X + t * ldx, y1, 0, rows);
        for (int64_t r = 0; r < rows; r++)
            if (memcmp(&y1[r], &Y[t * ldy + r], 4)) same = 0;
        if (!isnan(Y[t * ldy + rows]) || !isnan(Y[t * ldy + rows + 1])) pad_nan = 0;
    }
    CHECK(same);
    CHECK(pad_nan);
    /* row: the dequantized row, bit for bit */
    float *wr = qhx_malloc((size_t)cols * 4);
    int rows_same = 1;
    for (int64_t r = 0; r < rows; r++) {
        k.row[fmt](&w, r, wr);
        if (memcmp(wr, Wd + r * cols, (size_t)cols * 4)) rows_same = 0;
    }
    CHECK(rows_same);
    qhx_free(wr);
    qhx_free(y1);
    qhx_free(W);
    qhx_free(Wd);
    qhx_free(q);
    qhx_free(sc);
    qhx_free(gsc);
    qhx_free(X);
    qhx_free(Y);
    qhx_free(yref);
    qhx_free(mag);
}

static void test_kernels(void) {
    const int64_t rows[] = {1, 5, 33, 257};
    const int64_t cols8[] = {1, 7, 64, 2048};
    const int64_t cols4[] = {32, 64, 96, 2048};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            check_kernel(QHX_W_Q8, rows[i], cols8[j], 0);
            check_kernel(QHX_W_Q4, rows[i], cols4[j], 32);
            if (cols4[j] % 64 == 0) check_kernel(QHX_W_Q4, rows[i], cols4[j], 64);
            check_kernel(QHX_W_Q6, rows[i], cols4[j], 32);
        }
    qhx_kernels k;
    memset(&k, 0, sizeof k);
    qhx_kern_ref_quant(&k);
    CHECK(k.matvec[QHX_W_Q8] == qhx_k_matvec_q8_ref && k.matvec[QHX_W_Q4] == qhx_k_matvec_q4_ref);
    CHECK(k.matmul[QHX_W_Q8] == qhx_k_matmul_q8_ref && k.matmul[QHX_W_Q4] == qhx_k_matmul_q4_ref);
    CHECK(k.row[QHX_W_Q8] == qhx_k_row_q8_ref && k.row[QHX_W_Q4] == qhx_k_row_q4_ref);
    CHECK(k.matvec[QHX_W_F32] == NULL);
}

/* The weighted scale search (qhx_quant_q4_row_w / _q6_row_w, the forge's --calibrate): NULL
 * weights give qhx_quant_q4_row's / _q6_row's bytes; with weights 100 on every fifth column
 * against 1, the weighted error is lower than the unweighted quantizer's; the codes are the
 * nearest at the scales found (the _codes pass from those scales gives the same bytes). */
static void test_weighted(void) {
    enum { N = 1024, ROWS = 32, G = QHX_Q4_GROUP };
    static float w[N], o[N], imp[N];
    static uint8_t q[N / 2], q2[N / 2], hi[N / 4], hi2[N / 4];
    static uint16_t sc[N / G], sc2[N / G];
    for (int i = 0; i < N; i++) imp[i] = i % 5 == 0 ? 100.0f : 1.0f;
    for (int fmt = 0; fmt < 2; fmt++) { /* Q4, Q6 */
        double with = 0, without = 0;
        for (int r = 0; r < ROWS; r++) {
            fill(w, N, r % 3);
            if (fmt == 0) {
                CHECK_EQ(qhx_quant_q4_row(w, N, G, q, sc), 0);
                CHECK_EQ(qhx_quant_q4_row_w(w, NULL, N, G, q2, sc2), 0);
                CHECK(!memcmp(q, q2, sizeof q) && !memcmp(sc, sc2, sizeof sc));
                qhx_dequant_q4_row(q, sc, N, G, o);
            } else {
                CHECK_EQ(qhx_quant_q6_row(w, N, G, q, hi, sc), 0);
                CHECK_EQ(qhx_quant_q6_row_w(w, NULL, N, G, q2, hi2, sc2), 0);
                CHECK(!memcmp(q, q2, sizeof q) && !memcmp(hi, hi2, sizeof hi) && !memcmp(sc, sc2, sizeof sc));
                qhx_dequant_q6_row(q, hi, sc, N, G, o);
            }
            for (int i = 0; i < N; i++) without += imp[i] * ((double)o[i] - w[i]) * ((double)o[i] - w[i]);
            if (fmt == 0) {
                CHECK_EQ(qhx_quant_q4_row_w(w, imp, N, G, q, sc), 0);
                qhx_quant_q4_codes(w, N, G, sc, q2);
                CHECK(!memcmp(q, q2, sizeof q));
                qhx_dequant_q4_row(q, sc, N, G, o);
            } else {
                CHECK_EQ(qhx_quant_q6_row_w(w, imp, N, G, q, hi, sc), 0);
                qhx_quant_q6_codes(w, N, G, sc, q2, hi2);
                CHECK(!memcmp(q, q2, sizeof q) && !memcmp(hi, hi2, sizeof hi));
                qhx_dequant_q6_row(q, hi, sc, N, G, o);
            }
            for (int i = 0; i < N; i++) with += imp[i] * ((double)o[i] - w[i]) * ((double)o[i] - w[i]);
        }
        fprintf(stderr, "%s: importance-weighted error with / without the weights: %.3f\n", fmt ? "q6" : "q4",
                with / without);
        CHECK(with < 0.97 * without);
    }
}

int main(void) {
    test_q8_bounds();
    test_q4_bounds();
    test_q6();
    test_rms_table();
    test_kernels();
    test_weighted();
    return t_done("test_quant");
}
