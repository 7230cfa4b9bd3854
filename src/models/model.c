/* models/model.c: family dispatch behind model.h: read config.json, pick the family by
 * model_type, and forward the state and forward calls to its function table. */
#include "models/family.h"

#include "core/alloc.h"
#include "core/file.h"

#include <string.h>

qhx_model_params qhx_model_default_params(void) {
    qhx_model_params p = {.max_isa = QHX_ISA_BEST, .n_threads = 1};
    return p;
}

qhx_status qhx_model_open(const char *path, const qhx_model_params *params, qhx_model **out,
                          qhx_error *err) {
    *out = NULL;
    if (!path) return qhx_fail(err, QHX_E_ARG, "model path is NULL");
    if (!qhx_path_is_dir(path))
        return qhx_fail(err, QHX_E_IO, "%s: not a checkpoint folder (expected config.json and *.safetensors)", path);
    char *cfg_path = qhx_path_join(path, "config.json");
    if (!cfg_path) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    qhx_model *m = NULL;
    qhx_status rc = QHX_OK;
    json_t *root = qhx_json_load_file(cfg_path, err);
    if (!root) {
        rc = err && err->code ? err->code : QHX_E_FORMAT;
        goto fail;
    }
    m = qhx_calloc(1, sizeof *m);
    if (!m) {
        rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
        goto fail;
    }
    m->params = params ? *params : qhx_model_default_params();
    qhx_kern_select(m->params.max_isa, &m->kern);

    const char *model_type = NULL;
    if ((rc = qhx_json_get_str(root, "model_type", cfg_path, "", true, &model_type, err))) goto fail;
    if (!strcmp(model_type, "qwen3_5") || !strcmp(model_type, "qwen3_5_text")) {
        m->family = QHX_FAMILY_QWEN35;
        if ((rc = qhx_qwen35_parse_config(root, cfg_path, &m->cfg, err))) goto fail;
        if ((rc = qhx_qwen35_open(m, path, err))) goto fail;
    } else {
        rc = qhx_fail(err, QHX_E_UNSUPPORTED, "%s: model_type: '%s' is not supported (supported: qwen3_5, qwen3_5_text)",
                      cfg_path, model_type);
        goto fail;
    }
    json_decref(root);
    qhx_free(cfg_path);
    *out = m;
    return QHX_OK;
fail:
    qhx_model_free(m);
    json_decref(root);
    qhx_free(cfg_path);
    return rc;
}

void qhx_model_free(qhx_model *m) {
    if (!m) return;
    if (m->vt && m->impl) m->vt->free_impl(m->impl);
    qhx_free(m);
}

qhx_family qhx_model_family(const qhx_model *m) { return m->family; }
const qhx_model_config *qhx_model_get_config(const qhx_model *m) { return &m->cfg; }
int64_t qhx_model_n_vocab(const qhx_model *m) { return m->cfg.vocab_size; }
const qhx_st_tensor *qhx_model_find_tensor(const qhx_model *m, const char *name) {
    return m->weights ? qhx_st_find(m->weights, name) : NULL;
}

qhx_status qhx_model_state_create(const qhx_model *m, const qhx_state_params *params,
                                  qhx_model_state **out, qhx_error *err) {
    *out = NULL;
    if (!m || !params) return qhx_fail(err, QHX_E_ARG, "state: model and params are required");
    int64_t n_ctx = params->n_ctx, n_batch = params->n_batch;
    if (n_ctx < 1 || n_ctx > ((int64_t)1 << 24))
        return qhx_fail(err, QHX_E_ARG, "state: n_ctx %lld is outside [1, %lld]", (long long)n_ctx,
                        (long long)1 << 24);
    if (n_batch == 0) n_batch = n_ctx < 512 ? n_ctx : 512;
    if (n_batch < 1 || n_batch > n_ctx)
        return qhx_fail(err, QHX_E_ARG, "state: n_batch %lld is outside [1, n_ctx = %lld]",
                        (long long)n_batch, (long long)n_ctx);
    qhx_model_state *st = qhx_calloc(1, sizeof *st);
    if (!st) return qhx_fail(err, QHX_E_NOMEM, "state: out of memory");
    st->m = m;
    st->n_ctx = n_ctx;
    st->n_batch = n_batch;
    qhx_status rc = m->vt->state_create(st, err);
    if (rc) {
        qhx_free(st);
        return rc;
    }
    *out = st;
    return QHX_OK;
}

void qhx_model_state_free(qhx_model_state *st) {
    if (!st) return;
    if (st->impl) st->m->vt->state_free(st->impl);
    qhx_free(st);
}

void qhx_model_state_reset(qhx_model_state *st) {
    st->m->vt->state_reset(st);
    st->n_past = 0;
}

int64_t qhx_model_state_n_past(const qhx_model_state *st) { return st->n_past; }
int64_t qhx_model_state_n_ctx(const qhx_model_state *st) { return st->n_ctx; }

qhx_status qhx_model_forward(const qhx_model *m, qhx_model_state *st, const int32_t *ids,
                             int64_t n, const qhx_forward_opts *opts, qhx_error *err) {
    if (!m || !st || st->m != m) return qhx_fail(err, QHX_E_ARG, "forward: state does not belong to this model");
    if (n < 1 || !ids) return qhx_fail(err, QHX_E_ARG, "forward: no tokens");
    if (n > st->n_ctx - st->n_past)
        return qhx_fail(err, QHX_E_LIMIT, "forward: %lld tokens at position %lld exceed the context of %lld",
                        (long long)n, (long long)st->n_past, (long long)st->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return qhx_fail(err, QHX_E_ARG, "forward: token %lld: id %d is outside the vocabulary [0, %lld)",
                            (long long)i, ids[i], (long long)m->cfg.vocab_size);
    static const qhx_forward_opts none = {0};
    return m->vt->forward(m, st, ids, n, opts ? opts : &none, err);
}
