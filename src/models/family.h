/* models/family.h: what model.c shares with each family implementation (qwen35.c, ...): the
 * concrete model and state heads and the per-family function table. Not for host-ops. */
#ifndef QHX_MODELS_FAMILY_H
#define QHX_MODELS_FAMILY_H

#include "io/json.h"
#include "models/model.h"

typedef struct qhx_model_vt {
    void (*free_impl)(void *impl);
    qhx_status (*state_create)(qhx_model_state *st, qhx_error *err); /* fills st->impl */
    void (*state_free)(void *impl);
    void (*state_reset)(qhx_model_state *st);
    qhx_status (*forward)(const qhx_model *m, qhx_model_state *st, const int32_t *ids, int64_t n,
                          const qhx_forward_opts *opts, qhx_error *err);
} qhx_model_vt;

struct qhx_model {
    qhx_family family;
    const qhx_model_vt *vt;
    qhx_model_params params;
    qhx_model_config cfg;
    qhx_kernels kern;
    const qhx_st_set *weights; /* the checkpoint's tensors; owned by impl */
    void *impl;                /* family-owned: bound weights, mapping */
};

struct qhx_model_state {
    const qhx_model *m;
    int64_t n_ctx, n_batch;
    int64_t n_past; /* tokens consumed */
    void *impl;     /* family-owned: caches, recurrent state, scratch */
};

/* ---- Qwen3.5 (qwen35.c) ------------------------------------------------------------------ */

/* Fill cfg from a parsed config.json (composite with text_config, or a bare text config).
 * `label` names the file in messages. Unsupported values are refused by field name. */
qhx_status qhx_qwen35_parse_config(const json_t *root, const char *label, qhx_model_config *cfg,
                                   qhx_error *err);

/* Bind the weights of the checkpoint folder `dir` (config already in m->cfg) into m->impl and
 * set m->vt. */
qhx_status qhx_qwen35_open(qhx_model *m, const char *dir, qhx_error *err);

#endif
