/* runtime/session.c: the public session (qhx.h) and the internal prefill/decode calls. */
#include "runtime/session.h"

#include "core/alloc.h"
#include "core/time.h"
#include "io/manifest.h"
#include "models/family.h"
#include "models/qwen3vl.h"
#include "runtime/backend.h"
#include "runtime/sample.h"
#include "text/tokenizer.h"

#include <string.h>

struct qhx_session {
    const qhx_model *m;
    qhx_model_state *st;
    qhx_session_params params;
    int64_t n_vocab;
    float *logits;          /* (vocab,) after the last fed token */
    qhx_sampler *smp;
    qhx_tok_stream *stream; /* NULL when the model has no tokenizer */
    int32_t pending;        /* sampled and reported, not yet fed; -1 if none */
    bool has_logits;
    qhx_stop_reason last_stop;
    bool broken;            /* an aborted forward left the state half-updated */
    bool busy;              /* inside feed/generate/save/restore: a call from its callbacks is refused */
    int64_t n_fed;          /* tokens fed since the last generate (for its stats) */
    double feed_ms;
};

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
    s->m = m;
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
    qhx_state_params sp = {.n_ctx = n_ctx, .n_batch = params->n_batch, .kv_cache = params->kv_cache};
    if ((rc = qhx_model_state_create(m, &sp, &s->st, err))) goto fail;
    if ((rc = qhx_sampler_create(&params->sampling, s->n_vocab, &s->smp, err))) goto fail;
    if (m->tok && (rc = qhx_tok_stream_create(m->tok, 0, &s->stream, err))) goto fail;
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
    qhx_sampler_free(s->smp);
    qhx_tok_stream_free(s->stream);
    qhx_aligned_free(s->logits);
    qhx_free(s);
}

void qhx_session_reset(qhx_session *s) {
    if (!s || s->busy) return; /* from its own callback: the running call owns the state */
    qhx_model_state_reset(s->st);
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
qhx_model_state *qhx_session_state(qhx_session *s) { return s->st; }
struct qhx_sampler *qhx_session_sampler(qhx_session *s) { return s->smp; }

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
    qhx_graph_io io = {.ids = ids, .n = n, .logits = logits, .logits_all = (flags & QHX_FWD_LOGITS_ALL) != 0,
                       .sequential = (flags & QHX_FWD_SEQUENTIAL) != 0, .abort_cb = s->params.abort_cb,
                       .abort_user = s->params.abort_user};
    qhx_graph g = n == 1 ? QHX_GRAPH_DECODE : QHX_GRAPH_PREFILL;
    const qhx_backend *be = s->m->backend;
    qhx_status rc = be ? be->run(s->m, s->st, g, &io, err) : qhx_model_forward(s->m, s->st, ids, n,
        &(qhx_forward_opts){.flags = flags, .logits = logits, .abort_cb = s->params.abort_cb,
                            .abort_cb_user = s->params.abort_user}, err);
    if (rc == QHX_E_ABORTED) s->broken = true;
    if (rc == QHX_OK) {
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

static qhx_status feed_ids(qhx_session *s, const qhx_token *ids, size_t n, qhx_error *err) {
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

/* Refuse text that cannot fit before paying for its tokenization: NFC shrinks UTF-8 by at most
 * 3x (three jamo into one syllable) and one token covers at most QHX_TOK_MAX_TOKEN_BYTES bytes,
 * so len bytes make at least len / (3 * QHX_TOK_MAX_TOKEN_BYTES) tokens. */
static qhx_status text_may_fit(const qhx_session *s, size_t len, qhx_error *err) {
    int64_t room = qhx_session_n_ctx(s) - qhx_session_n_past(s) - (s->pending >= 0 ? 1 : 0);
    uint64_t at_least = (uint64_t)len / (3u * QHX_TOK_MAX_TOKEN_BYTES);
    if (at_least > (uint64_t)room)
        return qhx_fail(err, QHX_E_LIMIT,
                        "text of %zu bytes makes at least %llu tokens, more than the %lld left in the context",
                        len, (unsigned long long)at_least, (long long)room);
    return QHX_OK;
}

/* Tokenize with the session's abort callback polled. */
static qhx_status encode(qhx_session *s, const char *text, size_t len, int32_t **ids, size_t *n, qhx_error *err) {
    qhx_status rc = text_may_fit(s, len, err);
    if (rc) return rc;
    return qhx_tok_encode_alloc_abortable(s->m->tok, text, len, s->params.abort_cb, s->params.abort_user, ids, n,
                                          err);
}

static qhx_status feed_text(qhx_session *s, const char *text, size_t len, qhx_error *err) {
    if (!s->m->tok) return qhx_fail(err, QHX_E_ARG, "session: the model has no tokenizer");
    int32_t *ids = NULL;
    size_t n = 0;
    qhx_status rc = encode(s, text, len, &ids, &n, err);
    if (rc == QHX_OK) rc = feed_ids(s, ids, n, err);
    qhx_free(ids);
    return rc;
}

/* The prompt text of a chat turn (owned: qhx_free). After an earlier answer in this session the
 * text starts by closing it: its stop token is pending (fed first), or, after a length stop,
 * the end-of-turn marker is added. */
static qhx_status chat_text(qhx_session *s, const qhx_chat_msg *msgs, size_t n, int64_t image_tokens,
                            int thinking, char **out, qhx_error *err) {
    *out = NULL;
    qhx_chat_message *cm = qhx_calloc(n, sizeof *cm);
    qhx_chat_part parts[2];
    if (!cm) return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    size_t last_user = n;
    for (size_t i = 0; i < n; i++) {
        cm[i].role = msgs[i].role;
        cm[i].content = msgs[i].content ? msgs[i].content : "";
        if (msgs[i].role && !strcmp(msgs[i].role, "user")) last_user = i;
    }
    if (image_tokens > 0) {
        if (last_user == n) {
            qhx_free(cm);
            return qhx_fail(err, QHX_E_ARG, "chat: an image needs a user message");
        }
        parts[0] = (qhx_chat_part){.text = NULL, .image_tokens = (int32_t)image_tokens};
        parts[1] = (qhx_chat_part){.text = cm[last_user].content, .text_len = strlen(cm[last_user].content)};
        cm[last_user].parts = parts;
        cm[last_user].n_parts = 2;
    }
    qhx_chat_options opt = {.add_generation_prompt = 1, .enable_thinking = thinking};
    qhx_chat_family fam = s->m->family == QHX_FAMILY_QWEN3_VL ? QHX_CHAT_QWEN3VL : QHX_CHAT_QWEN35;
    char *body = NULL;
    size_t len = 0;
    qhx_status rc = qhx_tok_chat_format(fam, cm, n, &opt, &body, &len, err);
    qhx_free(cm);
    if (rc) return rc;
    if (qhx_session_n_past(s) == 0 && s->pending < 0) {
        *out = body;
        return QHX_OK;
    }
    const char *sep = s->last_stop == QHX_STOP_TOKEN ? "\n" : "<|im_end|>\n";
    char *t = qhx_malloc(strlen(sep) + len + 1);
    if (!t) {
        qhx_free(body);
        return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    }
    memcpy(t, sep, strlen(sep));
    memcpy(t + strlen(sep), body, len + 1);
    qhx_free(body);
    *out = t;
    return QHX_OK;
}

static qhx_status feed_chat(qhx_session *s, const qhx_chat_msg *msgs, size_t n, const char *image_path,
                            int thinking, qhx_error *err) {
    if (!s->m->tok) return qhx_fail(err, QHX_E_ARG, "session: the model has no tokenizer");
    if (!msgs || n == 0 || n > 4096) return qhx_fail(err, QHX_E_ARG, "chat: 1 to 4096 messages are needed");
    const qhx_qwen3vl *vl = qhx_qwen3vl_of(s->m);
    if (image_path && !vl) return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: images need a Qwen3-VL model", image_path);
    if (image_path && s->m->plan && s->m->plan->host_op == QHX_HOST_OP_QWEN3_VL_TEXT_GENERATE)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: the run plan's host-op qwen3_vl_text_generate takes no images (use the -vlm- manifest)",
                        image_path);
    qhx_vl_image im = {0};
    char *text = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    qhx_status rc = QHX_OK;
    if (image_path && (rc = qhx_qwen3vl_image_load(vl, image_path, &im, err))) goto done;
    if ((rc = chat_text(s, msgs, n, im.n_tokens, thinking, &text, err))) goto done;
    if ((rc = encode(s, text, strlen(text), &ids, &n_ids, err))) goto done;
    /* the pending token goes first, so the image announcement covers exactly these ids */
    if ((rc = qhx_session_feed_pending(s, err))) goto done;
    if (vl && (rc = qhx_qwen3vl_attach(s->st, image_path ? &im : NULL, ids, (int64_t)n_ids, err))) goto done;
    rc = feed_ids(s, ids, n_ids, err);
    if (vl) qhx_qwen3vl_attach(s->st, NULL, NULL, 0, NULL); /* the image dies here: drop the announcement */
done:
    qhx_vl_image_deinit(&im);
    qhx_free(text);
    qhx_free(ids);
    return rc;
}

qhx_stop_reason qhx_session_last_stop(const qhx_session *s) { return s ? s->last_stop : QHX_STOP_LENGTH; }

qhx_token qhx_session_sample(qhx_session *s) {
    return s && !s->busy ? qhx_sampler_sample(s->smp, s->logits) : -1;
}


/* ---- generation ---------------------------------------------------------------------------- */

/* Report a token (and whatever text it completes) to the callback. Returns 1 when the callback
 * asks to stop, 0 to go on, -1 when the text could not be made (out of memory; err set, and the
 * token is not reported). */
static int emit(qhx_session *s, const qhx_generate_params *p, qhx_token t, qhx_error *err) {
    const char *text = "";
    size_t len = 0;
    if (s->stream && qhx_tok_stream_push(s->stream, t, &text, &len, err) != QHX_OK) return -1;
    return p->on_token ? p->on_token(p->user, t, text, len) != 0 : 0;
}

/* The text the stream still holds (an incomplete UTF-8 tail), reported with token -1. */
static qhx_status flush_stream(qhx_session *s, const qhx_generate_params *p, qhx_error *err) {
    const char *text;
    size_t len = 0;
    if (!s->stream) return QHX_OK;
    qhx_status rc = qhx_tok_stream_flush(s->stream, &text, &len, err);
    if (rc == QHX_OK && len && p->on_token) p->on_token(p->user, -1, text, len);
    return rc;
}

static int is_stop(const qhx_model *m, qhx_token t, qhx_token turn_end) {
    return qhx_model_is_stop(m, t) || (turn_end >= 0 && t == turn_end);
}

static qhx_status generate(qhx_session *s, const qhx_generate_params *p, qhx_generate_stats *stats,
                           qhx_error *err) {
    qhx_generate_stats st = {.n_prompt = s->n_fed, .prefill_ms = s->feed_ms};
    if (stats) *stats = st;
    if (!p || p->max_tokens < 1) return qhx_fail(err, QHX_E_ARG, "generate: max_tokens must be >= 1");
    int64_t held = qhx_session_n_past(s) + (s->pending >= 0 ? 1 : 0), n_ctx = qhx_session_n_ctx(s);
    if (p->max_tokens > n_ctx - held)
        return qhx_fail(err, QHX_E_LIMIT,
                        "prompt (%lld tokens) + generation (%lld) would pass the context of %lld tokens",
                        (long long)held, (long long)p->max_tokens, (long long)n_ctx);
    qhx_status rc = qhx_session_feed_pending(s, err);
    if (rc) return rc;
    if (!s->has_logits) return qhx_fail(err, QHX_E_ARG, "generate: feed a prompt first");
    uint64_t t0 = qhx_time_ns();
    st.stop = QHX_STOP_LENGTH;
    /* both chat formats (ChatML) end a turn with <|im_end|> */
    qhx_token turn_end = p->stop_at_turn_end ? qhx_model_token_id(s->m, "<|im_end|>") : -1;
    for (int64_t k = 0; k < p->max_tokens; k++) {
        if (s->params.abort_cb && s->params.abort_cb(s->params.abort_user)) {
            rc = qhx_fail(err, QHX_E_ABORTED, "generate: interrupted after %lld tokens", (long long)k);
            break;
        }
        qhx_token t = qhx_sampler_sample(s->smp, s->logits);
        if (t < 0) {
            rc = qhx_fail(err, QHX_E_FORMAT,
                          "generate: the logits after %lld tokens are not finite (NaN or Inf): the weights "
                          "or the computation overflowed", (long long)qhx_session_n_past(s));
            break;
        }
        if (!p->ignore_stop && is_stop(s->m, t, turn_end)) {
            s->pending = t;
            st.stop = QHX_STOP_TOKEN;
            break;
        }
        int e = emit(s, p, t, err);
        if (e < 0) { /* t is dropped: the state never held it */
            rc = QHX_E_NOMEM;
            break;
        }
        st.n_generated++;
        if (e) {
            s->pending = t;
            st.stop = QHX_STOP_CALLBACK;
            break;
        }
        if (k + 1 == p->max_tokens) {
            s->pending = t; /* fed by the next call, so the state never holds a token twice */
            break;
        }
        if ((rc = qhx_session_decode(s, t, err))) break;
    }
    if (rc == QHX_OK) rc = flush_stream(s, p, err);
    else flush_stream(s, p, NULL);
    s->last_stop = st.stop;
    st.decode_ms = (double)(qhx_time_ns() - t0) / 1e6;
    s->n_fed = 0;
    s->feed_ms = 0;
    if (stats) *stats = st;
    return rc;
}

/* ---- the public calls: NULL and re-entrancy checked once, here ------------------------------ */

qhx_status qhx_session_feed(qhx_session *s, const qhx_token *ids, size_t n, qhx_error *err) {
    qhx_status rc = enter(s, "feed", err);
    return rc ? rc : leave(s, feed_ids(s, ids, n, err));
}

qhx_status qhx_session_feed_text(qhx_session *s, const char *text, size_t len, qhx_error *err) {
    qhx_status rc = enter(s, "feed text", err);
    if (rc) return rc;
    if (!text && len) return leave(s, qhx_fail(err, QHX_E_ARG, "feed text: text is NULL"));
    return leave(s, feed_text(s, text ? text : "", len, err));
}

qhx_status qhx_session_feed_chat(qhx_session *s, const qhx_chat_msg *msgs, size_t n, const char *image_path,
                                 int thinking, qhx_error *err) {
    qhx_status rc = enter(s, "chat", err);
    return rc ? rc : leave(s, feed_chat(s, msgs, n, image_path, thinking, err));
}

qhx_status qhx_session_generate(qhx_session *s, const qhx_generate_params *p, qhx_generate_stats *stats,
                                qhx_error *err) {
    qhx_status rc = enter(s, "generate", err);
    return rc ? rc : leave(s, generate(s, p, stats, err));
}

qhx_status qhx_session_guard_enter(qhx_session *s, const char *what, qhx_error *err) { return enter(s, what, err); }
qhx_status qhx_session_guard_leave(qhx_session *s, qhx_status rc) { return leave(s, rc); }
