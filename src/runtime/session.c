/* runtime/session.c: a model state plus last-position logits (see session.h). */
#include "runtime/session.h"

#include "core/alloc.h"

#include <string.h>

struct qhx_session {
    const qhx_model *m;
    qhx_model_state *st;
    float *logits; /* (vocab,) after the last call */
    int64_t n_vocab;
};

qhx_status qhx_session_create(const qhx_model *m, const qhx_session_params *params,
                              qhx_session **out, qhx_error *err) {
    *out = NULL;
    if (!m || !params) return qhx_fail(err, QHX_E_ARG, "session: model and params are required");
    qhx_session *s = qhx_calloc(1, sizeof *s);
    if (!s) return qhx_fail(err, QHX_E_NOMEM, "session: out of memory");
    s->m = m;
    s->n_vocab = qhx_model_n_vocab(m);
    qhx_state_params sp = {.n_ctx = params->n_ctx, .n_batch = params->n_batch};
    qhx_status rc = qhx_model_state_create(m, &sp, &s->st, err);
    if (rc) goto fail;
    s->logits = qhx_aligned_alloc((size_t)s->n_vocab * sizeof(float));
    if (!s->logits) {
        rc = qhx_fail(err, QHX_E_NOMEM, "session: out of memory for %lld logits", (long long)s->n_vocab);
        goto fail;
    }
    *out = s;
    return QHX_OK;
fail:
    qhx_session_free(s);
    return rc;
}

void qhx_session_free(qhx_session *s) {
    if (!s) return;
    qhx_model_state_free(s->st);
    qhx_aligned_free(s->logits);
    qhx_free(s);
}

void qhx_session_reset(qhx_session *s) {
    qhx_model_state_reset(s->st);
    memset(s->logits, 0, (size_t)s->n_vocab * sizeof(float));
}

qhx_status qhx_session_prefill(qhx_session *s, const int32_t *ids, int64_t n, float *logits_all,
                               qhx_error *err) {
    qhx_forward_opts o = {.flags = logits_all ? QHX_FWD_LOGITS_ALL : 0u,
                          .logits = logits_all ? logits_all : s->logits};
    qhx_status rc = qhx_model_forward(s->m, s->st, ids, n, &o, err);
    if (rc == QHX_OK && logits_all)
        memcpy(s->logits, logits_all + (n - 1) * s->n_vocab, (size_t)s->n_vocab * sizeof(float));
    return rc;
}

qhx_status qhx_session_decode(qhx_session *s, int32_t id, qhx_error *err) {
    qhx_forward_opts o = {.logits = s->logits};
    return qhx_model_forward(s->m, s->st, &id, 1, &o, err);
}

const float *qhx_session_logits(const qhx_session *s) { return s->logits; }
int64_t qhx_session_n_vocab(const qhx_session *s) { return s->n_vocab; }
int64_t qhx_session_n_past(const qhx_session *s) { return qhx_model_state_n_past(s->st); }

int32_t qhx_argmax_f32(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
    return (int32_t)best;
}
