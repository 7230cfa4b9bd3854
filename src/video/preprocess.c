/* video/preprocess: Qwen3VLVideoProcessor (transformers 5.24, video_processing_qwen3_vl.py) on
 * frames the reader (video/decode.c) hands over one at a time: frame sampling, the video
 * smart_resize, the image path's resampler and normalisation, temporal patching. */
#include "video/video.h"

#include "core/alloc.h"
#include "core/time.h"
#include "io/json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

qhx_video_prep qhx_video_prep_default(void) {
    qhx_video_prep p = {
        .img = qhx_image_prep_default(),
        .fps = 2.0,
        .num_frames = 0,
        .min_frames = 4,
        .max_frames = 768,
        .do_sample_frames = true,
    };
    p.img.min_pixels = 128 * 32 * 32;
    p.img.max_pixels = 768 * 32 * 32;
    return p;
}

qhx_status qhx_video_prep_load(const char *path, qhx_video_prep *out, qhx_error *err) {
    qhx_video_prep p = qhx_video_prep_default();
    /* The image fields read as the image processor reads them, over the video defaults. */
    qhx_image_prep img = p.img;
    qhx_status rc = qhx_image_prep_load(path, &img, err);
    if (rc) return rc;
    json_t *root = qhx_json_load_file(path, err);
    if (!root) return err ? err->code : QHX_E_FORMAT;
    /* qhx_image_prep_load starts from the image defaults: keep the video sizes unless the file
     * gives them. */
    json_t *size = json_object_get(root, "size");
    bool has_min = (size && json_object_get(size, "shortest_edge")) || json_object_get(root, "min_pixels");
    bool has_max = (size && json_object_get(size, "longest_edge")) || json_object_get(root, "max_pixels");
    if (!has_min) img.min_pixels = p.img.min_pixels;
    if (!has_max) img.max_pixels = p.img.max_pixels;
    p.img = img;
    if ((rc = qhx_json_get_num(root, "fps", path, "", false, &p.fps, err))) goto done;
    if ((rc = qhx_json_get_int(root, "min_frames", path, "", false, 1, 100000, &p.min_frames, err))) goto done;
    if ((rc = qhx_json_get_int(root, "max_frames", path, "", false, 1, 100000, &p.max_frames, err))) goto done;
    if ((rc = qhx_json_get_bool(root, "do_sample_frames", path, "", false, &p.do_sample_frames, err))) goto done;
    json_t *nf = json_object_get(root, "num_frames");
    if (nf && !json_is_null(nf) &&
        (rc = qhx_json_get_int(root, "num_frames", path, "", false, 1, 100000, &p.num_frames, err)))
        goto done;
    if (!(p.fps > 0) || !isfinite(p.fps) || p.fps > 1000) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: fps: must be in (0, 1000]", path);
        goto done;
    }
    if (p.img.min_pixels > p.img.max_pixels) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: size: shortest_edge > longest_edge", path);
        goto done;
    }
    *out = p;
done:
    json_decref(root);
    return rc;
}

qhx_status qhx_video_sample(int64_t n, double fps_meta, const qhx_video_prep *prep, int64_t cap, int64_t *idx,
                            int64_t *k_out, qhx_error *err) {
    if (n < 1) return qhx_fail(err, QHX_E_ARG, "video has no frames");
    const int64_t tp = prep->img.temporal_patch_size;
    int64_t k;
    if (!prep->do_sample_frames) {
        k = n; /* every frame, in order */
    } else if (prep->num_frames > 0) {
        k = (int64_t)nearbyint((double)prep->num_frames / (double)tp) * tp;
        if (k < 1) k = tp;
    } else {
        double fps = fps_meta > 0 && isfinite(fps_meta) ? fps_meta : 24.0; /* HF's default without metadata */
        double want = (double)n / fps * prep->fps;
        k = want >= 9e15 ? (int64_t)9e15 : (int64_t)want; /* Python int(): toward zero */
        if (k < prep->min_frames) k = prep->min_frames;
        if (k > prep->max_frames) k = prep->max_frames;
        if (k > n) k = n;
    }
    if (k > cap)
        return qhx_fail(err, QHX_E_LIMIT, "video: %lld frames would be sampled, more than the cap of %lld",
                        (long long)k, (long long)cap);
    if (k < 1) return qhx_fail(err, QHX_E_ARG, "video: no frame to sample");
    /* np.linspace(0, n - 1, k): step = (n-1)/(k-1), value i*step, the last one exactly n-1; then
     * numpy's round (half to even). */
    double stop = (double)(n - 1);
    if (k == 1) {
        idx[0] = 0;
    } else {
        double step = stop / (double)(k - 1);
        for (int64_t i = 0; i < k; i++) idx[i] = (int64_t)nearbyint((double)i * step);
        idx[k - 1] = n - 1;
    }
    *k_out = k;
    return QHX_OK;
}

qhx_status qhx_video_smart_resize(int64_t num_frames, int64_t height, int64_t width, int64_t tf, int64_t factor,
                                  int64_t min_pixels, int64_t max_pixels, int64_t *out_h, int64_t *out_w,
                                  qhx_error *err) {
    const int64_t cap = (int64_t)1 << 20;
    if (tf < 1 || num_frames < tf)
        return qhx_fail(err, QHX_E_ARG, "video: %lld frames, fewer than the temporal patch %lld", (long long)num_frames,
                        (long long)tf);
    if (height < 1 || width < 1 || height > cap || width > cap || factor < 1 || factor > 4096 || num_frames > cap)
        return qhx_fail(err, QHX_E_ARG, "video smart_resize: bad size %lldx%lld", (long long)height, (long long)width);
    double H = (double)height, W = (double)width, f = (double)factor, T = (double)num_frames;
    if (height < factor || width < factor) { /* scaled up first, truncated as int() does */
        double s = fmax(f / H, f / W);
        H = trunc(H * s);
        W = trunc(W * s);
    }
    double big = fmax(H, W), small = fmin(H, W);
    if (!(small >= 1) || big / small > 200)
        return qhx_fail(err, QHX_E_ARG, "video %lldx%lld: absolute aspect ratio must be smaller than 200",
                        (long long)width, (long long)height);
    double h, w, t = nearbyint(T / (double)tf) * (double)tf;
    qhx_smart_resize_fit(H, W, T, t, f, min_pixels, max_pixels, &h, &w);
    if (!(h >= f && w >= f && h <= 65536 && w <= 65536))
        return qhx_fail(err, QHX_E_ARG, "video smart_resize: %lldx%lld gives an unusable target %gx%g",
                        (long long)width, (long long)height, w, h);
    *out_h = (int64_t)h;
    *out_w = (int64_t)w;
    return QHX_OK;
}

void qhx_video_timestamps(const int64_t *idx, int64_t k, double fps, int64_t tp, double *ts) {
    if (k < 1 || tp < 1) return;
    int64_t groups = (k + tp - 1) / tp;
    for (int64_t g = 0; g < groups; g++) {
        int64_t a = g * tp, b = g * tp + tp - 1;
        double ta = (double)idx[a] / fps;
        double tb = (double)idx[b < k ? b : k - 1] / fps; /* padded with the last index */
        ts[g] = (ta + tb) / 2;
    }
}

int qhx_video_timestamp_text(double t, char *buf, size_t cap) {
    return snprintf(buf, cap, "<%.1f seconds>", t);
}

void qhx_video_patches_deinit(qhx_video_patches *p) {
    if (!p) return;
    qhx_free(p->data);
    qhx_free(p->indices);
    qhx_free(p->timestamps);
    memset(p, 0, sizeof *p);
}

/* What the per-frame callback needs to place a decoded frame. */
typedef struct frame_sink {
    const qhx_video_prep *prep;
    qhx_video_patches *out;
    int64_t h, w; /* target size */
    float lut[3][256];
    uint64_t ns;  /* spent resizing, normalising and patching (the rest of the pass is decoding) */
} frame_sink;


/* Write frame f (of the padded sequence) of size h x w into the patch rows of temporal group
 * f / tp, at t = f % tp. */
static void put_frame(frame_sink *s, int64_t f, const uint8_t *rgb) {
    const qhx_image_prep *ip = &s->prep->img;
    const int64_t P = ip->patch_size, Tp = ip->temporal_patch_size, M = ip->merge_size;
    const int64_t gh = s->out->grid_h, gw = s->out->grid_w, dim = s->out->patch_dim, w = s->w;
    const int64_t g = f / Tp, t = f % Tp;
    int64_t n = g * gh * gw;
    for (int64_t bh = 0; bh < gh / M; bh++)
        for (int64_t bw = 0; bw < gw / M; bw++)
            for (int64_t ih = 0; ih < M; ih++)
                for (int64_t iw = 0; iw < M; iw++, n++) {
                    int64_t pr = bh * M + ih, pc = bw * M + iw;
                    float *row = s->out->data + n * dim;
                    for (int64_t c = 0; c < 3; c++)
                        for (int64_t py = 0; py < P; py++) {
                            const uint8_t *pix = rgb + ((pr * P + py) * w + pc * P) * 3 + c;
                            float *dst = row + ((c * Tp + t) * P + py) * P;
                            for (int64_t px = 0; px < P; px++) dst[px] = s->lut[c][pix[px * 3]];
                        }
                }
}

static qhx_status on_frame(void *ctx, int64_t slot, const qhx_image *rgb, qhx_error *err) {
    frame_sink *s = ctx;
    const uint64_t t0 = qhx_time_ns();
    qhx_image resized = {0};
    const qhx_image *src = rgb;
    if (rgb->width != s->w || rgb->height != s->h) {
        qhx_status rc = qhx_image_resize(rgb, s->w, s->h, s->prep->img.resample, s->prep->img.resize_mode, &resized, err);
        if (rc) return rc;
        src = &resized;
    }
    put_frame(s, slot, src->rgb);
    /* the last sampled frame fills the temporal padding */
    const int64_t Tp = s->prep->img.temporal_patch_size;
    if (slot == s->out->n_sampled - 1)
        for (int64_t f = slot + 1; f < s->out->grid_t * Tp; f++) put_frame(s, f, src->rgb);
    qhx_image_deinit(&resized);
    s->ns += qhx_time_ns() - t0;
    return QHX_OK;
}

qhx_status qhx_video_preprocess_file(const char *path, const qhx_video_prep *prep, const qhx_video_limits *lim,
                                     qhx_video_patches *out, qhx_error *err) {
    qhx_video_src src = {.path = path};
    return qhx_video_preprocess(&src, prep, lim, out, err);
}

qhx_status qhx_video_plan(const qhx_video_meta *meta, const qhx_video_prep *prep, const qhx_video_limits *lim,
                          const char *label, qhx_video_patches *out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "video plan: no output");
    memset(out, 0, sizeof *out);
    if (!meta || !prep) return qhx_fail(err, QHX_E_ARG, "video plan: no video");
    const char *path = label ? label : "video";
    qhx_video_limits L = lim ? *lim : qhx_video_default_limits();
    out->meta = *meta;
    const qhx_image_prep *ip = &prep->img;
    const int64_t P = ip->patch_size, Tp = ip->temporal_patch_size, M = ip->merge_size;
    int64_t cap = L.max_frames;
    qhx_status rc;
    out->indices = qhx_malloc((size_t)cap * sizeof(int64_t));
    if (!out->indices) { rc = qhx_fail(err, QHX_E_NOMEM, "video: out of memory"); goto fail; }
    if ((rc = qhx_video_sample(out->meta.n_frames, out->meta.fps, prep, cap, out->indices, &out->n_sampled, err))) {
        qhx_fail_prefix(err, "%s", path);
        goto fail;
    }
    int64_t k = out->n_sampled;
    int64_t h = out->meta.height, w = out->meta.width;
    if (ip->do_resize) {
        /* fewer frames than the temporal patch: the processor refuses too */
        if ((rc = qhx_video_smart_resize(k, out->meta.height, out->meta.width, Tp, P * M, ip->min_pixels, ip->max_pixels,
                                         &h, &w, err))) {
            qhx_fail_prefix(err, "%s", path);
            goto fail;
        }
    }
    if (h % (P * M) || w % (P * M)) {
        rc = qhx_fail(err, QHX_E_ARG, "%s: %lldx%lld: without resizing, the sides must be multiples of %lld", path,
                      (long long)w, (long long)h, (long long)(P * M));
        goto fail;
    }
    out->grid_t = (k + Tp - 1) / Tp;
    out->grid_h = h / P;
    out->grid_w = w / P;
    out->n_patches = out->grid_t * out->grid_h * out->grid_w;
    out->patch_dim = 3 * Tp * P * P;
    out->timestamps = qhx_malloc((size_t)out->grid_t * sizeof(double));
    if (!out->timestamps) {
        rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    qhx_video_timestamps(out->indices, k, out->meta.fps, Tp, out->timestamps);
    return QHX_OK;
fail:
    qhx_video_patches_deinit(out);
    return rc;
}

qhx_status qhx_video_preprocess(const qhx_video_src *src, const qhx_video_prep *prep, const qhx_video_limits *lim,
                                qhx_video_patches *out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "video preprocess: no output");
    memset(out, 0, sizeof *out);
    if (!src || (!src->path && !src->buf) || !prep) return qhx_fail(err, QHX_E_ARG, "video preprocess: no file");
    qhx_video_limits L = lim ? *lim : qhx_video_default_limits();
    const uint64_t t0 = qhx_time_ns();
    qhx_video_meta meta;
    qhx_status rc = qhx_video_probe_src(src, &L, &meta, err);
    if (rc) return rc;
    const double probe_ms = (double)(qhx_time_ns() - t0) / 1e6;
    if ((rc = qhx_video_preprocess_probed(src, &meta, prep, &L, out, err))) return rc;
    out->decode_ms += probe_ms;
    return QHX_OK;
}

qhx_status qhx_video_preprocess_probed(const qhx_video_src *src, const qhx_video_meta *meta, const qhx_video_prep *prep,
                                       const qhx_video_limits *lim, qhx_video_patches *out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "video preprocess: no output");
    memset(out, 0, sizeof *out);
    if (!src || (!src->path && !src->buf) || !prep) return qhx_fail(err, QHX_E_ARG, "video preprocess: no file");
    const char *path = src->label ? src->label : src->path ? src->path : "video";
    qhx_video_limits L = lim ? *lim : qhx_video_default_limits();
    const uint64_t t0 = qhx_time_ns();
    qhx_status rc = qhx_video_plan(meta, prep, &L, path, out, err);
    if (rc) return rc;
    size_t n_floats, bytes;
    if (!qhx_size_mul((size_t)out->n_patches, (size_t)out->patch_dim, &n_floats) ||
        !qhx_size_mul(n_floats, sizeof(float), &bytes) || bytes > L.max_bytes) {
        rc = qhx_fail(err, QHX_E_LIMIT, "%s: %lld patches of %lld values exceed the cap of %zu bytes", path,
                      (long long)out->n_patches, (long long)out->patch_dim, L.max_bytes);
        goto fail;
    }
    out->data = qhx_malloc(bytes);
    if (!out->data) {
        rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory for %zu bytes of patches", path, bytes);
        goto fail;
    }
    frame_sink sink = {.prep = prep, .out = out, .h = out->grid_h * prep->img.patch_size,
                       .w = out->grid_w * prep->img.patch_size};
    qhx_image_norm_lut(&prep->img, sink.lut);
    if ((rc = qhx_video_decode_frames_src(src, &L, out->indices, out->n_sampled, on_frame, &sink, err))) goto fail;
    out->preprocess_ms = (double)sink.ns / 1e6;
    out->decode_ms = (double)(qhx_time_ns() - t0 - sink.ns) / 1e6;
    return QHX_OK;
fail:
    qhx_video_patches_deinit(out);
    return rc;
}
