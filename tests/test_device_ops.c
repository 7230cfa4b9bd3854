// ctest-labels: unit;kernels
/* Every op of devices/device.h on every device of the build (devices/registry.c), in several
 * configurations, against the reference kernels (kernels/ref, kernels/quant) composed on the
 * host one step at a time: every weight format (f32, f16, bf16, q8, q4, q6, q4a), every KV cache type
 * (f32, f16, q8), odd sizes and sizes that no SIMD width divides, padded strides, and contexts
 * of several attention key blocks (up to 1200 keys).
 *
 * Tolerances, per op (|got - want| <= atol + rtol |want| unless said otherwise), and why:
 *   buffers (alloc/set/get/copy/zero), add, bias_rows, split_heads, embed_rows: exact: each
 *       output is one copy, one widening or one float addition.
 *   linear, linears: 1e-5 of sum_c |W[r,c] x[c]| (kernels_check.h: any summation order), plus,
 *       for q8 / q4 / q6 / q4a, the rounding of x to int8 per block of 32 (kc_i8x_bound; the int8 and
 *       int16 activation kernels stay inside it).
 *   linears (several layers), linears_multi: bitwise the device's own single-layer / single-row
 *       linear (the contract the server's batched decode relies on).
 *   swiglu_linear: the linear bound of gate and up carried through silu(g) * u (|silu'| <= 1.1),
 *       plus 1e-5 relative for the activation.
 *   rmsnorm, add_rmsnorm, layernorm: atol 1e-6, rtol 1e-5 (a reordered mean over <= 256 values).
 *   act (SiLU, GELU tanh / erf): atol 1e-6, rtol 1e-5 (SIMD activations within a few ulps).
 *   rope_rows: atol 1e-6, rtol 1e-6 (one rotation per pair).
 *   attention: atol 3e-5, rtol 1e-4 against a double-precision softmax over the rows the cache
 *       holds (f32 accumulation over up to 1200 keys of weights <= 1 times values <= 1, and the
 *       polynomial exp); the cache rows within 1e-6 + 1e-5 |x| plus one f16 ulp (f16) or half
 *       a q8 step (q8) of the reference rounding (the reference row is rounded itself: a device
 *       whose f32 row differs in the last bit may land on the other side of a rounding point); and a token's output is bitwise the same
 *       whether it came in a prompt batch or alone (decode).
 *   gdn_prep: atol 1e-6, rtol 1e-5 (conv + SIMD SiLU + norms); gdn_delta fed the device's own
 *       prep outputs: one token atol 1e-6 rtol 1e-5 against the recurrent reference step; the
 *       chunked form (n > 1) atol 5e-5 rtol 1e-4 (algebraically equal, rounded differently over
 *       chunks of 64); the state S likewise.
 *   vit_attention: atol 1e-5, rtol 1e-4 against a double-precision softmax over <= 300 patches.
 * And every op of the list in devices/device.h is in each device's table; sync is QHX_OK after
 * all of the above.
 *
 * A device other than the CPU runs the first configuration only (the others are the CPU's
 * kernel choices); one that reports no platform (QHX_E_UNSUPPORTED: OpenCL without a driver) is
 * skipped with a note unless QHX_REQUIRE_OPENCL=1. QHX_TEST_DEVICE=NAME checks that device
 * alone. The OpenCL device meets the same tolerances (its sums run in other orders: strided
 * work-item shares and a tree per row). */
#include "core/alloc.h"
#include "core/fp16.h"
#include "devices/device.h"
#include "kernels_check.h"
#include "kernels/ref.h"
#include "kernels/vision.h"
#include "t.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------------------------- */

static const qhx_device *D; /* the device under test */

/* whether environment variable name is set to 1 */
static int t_env_on(const char *name) {
    const char *v = getenv(name);
    return v && !strcmp(v, "1");
}
static const char *CFG;     /* its configuration, for messages */

static float *rnd(size_t n, float scale) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = scale * kc_unif();
    return p;
}

static qhx_dbuf *dbuf(size_t bytes) {
    qhx_dbuf *b = NULL;
    qhx_error err = {0};
    CHECK_EQ(D->op->buf_alloc(D, bytes, &b, &err), QHX_OK);
    return b;
}
static qhx_dbuf *upload(const float *host, size_t n) {
    qhx_dbuf *b = dbuf(n * sizeof(float));
    if (b) D->op->set(D, qhx_dv_of(b, 0), host, n * sizeof(float));
    return b;
}
static float *download(const qhx_dbuf *b, size_t off_floats, size_t n) {
    float *p = malloc(n * sizeof(float) + 1);
    D->op->get(D, qhx_dv_of(b, off_floats * sizeof(float)), p, n * sizeof(float));
    return p;
}
static void dfree(qhx_dbuf *b) { D->op->buf_free(D, b); }

/* got vs want within atol + rtol |want| (NaN fails); prints the worst element once. */
static int close_enough(const char *what, const float *got, const float *want, size_t n, double atol, double rtol) {
    double worst = 0.0;
    size_t at = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]), lim = atol + rtol * fabs((double)want[i]);
        if (!(d <= lim)) {
            if (!bad || d - lim > worst) worst = d - lim, at = i;
            bad = 1;
        }
    }
    if (bad)
        fprintf(stderr, "%s [%s]: element %zu: %.9g vs %.9g (over the tolerance by %.3g)\n", what, CFG, at,
                (double)got[at], (double)want[at], worst);
    CHECK(!bad);
    return !bad;
}

static int same_bits(const char *what, const float *a, const float *b, size_t n) {
    int ok = memcmp(a, b, n * sizeof(float)) == 0;
    if (!ok) fprintf(stderr, "%s [%s]: not bitwise equal\n", what, CFG);
    CHECK(ok);
    return ok;
}

static const char *FMT_NAME[QHX_W_COUNT] = {"f32", "f16", "bf16", "q8", "q4", "q6", "q4a", "ggml"};
static int is_quant(qhx_wfmt f) {
    return f == QHX_W_Q8 || f == QHX_W_Q4 || f == QHX_W_Q6 || f == QHX_W_Q4A || f == QHX_W_GGML;
}

/* ---- buffers ------------------------------------------------------------------------------- */

static void test_buffers(void) {
    const size_t n = 1003;
    qhx_dbuf *a = dbuf(n * sizeof(float)), *b = dbuf(n * sizeof(float));
    if (!a || !b) return;
    float *z = download(a, 0, n), *zero = calloc(n, sizeof(float));
    same_bits("alloc zeroes", z, zero, n);
    float *x = rnd(n, 1.0f);
    D->op->set(D, qhx_dv_of(a, 0), x, n * sizeof(float));
    D->op->copy(D, qhx_dv_of(b, 4), qhx_dv_of(a, 0), (n - 1) * sizeof(float));
    D->op->zero(D, qhx_dv_of(b, 4 * 100), 4 * 7);
    float *y = download(b, 0, n);
    int ok = y[0] == 0.0f;
    for (size_t i = 1; i < n; i++) ok &= (i >= 100 && i < 107) ? y[i] == 0.0f : y[i] == x[i - 1];
    CHECK(ok);
    /* a host wrapper is accepted wherever a view is */
    qhx_dbuf h = qhx_dbuf_host(x, n * sizeof(float));
    D->op->copy(D, qhx_dv_of(b, 0), qhx_dv_of(&h, 0), n * sizeof(float));
    float *w = download(b, 0, n);
    same_bits("copy from a host wrapper", w, x, n);
    free(z), free(zero), free(x), free(y), free(w);
    dfree(a), dfree(b);
}

/* ---- linear layers ------------------------------------------------------------------------- */

static double lin_tol(const qhx_weight *w, const float *x, int64_t r) {
    return 1e-5 * kc_mag(w, x, r) + (is_quant(w->fmt) ? kc_i8x_bound(w, x, r) : 0.0);
}

/* Y (n, rows) stride ldy from the device vs the reference matvec per token; padding untouched. */
static void check_linear(const qhx_weight *w, int64_t n) {
    const int64_t rows = w->rows, cols = w->cols, ldx = cols + 3, ldy = rows + 5;
    float *X = rnd((size_t)(n * ldx), 1.0f), *Y = kc_nan((size_t)(n * ldy));
    qhx_dbuf *bx = upload(X, (size_t)(n * ldx)), *by = upload(Y, (size_t)(n * ldy));
    if (!bx || !by) return;
    D->op->linear(D, w, qhx_dv_of(bx, 0), ldx, qhx_dv_of(by, 0), ldy, n);
    float *got = download(by, 0, (size_t)(n * ldy)), *ref = malloc((size_t)rows * sizeof(float));
    int ok = 1;
    for (int64_t t = 0; t < n && ok; t++) {
        kc_ref(w->fmt)(w, X + t * ldx, ref, 0, rows);
        for (int64_t r = 0; r < rows && ok; r++) {
            double d = fabs((double)got[t * ldy + r] - ref[r]), tol = lin_tol(w, X + t * ldx, r);
            if (!(d <= tol)) {
                fprintf(stderr, "linear %s %lldx%lld n=%lld [%s]: token %lld row %lld: %.9g vs %.9g (tol %.3g)\n",
                        FMT_NAME[w->fmt], (long long)rows, (long long)cols, (long long)n, CFG, (long long)t,
                        (long long)r, (double)got[t * ldy + r], (double)ref[r], tol);
                ok = 0;
            }
        }
        for (int64_t r = rows; r < ldy && ok; r++) ok = isnan(got[t * ldy + r]);
    }
    CHECK(ok);
    /* the same layers as one call of linears: bitwise the single calls */
    qhx_weight w2 = kc_make_weight(w->fmt, rows + 7, cols);
    qhx_dbuf *b2 = dbuf((size_t)(n * (rows + 7)) * sizeof(float)), *b1 = dbuf((size_t)(n * rows) * sizeof(float));
    qhx_dbuf *b3 = dbuf((size_t)(n * (rows + 7)) * sizeof(float));
    const qhx_dlin ls[2] = {{w, qhx_dv_of(b1, 0), rows}, {&w2, qhx_dv_of(b2, 0), rows + 7}};
    D->op->linears(D, ls, 2, qhx_dv_of(bx, 0), ldx, n);
    D->op->linear(D, &w2, qhx_dv_of(bx, 0), ldx, qhx_dv_of(b3, 0), rows + 7, n);
    float *g1 = download(b1, 0, (size_t)(n * rows)), *g2 = download(b2, 0, (size_t)(n * (rows + 7)));
    float *g3 = download(b3, 0, (size_t)(n * (rows + 7)));
    for (int64_t t = 0; t < n; t++) same_bits("linears vs linear", g1 + t * rows, got + t * ldy, (size_t)rows);
    same_bits("linears vs linear (second layer)", g2, g3, (size_t)(n * (rows + 7)));
    free(g1), free(g2), free(g3), dfree(b1), dfree(b2), dfree(b3);
    kc_free_weight(&w2);
    free(X), free(Y), free(got), free(ref);
    dfree(bx), dfree(by);
}

/* G = silu(gate x) * (up x) against the reference, U = up x; gate in format f, up in fu (a
 * q4a bundle's narrow rows and --tensor-precision rules give the pair two formats). */
static void check_swiglu(qhx_wfmt f, qhx_wfmt fu, int64_t rows, int64_t cols, int64_t n) {
    qhx_weight g = kc_make_weight(f, rows, cols), u = kc_make_weight(fu, rows, cols);
    float *X = rnd((size_t)(n * cols), 1.0f);
    qhx_dbuf *bx = upload(X, (size_t)(n * cols)), *bg = dbuf((size_t)(n * rows) * 4), *bu = dbuf((size_t)(n * rows) * 4);
    D->op->swiglu_linear(D, &g, &u, qhx_dv_of(bx, 0), cols, qhx_dv_of(bg, 0), qhx_dv_of(bu, 0), rows, n);
    float *G = download(bg, 0, (size_t)(n * rows)), *rg = malloc((size_t)rows * 4), *ru = malloc((size_t)rows * 4);
    int ok = 1;
    for (int64_t t = 0; t < n && ok; t++) {
        kc_ref(f)(&g, X + t * cols, rg, 0, rows);
        kc_ref(fu)(&u, X + t * cols, ru, 0, rows);
        for (int64_t r = 0; r < rows && ok; r++) {
            double tg = lin_tol(&g, X + t * cols, r), tu = lin_tol(&u, X + t * cols, r);
            double s = rg[r] / (1.0 + exp(-(double)rg[r])), want = s * ru[r];
            double tol = 1.1 * tg * (fabs(ru[r]) + tu) + (fabs(s) + 1.1 * tg) * tu + 1e-6 + 1e-5 * fabs(want);
            if (!(fabs(G[t * rows + r] - want) <= tol)) {
                fprintf(stderr, "swiglu %s/%s [%s]: token %lld row %lld: %.9g vs %.9g (tol %.3g)\n", FMT_NAME[f],
                        FMT_NAME[fu], CFG, (long long)t, (long long)r, (double)G[t * rows + r], want, tol);
                ok = 0;
            }
        }
    }
    CHECK(ok);
    free(G), free(rg), free(ru), free(X);
    dfree(bx), dfree(bg), dfree(bu);
    kc_free_weight(&g), kc_free_weight(&u);
}

/* linears_multi over nb rows: each row bitwise the device's single-row linear (and swiglu); the
 * first layer in format f, the second in fb. */
static void check_multi(qhx_wfmt f, qhx_wfmt fb, int64_t rows, int64_t cols, int64_t nb) {
    qhx_weight a = kc_make_weight(f, rows, cols), b = kc_make_weight(fb, rows, cols);
    qhx_dbuf *bx = dbuf((size_t)(nb * cols) * 4), *ya = dbuf((size_t)(nb * rows) * 4), *yb = dbuf((size_t)(nb * rows) * 4);
    qhx_dbuf *one = dbuf((size_t)rows * 4), *oneu = dbuf((size_t)rows * 4);
    float *X = rnd((size_t)(nb * cols), 1.0f);
    D->op->set(D, qhx_dv_of(bx, 0), X, (size_t)(nb * cols) * 4);
    qhx_dv xs[QHX_DEV_MULTI_MAX], as[QHX_DEV_MULTI_MAX], bs[QHX_DEV_MULTI_MAX];
    for (int64_t r = 0; r < nb; r++) {
        xs[r] = qhx_dv_of(bx, (size_t)(r * cols) * 4);
        as[r] = qhx_dv_of(ya, (size_t)(r * rows) * 4);
        bs[r] = qhx_dv_of(yb, (size_t)(r * rows) * 4);
    }
    for (int sw = 0; sw < 2; sw++) {
        const qhx_dlin_multi ls[2] = {{&a, as}, {&b, bs}};
        D->op->linears_multi(D, ls, 2, xs, nb, sw);
        float *ga = download(ya, 0, (size_t)(nb * rows)), *gb = download(yb, 0, (size_t)(nb * rows));
        for (int64_t r = 0; r < nb; r++) {
            if (sw) {
                D->op->swiglu_linear(D, &a, &b, xs[r], cols, qhx_dv_of(one, 0), qhx_dv_of(oneu, 0), rows, 1);
            } else {
                D->op->linear(D, &a, xs[r], cols, qhx_dv_of(one, 0), rows, 1);
                D->op->linear(D, &b, xs[r], cols, qhx_dv_of(oneu, 0), rows, 1);
            }
            float *s1 = download(one, 0, (size_t)rows), *s2 = download(oneu, 0, (size_t)rows);
            same_bits(sw ? "linears_multi swiglu vs single row" : "linears_multi vs single row", ga + r * rows, s1,
                      (size_t)rows);
            same_bits("linears_multi second layer vs single row", gb + r * rows, s2, (size_t)rows);
            free(s1), free(s2);
        }
        free(ga), free(gb);
    }
    free(X);
    dfree(bx), dfree(ya), dfree(yb), dfree(one), dfree(oneu);
    kc_free_weight(&a), kc_free_weight(&b);
}

static void check_embed(qhx_wfmt f, int64_t rows, int64_t cols) {
    qhx_weight w = kc_make_weight(f, rows, cols);
    const int32_t ids[4] = {0, (int32_t)rows - 1, (int32_t)(rows / 2), 0};
    qhx_dbuf *b = dbuf((size_t)(4 * cols) * 4);
    D->op->embed_rows(D, &w, ids, 4, qhx_dv_of(b, 0));
    float *got = download(b, 0, (size_t)(4 * cols)), *want = malloc((size_t)(4 * cols) * 4);
    for (int t = 0; t < 4; t++)
        for (int64_t c = 0; c < cols; c++) want[t * cols + c] = kc_wval(&w, ids[t], c);
    same_bits("embed_rows", got, want, (size_t)(4 * cols));
    free(got), free(want), dfree(b);
    kc_free_weight(&w);
}

static void test_linear(void) {
    static const int64_t fshape[][2] = {{1, 7}, {17, 33}, {67, 100}, {131, 256}};
    static const int64_t qshape[][2] = {{1, 32}, {17, 96}, {67, 160}, {131, 256}};
    static const int64_t ns[] = {1, 2, 5, 17};
    for (int f = 0; f < QHX_W_COUNT; f++) {
        if (!D->op->supports(D, (qhx_wfmt)f)) {
            fprintf(stderr, "note [%s]: no %s kernels\n", CFG, FMT_NAME[f]);
            continue;
        }
        const int64_t(*sh)[2] = is_quant((qhx_wfmt)f) ? qshape : fshape;
        for (int s = 0; s < 4; s++) {
            qhx_weight w = kc_make_weight((qhx_wfmt)f, sh[s][0], sh[s][1]);
            for (int i = 0; i < 4; i++) check_linear(&w, ns[i]);
            kc_free_weight(&w);
            check_swiglu((qhx_wfmt)f, (qhx_wfmt)f, sh[s][0], sh[s][1], s % 2 ? 1 : 9);
            check_multi((qhx_wfmt)f, (qhx_wfmt)f, sh[s][0], sh[s][1], s == 3 ? 9 : 3);
            check_embed((qhx_wfmt)f, sh[s][0], sh[s][1]);
        }
    }
    /* gate and up of two formats (the fused kernels of a device may read one format only): each
     * supported format as the gate with the next supported one as the up, so every format is
     * once each, on shapes every format takes */
    for (int f = 0; f < QHX_W_COUNT; f++) {
        if (!D->op->supports(D, (qhx_wfmt)f)) continue;
        int fu = (f + 1) % QHX_W_COUNT;
        while (fu != f && !D->op->supports(D, (qhx_wfmt)fu)) fu = (fu + 1) % QHX_W_COUNT;
        if (fu == f) continue;
        const int s = f % 4;
        check_swiglu((qhx_wfmt)f, (qhx_wfmt)fu, qshape[s][0], qshape[s][1], s % 2 ? 1 : 9);
        check_multi((qhx_wfmt)f, (qhx_wfmt)fu, qshape[s][0], qshape[s][1], 3);
    }
}

/* ---- norms, residuals, element ops --------------------------------------------------------- */

static void ref_norm(qhx_norm_kind k, const float *x, const float *w, float *y, int64_t H, float eps) {
    if (k == QHX_NORM_ZERO_CENTRED) qhx_k_rmsnorm_zc_f32_ref(x, w, y, H, eps);
    else qhx_k_rmsnorm_f32_ref(x, w, y, H, eps);
}

static void test_norms(void) {
    static const int64_t Hs[] = {7, 64, 129}, ns[] = {1, 5, 33};
    for (int kind = 0; kind < 2; kind++)
        for (int hi = 0; hi < 3; hi++)
            for (int ni = 0; ni < 3; ni++) {
                const int64_t H = Hs[hi], n = ns[ni], cnt = n * H;
                float *x = rnd((size_t)cnt, 2.0f), *a = rnd((size_t)cnt, 1.0f), *w = rnd((size_t)H, 0.5f);
                float *want = malloc((size_t)cnt * 4), *xs = malloc((size_t)cnt * 4);
                qhx_dbuf *bx = upload(x, (size_t)cnt), *ba = upload(a, (size_t)cnt), *bo = dbuf((size_t)cnt * 4);
                D->op->rmsnorm(D, (qhx_norm_kind)kind, qhx_dv_of(bx, 0), w, qhx_dv_of(bo, 0), n, H, 1e-6f);
                for (int64_t t = 0; t < n; t++) ref_norm((qhx_norm_kind)kind, x + t * H, w, want + t * H, H, 1e-6f);
                float *got = download(bo, 0, (size_t)cnt);
                close_enough("rmsnorm", got, want, (size_t)cnt, 1e-6, 1e-5);
                free(got);
                D->op->add_rmsnorm(D, (qhx_norm_kind)kind, qhx_dv_of(bx, 0), qhx_dv_of(ba, 0), w, qhx_dv_of(bo, 0), n, H,
                                   1e-6f);
                memcpy(xs, x, (size_t)cnt * 4);
                qhx_k_add_f32_ref(xs, a, cnt);
                for (int64_t t = 0; t < n; t++) ref_norm((qhx_norm_kind)kind, xs + t * H, w, want + t * H, H, 1e-6f);
                float *gx = download(bx, 0, (size_t)cnt);
                got = download(bo, 0, (size_t)cnt);
                same_bits("add_rmsnorm residual", gx, xs, (size_t)cnt);
                close_enough("add_rmsnorm", got, want, (size_t)cnt, 1e-6, 1e-5);
                /* add alone */
                D->op->add(D, qhx_dv_of(bx, 0), qhx_dv_of(ba, 0), cnt);
                qhx_k_add_f32_ref(xs, a, cnt);
                free(gx);
                gx = download(bx, 0, (size_t)cnt);
                same_bits("add", gx, xs, (size_t)cnt);
                free(x), free(a), free(w), free(want), free(xs), free(got), free(gx);
                dfree(bx), dfree(ba), dfree(bo);
            }
    /* a long add, over several pieces */
    const int64_t big = 3 * 24576 + 11;
    float *x = rnd((size_t)big, 1.0f), *a = rnd((size_t)big, 1.0f);
    qhx_dbuf *bx = upload(x, (size_t)big), *ba = upload(a, (size_t)big);
    D->op->add(D, qhx_dv_of(bx, 0), qhx_dv_of(ba, 0), big);
    qhx_k_add_f32_ref(x, a, big);
    float *g = download(bx, 0, (size_t)big);
    same_bits("add (long)", g, x, (size_t)big);
    free(x), free(a), free(g), dfree(bx), dfree(ba);
    /* split_heads: n rows of nh heads [a | b] */
    const int64_t n = 5, nh = 3, hd = 17;
    float *src = rnd((size_t)(n * nh * 2 * hd), 1.0f), *wa = malloc((size_t)(n * nh * hd) * 4), *wb = malloc((size_t)(n * nh * hd) * 4);
    for (int64_t t = 0; t < n; t++)
        for (int64_t h = 0; h < nh; h++)
            for (int64_t i = 0; i < hd; i++) {
                wa[(t * nh + h) * hd + i] = src[(t * nh + h) * 2 * hd + i];
                wb[(t * nh + h) * hd + i] = src[(t * nh + h) * 2 * hd + hd + i];
            }
    qhx_dbuf *bs = upload(src, (size_t)(n * nh * 2 * hd)), *b2 = dbuf((size_t)(2 * n * nh * hd) * 4);
    D->op->split_heads(D, qhx_dv_of(bs, 0), qhx_dv_of(b2, 0), qhx_dv_of(b2, (size_t)(n * nh * hd) * 4), n, nh, hd);
    float *ga = download(b2, 0, (size_t)(n * nh * hd)), *gb = download(b2, (size_t)(n * nh * hd), (size_t)(n * nh * hd));
    same_bits("split_heads a", ga, wa, (size_t)(n * nh * hd));
    same_bits("split_heads b", gb, wb, (size_t)(n * nh * hd));
    free(src), free(wa), free(wb), free(ga), free(gb), dfree(bs), dfree(b2);
}

/* ---- attention over the KV cache ----------------------------------------------------------- */

/* f32 -> what the cache gives back for a row of `width` values of type t (the reference's
 * rounding: f16 to nearest even; q8 per block of 32, scale max|x| / 127, halves away from 0). */
static void kv_round(qhx_kv_type t, float *x, int64_t width) {
    if (t == QHX_KV_F16)
        for (int64_t i = 0; i < width; i++) x[i] = qhx_f16_to_f32(qhx_f32_to_f16(x[i]));
    if (t != QHX_KV_Q8) return;
    for (int64_t b = 0; b < width / 32; b++) {
        float amax = 0.0f, *xb = x + 32 * b;
        for (int j = 0; j < 32; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        float id = amax > 0.0f ? 127.0f / amax : 0.0f, d = amax / 127.0f;
        for (int j = 0; j < 32; j++) xb[j] = d * (float)(int8_t)roundf(xb[j] * id);
    }
}

/* A row of the device's cache, widened (q8: scales then values). */
static void kv_widen(qhx_kv_type t, const unsigned char *row, int64_t width, float *out) {
    if (t == QHX_KV_F32) memcpy(out, row, (size_t)width * 4);
    else if (t == QHX_KV_F16)
        for (int64_t i = 0; i < width; i++) {
            uint16_t h;
            memcpy(&h, row + 2 * i, 2);
            out[i] = qhx_f16_to_f32(h);
        }
    else
        for (int64_t i = 0; i < width; i++) {
            float d;
            memcpy(&d, row + 4 * (i / 32), 4);
            out[i] = d * (float)((const int8_t *)(row + 4 * (width / 32)))[i];
        }
}

typedef struct attn_case {
    int64_t nh, nkv, hd, rot;
    int gate;
    qhx_norm_kind norm;
    int64_t n_ctx;
    int64_t steps[6]; /* token counts fed in turn; 0 ends */
} attn_case;

/* One sequence through the steps of c on the device (with the cache in type t) and on the
 * host reference; every step's output and the cache rows compared. Returns the outputs of all
 * tokens (n_ctx, nh hd) for the batch-independence check. */
static float *run_attn(const attn_case *c, qhx_kv_type t, int by_token, uint64_t seed) {
    const int64_t nh = c->nh, nkv = c->nkv, hd = c->hd, rep = nh / nkv, qw = nh * hd, kvw = nkv * hd, half = c->rot / 2;
    const int64_t N = c->n_ctx;
    kc_rng = seed;
    float *qn = rnd((size_t)hd, 0.5f), *kn = rnd((size_t)hd, 0.5f);
    float *Q = rnd((size_t)(N * qw), 1.0f), *K = rnd((size_t)(N * kvw), 1.0f), *V = rnd((size_t)(N * kvw), 1.0f);
    float *G = rnd((size_t)(N * qw), 2.0f), *ang = rnd((size_t)(N * half), 3.0f);
    float *cs = malloc((size_t)(N * half) * 4), *sn = malloc((size_t)(N * half) * 4);
    for (int64_t i = 0; i < N * half; i++) cs[i] = cosf(ang[i]), sn[i] = sinf(ang[i]);
    float *Kr = malloc((size_t)(N * kvw) * 4), *Vr = malloc((size_t)(N * kvw) * 4), *all = malloc((size_t)(N * qw) * 4);
    const size_t row = qhx_kv_row_bytes(t, kvw), kvbytes = 2 * (size_t)N * row;
    qhx_dbuf *cache = dbuf(kvbytes + 64);
    const int64_t wf = D->op->attn_work(D, N, nkv, rep, hd, t);
    const int64_t S = 512; /* the largest batch below */
    qhx_dbuf *io = dbuf((size_t)(S * (3 * qw + 2 * kvw) + wf) * 4);
    const qhx_kv_cache kv = {t, qhx_dv_of(cache, 64), 1, N, kvw}; /* an offset into its buffer, as a state has */
    const float scale = 1.0f / sqrtf((float)hd);
    int64_t past = 0;
    for (int s = 0; c->steps[s] && past < N; s++) {
        int64_t nstep = c->steps[s];
        for (int64_t b0 = 0; b0 < nstep; b0 += by_token ? 1 : S) {
            int64_t n = by_token ? 1 : (nstep - b0 < S ? nstep - b0 : S);
            qhx_dv q = qhx_dv_of(io, 0), k = qhx_dv_f(q, S * qw), v = qhx_dv_f(k, S * kvw), g = qhx_dv_f(v, S * kvw);
            qhx_dv o = qhx_dv_f(g, S * qw), w = qhx_dv_f(o, S * qw);
            D->op->set(D, q, Q + past * qw, (size_t)(n * qw) * 4);
            D->op->set(D, k, K + past * kvw, (size_t)(n * kvw) * 4);
            D->op->set(D, v, V + past * kvw, (size_t)(n * kvw) * 4);
            D->op->set(D, g, G + past * qw, (size_t)(n * qw) * 4);
            const qhx_dattn a = {.kv = &kv, .slot = 0, .nh = nh, .nkv = nkv, .hd = hd, .rot = c->rot, .norm = c->norm,
                                 .q_norm = qn, .k_norm = kn, .eps = 1e-6f, .scale = scale, .q = q, .k = k, .v = v,
                                 .cos = cs + past * half, .sin = sn + past * half,
                                 .gate = c->gate ? g : (qhx_dv){0}, .out = o, .work = w, .n_past = past, .n = n};
            D->op->attention(D, &a);
            float *got = download(io, (size_t)(S * (2 * qw + 2 * kvw)), (size_t)(n * qw));
            /* the reference: norms and rotary, the rounded rows, a double softmax */
            float *want = malloc((size_t)(n * qw) * 4), *qt = malloc((size_t)qw * 4);
            for (int64_t i = 0; i < n; i++) {
                int64_t p = past + i;
                float *kr = Kr + p * kvw;
                memcpy(kr, K + p * kvw, (size_t)kvw * 4);
                memcpy(Vr + p * kvw, V + p * kvw, (size_t)kvw * 4);
                for (int64_t h = 0; h < nkv; h++) ref_norm(c->norm, kr + h * hd, kn, kr + h * hd, hd, 1e-6f);
                qhx_k_rope_neox_f32_ref(kr, nkv, hd, c->rot, cs + p * half, sn + p * half);
                kv_round(t, kr, kvw);
                kv_round(t, Vr + p * kvw, kvw);
            }
            for (int64_t i = 0; i < n; i++) {
                int64_t p = past + i;
                memcpy(qt, Q + p * qw, (size_t)qw * 4);
                for (int64_t h = 0; h < nh; h++) ref_norm(c->norm, qt + h * hd, qn, qt + h * hd, hd, 1e-6f);
                qhx_k_rope_neox_f32_ref(qt, nh, hd, c->rot, cs + p * half, sn + p * half);
                for (int64_t h = 0; h < nh; h++) {
                    int64_t gi = h / rep;
                    double mx = -INFINITY, sum = 0.0, acc[256] = {0};
                    for (int64_t j = 0; j <= p; j++) {
                        double d = 0.0;
                        for (int64_t e = 0; e < hd; e++) d += (double)qt[h * hd + e] * Kr[j * kvw + gi * hd + e];
                        mx = fmax(mx, d * scale);
                    }
                    for (int64_t j = 0; j <= p; j++) {
                        double d = 0.0;
                        for (int64_t e = 0; e < hd; e++) d += (double)qt[h * hd + e] * Kr[j * kvw + gi * hd + e];
                        double e1 = exp(d * scale - mx);
                        sum += e1;
                        for (int64_t e = 0; e < hd; e++) acc[e] += e1 * Vr[j * kvw + gi * hd + e];
                    }
                    for (int64_t e = 0; e < hd; e++) {
                        double o1 = acc[e] / sum;
                        if (c->gate) o1 /= 1.0 + exp(-(double)G[p * qw + h * hd + e]);
                        want[i * qw + h * hd + e] = (float)o1;
                    }
                }
            }
            close_enough("attention", got, want, (size_t)(n * qw), 3e-5, 1e-4);
            memcpy(all + past * qw, got, (size_t)(n * qw) * 4);
            free(got), free(want), free(qt);
            past += n;
        }
    }
    /* the cache rows: K then V of the layer */
    unsigned char *raw = malloc(kvbytes);
    D->op->get(D, kv.at, raw, kvbytes);
    float *wide = malloc((size_t)kvw * 4);
    int ok = 1;
    for (int which = 0; which < 2 && ok; which++)
        for (int64_t p = 0; p < past && ok; p++) {
            kv_widen(t, raw + ((size_t)which * (size_t)N + (size_t)p) * row, kvw, wide);
            const float *ref = (which ? Vr : Kr) + p * kvw;
            for (int64_t i = 0; i < kvw && ok; i++) {
                /* ref is itself rounded: either way of a rounding point, one f16 ulp (<= |x| 2^-10) */
                double lim = 1e-6 + 1e-5 * fabs(ref[i]) + (t == QHX_KV_F16 ? fabs(ref[i]) * 0x1p-10 : 0.0);
                if (t == QHX_KV_Q8) { /* half a step of the block, either way of a rounding point */
                    double amax = 0.0;
                    for (int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; j++) amax = fmax(amax, fabs(ref[j]));
                    lim += 0.5 * amax / 127.0;
                }
                ok = fabs(wide[i] - ref[i]) <= lim;
                if (!ok)
                    fprintf(stderr, "kv cache %s [%s]: %s row %lld value %lld: %g vs %g\n", t == QHX_KV_F32 ? "f32" : t == QHX_KV_F16 ? "f16" : "q8", CFG,
                            which ? "V" : "K", (long long)p, (long long)i, wide[i], ref[i]);
            }
        }
    CHECK(ok);
    free(raw), free(wide), free(qn), free(kn), free(Q), free(K), free(V), free(G), free(ang), free(cs), free(sn);
    free(Kr), free(Vr);
    dfree(cache), dfree(io);
    return all;
}

static void test_attention(void) {
    static const attn_case cases[] = {
        {4, 2, 32, 8, 1, QHX_NORM_ZERO_CENTRED, 340, {37, 1, 5, 1, 290, 0}},  /* Qwen3.5-shaped: partial rotary, gate */
        {8, 1, 64, 64, 0, QHX_NORM_PLAIN, 1200, {700, 1, 400, 1, 1, 0}},      /* Qwen3-VL-shaped, five key blocks */
        {2, 2, 32, 32, 1, QHX_NORM_PLAIN, 40, {1, 1, 3, 30, 0}},              /* no GQA, odd batches */
    };
    static const qhx_kv_type types[] = {QHX_KV_F32, QHX_KV_F16, QHX_KV_Q8};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int ti = 0; ti < 3; ti++) {
            float *batch = run_attn(&cases[ci], types[ti], 0, 77 + ci);
            /* the third case fed token by token gives every token the bits of its batch */
            if (ci == 2 || (ci == 0 && ti == 1)) {
                float *one = run_attn(&cases[ci], types[ti], 1, 77 + ci);
                int64_t n = 0;
                for (int s = 0; cases[ci].steps[s]; s++) n += cases[ci].steps[s];
                same_bits("attention: a token alone vs in its batch", one, batch, (size_t)(n * cases[ci].nh * cases[ci].hd));
                free(one);
            }
            free(batch);
        }
}

/* ---- Gated DeltaNet ------------------------------------------------------------------------ */

typedef struct gdn_case {
    int64_t nk, nv, dk, dv, K;
    int64_t steps[6];
} gdn_case;

static void run_gdn(const gdn_case *c) {
    const int64_t nk = c->nk, nv = c->nv, dk = c->dk, dv = c->dv, K = c->K, rep = nv / nk;
    const int64_t kd = nk * dk, vd = nv * dv, C = 2 * kd + vd, NB = 160;
    float *conv_w = rnd((size_t)(C * K), 0.6f), *A = rnd((size_t)nv, 1.0f), *dt = rnd((size_t)nv, 0.5f), *gw = rnd((size_t)dv, 1.0f);
    for (int64_t j = 0; j < nv; j++) A[j] = -expf(A[j]);
    float *fifo = calloc((size_t)((K - 1) * C), 4), *Sref = calloc((size_t)(nv * dk * dv), 4);
    const int64_t wf = D->op->gdn_work(D, dk, dv);
    const size_t nfl = (size_t)((K - 1 + NB) * C + NB * C + NB * vd * 2 + 2 * NB * nv + nv * dk * dv + wf);
    qhx_dbuf *b = dbuf(nfl * 4);
    qhx_dv ext = qhx_dv_of(b, 0), cv = qhx_dv_f(ext, (K - 1 + NB) * C), z = qhx_dv_f(cv, NB * C), out = qhx_dv_f(z, NB * vd);
    qhx_dv beta = qhx_dv_f(out, NB * vd), g = qhx_dv_f(beta, NB * nv), S = qhx_dv_f(g, NB * nv), work = qhx_dv_f(S, nv * dk * dv);
    for (int s = 0; c->steps[s]; s++) {
        const int64_t n = c->steps[s];
        float *e = malloc((size_t)((K - 1 + n) * C) * 4), *zz = rnd((size_t)(n * vd), 1.0f);
        float *bb = rnd((size_t)(n * nv), 2.0f), *gg = rnd((size_t)(n * nv), 2.0f);
        memcpy(e, fifo, (size_t)((K - 1) * C) * 4);
        float *fresh = rnd((size_t)(n * C), 1.0f);
        memcpy(e + (K - 1) * C, fresh, (size_t)(n * C) * 4);
        D->op->set(D, ext, e, (size_t)((K - 1 + n) * C) * 4);
        D->op->set(D, z, zz, (size_t)(n * vd) * 4);
        D->op->set(D, beta, bb, (size_t)(n * nv) * 4);
        D->op->set(D, g, gg, (size_t)(n * nv) * 4);
        const qhx_dgdn a = {.n = n, .nk = nk, .nv = nv, .dk = dk, .dv = dv, .K = K, .rep = rep, .eps = 1e-6f,
                            .conv_w = conv_w, .A = A, .dt_bias = dt, .gnorm_w = gw, .ext = ext, .cv = cv, .z = z,
                            .beta = beta, .g = g, .S = S, .out = out, .work = work};
        D->op->gdn_prep(D, &a);
        /* reference prep */
        float *rcv = malloc((size_t)(n * C) * 4);
        qhx_k_conv1d_causal_f32_ref(e, conv_w, rcv, n, C, K);
        qhx_k_silu_f32_ref(rcv, n * C);
        const float sc = (float)(1.0 / sqrt((double)dk));
        for (int64_t t = 0; t < n; t++)
            for (int64_t h = 0; h < nk; h++) {
                float *qh = rcv + t * C + h * dk, *kh = rcv + t * C + kd + h * dk;
                qhx_k_l2norm_f32_ref(qh, dk, 1e-6f);
                qhx_k_l2norm_f32_ref(kh, dk, 1e-6f);
                for (int64_t i = 0; i < dk; i++) qh[i] *= sc;
            }
        float *rb = malloc((size_t)(n * nv) * 4), *rg = malloc((size_t)(n * nv) * 4);
        for (int64_t i = 0; i < n * nv; i++) {
            rb[i] = qhx_k_sigmoid_ref(bb[i]);
            rg[i] = A[i % nv] * qhx_k_softplus_ref(gg[i] + dt[i % nv]);
        }
        float *dcv = download(b, (size_t)((K - 1 + NB) * C), (size_t)(n * C));
        float *db = download(b, (size_t)((K - 1 + NB) * C + NB * C + 2 * NB * vd), (size_t)(n * nv));
        float *dg = download(b, (size_t)((K - 1 + NB) * C + NB * C + 2 * NB * vd + NB * nv), (size_t)(n * nv));
        close_enough("gdn_prep conv", dcv, rcv, (size_t)(n * C), 1e-6, 1e-5);
        close_enough("gdn_prep beta", db, rb, (size_t)(n * nv), 1e-6, 1e-5);
        close_enough("gdn_prep g", dg, rg, (size_t)(n * nv), 1e-6, 1e-5);
        D->op->gdn_delta(D, &a);
        /* reference delta on the device's own prep outputs: the recurrent step per token */
        float *ro = malloc((size_t)(n * vd) * 4), *o1 = malloc((size_t)dv * 4);
        for (int64_t t = 0; t < n; t++)
            for (int64_t j = 0; j < nv; j++) {
                int64_t kh = j / rep;
                const float *row = dcv + t * C;
                qhx_k_delta_step_f32_ref(Sref + j * dk * dv, row + kh * dk, row + kd + kh * dk, row + 2 * kd + j * dv,
                                         db[t * nv + j], dg[t * nv + j], o1, dk, dv);
                qhx_k_rmsnorm_gated_f32_ref(o1, zz + t * vd + j * dv, gw, ro + t * vd + j * dv, dv, 1e-6f);
            }
        float *dout = download(b, (size_t)((K - 1 + NB) * C + NB * C + NB * vd), (size_t)(n * vd));
        float *dS = download(b, (size_t)((K - 1 + NB) * C + NB * C + 2 * NB * vd + 2 * NB * nv), (size_t)(nv * dk * dv));
        double at = n == 1 ? 1e-6 : 5e-5, rt = n == 1 ? 1e-5 : 1e-4;
        close_enough("gdn_delta out", dout, ro, (size_t)(n * vd), at, rt);
        close_enough("gdn_delta state", dS, Sref, (size_t)(nv * dk * dv), at, rt);
        /* continue from the device's state, as a sequence does; the FIFO as the family keeps it */
        memcpy(Sref, dS, (size_t)(nv * dk * dv) * 4);
        memcpy(fifo, e + n * C, (size_t)((K - 1) * C) * 4);
        free(e), free(zz), free(bb), free(gg), free(fresh), free(rcv), free(rb), free(rg), free(dcv), free(db), free(dg);
        free(ro), free(o1), free(dout), free(dS);
    }
    free(conv_w), free(A), free(dt), free(gw), free(fifo), free(Sref);
    dfree(b);
}

static void test_gdn(void) {
    static const gdn_case cases[] = {
        {2, 2, 16, 16, 4, {5, 1, 130, 1, 64, 0}}, /* chunks of 64: whole, partial, several */
        {2, 4, 16, 16, 4, {1, 7, 1, 0}},          /* rep 2: value head j reads key head j / 2 */
        {1, 2, 16, 32, 4, {1, 3, 1, 0}},          /* dk != dv: one token takes the token split */
        {3, 3, 32, 32, 3, {70, 1, 1, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_gdn(&cases[i]);
}

/* ---- the vision tower's ops ---------------------------------------------------------------- */

static void test_vision(void) {
    /* bias rows and activations */
    const int64_t n = 9, cols = 37, ld = 41;
    float *Y = rnd((size_t)(n * ld), 1.0f), *bias = rnd((size_t)cols, 1.0f);
    qhx_dbuf *by = upload(Y, (size_t)(n * ld));
    D->op->bias_rows(D, qhx_dv_of(by, 0), ld, bias, cols, n);
    for (int64_t t = 0; t < n; t++) qhx_k_add_f32_ref(Y + t * ld, bias, cols);
    float *g = download(by, 0, (size_t)(n * ld));
    same_bits("bias_rows", g, Y, (size_t)(n * ld));
    free(Y), free(bias), free(g), dfree(by);
    static const int64_t counts[] = {1, 7, 4097, 10001};
    for (int a = 0; a < 3; a++)
        for (int ci = 0; ci < 4; ci++) {
            float *x = rnd((size_t)counts[ci], 6.0f);
            qhx_dbuf *bx = upload(x, (size_t)counts[ci]);
            D->op->act(D, (qhx_act)a, qhx_dv_of(bx, 0), counts[ci]);
            if (a == QHX_ACT_GELU_TANH) qhx_k_gelu_tanh_f32_ref(x, counts[ci]);
            else if (a == QHX_ACT_GELU_ERF) qhx_k_gelu_erf_f32_ref(x, counts[ci]);
            else qhx_k_silu_f32_ref(x, counts[ci]);
            float *got = download(bx, 0, (size_t)counts[ci]);
            close_enough("act", got, x, (size_t)counts[ci], 1e-6, 1e-5);
            free(x), free(got), dfree(bx);
        }
    /* LayerNorm */
    static const int64_t widths[] = {16, 64, 100, 256};
    for (int wi = 0; wi < 4; wi++) {
        const int64_t W = widths[wi], rows = 17;
        float *x = rnd((size_t)(rows * W), 3.0f), *w = rnd((size_t)W, 1.0f), *b = rnd((size_t)W, 1.0f);
        float *want = malloc((size_t)(rows * W) * 4);
        qhx_dbuf *bx = upload(x, (size_t)(rows * W)), *bo = dbuf((size_t)(rows * W) * 4);
        D->op->layernorm(D, qhx_dv_of(bx, 0), w, b, qhx_dv_of(bo, 0), rows, W, 1e-6f);
        for (int64_t r = 0; r < rows; r++) qhx_k_layernorm_f32_ref(x + r * W, w, b, want + r * W, W, 1e-6f);
        float *got = download(bo, 0, (size_t)(rows * W));
        close_enough("layernorm", got, want, (size_t)(rows * W), 1e-6, 1e-5);
        free(x), free(w), free(b), free(want), free(got), dfree(bx), dfree(bo);
    }
    /* rotary of n rows of nh heads, stride ld (the q part of a qkv row) */
    {
        const int64_t rows = 13, nh = 4, hd = 16, ldq = 3 * nh * hd;
        float *x = rnd((size_t)(rows * ldq), 1.0f), *ang = rnd((size_t)(rows * hd / 2), 3.0f);
        float *cs = malloc((size_t)(rows * hd / 2) * 4), *sn = malloc((size_t)(rows * hd / 2) * 4);
        for (int64_t i = 0; i < rows * hd / 2; i++) cs[i] = cosf(ang[i]), sn[i] = sinf(ang[i]);
        qhx_dbuf *bx = upload(x, (size_t)(rows * ldq));
        D->op->rope_rows(D, qhx_dv_of(bx, 0), ldq, rows, nh, hd, cs, sn);
        for (int64_t r = 0; r < rows; r++) qhx_k_rope_neox_f32_ref(x + r * ldq, nh, hd, hd, cs + r * hd / 2, sn + r * hd / 2);
        float *got = download(bx, 0, (size_t)(rows * ldq));
        close_enough("rope_rows", got, x, (size_t)(rows * ldq), 1e-6, 1e-6);
        free(x), free(ang), free(cs), free(sn), free(got), dfree(bx);
    }
    /* full attention over the patches of one image */
    static const int64_t Ns[] = {4, 6, 37, 300};
    for (int ni = 0; ni < 4; ni++) {
        const int64_t N = Ns[ni], Dm = 64, H = 4, hd = Dm / H;
        float *qkv = rnd((size_t)(N * 3 * Dm), 1.0f), *want = malloc((size_t)(N * Dm) * 4);
        const int64_t wf = D->op->vit_attn_work(D, N, Dm, H);
        qhx_dbuf *bq = upload(qkv, (size_t)(N * 3 * Dm)), *bk = dbuf((size_t)(3 * N * Dm) * 4);
        qhx_dbuf *bw = dbuf((size_t)wf * 4 + 4), *bo = dbuf((size_t)(N * Dm) * 4);
        D->op->vit_attention(D, qhx_dv_of(bq, 0), N, Dm, H, qhx_dv_of(bk, 0), qhx_dv_of(bw, 0), qhx_dv_of(bo, 0));
        const double scale = 1.0 / sqrt((double)hd);
        for (int64_t p = 0; p < N; p++)
            for (int64_t h = 0; h < H; h++) {
                double mx = -INFINITY, sum = 0.0, acc[64] = {0}, *sc = malloc((size_t)N * sizeof(double));
                for (int64_t j = 0; j < N; j++) {
                    double d = 0.0;
                    for (int64_t e = 0; e < hd; e++) d += (double)qkv[p * 3 * Dm + h * hd + e] * qkv[j * 3 * Dm + Dm + h * hd + e];
                    sc[j] = d * (double)(1.0f / sqrtf((float)hd));
                    mx = fmax(mx, sc[j]);
                }
                for (int64_t j = 0; j < N; j++) {
                    double e1 = exp(sc[j] - mx);
                    sum += e1;
                    for (int64_t e = 0; e < hd; e++) acc[e] += e1 * qkv[j * 3 * Dm + 2 * Dm + h * hd + e];
                }
                for (int64_t e = 0; e < hd; e++) want[p * Dm + h * hd + e] = (float)(acc[e] / sum);
                free(sc);
                (void)scale;
            }
        float *got = download(bo, 0, (size_t)(N * Dm));
        close_enough("vit_attention", got, want, (size_t)(N * Dm), 1e-5, 1e-4);
        free(qkv), free(want), free(got), dfree(bq), dfree(bk), dfree(bw), dfree(bo);
    }
}

/* ---- the table ------------------------------------------------------------------------------ */

/* Every op of the list (devices/device.h QHX_DEVICE_OPS) filled in, so a device that lacks a new
 * op fails here rather than in a model; and sync says QHX_OK after the ops above. */
static void test_table(void) {
#define HAS_V(name, params, args)                                                                                     \
    if (!D->op->name) {                                                                                               \
        fprintf(stderr, "%s: no op " #name "\n", CFG);                                                               \
        CHECK(0);                                                                                                     \
    }
#define HAS_R(type, name, params, args) HAS_V(name, params, args)
    QHX_DEVICE_OPS(HAS_V, HAS_R)
#undef HAS_V
#undef HAS_R
    CHECK(D->op->destroy != NULL);
    qhx_error err = {0};
    CHECK_EQ(D->op->sync(D, &err), QHX_OK);
    CHECK_EQ(err.code, QHX_OK);
}

/* ---- every device, several configurations -------------------------------------------------- */

int main(void) {
    const qhx_device_params cfgs[] = {
        {.max_isa = QHX_ISA_BEST, .n_threads = 3},
        {.max_isa = QHX_ISA_BEST, .n_threads = 2, .int8_prefill_formats = 1u << QHX_W_Q8 | 1u << QHX_W_Q4 | 1u << QHX_W_Q6,
         .int8_decode_formats = 1u << QHX_W_Q4 | 1u << QHX_W_Q6}, /* the Q4 bit selects the Q4A int8 kernels too */
        {.max_isa = QHX_ISA_REF, .n_threads = 1},
    };
    static const char *cfg_name[] = {"best ISA, f32 activations, 3 threads", "best ISA, int8 activations, 2 threads",
                                     "reference kernels, 1 thread"};
    char label[160];
    const char *only = getenv("QHX_TEST_DEVICE"); /* one device of the build, by name */
    for (int i = 0; i < qhx_device_count(); i++) {
        const qhx_device_desc *dd = qhx_device_at(i);
        if (only && strcmp(only, dd->name)) continue;
        /* the configurations are the CPU device's; another device runs the first one */
        const size_t n_cfg = strcmp(dd->name, "cpu") ? 1 : sizeof cfgs / sizeof cfgs[0];
        for (size_t c = 0; c < n_cfg; c++) {
            qhx_device *d = NULL;
            qhx_error err = {0};
            qhx_status rc = dd->create(&cfgs[c], &d, &err);
            if (rc == QHX_E_UNSUPPORTED && strcmp(dd->name, "cpu") && !t_env_on("QHX_REQUIRE_OPENCL")) {
                /* a build with OpenCL on a machine without a platform: skipped, said so */
                fprintf(stderr, "note: %s: skipped: %s (QHX_REQUIRE_OPENCL=1 makes this a failure)\n", dd->name, err.msg);
                break;
            }
            if (rc != QHX_OK) {
                fprintf(stderr, "%s: %s\n", dd->name, err.msg);
                CHECK(0);
                continue;
            }
            snprintf(label, sizeof label, "%s, %s", dd->name, cfg_name[c]);
            D = d, CFG = label;
            kc_rng = 0x9e3779b97f4a7c15ull + c;
            int before = t_failures;
            test_buffers();
            test_linear();
            test_norms();
            test_attention();
            test_gdn();
            test_vision();
            test_table();
            fprintf(stderr, "%s: %s\n", label, t_failures == before ? "ok" : "FAILED");
            d->op->destroy(d);
        }
    }
    CHECK(qhx_device_find("cpu") != NULL);
    CHECK(qhx_device_find("no-such-device") == NULL);
    (void)kc_run_all; /* kernels_check.h's driver of the kernel tests: not this file's */
    return t_done("test_device_ops");
}
