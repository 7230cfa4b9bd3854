/* models/qwen3vl.h: Qwen3-VL (Hugging Face Qwen3VLForConditionalGeneration) in float32: the
 * vision tower (vit.h), the dense Qwen3 text decoder with interleaved M-RoPE over 3-D positions
 * and DeepStack injection, the tied lm-head. Spec: spec/qwen3_vl.md.
 *
 * Usage:
 *   qhx_qwen3vl *m;  qhx_qwen3vl_open("ckpt-dir", &m, &err);
 *   qhx_vl_image im; qhx_qwen3vl_image_load(m, "x.png", &im, &err);   // preprocess + encode
 *   qhx_vl_plan plan; qhx_qwen3vl_plan(m, ids, n, &im, &plan, &err);   // positions, image rows
 *   qhx_vl_state *s; qhx_vl_state_create(m, n_ctx, &s, &err);
 *   qhx_qwen3vl_eval(m, s, ids, n, &plan, 0, logits, QHX_VL_LOGITS_ALL, NULL, &err);
 *   ... decode: qhx_qwen3vl_eval(m, s, &tok, 1, NULL, 0, logits, QHX_VL_LOGITS_LAST, NULL, &err);
 * A model is immutable after open and may be shared; a state is used by one thread at a time. */
#ifndef QHX_MODELS_QWEN3VL_H
#define QHX_MODELS_QWEN3VL_H

#include "image/image.h"
#include "io/safetensors.h"
#include "models/vit.h"
#include "models/vl_common.h"

#define QHX_VL_MAX_LAYERS 512

/* text_config of config.json (HF names) plus the top-level token ids. */
typedef struct qhx_qwen3vl_config {
    int64_t vocab_size, hidden_size, intermediate_size, num_hidden_layers;
    int64_t num_attention_heads, num_key_value_heads, head_dim;
    double rms_norm_eps, rope_theta;
    int64_t mrope_section[3];
    int mrope_interleaved;
    int tie_word_embeddings;
    int64_t image_token_id, video_token_id, vision_start_token_id, vision_end_token_id;
    int64_t bos_token_id, eos_token_id;
} qhx_qwen3vl_config;

typedef struct qhx_vl_layer {
    float *input_layernorm, *post_attention_layernorm; /* (hidden) */
    qhx_weight q_proj, k_proj, v_proj, o_proj;         /* (Hq hd, hidden), (Hkv hd, hidden) x2, (hidden, Hq hd) */
    float *q_norm, *k_norm;                            /* (head_dim) */
    qhx_weight gate_proj, up_proj, down_proj;          /* (I, hidden) x2, (hidden, I) */
} qhx_vl_layer;

typedef struct qhx_qwen3vl {
    char *dir;
    qhx_qwen3vl_config cfg;
    qhx_st_set *st;
    qhx_vit *vit;           /* NULL when the checkpoint has no vision tower */
    qhx_image_prep prep;    /* preprocessor_config.json, or the defaults */
    qhx_weight embed;       /* (vocab, hidden) */
    qhx_weight lm_head;     /* (vocab, hidden); the embedding when tied */
    float *norm;            /* (hidden) */
    qhx_vl_layer *layers;   /* (num_hidden_layers) */
    float *inv_freq;        /* (head_dim / 2): 1 / theta^(2j / head_dim), float32 */
    unsigned char *axis;    /* (head_dim / 2): M-RoPE axis of each frequency slot, 0 T, 1 H, 2 W */
    qhx_vl_bufs bufs;
} qhx_qwen3vl;

/* Open a Hugging Face checkpoint folder (config.json, *.safetensors, preprocessor_config.json
 * optional). Errors name the file and field. */
qhx_status qhx_qwen3vl_open(const char *dir, qhx_qwen3vl **out /* OUT */, qhx_error *err);
void qhx_qwen3vl_free(qhx_qwen3vl *m); /* NULL allowed */

/* Whether a config.json (parsed) describes this family (model_type qwen3_vl). */
int qhx_qwen3vl_config_matches(const char *config_path);

/* ---- images ----------------------------------------------------------------------- */

/* One encoded image: its merged grid and the embedding rows of its tokens. */
typedef struct qhx_vl_image {
    int64_t grid_h, grid_w;   /* patches (before merging) */
    int64_t n_tokens;         /* (grid_h / m) * (grid_w / m) */
    int64_t row_width;        /* out_hidden * (1 + n_deepstack) */
    float *embd;              /* owned, (n_tokens, row_width): [merger | deepstack 0 | ...] */
} qhx_vl_image;

/* Decode, preprocess and encode an image file. */
qhx_status qhx_qwen3vl_image_load(const qhx_qwen3vl *m, const char *path, qhx_vl_image *out /* OUT */,
                                  qhx_error *err);
void qhx_vl_image_deinit(qhx_vl_image *im); /* NULL / zeroed allowed */

/* ---- prompts, states, evaluation ------------------------------------------------- */

/* Per-token M-RoPE positions and image rows of one id sequence (HF get_rope_index). */
typedef struct qhx_vl_plan {
    int64_t n;
    int64_t *pos;             /* owned, (n, 3): t, h, w */
    int64_t *img_row;         /* owned, (n): image token index, or -1 for text */
    const qhx_vl_image *image; /* borrowed, or NULL */
} qhx_vl_plan;

/* Plan ids[0..n) with at most one image: its image-pad tokens must form one run of exactly
 * image->n_tokens ids; text continues after max + 1. image NULL: no image-pad id may appear.
 * Errors (QHX_E_ARG) say what count was found and what the image needs. */
qhx_status qhx_qwen3vl_plan(const qhx_qwen3vl *m, const int32_t *ids, int64_t n,
                            const qhx_vl_image *image, qhx_vl_plan *out /* OUT */, qhx_error *err);
void qhx_vl_plan_deinit(qhx_vl_plan *p); /* NULL / zeroed allowed */

/* Mutable decoding state: KV cache (rotated K, V), the next position. */
typedef struct qhx_vl_state {
    int64_t n_ctx, n_past;
    int64_t next_pos;  /* position of the next text token: max position so far + 1 */
    float *k, *v;      /* (layers, n_ctx, Hkv * hd) */
} qhx_vl_state;

qhx_status qhx_vl_state_create(const qhx_qwen3vl *m, int64_t n_ctx, qhx_vl_state **out /* OUT */,
                               qhx_error *err);
void qhx_vl_state_free(qhx_vl_state *s); /* NULL allowed */

enum { QHX_VL_LOGITS_NONE = 0, QHX_VL_LOGITS_LAST = 1, QHX_VL_LOGITS_ALL = 2 };

/* Run ids[0..n) after the tokens already in s. plan NULL: all text, positions continue from
 * s->next_pos; else rows plan_off .. plan_off + n of plan give positions and image rows.
 * logits: (n, vocab) for ALL, (vocab) for LAST, unused for NONE. layers_out, when not NULL,
 * receives the residual stream after each decoder layer (before any DeepStack add):
 * (layers, n, hidden). Errors: QHX_E_ARG (ids out of range), QHX_E_LIMIT (context full),
 * QHX_E_NOMEM. */
qhx_status qhx_qwen3vl_eval(const qhx_qwen3vl *m, qhx_vl_state *s, const int32_t *ids, int64_t n,
                            const qhx_vl_plan *plan, int64_t plan_off, float *logits, int which,
                            float *layers_out, qhx_error *err);

#endif
