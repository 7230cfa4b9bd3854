/* models/family.h: what model.c shares with each family implementation (qwen35.c, ...): the
 * concrete model and state heads and the per-family function table. Not for host-ops. */
#ifndef QHX_MODELS_FAMILY_H
#define QHX_MODELS_FAMILY_H

#include "io/json.h"
#include "models/model.h"

/* A piece of a state's persistent memory (for session save/restore): n_rows rows of row_bytes.
 * per_token: row r belongs to position r, so only rows [0, n_past) carry information. */
struct qhx_state_region {
    void *data;
    size_t row_bytes;
    int64_t n_rows;
    bool per_token;
};

#define QHX_STATE_MAX_REGIONS 4096

typedef struct qhx_model_vt {
    void (*free_impl)(void *impl);
    qhx_status (*state_create)(qhx_model_state *st, qhx_error *err); /* fills st->impl */
    void (*state_free)(void *impl);
    void (*state_reset)(qhx_model_state *st);
    qhx_status (*forward)(const qhx_model *m, qhx_model_state *st, const int32_t *ids, int64_t n,
                          const qhx_forward_opts *opts, qhx_error *err);
    /* Describe the persistent state (caches, recurrent state) as regions; returns the count
     * written (at most cap). Everything else in a state is scratch. */
    int (*state_regions)(const qhx_model_state *st, qhx_state_region *out, int cap);
} qhx_model_vt;

struct qhx_model {
    qhx_family family;
    const qhx_model_vt *vt;
    qhx_model_params params;
    qhx_model_config cfg;
    qhx_kernels kern;
    const qhx_st_set *weights; /* the checkpoint's tensors; owned by impl */
    void *impl;                /* family-owned: bound weights, mapping */
    /* Set by the public open (runtime/model_api.c); NULL when a family is opened directly. */
    struct qhx_plan *plan;     /* the run plan (owned) */
    struct qhx_tok *tok;       /* the tokenizer (owned) */
    struct qhx_pool *pool;     /* worker threads (owned) */
    int64_t max_context;       /* plan's, or the caller's override */
    qhx_kv_type kv_cache;      /* sessions' KV element type: the caller's, the plan's or the built-in default */
    const struct qhx_backend *backend; /* executes the graphs (runtime/backend.h) */
};

struct qhx_model_state {
    const qhx_model *m;
    int64_t n_ctx, n_batch;
    int64_t n_past; /* tokens consumed */
    qhx_kv_type kv_type; /* QHX_KV_F32 or QHX_KV_F16 (never DEFAULT) */
    void *impl;     /* family-owned: caches, recurrent state, scratch */
};

/* ---- Qwen3.5 (qwen35.c) ------------------------------------------------------------------ */

/* Fill cfg from a parsed config.json (composite with text_config, or a bare text config).
 * `label` names the file in messages. Unsupported values are refused by field name. */
qhx_status qhx_qwen35_parse_config(const json_t *root, const char *label, qhx_model_config *cfg,
                                   qhx_error *err);

/* Bind the weights of the tensor set `set` (owned from the call on; config already in m->cfg)
 * into m->impl and
 * set m->vt. */
qhx_status qhx_qwen35_open(qhx_model *m, qhx_st_set *set, const char *label, qhx_error *err);

/* ---- Qwen3-VL (qwen3vl.c) ----------------------------------------------------------------- */

/* Fill m->cfg from the parsed config.json `root` (file `label`), bind the text decoder and, when
 * present, the vision tower of the tensor set `set` (owned from the call on), with the image
 * preprocessing of preprocessor_config.json at preprocessor_path (NULL: the defaults), and set
 * m->impl / m->vt. */
qhx_status qhx_qwen3vl_open(qhx_model *m, const json_t *root, const char *label, qhx_st_set *set,
                            const char *preprocessor_path, qhx_error *err);

#endif
