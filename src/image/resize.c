/* image/resize: antialiased separable resampling of RGB8 images in integer arithmetic, as the
 * reference does it. Two flavours share the geometry (Pillow's Resample.c lineage):
 *   - QHX_RESIZE_TORCH: PyTorch's uint8 kernel (UpSampleKernel / its AVX twin, reached from
 *     torchvision's resize on a CPU uint8 tensor, which the HF fast image processor uses):
 *     int16 weights with one precision per pass;
 *   - QHX_RESIZE_PILLOW: Pillow's Image.resize: int32 weights with 22 fractional bits.
 * Horizontal pass first, then vertical, with a rounded and clamped uint8 image in between; a
 * pass whose axis keeps its size is skipped. */
#include "image/image.h"

#include "core/alloc.h"

#include <math.h>
#include <string.h>

/* Keys cubic convolution with a = -0.5 (Pillow's bicubic_filter, PyTorch's aa_filter). */
static double bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double triangle(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Integer weights of one pass: output i reads in[xmin[i] + j] for j < xsize[i]. */
typedef struct coeffs {
    int64_t ksize;  /* row stride of w */
    int64_t *xmin, *xsize;
    int32_t *w;     /* [out, ksize] */
    int prec;       /* fractional bits */
} coeffs;

/* Free and clear: coeffs_make frees on failure, and its caller frees again on its way out. */
static void coeffs_free(coeffs *c) {
    qhx_free(c->xmin);
    qhx_free(c->xsize);
    qhx_free(c->w);
    memset(c, 0, sizeof *c);
}

static qhx_status coeffs_make(int64_t in, int64_t out, qhx_resample filter, qhx_resize_mode mode,
                              coeffs *c, qhx_error *err) {
    memset(c, 0, sizeof *c);
    double (*fn)(double) = filter == QHX_RESAMPLE_BILINEAR ? triangle : bicubic;
    double fsupport = filter == QHX_RESAMPLE_BILINEAR ? 1.0 : 2.0;
    double scale = (double)in / (double)out;
    double fs = scale < 1.0 ? 1.0 : scale;
    double support = fsupport * fs;
    c->ksize = (int64_t)ceil(support) * 2 + 1;
    double *k = qhx_malloc((size_t)out * (size_t)c->ksize * sizeof *k);
    c->xmin = qhx_malloc((size_t)out * sizeof *c->xmin);
    c->xsize = qhx_malloc((size_t)out * sizeof *c->xsize);
    c->w = qhx_calloc((size_t)out * (size_t)c->ksize, sizeof *c->w);
    if (!k || !c->xmin || !c->xsize || !c->w) {
        qhx_free(k);
        coeffs_free(c);
        return qhx_fail(err, QHX_E_NOMEM, "image resize: out of memory");
    }
    double ss = 1.0 / fs, wmax = 0.0;
    for (int64_t i = 0; i < out; i++) {
        double center = ((double)i + 0.5) * scale;
        int64_t xmin = (int64_t)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int64_t xmax = (int64_t)(center + support + 0.5);
        if (xmax > in) xmax = in;
        int64_t n = xmax - xmin;
        if (n > c->ksize) n = c->ksize;
        if (n < 0) n = 0;
        double *ki = k + i * c->ksize, ww = 0.0;
        for (int64_t j = 0; j < n; j++) {
            ki[j] = fn(((double)(j + xmin) - center + 0.5) * ss);
            ww += ki[j];
        }
        for (int64_t j = 0; j < n; j++) {
            if (ww != 0.0) ki[j] /= ww;
            if (ki[j] > wmax) wmax = ki[j];
        }
        c->xmin[i] = xmin;
        c->xsize[i] = n;
    }
    if (mode == QHX_RESIZE_PILLOW) {
        c->prec = 22;
    } else {
        /* PyTorch: the largest precision (< 22) whose doubled max weight still fits in int16. */
        int p;
        for (p = 0; p < 22; p++)
            if ((int)(0.5 + wmax * (double)(1 << (p + 1))) >= (1 << 15)) break;
        c->prec = p < 1 ? 1 : p;
    }
    double one = (double)(1 << c->prec);
    for (int64_t i = 0; i < out; i++)
        for (int64_t j = 0; j < c->xsize[i]; j++) {
            double v = k[i * c->ksize + j] * one;
            c->w[i * c->ksize + j] = (int32_t)(v < 0 ? v - 0.5 : v + 0.5);
        }
    qhx_free(k);
    return QHX_OK;
}

static inline uint8_t clamp_shift(int64_t acc, int prec) {
    int64_t v = acc >> prec; /* arithmetic shift, as both references */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* out[y][i] = sum_j in[y][xmin_i + j] w_ij; images W_in x H and W_out x H, RGB8. */
static void pass_h(const uint8_t *in, int64_t w_in, int64_t h, uint8_t *out, int64_t w_out, const coeffs *c) {
    int64_t half = (int64_t)1 << (c->prec - 1);
    for (int64_t y = 0; y < h; y++) {
        const uint8_t *row = in + y * w_in * 3;
        uint8_t *o = out + y * w_out * 3;
        for (int64_t i = 0; i < w_out; i++) {
            const int32_t *w = c->w + i * c->ksize;
            const uint8_t *p = row + c->xmin[i] * 3;
            int64_t a0 = half, a1 = half, a2 = half;
            for (int64_t j = 0; j < c->xsize[i]; j++) {
                a0 += (int64_t)p[3 * j] * w[j];
                a1 += (int64_t)p[3 * j + 1] * w[j];
                a2 += (int64_t)p[3 * j + 2] * w[j];
            }
            o[3 * i] = clamp_shift(a0, c->prec);
            o[3 * i + 1] = clamp_shift(a1, c->prec);
            o[3 * i + 2] = clamp_shift(a2, c->prec);
        }
    }
}

/* out[i][x] = sum_j in[ymin_i + j][x] w_ij; images W x H_in and W x H_out. */
static void pass_v(const uint8_t *in, int64_t w, uint8_t *out, int64_t h_out, const coeffs *c) {
    int64_t half = (int64_t)1 << (c->prec - 1);
    for (int64_t i = 0; i < h_out; i++) {
        const int32_t *wt = c->w + i * c->ksize;
        uint8_t *o = out + i * w * 3;
        for (int64_t x = 0; x < w * 3; x++) {
            int64_t a = half;
            for (int64_t j = 0; j < c->xsize[i]; j++) a += (int64_t)in[(c->xmin[i] + j) * w * 3 + x] * wt[j];
            o[x] = clamp_shift(a, c->prec);
        }
    }
}

qhx_status qhx_image_resize(const qhx_image *in, int64_t out_w, int64_t out_h, qhx_resample filter,
                            qhx_resize_mode mode, qhx_image *out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "image resize: no output");
    memset(out, 0, sizeof *out);
    if (!in || !in->rgb || in->width < 1 || in->height < 1)
        return qhx_fail(err, QHX_E_ARG, "image resize: empty input");
    if (filter != QHX_RESAMPLE_BICUBIC && filter != QHX_RESAMPLE_BILINEAR)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "image resize: resample filter %d is not supported (2 bilinear, 3 bicubic)", (int)filter);
    if (out_w < 1 || out_h < 1 || out_w > QHX_IMAGE_MAX_SIDE || out_h > QHX_IMAGE_MAX_SIDE)
        return qhx_fail(err, QHX_E_ARG, "image resize: target %lldx%lld outside 1..%d", (long long)out_w,
                        (long long)out_h, QHX_IMAGE_MAX_SIDE);
    size_t n_out, n_mid;
    if (!qhx_size_mul((size_t)out_w * (size_t)out_h, 3, &n_out) || n_out > QHX_IMAGE_MAX_BYTES ||
        !qhx_size_mul((size_t)out_w * (size_t)in->height, 3, &n_mid) || n_mid > QHX_IMAGE_MAX_BYTES)
        return qhx_fail(err, QHX_E_LIMIT, "image resize: %lldx%lld -> %lldx%lld exceeds the cap of %zu bytes",
                        (long long)in->width, (long long)in->height, (long long)out_w, (long long)out_h,
                        (size_t)QHX_IMAGE_MAX_BYTES);
    qhx_status rc = QHX_OK;
    coeffs ch = {0}, cv = {0};
    uint8_t *mid = NULL;
    const uint8_t *src = in->rgb;
    int need_h = out_w != in->width, need_v = out_h != in->height;
    if (need_h) {
        if ((rc = coeffs_make(in->width, out_w, filter, mode, &ch, err))) goto fail;
        if (!(mid = qhx_malloc(n_mid))) { rc = qhx_fail(err, QHX_E_NOMEM, "image resize: out of memory"); goto fail; }
        pass_h(src, in->width, in->height, mid, out_w, &ch);
        src = mid;
    }
    out->rgb = qhx_malloc(n_out);
    if (!out->rgb) { rc = qhx_fail(err, QHX_E_NOMEM, "image resize: out of memory"); goto fail; }
    if (need_v) {
        if ((rc = coeffs_make(in->height, out_h, filter, mode, &cv, err))) goto fail;
        pass_v(src, out_w, out->rgb, out_h, &cv);
    } else {
        memcpy(out->rgb, src, n_out);
    }
    out->width = out_w;
    out->height = out_h;
    coeffs_free(&ch);
    coeffs_free(&cv);
    qhx_free(mid);
    return QHX_OK;
fail:
    coeffs_free(&ch);
    coeffs_free(&cv);
    qhx_free(mid);
    qhx_image_deinit(out);
    return rc;
}
