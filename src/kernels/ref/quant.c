/* kernels/ref/quant.c: Q8, Q4 and Q6 row quantizers, their inverses, and the scalar reference
 * matvec/matmul over them (the oracle every SIMD variant is tested against). Plain loops, f32
 * accumulation; layouts as in kernels/quant.h and docs/formats.md. */
#include "kernels/quant.h"

#include "core/fp16.h"

#include <math.h>

// ---- Q8 --------------------------------------------------------------------------------------

int qhx_quant_q8_row(const float *w, int64_t n, int8_t *q, float *scale) {
    float amax = 0.0f;
    for (int64_t c = 0; c < n; c++) {
        if (!isfinite(w[c])) return -1;
        float a = fabsf(w[c]);
        if (a > amax) amax = a;
    }
    float d = amax / 127.0f;
    *scale = d;
    for (int64_t c = 0; q && c < n; c++) {
        /* d == 0 also covers rows so small that amax / 127 underflows */
        float v = d != 0.0f ? nearbyintf(w[c] / d) : 0.0f;
        if (v > 127.0f) v = 127.0f;
        if (v < -127.0f) v = -127.0f;
        q[c] = (int8_t)v;
    }
    return 0;
}

void qhx_dequant_q8_row(const int8_t *q, float scale, int64_t n, float *out) {
    for (int64_t c = 0; c < n; c++) out[c] = scale * (float)q[c];
}

// ---- Q4 --------------------------------------------------------------------------------------

static int q4_shape_ok(int64_t n, int64_t group) {
    return group >= 2 && group % 2 == 0 && group <= QHX_GROUP_MAX && n >= 0 && n % group == 0;
}

/* ---- the scale search shared by Q4 and Q6 ---------------------------------------------------
 * Symmetric codes v in [-(top + 1), top] (top = 7 for Q4, 31 for Q6), one f16 scale per group. */

/* The largest |d| an f16 scale holds. */
#define F16_MAX 65504.0f

static float f16_round(float d) { return qhx_f16_to_f32(qhx_f32_to_f16(d)); }

/* Codes of a group at scale d (nearest, ties to even, clamped; all 0 when d is 0) -> v; returns
 * the squared error sum (w - d v)^2 in f32, and in *refit the least-squares scale for these
 * codes, sum w v / sum v^2 (0 for all-zero codes). */
/* One value's code at scale d (inv = 1 / d) into *v (when given) and its terms into one lane of
 * the partial sums. Round half to even without a libm call (the search runs this 27 times per
 * weight): clamp to [lo, hi] (integers, so clamping before rounding is the same as after), then
 * add and subtract 1.5 * 2^23, which rounds a float of magnitude below 2^22 to an integer in the
 * default rounding mode, exactly as nearbyintf. */
typedef struct lane_sums {
    float err, wv, vv;
} lane_sums;

static inline __attribute__((always_inline)) void code_lane(float w, float inv, float d, float lo, float hi,
                                                            int8_t *v, lane_sums *s) {
    const float magic = 0x1.8p23f;
    float t = w * inv;
    t = t < hi ? t : hi; /* the forms of minss / maxss */
    t = t > lo ? t : lo;
    t = (t + magic) - magic;
    if (v) *v = (int8_t)t;
    float e = w - d * t;
    s->err += e * e;
    s->wv += w * t;
    s->vv += t * t;
}

static inline __attribute__((always_inline)) float codes_at(const float *wg, int64_t group, float d, int top,
                                                              int8_t *v, float *refit) {
    const float inv = d != 0.0f ? 1.0f / d : 0.0f, hi = (float)top, lo = -(float)top - 1.0f;
    /* two partial sums (value i into lane i % 2): the loop is not bound by one chain of dependent
     * additions, and each sum stays a fixed function of the inputs */
    lane_sums s0 = {0}, s1 = {0};
    for (int64_t i = 0; i < group; i += 2) { /* groups are even in both formats */
        code_lane(wg[i], inv, d, lo, hi, v ? v + i : NULL, &s0);
        code_lane(wg[i + 1], inv, d, lo, hi, v ? v + i + 1 : NULL, &s1);
    }
    float sv = s0.vv + s1.vv;
    *refit = sv > 0.0f ? (s0.wv + s1.wv) / sv : 0.0f;
    return s0.err + s1.err;
}

/* The scale search (docs/formats.md, "Choosing the scale"). Candidates: d = m / -n for the
 * signed extreme m and n = N * (7/8 + k/32), k = 0 .. SEARCH_STEPS - 1, N = top + 1 (n = N, the
 * first candidate, is ggml Q4_0's choice for Q4; n > N clips the extreme, n < N spends fewer
 * levels on it), each rounded to f16, and for each the least-squares refit of its codes, rounded
 * to f16. The candidate of least squared error wins, the first one on ties. */
#define SEARCH_STEPS 13
static float search_scale(const float *wg, int64_t group, float m, int top) {
    const float N = (float)top + 1.0f;
    float fit, unused, best = f16_round(m / -N), best_err = codes_at(wg, group, best, top, NULL, &unused);
    for (int k = 0; k < SEARCH_STEPS; k++) {
        float d = f16_round(m / -(N * (0.875f + (float)k / 32.0f)));
        float err = codes_at(wg, group, d, top, NULL, &fit);
        if (err < best_err) best = d, best_err = err;
        fit = f16_round(fit);
        if ((err = codes_at(wg, group, fit, top, NULL, &unused)) < best_err) best = fit, best_err = err;
    }
    return best;
}

/* The search again with each squared error weighted by a[i] (> 0): sum a (w - d v)^2, and the
 * weighted refit sum a w v / sum a v^2. A separate loop, so the unweighted one keeps its bits. */
static float codes_at_w(const float *wg, const float *a, int64_t group, float d, int top, float *refit) {
    const float inv = d != 0.0f ? 1.0f / d : 0.0f, hi = (float)top, lo = -(float)top - 1.0f, magic = 0x1.8p23f;
    float err = 0.0f, wv = 0.0f, vv = 0.0f;
    for (int64_t i = 0; i < group; i++) {
        float t = wg[i] * inv;
        t = t < hi ? t : hi;
        t = t > lo ? t : lo;
        t = (t + magic) - magic;
        float e = wg[i] - d * t;
        err += a[i] * e * e, wv += a[i] * wg[i] * t, vv += a[i] * t * t;
    }
    *refit = vv > 0.0f ? wv / vv : 0.0f;
    return err;
}

static float search_scale_w(const float *wg, const float *a, int64_t group, float m, int top) {
    const float N = (float)top + 1.0f;
    float fit, unused, best = f16_round(m / -N), best_err = codes_at_w(wg, a, group, best, top, &unused);
    for (int k = 0; k < SEARCH_STEPS; k++) {
        float d = f16_round(m / -(N * (0.875f + (float)k / 32.0f)));
        float err = codes_at_w(wg, a, group, d, top, &fit);
        if (err < best_err) best = d, best_err = err;
        fit = f16_round(fit);
        if ((err = codes_at_w(wg, a, group, fit, top, &unused)) < best_err) best = fit, best_err = err;
    }
    return best;
}

/* One group: checks it (finite, within reach of an f16 scale), searches its scale (weighted by
 * a when given), and gives the codes at that scale (nearest: the same for any weights). Returns
 * -1 on a refusal. */
static int quant_group(const float *wg, const float *a, int64_t group, int top, uint16_t *scale, int8_t *v) {
    float m = 0.0f, amax = 0.0f;
    for (int64_t i = 0; i < group; i++) {
        if (!isfinite(wg[i])) return -1;
        if (fabsf(wg[i]) > amax) {
            amax = fabsf(wg[i]);
            m = wg[i];
        }
    }
    if (amax > ((float)top + 1.0f) * F16_MAX) return -1;
    float d = a ? search_scale_w(wg, a, group, m, top) : search_scale(wg, group, m, top);
    *scale = qhx_f32_to_f16(d);
    float unused;
    if (v) codes_at(wg, group, d, top, v, &unused);
    return 0;
}

static void pack_q4(const int8_t *v, int64_t half, uint8_t *qg) {
    for (int64_t i = 0; i < half; i++) qg[i] = (uint8_t)((v[i] + 8) | ((v[i + half] + 8) << 4));
}

int qhx_quant_q4_row(const float *w, int64_t n, int64_t group, uint8_t *q, uint16_t *scales) {
    return qhx_quant_q4_row_w(w, NULL, n, group, q, scales);
}

int qhx_quant_q4_row_w(const float *w, const float *imp, int64_t n, int64_t group, uint8_t *q, uint16_t *scales) {
    if (!q4_shape_ok(n, group)) return -1;
    int8_t v[QHX_GROUP_MAX];
    for (int64_t g = 0; g < n / group; g++) {
        if (quant_group(w + g * group, imp ? imp + g * group : NULL, group, 7, scales + g, q ? v : NULL)) return -1;
        if (q) pack_q4(v, group / 2, q + g * group / 2);
    }
    return 0;
}

void qhx_quant_q4_codes(const float *w, int64_t n, int64_t group, const uint16_t *scales, uint8_t *q) {
    int8_t v[QHX_GROUP_MAX];
    for (int64_t g = 0; g < n / group; g++) {
        float unused;
        codes_at(w + g * group, group, qhx_f16_to_f32(scales[g]), 7, v, &unused);
        pack_q4(v, group / 2, q + g * group / 2);
    }
}

void qhx_dequant_q4_row(const uint8_t *q, const uint16_t *scales, int64_t n, int64_t group,
                        float *out) {
    const int64_t half = group / 2;
    for (int64_t g = 0; g < n / group; g++) {
        const uint8_t *qg = q + g * half;
        float d = qhx_f16_to_f32(scales[g]);
        for (int64_t i = 0; i < half; i++) {
            out[g * group + i] = d * (float)((qg[i] & 0x0f) - 8);
            out[g * group + i + half] = d * (float)((qg[i] >> 4) - 8);
        }
    }
}

// ---- Q6 -----------------------------------------------------------------------------------------

static int q6_shape_ok(int64_t n, int64_t group) {
    return group >= 4 && group % 4 == 0 && group <= QHX_GROUP_MAX && n >= 0 && n % group == 0;
}

/* One group's codes v in [-32, 31] into its bytes of the two planes (layout: quant.h). */
static void pack_q6(const int8_t *v, int64_t group, uint8_t *lo, uint8_t *hi) {
    const int64_t half = group / 2, quarter = group / 4;
    uint8_t u[QHX_GROUP_MAX];
    for (int64_t i = 0; i < group; i++) u[i] = (uint8_t)(v[i] + 32);
    for (int64_t i = 0; i < half; i++) lo[i] = (uint8_t)((u[i] & 15) | (u[i + half] & 15) << 4);
    for (int64_t k = 0; k < quarter; k++) {
        unsigned b = 0;
        for (int c = 0; c < 4; c++) b |= (unsigned)(u[k + c * quarter] >> 4) << (2 * c);
        hi[k] = (uint8_t)b;
    }
}

int qhx_quant_q6_row(const float *w, int64_t n, int64_t group, uint8_t *lo, uint8_t *hi, uint16_t *scales) {
    return qhx_quant_q6_row_w(w, NULL, n, group, lo, hi, scales);
}

int qhx_quant_q6_row_w(const float *w, const float *imp, int64_t n, int64_t group, uint8_t *lo, uint8_t *hi,
                       uint16_t *scales) {
    if (!q6_shape_ok(n, group)) return -1;
    int8_t v[QHX_GROUP_MAX];
    for (int64_t g = 0; g < n / group; g++) {
        if (quant_group(w + g * group, imp ? imp + g * group : NULL, group, 31, scales + g, lo ? v : NULL)) return -1;
        if (lo) pack_q6(v, group, lo + g * group / 2, hi + g * group / 4);
    }
    return 0;
}

void qhx_quant_q6_codes(const float *w, int64_t n, int64_t group, const uint16_t *scales, uint8_t *lo, uint8_t *hi) {
    int8_t v[QHX_GROUP_MAX];
    for (int64_t g = 0; g < n / group; g++) {
        float unused;
        codes_at(w + g * group, group, qhx_f16_to_f32(scales[g]), 31, v, &unused);
        pack_q6(v, group, lo + g * group / 2, hi + g * group / 4);
    }
}

/* The unsigned 6-bit code of value i (in [0, group)) of the group at lo/hi (layout: quant.h). */
static int q6_code(const uint8_t *lo, const uint8_t *hi, int64_t group, int64_t i) {
    const int64_t half = group / 2, quarter = group / 4;
    int low = i < half ? lo[i] & 15 : lo[i - half] >> 4;
    int high = (hi[i % quarter] >> (2 * (i / quarter))) & 3;
    return low | high << 4;
}

void qhx_dequant_q6_row(const uint8_t *lo, const uint8_t *hi, const uint16_t *scales, int64_t n, int64_t group,
                        float *out) {
    for (int64_t g = 0; g < n / group; g++) {
        float d = qhx_f16_to_f32(scales[g]);
        for (int64_t i = 0; i < group; i++)
            out[g * group + i] = d * (float)(q6_code(lo + g * group / 2, hi + g * group / 4, group, i) - 32);
    }
}

// ---- reference kernels -----------------------------------------------------------------------

/* y[r] = scale[r] * sum_c q[r, c] * x[c] */
static float dot_q8(const int8_t *q, float scale, const float *x, int64_t cols) {
    float acc = 0.0f;
    for (int64_t c = 0; c < cols; c++) acc += (float)q[c] * x[c];
    return acc * scale;
}

/* y[r] = sum_g d[r, g] * sum_i (nib - 8) * x[g*group + i] */
static float dot_q4(const uint8_t *q, const uint16_t *d, const float *x, int64_t cols, int64_t group) {
    const int64_t half = group / 2;
    float acc = 0.0f;
    for (int64_t g = 0; g < cols / group; g++) {
        const uint8_t *qg = q + g * half;
        const float *xg = x + g * group;
        float s = 0.0f;
        for (int64_t i = 0; i < half; i++) {
            s += (float)((qg[i] & 0x0f) - 8) * xg[i];
            s += (float)((qg[i] >> 4) - 8) * xg[i + half];
        }
        acc += qhx_f16_to_f32(d[g]) * s;
    }
    return acc;
}

void qhx_k_matvec_q8_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    const int8_t *q = (const int8_t *)w->data;
    for (int64_t r = r0; r < r1; r++) y[r] = dot_q8(q + r * w->cols, w->scales[r], x, w->cols);
}

void qhx_k_matvec_q4_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    const uint8_t *q = (const uint8_t *)w->data;
    const int64_t rb = qhx_q4_row_bytes(w->cols), ng = qhx_q4_row_groups(w->cols, w->group);
    for (int64_t r = r0; r < r1; r++)
        y[r] = dot_q4(q + r * rb, w->gscales + r * ng, x, w->cols, w->group);
}

/* dot_q4 of one weight row against nb activation rows: a group's nibbles are unpacked once, then
 * every row runs dot_q4's own sums (the same products in the same order, acc[b] its acc). */
static void dot_q4_multi(const uint8_t *q, const uint16_t *d, const float *const *x, float *const *y, int64_t r,
                         int64_t nb, int64_t cols, int64_t group) {
    enum { MAX_HALF = 128 };
    const int64_t half = group / 2;
    float acc[QHX_MATVEC_MULTI_MAX] = {0};
    int8_t lo[MAX_HALF], hi[MAX_HALF];
    for (int64_t g = 0; g < cols / group; g++) {
        const uint8_t *qg = q + g * half;
        for (int64_t i = 0; i < half; i++) {
            lo[i] = (int8_t)((qg[i] & 0x0f) - 8);
            hi[i] = (int8_t)((qg[i] >> 4) - 8);
        }
        for (int64_t b = 0; b < nb; b++) {
            const float *xg = x[b] + g * group;
            float s = 0.0f;
            for (int64_t i = 0; i < half; i++) {
                s += (float)lo[i] * xg[i];
                s += (float)hi[i] * xg[i + half];
            }
            acc[b] += qhx_f16_to_f32(d[g]) * s;
        }
    }
    for (int64_t b = 0; b < nb; b++) y[b][r] = acc[b];
}

void qhx_k_matvec_multi_q4_ref(const qhx_weight *w, const float *const *x, float *const *y, int64_t nb, int64_t r0,
                               int64_t r1) {
    const uint8_t *q = (const uint8_t *)w->data;
    const int64_t rb = qhx_q4_row_bytes(w->cols), ng = qhx_q4_row_groups(w->cols, w->group);
    if (w->group > 2 * 128) { /* groups larger than dot_q4_multi's unpack buffer: row by row */
        for (int64_t b = 0; b < nb; b++) qhx_k_matvec_q4_ref(w, x[b], y[b], r0, r1);
        return;
    }
    for (int64_t b = 0; b < nb; b += QHX_MATVEC_MULTI_MAX) { /* more rows than the contract's bound: in turn */
        int64_t n = nb - b < QHX_MATVEC_MULTI_MAX ? nb - b : QHX_MATVEC_MULTI_MAX;
        for (int64_t r = r0; r < r1; r++) dot_q4_multi(q + r * rb, w->gscales + r * ng, x + b, y + b, r, n, w->cols, w->group);
    }
}

void qhx_k_matmul_q8_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                         int64_t n, int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < n; t++) qhx_k_matvec_q8_ref(w, X + t * ldx, Y + t * ldy, r0, r1);
}

void qhx_k_matmul_q4_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                         int64_t n, int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < n; t++) qhx_k_matvec_q4_ref(w, X + t * ldx, Y + t * ldy, r0, r1);
}

void qhx_k_row_q8_ref(const qhx_weight *w, int64_t r, float *out) {
    qhx_dequant_q8_row((const int8_t *)w->data + r * w->cols, w->scales[r], w->cols, out);
}

void qhx_k_row_q4_ref(const qhx_weight *w, int64_t r, float *out) {
    qhx_dequant_q4_row((const uint8_t *)w->data + r * qhx_q4_row_bytes(w->cols),
                       w->gscales + r * qhx_q4_row_groups(w->cols, w->group), w->cols, w->group, out);
}

/* y[r] = sum_g d[r, g] * sum_i (code - 32) * x[g*group + i], values in order */
static float dot_q6(const uint8_t *lo, const uint8_t *hi, const uint16_t *d, const float *x, int64_t cols,
                    int64_t group) {
    float acc = 0.0f;
    for (int64_t g = 0; g < cols / group; g++) {
        const uint8_t *lg = lo + g * group / 2, *hg = hi + g * group / 4;
        float s = 0.0f;
        for (int64_t i = 0; i < group; i++) s += (float)(q6_code(lg, hg, group, i) - 32) * x[g * group + i];
        acc += qhx_f16_to_f32(d[g]) * s;
    }
    return acc;
}

void qhx_k_matvec_q6_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    const uint8_t *lo = (const uint8_t *)w->data;
    const int64_t ng = w->cols / w->group;
    for (int64_t r = r0; r < r1; r++)
        y[r] = dot_q6(lo + r * (w->cols / 2), w->high + r * (w->cols / 4), w->gscales + r * ng, x, w->cols, w->group);
}

void qhx_k_matmul_q6_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                         int64_t n, int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < n; t++) qhx_k_matvec_q6_ref(w, X + t * ldx, Y + t * ldy, r0, r1);
}

void qhx_k_row_q6_ref(const qhx_weight *w, int64_t r, float *out) {
    qhx_dequant_q6_row((const uint8_t *)w->data + r * (w->cols / 2), w->high + r * (w->cols / 4),
                       w->gscales + r * (w->cols / w->group), w->cols, w->group, out);
}

void qhx_kern_ref_quant(qhx_kernels *k) {
    k->matvec[QHX_W_Q8] = qhx_k_matvec_q8_ref;
    k->matvec[QHX_W_Q4] = qhx_k_matvec_q4_ref;
    k->matmul[QHX_W_Q8] = qhx_k_matmul_q8_ref;
    k->matmul[QHX_W_Q4] = qhx_k_matmul_q4_ref;
    k->row[QHX_W_Q8] = qhx_k_row_q8_ref;
    k->row[QHX_W_Q4] = qhx_k_row_q4_ref;
    k->matvec[QHX_W_Q6] = qhx_k_matvec_q6_ref;
    k->matmul[QHX_W_Q6] = qhx_k_matmul_q6_ref;
    k->row[QHX_W_Q6] = qhx_k_row_q6_ref;
    k->matvec[QHX_W_Q4A] = qhx_k_matvec_q4a_ref;
    k->matmul[QHX_W_Q4A] = qhx_k_matmul_q4a_ref;
    k->row[QHX_W_Q4A] = qhx_k_row_q4a_ref;
    /* the integer form where the type has one (llama.cpp's arithmetic), the f32 form elsewhere */
    k->matvec[QHX_W_GGML] = qhx_k_matvec_ggml_dot_ref;
    k->matmul[QHX_W_GGML] = qhx_k_matmul_ggml_dot_ref;
    k->row[QHX_W_GGML] = qhx_k_row_ggml_ref;
}
