/* runtime/model_api.c: the public model calls of qhx.h that sit above the family code: names,
 * limits, stop ids, and the text helpers (tokenize, detokenize, chat formatting). */
#include "core/alloc.h"
#include "core/cpu.h"
#include "io/manifest.h"
#include "ops/kv.h"
#include "runtime/model.h"
#include "runtime/sample.h"
#include "runtime/session.h"
#include "text/tokenizer.h"

#include <string.h>

const char *qhx_model_family_name(const qhx_model *m) { return m ? m->family->name : "?"; }
const char *qhx_model_family_title(const qhx_model *m) { return m ? m->family->title : "?"; }
const char *qhx_model_host_op(const qhx_model *m) { return m ? m->host_op->name : "?"; }
int qhx_model_takes_images(const qhx_model *m) { return m && m->images; }
int qhx_model_has_thinking(const qhx_model *m) { return m && m->family->chat->think_open != NULL; }

void qhx_model_chat_markers(const qhx_model *m, qhx_chat_markers *out) {
    if (!out) return;
    const qhx_chat_style *f = (m ? m->family : qhx_family_first())->chat;
    *out = (qhx_chat_markers){.turn_start = f->turn_start, .turn_end = f->turn_end,
                              .think_open = f->think_open, .think_close = f->think_close,
                              .tool_open = f->tool_open, .tool_close = f->tool_close,
                              .tool_prefix = f->tool_prefix, .tool_named = f->tool_named,
                              .tool_fn_open = f->tool_fn_open, .tool_param_open = f->tool_param_open,
                              .tool_param_close = f->tool_param_close};
}

int64_t qhx_model_kv_bytes_per_token(const qhx_model *m) {
    if (!m) return 0;
    const qhx_model_config *c = &m->cfg;
    int64_t layers = 0;
    for (int64_t l = 0; l < c->num_hidden_layers; l++) layers += c->layer_types[l] == QHX_LAYER_FULL_ATTENTION;
    return layers * 2 * (int64_t)qhx_kv_row_bytes(m->kv_cache, c->num_key_value_heads * c->head_dim);
}

int64_t qhx_model_max_context(const qhx_model *m) { return m ? m->max_context : 0; }

int64_t qhx_model_trained_context(const qhx_model *m) { return m ? m->trained_context : 0; }

qhx_status qhx_model_choose_context(const qhx_model *m, int64_t requested, int n_sessions, const char *what,
                                    qhx_context_choice *c, qhx_error *err) {
    if (!c) return qhx_fail(err, QHX_E_ARG, "context: out is NULL");
    memset(c, 0, sizeof *c);
    if (!m) return qhx_fail(err, QHX_E_ARG, "context: model is NULL");
    if (requested < 0) return qhx_fail(err, QHX_E_ARG, "%s %lld is negative", what ? what : "context", (long long)requested);
    c->trained = qhx_model_trained_context(m);
    if (requested) {
        if (c->trained > 0 && requested > c->trained)
            return qhx_fail(err, QHX_E_ARG, "%s %lld exceeds the %lld tokens the model was trained for",
                            what ? what : "context", (long long)requested, (long long)c->trained);
        c->n_ctx = requested;
        c->by_request = 1;
        return QHX_OK;
    }
    /* a bundle forged with a lower --max-context: the context it was made for */
    if (!m->plan || !m->plan->config ||
        (m->plan->source == QHX_PLAN_FROM_MANIFEST && m->plan->max_context < c->trained)) {
        c->n_ctx = qhx_model_max_context(m);
        return QHX_OK;
    }
    /* half of what is free after the weights were loaded: the KV cache is allocated, and zeroed,
       whole */
    c->n_ctx = c->trained;
    int64_t budget = qhx_mem_available_bytes() / 2 / (n_sessions > 1 ? n_sessions : 1);
    int64_t per = qhx_model_kv_bytes_per_token(m);
    if (per < 1) per = 1;
    if (budget > 0 && c->n_ctx > budget / per) {
        int64_t fit = budget / per / 256 * 256;
        c->n_ctx = fit > 256 ? fit : 256;
        c->by_memory = 1;
    }
    return QHX_OK;
}

int qhx_model_is_stop(const qhx_model *m, qhx_token t) {
    if (!m) return 0;
    if (m->plan) {
        const qhx_plan_tokens *sp = &m->plan->special;
        for (int i = 0; i < sp->n_stop_ids; i++)
            if (sp->stop_ids[i] == t) return 1;
        return 0;
    }
    return m->cfg.eos_token_id >= 0 && t == m->cfg.eos_token_id;
}

qhx_token qhx_model_token_id(const qhx_model *m, const char *text) {
    return m && m->tok && text ? qhx_tok_token_to_id(m->tok, text) : -1;
}

int32_t qhx_argmax_f32(const float *x, int64_t n) { return qhx_argmax(x, n); }

static qhx_status need_tok(const qhx_model *m, qhx_error *err) {
    if (!m) return qhx_fail(err, QHX_E_ARG, "model is NULL");
    return m->tok ? QHX_OK : qhx_fail(err, QHX_E_ARG, "the model has no tokenizer");
}

qhx_status qhx_tokenize(const qhx_model *m, const char *text, size_t len, qhx_token *ids, size_t cap,
                        size_t *n_out, qhx_error *err) {
    if (!n_out) return qhx_fail(err, QHX_E_ARG, "tokenize: n_out is NULL");
    *n_out = 0;
    qhx_status rc = need_tok(m, err);
    if (rc) return rc;
    if (!text && len) return qhx_fail(err, QHX_E_ARG, "tokenize: text is NULL");
    if (!ids && cap) return qhx_fail(err, QHX_E_ARG, "tokenize: ids is NULL with cap %zu", cap);
    return qhx_tok_encode(m->tok, text ? text : "", len, ids, cap, n_out, err);
}

qhx_status qhx_detokenize(const qhx_model *m, const qhx_token *ids, size_t n, char *buf, size_t cap,
                          size_t *len_out, qhx_error *err) {
    if (!len_out) return qhx_fail(err, QHX_E_ARG, "detokenize: len_out is NULL");
    *len_out = 0;
    qhx_status rc = need_tok(m, err);
    if (rc) return rc;
    if (!ids && n) return qhx_fail(err, QHX_E_ARG, "detokenize: ids is NULL");
    if (!buf && cap) return qhx_fail(err, QHX_E_ARG, "detokenize: buf is NULL with cap %zu", cap);
    int64_t vocab = qhx_model_n_vocab(m);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return qhx_fail(err, QHX_E_ARG, "detokenize: token %zu: id %d is outside the vocabulary [0, %lld)", i,
                            ids[i], (long long)vocab);
    rc = qhx_tok_decode(m->tok, ids, n, 0, buf, cap, len_out, err);
    if (rc) return rc;
    if (*len_out >= cap) /* no room for the terminator: the caller asked a size */
        return qhx_fail(err, QHX_E_LIMIT, "detokenize: %zu bytes + NUL do not fit in %zu", *len_out, cap);
    buf[*len_out] = '\0';
    return QHX_OK;
}

