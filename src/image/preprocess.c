/* image/preprocess: the Qwen2-VL / Qwen3-VL image processor (Qwen2VLImageProcessorFast):
 * smart_resize, resample on uint8, fused rescale + normalise in float32, temporal duplication
 * and merge-window patch order. Spec: spec/qwen3_vl.md §2. */
#include "image/image.h"

#include "core/alloc.h"
#include "io/json.h"

#include <math.h>
#include <string.h>

qhx_image_prep qhx_image_prep_default(void) {
    qhx_image_prep p = {
        .patch_size = 16,
        .temporal_patch_size = 2,
        .merge_size = 2,
        .min_pixels = 65536,
        .max_pixels = 16777216,
        .rescale_factor = 1.0 / 255.0,
        .image_mean = {0.5, 0.5, 0.5},
        .image_std = {0.5, 0.5, 0.5},
        .do_resize = true,
        .do_rescale = true,
        .do_normalize = true,
        .resample = QHX_RESAMPLE_BICUBIC,
        .resize_mode = QHX_RESIZE_TORCH,
    };
    return p;
}

static qhx_status get_triple(const json_t *root, const char *key, const char *label, double v[3],
                             qhx_error *err) {
    json_t *a = json_object_get(root, key);
    if (!a) return QHX_OK;
    if (json_is_number(a)) { /* a scalar applies to all channels, as HF allows */
        v[0] = v[1] = v[2] = json_number_value(a);
        return QHX_OK;
    }
    if (!json_is_array(a) || json_array_size(a) != 3)
        return qhx_fail(err, QHX_E_FORMAT, "%s: %s: expected a number or a list of 3 numbers", label, key);
    for (size_t i = 0; i < 3; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_number(x))
            return qhx_fail(err, QHX_E_FORMAT, "%s: %s[%zu]: expected a number", label, key, i);
        v[i] = json_number_value(x);
    }
    return QHX_OK;
}

qhx_status qhx_image_prep_load(const char *path, qhx_image_prep *out, qhx_error *err) {
    qhx_image_prep p = qhx_image_prep_default();
    json_t *root = qhx_json_load_file(path, err);
    if (!root) return err ? err->code : QHX_E_FORMAT;
    qhx_status rc = QHX_OK;
    const int64_t big = (int64_t)1 << 40;
    if (!json_is_object(root)) { rc = qhx_fail(err, QHX_E_FORMAT, "%s: expected a JSON object", path); goto done; }
    if ((rc = qhx_json_get_int(root, "patch_size", path, "", false, 1, 1024, &p.patch_size, err))) goto done;
    if ((rc = qhx_json_get_int(root, "temporal_patch_size", path, "", false, 1, 64, &p.temporal_patch_size, err))) goto done;
    if ((rc = qhx_json_get_int(root, "merge_size", path, "", false, 1, 64, &p.merge_size, err))) goto done;
    json_t *size = json_object_get(root, "size");
    if (size && json_is_object(size)) {
        if ((rc = qhx_json_get_int(size, "shortest_edge", path, "size", false, 1, big, &p.min_pixels, err))) goto done;
        if ((rc = qhx_json_get_int(size, "longest_edge", path, "size", false, 1, big, &p.max_pixels, err))) goto done;
    }
    /* Legacy top-level keys override size, as the HF constructor does. */
    if ((rc = qhx_json_get_int(root, "min_pixels", path, "", false, 1, big, &p.min_pixels, err))) goto done;
    if ((rc = qhx_json_get_int(root, "max_pixels", path, "", false, 1, big, &p.max_pixels, err))) goto done;
    if ((rc = qhx_json_get_num(root, "rescale_factor", path, "", false, &p.rescale_factor, err))) goto done;
    if ((rc = get_triple(root, "image_mean", path, p.image_mean, err))) goto done;
    if ((rc = get_triple(root, "image_std", path, p.image_std, err))) goto done;
    if ((rc = qhx_json_get_bool(root, "do_resize", path, "", false, &p.do_resize, err))) goto done;
    if ((rc = qhx_json_get_bool(root, "do_rescale", path, "", false, &p.do_rescale, err))) goto done;
    if ((rc = qhx_json_get_bool(root, "do_normalize", path, "", false, &p.do_normalize, err))) goto done;
    int64_t resample = p.resample;
    if ((rc = qhx_json_get_int(root, "resample", path, "", false, 0, 5, &resample, err))) goto done;
    if (resample != QHX_RESAMPLE_BICUBIC && resample != QHX_RESAMPLE_BILINEAR) {
        rc = qhx_fail(err, QHX_E_UNSUPPORTED, "%s: resample: %lld is not supported (2 bilinear, 3 bicubic)", path, (long long)resample);
        goto done;
    }
    p.resample = (qhx_resample)resample;
    if (!(p.rescale_factor > 0) || !isfinite(p.rescale_factor)) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: rescale_factor: must be positive", path);
        goto done;
    }
    for (int c = 0; c < 3; c++) {
        if (!(p.image_std[c] != 0) || !isfinite(p.image_std[c]) || !isfinite(p.image_mean[c])) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: image_mean/image_std: finite values, std non-zero", path);
            goto done;
        }
    }
    if (p.min_pixels > p.max_pixels) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: size: shortest_edge %lld > longest_edge %lld", path,
                      (long long)p.min_pixels, (long long)p.max_pixels);
        goto done;
    }
    *out = p;
done:
    json_decref(root);
    return rc;
}

/* Python's round() on a double: half to even (nearbyint in the default rounding mode). */
static double pyround(double x) { return nearbyint(x); }

void qhx_smart_resize_fit(double H, double W, double T, double t, double f, int64_t min_pixels, int64_t max_pixels,
                          double *out_h, double *out_w) {
    double h = pyround(H / f) * f, w = pyround(W / f) * f;
    if (t * h * w > (double)max_pixels) {
        double beta = sqrt(T * H * W / (double)max_pixels);
        h = fmax(f, floor(H / beta / f) * f);
        w = fmax(f, floor(W / beta / f) * f);
    } else if (t * h * w < (double)min_pixels) {
        double beta = sqrt((double)min_pixels / (T * H * W));
        h = ceil(H * beta / f) * f;
        w = ceil(W * beta / f) * f;
    }
    *out_h = h;
    *out_w = w;
}

qhx_status qhx_smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                            int64_t max_pixels, int64_t *out_h, int64_t *out_w, qhx_error *err) {
    const int64_t cap = (int64_t)1 << 24; /* keeps every product below 2^53: exact in double */
    if (height < 1 || width < 1 || height > cap || width > cap || factor < 1 || factor > 4096)
        return qhx_fail(err, QHX_E_ARG, "smart_resize: bad size %lldx%lld (factor %lld)",
                        (long long)height, (long long)width, (long long)factor);
    double H = (double)height, W = (double)width;
    double big = H > W ? H : W, small = H > W ? W : H;
    if (big / small > 200)
        return qhx_fail(err, QHX_E_ARG,
                        "image %lldx%lld: absolute aspect ratio must be smaller than 200, got %g",
                        (long long)height, (long long)width, big / small);
    double f = (double)factor;
    double h, w;
    qhx_smart_resize_fit(H, W, 1, 1, f, min_pixels, max_pixels, &h, &w);
    if (!(h >= f && w >= f && h <= 1e9 && w <= 1e9))
        return qhx_fail(err, QHX_E_ARG, "smart_resize: %lldx%lld gives an unusable target %gx%g",
                        (long long)height, (long long)width, h, w);
    *out_h = (int64_t)h;
    *out_w = (int64_t)w;
    return QHX_OK;
}

void qhx_image_patches_deinit(qhx_image_patches *p) {
    if (!p) return;
    qhx_free(p->data);
    memset(p, 0, sizeof *p);
}

void qhx_image_norm_lut(const qhx_image_prep *prep, float lut[3][256]) {
    for (int c = 0; c < 3; c++) {
        double scale = prep->do_rescale ? 1.0 / prep->rescale_factor : 1.0;
        float mean = prep->do_normalize ? (float)(prep->image_mean[c] * scale) : 0.0f;
        float std = prep->do_normalize ? (float)(prep->image_std[c] * scale) : 1.0f;
        for (int x = 0; x < 256; x++) {
            float v = (float)x - mean;
            lut[c][x] = v / std;
            if (prep->do_rescale && !prep->do_normalize) lut[c][x] = (float)x * (float)prep->rescale_factor;
        }
    }
}

qhx_status qhx_image_preprocess(const qhx_image *img, const qhx_image_prep *prep,
                                qhx_image_patches *out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "image preprocess: no output");
    memset(out, 0, sizeof *out);
    if (!img || !img->rgb || !prep) return qhx_fail(err, QHX_E_ARG, "image preprocess: no image");
    const int64_t P = prep->patch_size, Tp = prep->temporal_patch_size, M = prep->merge_size;
    int64_t h = img->height, w = img->width;
    qhx_status rc;
    if (prep->do_resize) {
        if ((rc = qhx_smart_resize(img->height, img->width, P * M, prep->min_pixels, prep->max_pixels, &h, &w, err)))
            return rc;
    }
    if (h % (P * M) || w % (P * M))
        return qhx_fail(err, QHX_E_ARG, "image %lldx%lld: without resizing, height and width must be multiples of %lld",
                        (long long)h, (long long)w, (long long)(P * M));
    qhx_image resized = {0};
    const qhx_image *src = img;
    if (h != img->height || w != img->width) {
        if ((rc = qhx_image_resize(img, w, h, prep->resample, prep->resize_mode, &resized, err))) return rc;
        src = &resized;
    }
    /* Fused rescale + normalise of the fast processor: mean and std are scaled by 1/rescale in
     * double, cast to float32, then v = fl32(fl32(x - mean') / std') per value. With both steps
     * off the value is the uint8 itself. */
    float lut[3][256];
    qhx_image_norm_lut(prep, lut);
    int64_t gh = h / P, gw = w / P;
    int64_t dim = 3 * Tp * P * P;
    size_t n_floats, bytes;
    if (!qhx_size_mul((size_t)(gh * gw), (size_t)dim, &n_floats) || !qhx_size_mul(n_floats, sizeof(float), &bytes)) {
        qhx_image_deinit(&resized);
        return qhx_fail(err, QHX_E_LIMIT, "image preprocess: too many patches");
    }
    out->data = qhx_malloc(bytes);
    if (!out->data) {
        qhx_image_deinit(&resized);
        return qhx_fail(err, QHX_E_NOMEM, "image preprocess: out of memory for %zu bytes", bytes);
    }
    out->grid_t = 1;
    out->grid_h = gh;
    out->grid_w = gw;
    out->n_patches = gh * gw;
    out->patch_dim = dim;
    int64_t n = 0;
    for (int64_t bh = 0; bh < gh / M; bh++)
        for (int64_t bw = 0; bw < gw / M; bw++)
            for (int64_t ih = 0; ih < M; ih++)
                for (int64_t iw = 0; iw < M; iw++, n++) {
                    int64_t pr = bh * M + ih, pc = bw * M + iw;
                    float *row = out->data + n * dim;
                    for (int64_t c = 0; c < 3; c++)
                        for (int64_t t = 0; t < Tp; t++) /* the still frame, repeated */
                            for (int64_t py = 0; py < P; py++)
                                for (int64_t px = 0; px < P; px++) {
                                    const uint8_t *pix = src->rgb + ((pr * P + py) * w + (pc * P + px)) * 3;
                                    row[((c * Tp + t) * P + py) * P + px] = lut[c][pix[c]];
                                }
                }
    qhx_image_deinit(&resized);
    return QHX_OK;
}
