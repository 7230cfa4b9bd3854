/* ops/vit.h: the Qwen3-VL vision tower (Hugging Face Qwen3VLVisionModel): patch embedding,
 * bilinearly resampled learned position table, pre-LN ViT blocks with 2-D rotary and full
 * attention within the image, the final patch merger and the DeepStack mergers.
 * Spec: spec/qwen3_vl.md §3. Float32 compute over F32/F16/BF16 weights. */
#ifndef QHX_OPS_VIT_H
#define QHX_OPS_VIT_H

#include "image/image.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "devices/device.h"
#include "ops/weights.h"

#define QHX_VIT_MAX_DEEPSTACK 8
#define QHX_VIT_MAX_DEPTH 256


/* vision_config of config.json (HF names). */
typedef struct qhx_vit_config {
    int64_t depth, hidden_size, num_heads, intermediate_size, in_channels;
    int64_t patch_size, temporal_patch_size, spatial_merge_size, out_hidden_size;
    int64_t num_position_embeddings; /* a square: side = sqrt */
    int64_t n_deepstack, deepstack_visual_indexes[QHX_VIT_MAX_DEEPSTACK];
    qhx_act hidden_act;              /* hidden_act of the block MLPs; mergers use exact GELU */
    float layer_norm_eps;            /* 1e-6, fixed in the HF classes */
    float rope_theta;                /* 10000, fixed in the HF classes */
} qhx_vit_config;

typedef struct qhx_vit_block {
    float *norm1_w, *norm1_b, *norm2_w, *norm2_b; /* (hidden) */
    qhx_weight qkv;  float *qkv_b;                /* (3 hidden, hidden): q | k | v, head-major */
    qhx_weight proj; float *proj_b;               /* (hidden, hidden) */
    qhx_weight fc1;  float *fc1_b;                /* (intermediate, hidden) */
    qhx_weight fc2;  float *fc2_b;                /* (hidden, intermediate) */
} qhx_vit_block;

typedef struct qhx_vit_merger {
    int postshuffle;                  /* 1: LayerNorm over the 2x2 concat (DeepStack) */
    int64_t norm_dim;                 /* hidden, or 4 hidden when postshuffle */
    float *norm_w, *norm_b;           /* (norm_dim) */
    qhx_weight fc1; float *fc1_b;     /* (4 hidden, 4 hidden) */
    qhx_weight fc2; float *fc2_b;     /* (out_hidden, 4 hidden) */
} qhx_vit_merger;

typedef struct qhx_vit {
    qhx_vit_config cfg;
    qhx_weight patch_embed; float *patch_b; /* (hidden, 3 * Tp * P * P): Conv3d kernel flattened */
    float *pos_embed;                       /* (num_position_embeddings, hidden), float32 copy */
    qhx_vit_block *blocks;                  /* (depth) */
    qhx_vit_merger merger;
    qhx_vit_merger deepstack[QHX_VIT_MAX_DEEPSTACK];
    const qhx_device *dev;                  /* the owning model's device */
    qhx_wowned owned;
    void *patch_copy;                       /* aligned copy of a misaligned patch kernel, or NULL */
} qhx_vit;

/* Parse vision_config (the object; `label` names the file). */
qhx_status qhx_vit_config_parse(const json_t *vc, const char *label, qhx_vit_config *out /* OUT */,
                                qhx_error *err);

/* Bind the tower's weights under `prefix` ("model.visual.") of st, which must outlive it;
 * it runs on device d. */
qhx_status qhx_vit_load(const qhx_st_set *st, const qhx_vit_config *cfg, const char *prefix,
                        const qhx_device *d, qhx_vit **out /* OUT */, qhx_error *err);
void qhx_vit_free(qhx_vit *v); /* NULL allowed */

/* Width of one output row: out_hidden_size * (1 + n_deepstack). */
int64_t qhx_vit_row_width(const qhx_vit *v);

/* Encode one image's patches (from qhx_image_preprocess with this tower's patch geometry).
 * out: (n_patches / merge^2, row width), each row [final merger | deepstack 0 | ...], rows in
 * merge-window order (the order of the image tokens). Allocates its scratch per call.
 * Errors: QHX_E_ARG (geometry), QHX_E_NOMEM, QHX_E_LIMIT. */
qhx_status qhx_vit_encode(const qhx_vit *v, const qhx_image_patches *p, float *out, qhx_error *err);

#endif
