/* kernels/ref/quant_q4a.c: the Q4A format ("q4a"): its row quantizer (a search over the
 * super-block scale, each group's 8-bit scale and zero point, minimising the squared error,
 * optionally weighted per column), its inverse, the f32-activation reference kernels, and the
 * scalar model of the int8-activation SIMD kernels (bit for bit what q4i8x_avx2.c computes).
 * Layout and numerics: kernels/quant.h and docs/formats.md, "Q4A". */
#include "kernels/quant.h"

#include "core/fp16.h"

#include <math.h>
#include <string.h>

#define G QHX_Q4A_GROUP
#define SB QHX_Q4A_SUPER

static int q4a_shape_ok(int64_t n) { return n >= 0 && n % G == 0; }

/* The f32 factor of group (d, s): d * 2^-12 * s, exact (an 11-bit mantissa times 8 bits). */
static inline float group_factor(float d, int s) { return d * 0x1p-12f * (float)s; }

// ---- the search ----------------------------------------------------------------------------------

/* Round half to even for |t| < 2^22 without a libm call (as kernels/ref/quant.c does). */
static inline float round_even(float t) {
    const float magic = 0x1.8p23f;
    return (t + magic) - magic;
}

/* The code of w for step `step` (inv = 1 / step) and zero point zf (in steps): nearest in
 * [0, 15]. */
static inline float code_of(float w, float inv, float zf) {
    float t = w * inv + zf;
    t = t < 15.0f ? t : 15.0f;
    t = t > 0.0f ? t : 0.0f;
    return round_even(t);
}

/* Weighted squared error of one group stored as (c, z): codes at step 16 c, zero point z / 16,
 * values c * (16 u - z) as the dequantizer computes them. u (may be NULL) gets the codes. */
static float group_err(const float *w, const float *a, float c, int z, uint8_t *u) {
    const float inv = c != 0.0f ? 1.0f / (16.0f * c) : 0.0f, zf = (float)z * 0.0625f;
    float e0 = 0.0f, e1 = 0.0f; /* two lanes: no single chain of dependent additions */
    for (int i = 0; i < G; i += 2) {
        float u0 = code_of(w[i], inv, zf), u1 = code_of(w[i + 1], inv, zf);
        if (u) u[i] = (uint8_t)u0, u[i + 1] = (uint8_t)u1;
        float d0 = w[i] - c * (16.0f * u0 - (float)z), d1 = w[i + 1] - c * (16.0f * u1 - (float)z);
        e0 += (a ? a[i] : 1.0f) * d0 * d0;
        e1 += (a ? a[i + 1] : 1.0f) * d1 * d1;
    }
    return e0 + e1;
}

/* Weighted least squares w ~ A u + B for fixed codes u. Returns 0 when the codes are all equal
 * (no slope to fit). */
static int fit_line(const float *w, const float *a, const float *u, float *A, float *B) {
    double sa = 0, su = 0, suu = 0, sw = 0, suw = 0;
    for (int i = 0; i < G; i++) {
        double ai = a ? a[i] : 1.0;
        sa += ai, su += ai * u[i], suu += ai * u[i] * u[i], sw += ai * w[i], suw += ai * u[i] * w[i];
    }
    double det = sa * suu - su * su;
    if (!(det > 0.0)) return 0;
    *A = (float)((sa * suw - su * sw) / det);
    *B = (float)((suu * sw - su * suw) / det);
    return *A > 0.0f;
}

/* Error of the continuous line (A, B) with codes rounded to it; u gets the codes. */
static float line_err(const float *w, const float *a, float A, float B, float *u) {
    const float inv = 1.0f / A, zf = -B * inv;
    float e = 0.0f;
    for (int i = 0; i < G; i++) {
        u[i] = code_of(w[i], inv, zf);
        float d = w[i] - (A * u[i] + B);
        e += (a ? a[i] : 1.0f) * d * d;
    }
    return e;
}

#define LINE_STEPS 13 /* steps tried per line fit */

/* The best line w ~ A (u - zf) with the offset zf fixed (0 or 15.9375 steps): steps reach / n for
 * n = 13.5 .. 16.5 and the least-squares refit of each (reach: the group's extreme on the free
 * side, > 0). */
static void best_line_at(const float *w, const float *a, float reach, float zf, float *bestA, float *bestB) {
    float u[G], best = INFINITY;
    if (!(reach > 0.0f)) return;
    for (int k = 0; k < LINE_STEPS; k++) {
        float A = reach / (13.5f + 0.25f * (float)k), e = line_err(w, a, A, -zf * A, u);
        if (e < best) best = e, *bestA = A, *bestB = -zf * A;
        double num = 0, den = 0;
        for (int i = 0; i < G; i++) {
            double ai = a ? a[i] : 1.0, v = u[i] - zf;
            num += ai * w[i] * v, den += ai * v * v;
        }
        if (!(den > 0.0) || !(num > 0.0)) continue;
        A = (float)(num / den);
        if ((e = line_err(w, a, A, -zf * A, u)) < best) best = e, *bestA = A, *bestB = -zf * A;
    }
}

/* Stage 1: the best unquantized step A > 0 and offset B of a group (w ~ A u + B, u in [0, 15]):
 * steps (max - min) / n for n = 13.5 .. 16.5 in quarters from the minimum, each refitted by least
 * squares to its codes. A is 0 only for a group of zeros. */
static void best_line(const float *w, const float *a, float *bestA, float *bestB) {
    float mn = w[0], mx = w[0];
    for (int i = 1; i < G; i++) mn = w[i] < mn ? w[i] : mn, mx = w[i] > mx ? w[i] : mx;
    if (!(mx > mn)) { /* constant: the value at the top code (positive) or the deepest offset */
        *bestA = fabsf(mn) / 15.0f, *bestB = mn < 0.0f ? mn : 0.0f;
        return;
    }
    float u[G], best = INFINITY;
    for (int k = 0; k < LINE_STEPS; k++) {
        float A = (mx - mn) / (13.5f + 0.25f * (float)k), B = mn, e = line_err(w, a, A, B, u);
        if (e < best) best = e, *bestA = A, *bestB = B;
        if (fit_line(w, a, u, &A, &B) && (e = line_err(w, a, A, B, u)) < best) best = e, *bestA = A, *bestB = B;
    }
    /* The zero point reaches offsets 0 .. -15.94 steps: a group all above 0 (B > 0) or below the
     * deepest offset is fitted again with the offset held at that end. */
    if (*bestB > 0.0f) best_line_at(w, a, mx, 0.0f, bestA, bestB);
    else if (*bestB < -15.9375f * *bestA) best_line_at(w, a, -mn, 15.9375f, bestA, bestB);
}

static int clampi(long v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

/* Stage 2: one group's (s, z) at super-block scale d, from its line (A, B): s and z near the
 * line's, three of each, then up to two least-squares refits of the winner's codes. */
static float best_sz(const float *w, const float *a, float d, float A, float B, uint8_t *s_out, uint8_t *z_out) {
    const float unit = d * 0x1p-12f * 16.0f; /* the step of s = 1 */
    int s0 = clampi(lrintf(A / unit), 1, 255), bs = s0, bz = 0;
    float best = INFINITY;
    for (int s = s0 - 1; s <= s0 + 1; s++) {
        if (s < 1 || s > 255) continue;
        float c = group_factor(d, s);
        int z0 = clampi(lrintf(-B / c), 0, 255); /* -B / step * 16 */
        for (int z = z0 - 1; z <= z0 + 1; z++) {
            if (z < 0 || z > 255) continue;
            float e = group_err(w, a, c, z, NULL);
            if (e < best) best = e, bs = s, bz = z;
        }
    }
    for (int it = 0; it < 2; it++) {
        uint8_t u8[G];
        float u[G], A2, B2;
        group_err(w, a, group_factor(d, bs), bz, u8);
        for (int i = 0; i < G; i++) u[i] = u8[i];
        if (!fit_line(w, a, u, &A2, &B2)) break;
        int s = clampi(lrintf(A2 / unit), 1, 255), z = clampi(lrintf(-B2 / group_factor(d, s)), 0, 255);
        float e = group_err(w, a, group_factor(d, s), z, NULL);
        if (!(e < best)) break;
        best = e, bs = s, bz = z;
    }
    *s_out = (uint8_t)bs, *z_out = (uint8_t)bz;
    return best;
}

/* Candidate super-block scales, as fractions of the one that gives the steepest group s = 255. */
static const float D_FRAC[] = {1.0f, 0.96f, 0.92f};
#define N_DFRAC ((int)(sizeof D_FRAC / sizeof D_FRAC[0]))

/* One super-block of ng <= SB groups: checks it, searches d and each group's (s, z), and gives
 * the codes. Returns -1 on a NaN, an infinity or a value beyond an f16 scale's reach. */
static int quant_super(const float *w, const float *a, int ng, uint16_t *dout, uint8_t *sub, uint8_t *codes) {
    float A[SB], B[SB], amax = 0.0f, Amax = 0.0f;
    for (int i = 0; i < ng * G; i++) {
        if (!isfinite(w[i])) return -1;
        amax = fabsf(w[i]) > amax ? fabsf(w[i]) : amax;
    }
    if (amax > 1e6f) return -1; /* d = 16 |w| / 15 would not fit an f16 (65504) with margin */
    for (int g = 0; g < ng; g++) {
        best_line(w + g * G, a ? a + g * G : NULL, &A[g], &B[g]);
        Amax = A[g] > Amax ? A[g] : Amax;
    }
    if (amax == 0.0f) { /* all zeros: d = 0 stores them exactly */
        *dout = 0;
        memset(sub, 0, (size_t)(2 * ng));
        if (codes) memset(codes, 0, (size_t)(ng * G));
        return 0;
    }
    if (!(Amax > 0.0f)) Amax = amax / 7.5f; /* constant groups only */
    float best = INFINITY, bd = 0.0f;
    uint8_t bsub[2 * SB];
    for (int k = 0; k < N_DFRAC; k++) {
        float d = qhx_f16_to_f32(qhx_f32_to_f16(Amax * D_FRAC[k] * 256.0f / 255.0f));
        if (!(d > 0.0f) || !isfinite(d)) continue;
        uint8_t cs[2 * SB];
        float e = 0.0f;
        for (int g = 0; g < ng; g++) e += best_sz(w + g * G, a ? a + g * G : NULL, d, A[g], B[g], &cs[2 * g], &cs[2 * g + 1]);
        if (e < best) best = e, bd = d, memcpy(bsub, cs, sizeof cs);
    }
    if (!(bd > 0.0f)) return -1;
    *dout = qhx_f32_to_f16(bd);
    memcpy(sub, bsub, (size_t)(2 * ng));
    for (int g = 0; codes && g < ng; g++)
        group_err(w + g * G, NULL, group_factor(bd, sub[2 * g]), sub[2 * g + 1], codes + g * G);
    return 0;
}

/* Codes u[0..G) of a group into Q4's nibble layout (byte i: value i low, value i + 16 high). */
static void pack_group(const uint8_t *u, uint8_t *q) {
    for (int i = 0; i < G / 2; i++) q[i] = (uint8_t)(u[i] | u[i + G / 2] << 4);
}

int qhx_quant_q4a_row(const float *w, const float *imp, int64_t n, uint8_t *q, uint16_t *super, uint8_t *sub) {
    if (!q4a_shape_ok(n)) return -1;
    const int64_t ngroups = n / G;
    uint8_t u[SB * G];
    for (int64_t s = 0; s * SB < ngroups; s++) {
        int ng = (int)(ngroups - s * SB < SB ? ngroups - s * SB : SB);
        const int64_t at = s * SB * G;
        if (quant_super(w + at, imp ? imp + at : NULL, ng, super + s, sub + 2 * s * SB, q ? u : NULL)) return -1;
        for (int g = 0; q && g < ng; g++) pack_group(u + g * G, q + (at + g * G) / 2);
    }
    return 0;
}

void qhx_quant_q4a_codes(const float *w, int64_t n, const uint16_t *super, const uint8_t *sub, uint8_t *q) {
    uint8_t u[G];
    for (int64_t g = 0; g < n / G; g++) {
        float d = qhx_f16_to_f32(super[g / SB]);
        group_err(w + g * G, NULL, group_factor(d, sub[2 * g]), sub[2 * g + 1], u);
        pack_group(u, q + g * G / 2);
    }
}

void qhx_dequant_q4a_row(const uint8_t *q, const uint16_t *super, const uint8_t *sub, int64_t n, float *out) {
    for (int64_t g = 0; g < n / G; g++) {
        const float c = group_factor(qhx_f16_to_f32(super[g / SB]), sub[2 * g]);
        const int z = sub[2 * g + 1];
        const uint8_t *qg = q + g * G / 2;
        for (int i = 0; i < G / 2; i++) {
            out[g * G + i] = c * (float)(16 * (qg[i] & 15) - z);
            out[g * G + i + G / 2] = c * (float)(16 * (qg[i] >> 4) - z);
        }
    }
}

// ---- reference kernels (f32 activations) -------------------------------------------------------

/* sum_g c_g * sum_i (16 u - z_g) x[...], values of a group in order */
static float dot_q4a(const uint8_t *q, const uint16_t *super, const uint8_t *sub, const float *x, int64_t cols) {
    float acc = 0.0f;
    for (int64_t g = 0; g < cols / G; g++) {
        const uint8_t *qg = q + g * G / 2;
        const float *xg = x + g * G;
        const int z = sub[2 * g + 1];
        float s = 0.0f;
        for (int i = 0; i < G / 2; i++) s += (float)(16 * (qg[i] & 15) - z) * xg[i];
        for (int i = 0; i < G / 2; i++) s += (float)(16 * (qg[i] >> 4) - z) * xg[i + G / 2];
        acc += group_factor(qhx_f16_to_f32(super[g / SB]), sub[2 * g]) * s;
    }
    return acc;
}

void qhx_k_matvec_q4a_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    const uint8_t *q = (const uint8_t *)w->data;
    const int64_t rb = w->cols / 2, ns = qhx_q4a_row_supers(w->cols), sb = qhx_q4a_row_sub_bytes(w->cols);
    for (int64_t r = r0; r < r1; r++) y[r] = dot_q4a(q + r * rb, w->gscales + r * ns, w->sub + r * sb, x, w->cols);
}

void qhx_k_matmul_q4a_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                          int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < n; t++) qhx_k_matvec_q4a_ref(w, X + t * ldx, Y + t * ldy, r0, r1);
}

void qhx_k_row_q4a_ref(const qhx_weight *w, int64_t r, float *out) {
    qhx_dequant_q4a_row((const uint8_t *)w->data + r * (w->cols / 2), w->gscales + r * qhx_q4a_row_supers(w->cols),
                        w->sub + r * qhx_q4a_row_sub_bytes(w->cols), w->cols, out);
}

// ---- the scalar model of the int8-activation kernels --------------------------------------------

/* One block of 32 activations as kernels/x86/quant_x_avx2.h quantizes it: codes, and dx (NaN
 * when the block holds a NaN or an infinity). */
static void quantize_block(const float *x, int8_t *q, float *dx) {
    float amax = 0.0f;
    int bad = 0;
    for (int i = 0; i < 32; i++) {
        bad |= !isfinite(x[i]);
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    }
    float d = amax / 127.0f;
    if (bad) {
        memset(q, 0, 32);
        *dx = NAN;
        return;
    }
    for (int i = 0; i < 32; i++)
        q[i] = d >= 0x1p-120f ? (int8_t)nearbyintf(x[i] * (1.0f / d)) : d > 0.0f ? (int8_t)nearbyintf(x[i] / d) : 0;
    *dx = d;
}

/* The four int32 lane sums P = sum u q of one group, as the SIMD kernel forms them: lane j covers
 * values 4j..4j+3 and 16+4j..16+4j+3. */
static void group_lanes(const uint8_t *qg, const int8_t *xq, float *lane) {
    for (int j = 0; j < 4; j++) {
        int32_t p = 0;
        for (int k = 4 * j; k < 4 * j + 4; k++) p += (qg[k] & 15) * xq[k] + (qg[k] >> 4) * xq[k + 16];
        lane[j] = (float)p;
    }
}

/* One weight row against one quantized activation row (dx, xs: per block the scale and the sum
 * of the codes), in the SIMD kernel's operations and order. Per group sc = c dx, and the lane
 * sums times 16 sc go into two 8-lane accumulators: the pairs of groups of whole super-blocks
 * alternating between them, the pairs of a partial last super-block into the first. The zero
 * points: (sc z) xs per group, in lane g % 8 of a third accumulator for whole super-blocks, in
 * order into one scalar for the rest. The result: the sum of the first two minus the third, the
 * odd last group into lanes 0-3, the horizontal sum ((l0 + l4) + (l2 + l6)) + ((l1 + l5) +
 * (l3 + l7)), minus the scalar. */
static float row_i8x(const uint8_t *q, const uint16_t *super, const uint8_t *sub, const int8_t *xq, const float *dx,
                     const float *xs, int64_t cols) {
    const int64_t ng = cols / G;
    float acc[8] = {0}, acc2[8] = {0}, accz[8] = {0}, zt = 0.0f, lane[4];
    int64_t g = 0;
    for (; g + 2 <= ng; g += 2) {
        const int full = (g / SB + 1) * SB <= ng; /* inside a whole super-block */
        float *to = full && (g % SB) / 2 % 2 ? acc2 : acc;
        for (int h = 0; h < 2; h++) {
            const int64_t gg = g + h;
            const float sc = group_factor(qhx_f16_to_f32(super[gg / SB]), sub[2 * gg]) * dx[gg];
            group_lanes(q + gg * G / 2, xq + gg * G, lane);
            for (int j = 0; j < 4; j++) to[4 * h + j] = fmaf(lane[j], sc * 16.0f, to[4 * h + j]);
            if (full) accz[gg % SB] = fmaf(sc * (float)sub[2 * gg + 1], xs[gg], accz[gg % SB]);
            else zt = fmaf(sc * (float)sub[2 * gg + 1], xs[gg], zt);
        }
    }
    float a[8];
    for (int l = 0; l < 8; l++) a[l] = (acc[l] + acc2[l]) - accz[l];
    if (g < ng) {
        const float sc = group_factor(qhx_f16_to_f32(super[g / SB]), sub[2 * g]) * dx[g];
        group_lanes(q + g * G / 2, xq + g * G, lane);
        for (int j = 0; j < 4; j++) a[j] = fmaf(lane[j], sc * 16.0f, a[j]);
        zt = fmaf(sc * (float)sub[2 * g + 1], xs[g], zt);
    }
    return (((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))) - zt;
}

void qhx_k_matvec_q4a_i8x_ref(const qhx_weight *w, const float *x, float *y, int64_t r0, int64_t r1) {
    const int64_t cols = w->cols, ns = qhx_q4a_row_supers(cols), sb = qhx_q4a_row_sub_bytes(cols);
    int8_t xq[QHX_Q4A_I8X_MAX_COLS];
    float dx[QHX_Q4A_I8X_MAX_COLS / 32], xs[QHX_Q4A_I8X_MAX_COLS / 32];
    if (cols > QHX_Q4A_I8X_MAX_COLS) {
        qhx_k_matvec_q4a_ref(w, x, y, r0, r1);
        return;
    }
    for (int64_t b = 0; b < cols / 32; b++) {
        quantize_block(x + 32 * b, xq + 32 * b, &dx[b]);
        int32_t sum = 0;
        for (int i = 0; i < 32; i++) sum += xq[32 * b + i];
        xs[b] = (float)sum;
    }
    const uint8_t *q = (const uint8_t *)w->data;
    for (int64_t r = r0; r < r1; r++)
        y[r] = row_i8x(q + r * (cols / 2), w->gscales + r * ns, w->sub + r * sb, xq, dx, xs, cols);
}

void qhx_k_matmul_q4a_i8x_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t n,
                              int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < n; t++) qhx_k_matvec_q4a_i8x_ref(w, X + t * ldx, Y + t * ldy, r0, r1);
}

// ---- the scalar model of the int8-activation prefill GEMM ---------------------------------------

/* Group g of a row (codes q at its start) against one quantized block: 16 sum u q - z sum q,
 * exact (|16 sum u q| <= 16 * 32 * 15 * 127, |z sum q| <= 255 * 32 * 127). */
static int32_t group_isum(const uint8_t *qg, int z, const int8_t *xq) {
    int32_t p = 0, s = 0;
    for (int i = 0; i < G / 2; i++) p += (qg[i] & 15) * xq[i] + (qg[i] >> 4) * xq[i + G / 2];
    for (int i = 0; i < G; i++) s += xq[i];
    return 16 * p - z * s;
}

/* Token by token, block by block: Y itself holds the running sums (f32 stores are exact), so the
 * only rounding steps are c dx and the one FMA per group, in column order. */
void qhx_k_matmul_q4a_i8gemm_ref(const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                                 int64_t n, int64_t r0, int64_t r1) {
    const int64_t cols = w->cols, ns = qhx_q4a_row_supers(cols), sb = qhx_q4a_row_sub_bytes(cols);
    if (cols % G) {
        qhx_k_matmul_q4a_ref(w, X, ldx, Y, ldy, n, r0, r1);
        return;
    }
    const uint8_t *q = (const uint8_t *)w->data;
    for (int64_t t = 0; t < n; t++) {
        float *y = Y + t * ldy;
        for (int64_t r = r0; r < r1; r++) y[r] = 0.0f;
        for (int64_t g = 0; g < cols / G; g++) {
            int8_t xq[G];
            float dx;
            quantize_block(X + t * ldx + G * g, xq, &dx);
            for (int64_t r = r0; r < r1; r++) {
                const uint8_t *sub = w->sub + r * sb;
                const float c = group_factor(qhx_f16_to_f32(w->gscales[r * ns + g / SB]), sub[2 * g]);
                const int32_t isum = group_isum(q + r * (cols / 2) + g * G / 2, sub[2 * g + 1], xq);
                y[r] = fmaf((float)isum, c * dx, y[r]);
            }
        }
    }
}
