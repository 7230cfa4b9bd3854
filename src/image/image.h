/* image/image.h: the host side of the vision path. Decode PNG/JPEG bytes to RGB8 (as the
 * reference's PIL loading does: EXIF orientation applied, alpha dropped, palette and grayscale
 * expanded), resample on uint8 (antialiased bicubic/bilinear, bit-exact with PyTorch's uint8
 * kernel or with Pillow), and turn an image into the Qwen2-VL/Qwen3-VL patch matrix
 * (smart_resize, rescale + normalise, temporal duplication, merge-window patch order).
 *
 * Nothing here knows about models or tensors beyond the patch matrix; docs/vision.md has the
 * pipeline and what is bit-exact. */
#ifndef QHX_IMAGE_H
#define QHX_IMAGE_H

#include "core/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- decoded images ------------------------------------------------------ */

/* An 8-bit RGB image, row-major, interleaved: rgb[(y * width + x) * 3 + c], c = R, G, B. */
typedef struct qhx_image {
    int64_t width, height;
    uint8_t *rgb; /* owned: qhx_image_deinit */
} qhx_image;

/* Caps checked from the file header, before any pixel buffer exists. */
typedef struct qhx_image_limits {
    int64_t max_width, max_height;
    size_t max_bytes; /* decoded RGB8 bytes (width * height * 3) */
} qhx_image_limits;

#define QHX_IMAGE_MAX_SIDE 32768
#define QHX_IMAGE_MAX_BYTES ((size_t)3 << 27) /* 128 Mpx of RGB8 = 384 MiB */

/* Default caps: QHX_IMAGE_MAX_SIDE per side, QHX_IMAGE_MAX_BYTES decoded. */
qhx_image_limits qhx_image_default_limits(void);

/* Decode a PNG or JPEG image held in buf[0..len) (format from the signature). `label` names the
 * source in messages; lim NULL = defaults. Conversion to RGB follows PIL's convert("RGB"):
 * grayscale is replicated, alpha is dropped (not composited), palettes are looked up, 16-bit
 * samples keep their high byte, CMYK uses PIL's formula. The EXIF orientation (JPEG APP1, PNG
 * eXIf) is applied as PIL's ImageOps.exif_transpose does. On failure *out is zeroed.
 * Errors: QHX_E_FORMAT (not an image / corrupt / truncated), QHX_E_LIMIT (caps),
 * QHX_E_UNSUPPORTED (e.g. 12-bit JPEG), QHX_E_NOMEM. Thread-safe. */
qhx_status qhx_image_decode(const uint8_t *buf, size_t len, const qhx_image_limits *lim,
                            const char *label, qhx_image *out /* OUT */, qhx_error *err);

/* Read and decode a file (capped at 256 MiB of encoded bytes). */
qhx_status qhx_image_load(const char *path, const qhx_image_limits *lim, qhx_image *out /* OUT */,
                          qhx_error *err);

void qhx_image_deinit(qhx_image *img); /* NULL / zeroed allowed */

/* ---- resampling ---------------------------------------------------------- */

typedef enum qhx_resample {
    QHX_RESAMPLE_BILINEAR = 2, /* PIL codes: triangle filter, support 1 */
    QHX_RESAMPLE_BICUBIC = 3   /* Keys cubic, a = -0.5, support 2 */
} qhx_resample;

/* Which integer arithmetic: both are separable (horizontal pass first, uint8 in between),
 * antialiased (the kernel widens by the downscale factor) and share the geometry. */
typedef enum qhx_resize_mode {
    QHX_RESIZE_TORCH = 0, /* PyTorch's uint8 kernel (torchvision resize on a CPU uint8 tensor,
                             the HF fast processor): int16 weights, per-pass precision */
    QHX_RESIZE_PILLOW = 1 /* Pillow's Image.resize: int32 weights, 22 fractional bits */
} qhx_resize_mode;

/* Resize `in` to out_w x out_h into a new image. A pass whose axis keeps its size is skipped,
 * so a same-size resize is a copy. Errors: QHX_E_ARG (sizes), QHX_E_LIMIT, QHX_E_NOMEM. */
qhx_status qhx_image_resize(const qhx_image *in, int64_t out_w, int64_t out_h, qhx_resample filter,
                            qhx_resize_mode mode, qhx_image *out /* OUT */, qhx_error *err);

/* ---- Qwen2-VL / Qwen3-VL preprocessing ----------------------------------- */

/* preprocessor_config.json, field names as Hugging Face writes them. */
typedef struct qhx_image_prep {
    int64_t patch_size;          /* 16 */
    int64_t temporal_patch_size; /* 2 */
    int64_t merge_size;          /* 2 */
    int64_t min_pixels;          /* size.shortest_edge (or legacy min_pixels) */
    int64_t max_pixels;          /* size.longest_edge (or legacy max_pixels) */
    double rescale_factor;       /* 1/255 */
    double image_mean[3], image_std[3];
    bool do_resize, do_rescale, do_normalize;
    qhx_resample resample;       /* PIL code 2 or 3 */
    qhx_resize_mode resize_mode; /* not in the file: QHX_RESIZE_TORCH, as the fast processor */
} qhx_image_prep;

/* The Qwen3-VL defaults (spec §1.3). */
qhx_image_prep qhx_image_prep_default(void);

/* Read preprocessor_config.json at `path` over the defaults. Unknown fields are ignored; a
 * field of the wrong type or out of range is an error naming it. */
qhx_status qhx_image_prep_load(const char *path, qhx_image_prep *out /* OUT */, qhx_error *err);

/* The value of each uint8 of channel c after the fast processor's fused rescale and normalise
 * (image/preprocess.c says the float order), for the image and the video paths alike. */
void qhx_image_norm_lut(const qhx_image_prep *prep, float lut[3][256]);

/* smart_resize's last step, shared with the video processor's: H x W rounded to multiples of f,
 * then scaled so that t x h x w (t: the frames, rounded to the temporal patch; 1 for an image)
 * lies in [min_pixels, max_pixels], beta from T x H x W (T: the frames as given). */
void qhx_smart_resize_fit(double H, double W, double T, double t, double f, int64_t min_pixels, int64_t max_pixels,
                          double *out_h, double *out_w);
/* Hugging Face smart_resize: the target (h, w), multiples of `factor`, area within
 * [min_pixels, max_pixels], aspect kept. Python's round (half to even), double arithmetic in
 * the reference's order. Errors: QHX_E_ARG for sizes < 1 or an aspect ratio above 200. */
qhx_status qhx_smart_resize(int64_t height, int64_t width, int64_t factor, int64_t min_pixels,
                            int64_t max_pixels, int64_t *out_h /* OUT */, int64_t *out_w /* OUT */,
                            qhx_error *err);

/* The processor's output for one still image. */
typedef struct qhx_image_patches {
    int64_t grid_t, grid_h, grid_w; /* patches per axis: (1, h / patch, w / patch) */
    int64_t n_patches;              /* grid_t * grid_h * grid_w */
    int64_t patch_dim;              /* 3 * temporal_patch_size * patch_size^2 */
    float *data;                    /* owned, [n_patches, patch_dim] */
} qhx_image_patches;

/* pixel_values of the HF processor: smart_resize (+ resample when the size changes), rescale
 * and normalise in float32 as the fast processor's fused step does, the frame repeated to the
 * temporal patch, rows in merge-window order: n = ((bh * gw/m + bw) * m + ih) * m + iw, columns
 * f = (c * Tp + t) * P * P + py * P + px. */
qhx_status qhx_image_preprocess(const qhx_image *img, const qhx_image_prep *prep,
                                qhx_image_patches *out /* OUT */, qhx_error *err);

void qhx_image_patches_deinit(qhx_image_patches *p); /* NULL / zeroed allowed */

#endif
