/* runtime/session.c: the public session (qhx.h): lifetime, feeding, the internal prefill and
 * decode calls. Chat turns and generation are the host-ops' (runtime/hostop.c), entered from
 * runtime/api_frontend.c: this file calls no host-op, so the loops build on it and not around it. */
#include "runtime/session_impl.h"

#include "core/alloc.h"
#include "core/time.h"

#include <string.h>

/* ---- the busy guard -------------------------------------------------------------------------
 * One session is not re-entrant (qhx.h): a feed, generate, save or restore called from the
 * callbacks of a call running on the same session would change the state under it. */

static qhx_status enter(qhx_session *s, const char *what, qhx_error *err) {
    if (!s) return qhx_fail(err, QHX_E_ARG, "%s: session is NULL", what);
    if (s->busy) return qhx_fail(err, QHX_E_ARG, "%s: the session is busy (called from its own callback)", what);
    s->busy = true;
    return QHX_OK;
}

static qhx_status leave(qhx_session *s, qhx_status rc) {
    s->busy = false;
    return rc;
}

/* ---- lifetime ------------------------------------------------------------------------------ */

qhx_session_params qhx_session_default_params(const qhx_model *m) {
    qhx_session_params p = {0};
    p.sampling = qhx_sample_default_params();
    if (m && m->plan) {
        const qhx_plan_generation *g = &m->plan->generation;
        p.sampling.temperature = (float)g->temperature;
        p.sampling.top_k = (int32_t)g->top_k;
        p.sampling.top_p = (float)g->top_p;
        p.sampling.min_p = (float)g->min_p;
        p.sampling.repeat_penalty = (float)g->repetition_penalty;
    }
    return p;
}

qhx_status qhx_session_create(const qhx_model *m, const qhx_session_params *params,
                              qhx_session **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "session: out is NULL");
    *out = NULL;
    if (!m || !params) return qhx_fail(err, QHX_E_ARG, "session: model and params are required");
    if ((unsigned)params->prefill > QHX_PREFILL_DECODE)
        return qhx_fail(err, QHX_E_ARG, "session: prefill mode %d is not chunked (0) or decode (1)", (int)params->prefill);
    if (params->n_ctx < 0 || params->n_batch < 0)
        return qhx_fail(err, QHX_E_ARG, "session: n_ctx %lld and n_batch %lld must be >= 0", (long long)params->n_ctx,
                        (long long)params->n_batch);
    qhx_session *s = qhx_calloc(1, sizeof *s);
    if (!s) return qhx_fail(err, QHX_E_NOMEM, "session: out of memory");
    s->m = qhx_model_retain(m);
    s->params = *params;
    s->pending = -1;
    s->n_vocab = qhx_model_n_vocab(m);
    int64_t n_ctx = params->n_ctx;
    if (n_ctx == 0) n_ctx = m->max_context > 0 ? m->max_context : 4096;
    qhx_status rc;
    int64_t trained = qhx_model_trained_context(m);
    if (trained > 0 && n_ctx > trained) {
        rc = qhx_fail(err, QHX_E_LIMIT, "session: n_ctx %lld exceeds the %lld tokens the model was trained for",
                      (long long)n_ctx, (long long)trained);
        goto fail;
    }
    s->params.n_ctx = n_ctx;
    qhx_seq_params sp = {.n_ctx = n_ctx, .n_batch = params->n_batch, .kv_cache = params->kv_cache};
    if ((rc = qhx_model_state_create(m, &sp, &s->st, err))) goto fail;
    if ((rc = qhx_sampler_create_raw(&params->sampling, s->n_vocab, &s->smp, err))) goto fail;
    if (m->tok && (rc = qhx_tok_stream_create(m->tok, 0, &s->stream, err))) goto fail;
    if (params->spec_draft != 0 &&
        (rc = qhx_spec_create(m, s->st, &(qhx_spec_params){params->spec_draft, params->spec_fixed != 0}, &s->spec, err)))
        goto fail;
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
    qhx_spec_free(s->spec);
    qhx_model_state_free(s->st);
    qhx_sampler_free_raw(s->smp);
    qhx_tok_stream_free(s->stream);
    qhx_aligned_free(s->logits);
    qhx_model_release(s->m); /* last: the state above was the model's */
    qhx_free(s);
}

void qhx_session_reset(qhx_session *s) {
    if (!s || s->busy) return; /* from its own callback: the running call owns the state */
    qhx_model_state_reset(s->st);
    qhx_spec_reset(s->spec, false);
    s->spec_qn = s->spec_qi = 0;
    qhx_sampler_reset(s->smp);
    if (s->stream) {
        const char *t;
        size_t n;
        qhx_tok_stream_flush(s->stream, &t, &n, NULL);
    }
    memset(s->logits, 0, (size_t)s->n_vocab * sizeof(float));
    s->pending = -1;
    s->has_logits = s->broken = false;
    s->last_stop = QHX_STOP_LENGTH;
    s->n_fed = 0;
    s->feed_ms = 0;
}

int64_t qhx_session_n_past(const qhx_session *s) { return s ? qhx_model_state_n_past(s->st) : 0; }
int64_t qhx_session_n_ctx(const qhx_session *s) { return s ? qhx_model_state_n_ctx(s->st) : 0; }
int64_t qhx_session_n_vocab(const qhx_session *s) { return s->n_vocab; }
const float *qhx_session_logits(const qhx_session *s) { return s ? s->logits : NULL; }
float *qhx_session_logits_mut(qhx_session *s) { return s->logits; }
const qhx_model *qhx_session_model(const qhx_session *s) { return s->m; }
qhx_seq *qhx_session_state(qhx_session *s) { return s->st; }
struct qhx_sampler *qhx_session_sampler(qhx_session *s) { return s->smp; }
qhx_tok_stream *qhx_session_stream(qhx_session *s) { return s->stream; }
int32_t qhx_session_pending(const qhx_session *s) { return s->pending; }
void qhx_session_set_pending(qhx_session *s, int32_t t) { s->pending = t; }
bool qhx_session_has_logits(const qhx_session *s) { return s->has_logits; }

void qhx_session_abort_cb(const qhx_session *s, int (**cb)(void *), void **user) {
    *cb = s->params.abort_cb;
    *user = s->params.abort_user;
}

void qhx_session_generate_begin(const qhx_session *s, int64_t *n_prompt, double *prefill_ms) {
    *n_prompt = s->n_fed;
    *prefill_ms = s->feed_ms;
}

void qhx_session_generate_end(qhx_session *s, qhx_stop_reason why) {
    s->last_stop = why;
    s->n_fed = 0;
    s->feed_ms = 0;
}

void qhx_session_get_snapshot(const qhx_session *s, qhx_session_snapshot *out) {
    out->pending = s->pending;
    out->has_logits = s->has_logits;
    out->last_stop = (int32_t)s->last_stop;
}

void qhx_session_set_snapshot(qhx_session *s, const qhx_session_snapshot *in) {
    s->pending = in->pending;
    s->has_logits = in->has_logits != 0;
    s->last_stop = (qhx_stop_reason)in->last_stop;
    s->broken = false;
}

/* ---- feeding ------------------------------------------------------------------------------- */

static qhx_status forward(qhx_session *s, const int32_t *ids, int64_t n, unsigned flags, float *logits,
                          qhx_error *err) {
    if (s->broken)
        return qhx_fail(err, QHX_E_ARG, "session: an interrupted call left it incomplete; reset it first");
    qhx_forward_opts o = {.flags = flags, .logits = logits, .abort_cb = s->params.abort_cb,
                          .abort_cb_user = s->params.abort_user};
    if (s->spec) { /* speculative decoding follows every forward */
        o.layer_cb = qhx_spec_layer_cb;
        o.layer_cb_user = s->spec;
    }
    qhx_status rc = qhx_model_forward(s->m, s->st, ids, n, &o, err);
    if (rc == QHX_E_ABORTED) s->broken = true;
    if (rc) qhx_spec_reset(s->spec, true);
    if (rc == QHX_OK) {
        if (s->spec) qhx_spec_fed(s->spec, ids, n, NULL); /* a failure only turns the drafts off */
        for (int64_t i = 0; i < n; i++) qhx_sampler_accept(s->smp, ids[i]);
        s->has_logits = true;
    }
    return rc;
}

qhx_status qhx_session_prefill(qhx_session *s, const int32_t *ids, int64_t n, float *logits_all,
                               qhx_error *err) {
    qhx_status rc = forward(s, ids, n, logits_all ? QHX_FWD_LOGITS_ALL : 0u,
                            logits_all ? logits_all : s->logits, err);
    if (rc == QHX_OK && logits_all)
        memcpy(s->logits, logits_all + (n - 1) * s->n_vocab, (size_t)s->n_vocab * sizeof(float));
    return rc;
}

qhx_status qhx_session_decode(qhx_session *s, int32_t id, qhx_error *err) {
    return forward(s, &id, 1, 0u, s->logits, err);
}

/* Feed the token sampled by the last generate, if any. */
qhx_status qhx_session_feed_pending(qhx_session *s, qhx_error *err) {
    if (s->pending < 0) return QHX_OK;
    qhx_status rc = qhx_session_decode(s, s->pending, err);
    if (rc == QHX_OK) s->pending = -1;
    return rc;
}

qhx_status qhx_session_feed_ids(qhx_session *s, const qhx_token *ids, size_t n, qhx_error *err) {
    if (n == 0) return QHX_OK;
    if (!ids) return qhx_fail(err, QHX_E_ARG, "session: ids is NULL");
    int64_t held = qhx_session_n_past(s), extra = s->pending >= 0 ? 1 : 0, n_ctx = qhx_session_n_ctx(s);
    if ((uint64_t)n > (uint64_t)(n_ctx - held - extra))
        return qhx_fail(err, QHX_E_LIMIT, "context full: %lld tokens held + %zu new exceed the context of %lld",
                        (long long)(held + extra), n, (long long)n_ctx);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            return qhx_fail(err, QHX_E_ARG, "token %zu: id %d is outside the vocabulary [0, %lld)", i, ids[i],
                            (long long)s->n_vocab);
    uint64_t t0 = qhx_time_ns();
    qhx_status rc = qhx_session_feed_pending(s, err);
    if (rc) return rc;
    unsigned flags = s->params.prefill == QHX_PREFILL_DECODE ? QHX_FWD_SEQUENTIAL : 0u;
    if ((rc = forward(s, ids, (int64_t)n, flags, s->logits, err))) return rc;
    s->n_fed += (int64_t)n;
    s->feed_ms += (double)(qhx_time_ns() - t0) / 1e6;
    return QHX_OK;
}

qhx_status qhx_session_feed_announced(qhx_session *s, const qhx_token *ids, size_t n, const qhx_image_embed *images,
                                      int n_images, qhx_error *err) {
    qhx_status rc = qhx_session_feed_pending(s, err); /* first: the announcement covers exactly ids */
    if (!rc && n) rc = qhx_model_state_attach(s->st, images, n_images, ids, (int64_t)n, err);
    if (!rc) rc = qhx_session_feed_ids(s, ids, n, err);
    qhx_model_state_attach(s->st, NULL, 0, NULL, 0, NULL); /* the images are the caller's: drop them */
    return rc;
}

/* Refuse text that cannot fit before paying for its tokenization: NFC shrinks UTF-8 by at most
 * 3x (three jamo into one syllable) and one token covers at most QHX_TOK_MAX_TOKEN_BYTES bytes,
 * so len bytes make at least len / (3 * QHX_TOK_MAX_TOKEN_BYTES) tokens. */
qhx_status qhx_session_text_may_fit(const qhx_session *s, size_t len, qhx_error *err) {
    int64_t room = qhx_session_n_ctx(s) - qhx_session_n_past(s) - (s->pending >= 0 ? 1 : 0);
    uint64_t at_least = (uint64_t)len / (3u * QHX_TOK_MAX_TOKEN_BYTES);
    if (at_least > (uint64_t)room)
        return qhx_fail(err, QHX_E_LIMIT,
                        "text of %zu bytes makes at least %llu tokens, more than the %lld left in the context",
                        len, (unsigned long long)at_least, (long long)room);
    return QHX_OK;
}

/* Tokenize with the session's abort callback polled. */
qhx_status qhx_session_encode(qhx_session *s, const char *text, size_t len, int32_t **ids, size_t *n, qhx_error *err) {
    qhx_status rc = qhx_session_text_may_fit(s, len, err);
    if (rc) return rc;
    return qhx_tok_encode_alloc_abortable(s->m->tok, text, len, s->params.abort_cb, s->params.abort_user, ids, n,
                                          err);
}

qhx_stop_reason qhx_session_last_stop(const qhx_session *s) { return s ? s->last_stop : QHX_STOP_LENGTH; }

qhx_status qhx_session_set_sampling(qhx_session *s, const qhx_sample_params *p, qhx_error *err) {
    if (!s || !p) return qhx_fail(err, QHX_E_ARG, "set sampling: session or params is NULL");
    if (s->busy) return qhx_fail(err, QHX_E_ARG, "set sampling: the session is busy (called from its own callback)");
    qhx_sampler *smp = NULL;
    qhx_status rc = qhx_sampler_create_raw(p, s->n_vocab, &smp, err);
    if (rc) return rc;
    qhx_sampler_free_raw(s->smp);
    s->smp = smp;
    s->params.sampling = *p;
    return QHX_OK;
}

qhx_token qhx_session_sample(qhx_session *s) {
    return s && !s->busy ? qhx_sampler_sample(s->smp, s->logits) : -1;
}


/* ---- the public calls: NULL and re-entrancy checked once, here ------------------------------ */

qhx_status qhx_session_feed(qhx_session *s, const qhx_token *ids, size_t n, qhx_error *err) {
    qhx_status rc = enter(s, "feed", err);
    return rc ? rc : leave(s, qhx_session_feed_ids(s, ids, n, err));
}

qhx_status qhx_session_guard_enter(qhx_session *s, const char *what, qhx_error *err) { return enter(s, what, err); }
qhx_status qhx_session_guard_leave(qhx_session *s, qhx_status rc) { return leave(s, rc); }
