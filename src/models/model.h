/* models/model.h: the model-family interface. A model is immutable after open (config, weights
 * bound in place from the mapped checkpoint, kernel table) and may be shared by several states;
 * a model state holds everything a sequence mutates (KV cache, conv FIFO, recurrent state,
 * positions, scratch). Host-ops drive a model through qhx_model_forward: a prompt is a call with
 * many tokens (batched projections, chunked delta rule), decode is a call with one token
 * (recurrent form). The model knows nothing of tokenizers or sampling.
 *
 * Usage:
 *   qhx_model *m; qhx_model_state *st; qhx_error err;
 *   qhx_model_open("ckpt/", NULL, &m, &err);
 *   qhx_model_state_create(m, &(qhx_state_params){.n_ctx = 4096}, &st, &err);
 *   qhx_model_forward(m, st, prompt, n_prompt, &(qhx_forward_opts){.logits = last}, &err);
 *   ... argmax(last) -> id; qhx_model_forward(m, st, &id, 1, &opts, &err); ...
 *   qhx_model_state_free(st); qhx_model_free(m);
 *
 * Threads: a model may be used by several threads, each with its own state; one state is not
 * re-entrant. */
#ifndef QHX_MODELS_MODEL_H
#define QHX_MODELS_MODEL_H

#include "core/status.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"

#include <stdbool.h>
#include <stdint.h>

#define QHX_MODEL_MAX_LAYERS 1024

/* qhx_family (QHX_FAMILY_QWEN3_5, QHX_FAMILY_QWEN3_VL) comes from the run plan: io/manifest.h. */

typedef enum qhx_layer_type {
    QHX_LAYER_LINEAR_ATTENTION = 0, /* Gated DeltaNet mixer */
    QHX_LAYER_FULL_ATTENTION = 1,   /* gated softmax attention mixer */
} qhx_layer_type;

/* Text-model hyperparameters under their Hugging Face config.json names (text_config of a
 * composite config). Derived values are marked. */
typedef struct qhx_model_config {
    int64_t vocab_size;
    int64_t hidden_size;
    int64_t intermediate_size;
    int64_t num_hidden_layers;
    int64_t num_attention_heads;
    int64_t num_key_value_heads;
    int64_t head_dim;
    int64_t linear_num_key_heads;
    int64_t linear_num_value_heads;
    int64_t linear_key_head_dim;
    int64_t linear_value_head_dim;
    int64_t linear_conv_kernel_dim;
    int64_t full_attention_interval;     /* 0 when layer_types was given explicitly */
    int64_t max_position_embeddings;
    int64_t mtp_num_hidden_layers;
    int64_t eos_token_id;                /* -1 when absent */
    double rms_norm_eps;
    double rope_theta;
    double partial_rotary_factor;
    int64_t mrope_section[3];            /* T, H, W frequency counts; zeros when absent */
    bool mrope_interleaved;
    bool tie_word_embeddings;
    bool attn_output_gate;
    qhx_layer_type layer_types[QHX_MODEL_MAX_LAYERS]; /* [num_hidden_layers] */
    int64_t rotary_dim;                  /* derived: int(head_dim * partial_rotary_factor) */
} qhx_model_config;

typedef struct qhx_model qhx_model;             /* opaque, immutable after open */
typedef struct qhx_model_state qhx_model_state; /* opaque, per sequence */

/* qhx_model_params and qhx_model_default_params are public: include/qhx.h. */

/* Open a Hugging Face checkpoint folder (config.json + *.safetensors). The family comes from
 * config.json model_type. Weights are used in place from the mapping (copied only where a
 * tensor is misaligned for its element type). params may be NULL (defaults).
 * Returns QHX_OK, or QHX_E_IO / QHX_E_FORMAT / QHX_E_UNSUPPORTED / QHX_E_NOMEM with err naming
 * the file and field or tensor; *out is NULL on failure. */
qhx_status qhx_model_open(const char *path, const qhx_model_params *params,
                          qhx_model **out /* OUT, owned: qhx_model_free */, qhx_error *err);
void qhx_model_free(qhx_model *m); /* NULL allowed; every state of m must be freed first */

qhx_family qhx_model_family(const qhx_model *m);
const qhx_model_config *qhx_model_get_config(const qhx_model *m); /* borrowed, lives with m */
int64_t qhx_model_n_vocab(const qhx_model *m);                    /* logits per row */
/* Any tensor of the checkpoint by exact name (e.g. the mtp.* block, which the forward pass does
 * not use), or NULL. Borrowed: lives with m; data points into the mapping. */
const qhx_st_tensor *qhx_model_find_tensor(const qhx_model *m, const char *name);

/* ---- state ------------------------------------------------------------------------------ */

typedef struct qhx_state_params {
    int64_t n_ctx;    /* most tokens the sequence may hold (KV cache rows) */
    int64_t n_batch;  /* most tokens per internal prefill step; 0: min(n_ctx, 512) */
    qhx_kv_type kv_cache; /* element type of the KV cache; DEFAULT: the model's (models/kv.h) */
} qhx_state_params;

/* Allocate a state for m: KV cache for n_ctx tokens, conv FIFOs, recurrent states and every
 * scratch buffer, so forward allocates nothing. */
qhx_status qhx_model_state_create(const qhx_model *m, const qhx_state_params *params,
                                  qhx_model_state **out /* OUT, owned: qhx_model_state_free */,
                                  qhx_error *err);
void qhx_model_state_free(qhx_model_state *st); /* NULL allowed */
/* Forget the sequence: position 0, zero conv/recurrent state. */
void qhx_model_state_reset(qhx_model_state *st);
int64_t qhx_model_state_n_past(const qhx_model_state *st); /* tokens consumed so far */
int64_t qhx_model_state_n_ctx(const qhx_model_state *st);
qhx_kv_type qhx_model_state_kv_type(const qhx_model_state *st); /* QHX_KV_F32 or QHX_KV_F16 */
/* Set the position after restoring the persistent regions (session files). 0 <= n <= n_ctx. */
void qhx_model_state_set_n_past(qhx_model_state *st, int64_t n);

/* ---- forward ---------------------------------------------------------------------------- */

/* Called after every decoder layer with the residual stream of the tokens just processed:
 * x (n, hidden_size) for positions pos0 .. pos0 + n - 1; first with layer = -1 for the input
 * rows (the embedding lookup, image rows merged). For tests and debugging. */
typedef void (*qhx_layer_cb)(void *user, int64_t layer, int64_t pos0, const float *x, int64_t n);

enum {
    QHX_FWD_LOGITS_ALL = 1u << 0,  /* logits for every token (else only the last) */
    QHX_FWD_SEQUENTIAL = 1u << 1,  /* run the tokens one at a time through the decode path */
};

typedef struct qhx_forward_opts {
    unsigned flags;          /* QHX_FWD_* */
    float *logits;           /* OUT or NULL: (n, vocab) with LOGITS_ALL, else (vocab) */
    qhx_layer_cb layer_cb;   /* optional */
    void *layer_cb_user;
    int (*abort_cb)(void *user); /* optional: non-zero between layers -> QHX_E_ABORTED */
    void *abort_cb_user;
} qhx_forward_opts;

/* The persistent parts of st (for save/restore); returns the count written, at most cap. */
typedef struct qhx_state_region qhx_state_region;
int qhx_model_state_regions(const qhx_model_state *st, qhx_state_region *out, int cap);

/* Feed n >= 1 tokens ids (n,) at positions n_past .. n_past + n - 1, updating st. n == 1 takes
 * the single-token decode path (recurrent delta rule); n > 1 the prompt path (batched
 * projections, chunked delta rule, in steps of n_batch tokens) unless QHX_FWD_SEQUENTIAL.
 * opts may be NULL (no logits). Returns QHX_E_LIMIT when n_past + n > n_ctx and QHX_E_ARG for an
 * id outside the vocabulary (st unchanged in both cases); QHX_E_ABORTED leaves st unusable
 * until reset. */
qhx_status qhx_model_forward(const qhx_model *m, qhx_model_state *st, const int32_t *ids,
                             int64_t n, const qhx_forward_opts *opts, qhx_error *err);

#endif
