/* models/qwen3vl.h: the Qwen3-VL family (Hugging Face Qwen3VLForConditionalGeneration) behind
 * models/model.h, plus what only this family has: images. Float32 compute over F32/F16/BF16
 * weights. Spec: spec/qwen3_vl.md.
 *
 * Text alone goes through the generic interface (qhx_model_open, qhx_model_forward). With an
 * image:
 *   const qhx_qwen3vl *vl = qhx_qwen3vl_of(m);           // NULL for other families
 *   qhx_vl_image im; qhx_qwen3vl_image_load(vl, "x.png", &im, &err);     // decode + encode
 *   qhx_qwen3vl_attach(st, &im, ids, n, &err);  // the next n tokens are ids, with this image
 *   qhx_model_forward(m, st, ids, n, &opts, &err);        // may also be split into pieces
 *   ... decode as usual; qhx_vl_image_deinit(&im) once the prompt has been fed.
 * The ids hold <|vision_start|>, the image-pad id once per image token, <|vision_end|>. */
#ifndef QHX_MODELS_QWEN3VL_H
#define QHX_MODELS_QWEN3VL_H

#include "image/image.h"
#include "models/model.h"
#include "models/vit.h"
#include "models/weights.h"

typedef struct qhx_qwen3vl qhx_qwen3vl;

/* ---- images ----------------------------------------------------------------------------- */

/* One encoded image: its patch grid and the embedding rows of its tokens. */
typedef struct qhx_vl_image {
    int64_t grid_h, grid_w; /* patches per axis, before merging */
    int64_t n_tokens;       /* (grid_h / merge) * (grid_w / merge) */
    int64_t row_width;      /* hidden * (1 + n_deepstack) */
    float *embd;            /* owned, (n_tokens, row_width): [merger | deepstack 0 | ...] */
} qhx_vl_image;

/* The Qwen3-VL part of a model from qhx_model_open, or NULL for another family. Borrowed. */
const qhx_qwen3vl *qhx_qwen3vl_of(const qhx_model *m);

/* Decode, preprocess (preprocessor_config.json of the checkpoint) and encode an image file.
 * Errors: those of qhx_image_load / qhx_image_preprocess, QHX_E_UNSUPPORTED without a vision
 * tower, QHX_E_NOMEM. Thread-safe for one model. */
qhx_status qhx_qwen3vl_image_load(const qhx_qwen3vl *vl, const char *path,
                                  qhx_vl_image *out /* OUT, owned: qhx_vl_image_deinit */,
                                  qhx_error *err);
/* The same with at most max_tokens image tokens (0: no cap): the image is scaled down by
 * smart_resize before the vision tower runs; QHX_E_LIMIT when even the smallest size the
 * preprocessor allows (min_pixels) takes more. */
qhx_status qhx_qwen3vl_image_load_capped(const qhx_qwen3vl *vl, const char *path, int64_t max_tokens,
                                         qhx_vl_image *out /* OUT, owned: qhx_vl_image_deinit */,
                                         qhx_error *err);
/* The same from a decoded image. */
qhx_status qhx_qwen3vl_image_encode(const qhx_qwen3vl *vl, const qhx_image *img,
                                    qhx_vl_image *out /* OUT */, qhx_error *err);
void qhx_vl_image_deinit(qhx_vl_image *im); /* NULL / zeroed allowed */

/* ---- prompts ---------------------------------------------------------------------------- */

/* Announce the next n tokens of st (from its current position): ids (n,) with the image's pad
 * tokens in one run of exactly image->n_tokens. Their M-RoPE positions follow HF get_rope_index
 * (image token (r, c) at (s, s + r, s + c), text after it at s + max(rows, cols)); forward then
 * puts the merger rows at the pads and adds DeepStack feature l after decoder layer l. image
 * must stay alive until those tokens have been fed; forward refuses ids that differ from the
 * announced ones. image NULL: no pad id may appear. Errors (QHX_E_ARG) name the counts.
 * Replaces an earlier announcement; reset drops it. */
qhx_status qhx_qwen3vl_attach(qhx_model_state *st, const qhx_vl_image *image, const int32_t *ids,
                              int64_t n, qhx_error *err);

/* Positions of the announced tokens: pos (n, 3) as t, h, w; for tests. Returns the count
 * announced, or 0 when nothing is attached. Borrowed, lives until the next attach/reset. */
int64_t qhx_qwen3vl_attached_positions(const qhx_model_state *st, const int64_t **pos);

/* ---- rotary layout ---------------------------------------------------------------------- */

/* Which position axis (0 T, 1 H, 2 W) each of the half = head_dim / 2 frequency slots reads.
 * Interleaved (HF apply_interleaved_mrope): slot j with j % 3 == 1 below 3 * section[1] is H,
 * j % 3 == 2 below 3 * section[2] is W, every other slot is T, including the tail at or past
 * 3 * section (llama.cpp gives those to a fourth axis; HF does not). Chunked (Qwen2-VL):
 * section[0] slots of T, then H, then W. axis: (half,). */
void qhx_qwen3vl_mrope_axes(const int64_t section[3], bool interleaved, int64_t half, unsigned char *axis);

#endif
