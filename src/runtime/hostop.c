/* runtime/hostop.c: the generate loops (runtime/hostop.h). */
#include "runtime/hostop.h"

#include "core/alloc.h"
#include "core/time.h"
#include "runtime/constrain.h"
#include "runtime/session_impl.h"

#include <string.h>

/* ---- chat turns ------------------------------------------------------------------------- */

qhx_status qhx_chat_turn_text(const qhx_model *m, const qhx_session *s, const qhx_chat_msg *msgs, size_t n,
                              const int64_t *image_tokens, int n_images, int add_generation_prompt, int thinking,
                              char **out, size_t *len_out, qhx_error *err) {
    *out = NULL;
    *len_out = 0;
    if (n > QHX_CHAT_MAX_MESSAGES) return qhx_fail(err, QHX_E_LIMIT, "chat: %zu messages, the limit is %d", n, QHX_CHAT_MAX_MESSAGES);
    if (!msgs && n) return qhx_fail(err, QHX_E_ARG, "chat: msgs is NULL");
    if (n_images < 0 || n_images > QHX_HOSTOP_MAX_IMAGES)
        return qhx_fail(err, QHX_E_LIMIT, "chat: %d images in one turn, the limit is %d", n_images, QHX_HOSTOP_MAX_IMAGES);
    for (int k = 0; k < n_images; k++)
        if (image_tokens[k] < 1 || image_tokens[k] > QHX_CHAT_MAX_IMAGE_TOKENS)
            return qhx_fail(err, QHX_E_ARG, "chat: image %d: %lld image tokens is outside [1, %lld]", k + 1,
                            (long long)image_tokens[k], (long long)QHX_CHAT_MAX_IMAGE_TOKENS);
    qhx_chat_message *cm = qhx_calloc(n ? n : 1, sizeof *cm);
    qhx_chat_part parts[QHX_HOSTOP_MAX_IMAGES + 1];
    if (!cm) return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    size_t last_user = n;
    for (size_t i = 0; i < n; i++) {
        cm[i].role = msgs[i].role;
        cm[i].content = msgs[i].content ? msgs[i].content : "";
        if (msgs[i].role && !strcmp(msgs[i].role, "user")) last_user = i;
    }
    if (n_images > 0) { /* the images first, in order, then the text of the last user message */
        if (last_user == n) {
            qhx_free(cm);
            return qhx_fail(err, QHX_E_ARG, "chat: an image needs a user message");
        }
        for (int k = 0; k < n_images; k++) parts[k] = (qhx_chat_part){.text = NULL, .image_tokens = (int32_t)image_tokens[k]};
        parts[n_images] = (qhx_chat_part){.text = cm[last_user].content, .text_len = strlen(cm[last_user].content)};
        cm[last_user].parts = parts;
        cm[last_user].n_parts = (size_t)n_images + 1;
    }
    qhx_chat_options opt = {.add_generation_prompt = add_generation_prompt, .enable_thinking = thinking};
    char *body = NULL;
    size_t len = 0;
    qhx_status rc = qhx_tok_chat_format(qhx_model_chat_style(m), cm, n, &opt, &body, &len, err);
    qhx_free(cm);
    if (rc) return rc;
    if (!s || (qhx_session_n_past(s) == 0 && s->pending < 0)) {
        *out = body;
        *len_out = len;
        return QHX_OK;
    }
    /* close the previous answer: its stop token (<|im_end|>) is pending and fed with this turn;
     * after any other stop (length, a stop string, a callback) the marker has to be added */
    const char *sep = s->last_stop == QHX_STOP_TOKEN ? "\n" : "<|im_end|>\n";
    size_t n_sep = strlen(sep);
    char *t = qhx_malloc(n_sep + len + 1);
    if (!t) {
        qhx_free(body);
        return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    }
    memcpy(t, sep, n_sep);
    memcpy(t + n_sep, body, len + 1);
    qhx_free(body);
    *out = t;
    *len_out = n_sep + len;
    return QHX_OK;
}

/* One chat turn: its text (images as runs of pads), tokens, then the feed; the pending token
 * goes first, so an image announcement covers exactly the turn's ids. */
static qhx_status feed_turn(qhx_session *s, const qhx_chat_msg *msgs, size_t n, const qhx_image_embed *images,
                            int n_images, int thinking, qhx_error *err) {
    char *text = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0, len = 0;
    int64_t tokens[QHX_HOSTOP_MAX_IMAGES];
    for (int k = 0; k < n_images; k++) tokens[k] = images[k].n_tokens;
    qhx_status rc;
    if ((rc = qhx_chat_turn_text(s->m, s, msgs, n, tokens, n_images, 1, thinking, &text, &len, err))) goto done;
    if ((rc = qhx_session_encode(s, text, strlen(text), &ids, &n_ids, err))) goto done;
    if ((rc = qhx_session_feed_pending(s, err))) goto done;
    if (n_ids && (rc = qhx_model_state_attach(s->st, images, n_images, ids, (int64_t)n_ids, err))) goto done;
    rc = qhx_session_feed_ids(s, ids, n_ids, err);
    qhx_model_state_attach(s->st, NULL, 0, NULL, 0, NULL); /* the images die here: drop the announcement */
done:
    qhx_free(text);
    qhx_free(ids);
    return rc;
}

static qhx_status check_turn(const qhx_session *s, const qhx_chat_msg *msgs, size_t n, qhx_error *err) {
    if (!s->m->tok) return qhx_fail(err, QHX_E_ARG, "session: the model has no tokenizer");
    if (!msgs || n == 0 || n > 4096) return qhx_fail(err, QHX_E_ARG, "chat: 1 to 4096 messages are needed");
    return QHX_OK;
}

static qhx_status text_feed_chat(qhx_session *s, const qhx_chat_msg *msgs, size_t n, const char *const *images,
                                 int n_images, int64_t max_image_tokens, int thinking, qhx_error *err) {
    (void)max_image_tokens;
    qhx_status rc = check_turn(s, msgs, n, err);
    if (rc) return rc;
    if (n_images > 0) { /* the model's own message says why: no vision graph, or a text host-op */
        qhx_image_embed none;
        return qhx_model_image_load(s->m, images[0], 0, &none, err);
    }
    return feed_turn(s, msgs, n, NULL, 0, thinking, err);
}

/* What the images of a turn may take together: the context left after the turn's text (rendered
 * with one pad per image) and one token of answer. */
static qhx_status image_budget(qhx_session *s, const qhx_chat_msg *msgs, size_t n, int n_images, int thinking,
                               int64_t *budget, qhx_error *err) {
    int64_t one[QHX_HOSTOP_MAX_IMAGES];
    for (int k = 0; k < n_images; k++) one[k] = 1;
    char *text = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0, len = 0;
    qhx_status rc = qhx_chat_turn_text(s->m, s, msgs, n, one, n_images, 1, thinking, &text, &len, err);
    if (!rc) rc = qhx_session_encode(s, text, strlen(text), &ids, &n_ids, err);
    qhx_free(text);
    qhx_free(ids);
    if (rc) return rc;
    const int64_t text_tokens = (int64_t)n_ids - n_images, pending = s->pending >= 0 ? 1 : 0;
    *budget = qhx_session_n_ctx(s) - qhx_session_n_past(s) - pending - text_tokens - 1;
    if (*budget < 1)
        return qhx_fail(err, QHX_E_LIMIT, "chat: the turn's text (%lld tokens) leaves no room for %d image%s in the context of %lld",
                        (long long)text_tokens, n_images, n_images == 1 ? "" : "s", (long long)qhx_session_n_ctx(s));
    return QHX_OK;
}

static qhx_status image_feed_chat(qhx_session *s, const qhx_chat_msg *msgs, size_t n, const char *const *images,
                                  int n_images, int64_t max_image_tokens, int thinking, qhx_error *err) {
    qhx_status rc = check_turn(s, msgs, n, err);
    if (rc) return rc;
    if (n_images < 0 || n_images > QHX_HOSTOP_MAX_IMAGES)
        return qhx_fail(err, QHX_E_LIMIT, "chat: %d images in one turn, the limit is %d", n_images, QHX_HOSTOP_MAX_IMAGES);
    qhx_image_embed im[QHX_HOSTOP_MAX_IMAGES];
    memset(im, 0, sizeof im);
    for (int k = 0; k < n_images && rc == QHX_OK; k++)
        if (!images[k]) rc = qhx_fail(err, QHX_E_ARG, "chat: image %d has no path", k + 1);
    int64_t budget = 0;
    if (rc == QHX_OK && n_images > 0 && (rc = image_budget(s, msgs, n, n_images, thinking, &budget, err)) == QHX_OK) {
        if (max_image_tokens > 0 && max_image_tokens < budget) budget = max_image_tokens;
        rc = qhx_model_images_load(s->m, images, n_images, budget, im, err);
    }
    if (rc == QHX_OK) rc = feed_turn(s, msgs, n, im, n_images, thinking, err);
    for (int k = 0; k < n_images; k++) qhx_image_embed_deinit(&im[k]);
    return rc;
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

/* The next token: the sampler's, or under a constraint the sampler's among the tokens the
 * grammar allows (-2: none; -1 with *rc set: a grammar cap). -1 with *rc OK: non-finite logits. */
static qhx_token pick(qhx_session *s, const qhx_generate_params *p, qhx_status *rc, qhx_error *err) {
    if (!p->constraint) return qhx_sampler_sample(s->smp, s->logits);
    qhx_error e2 = {0};
    qhx_token t = qhx_constraint_sample(p->constraint, s->smp, s->logits, !p->ignore_stop, &e2);
    if (t == -1 && e2.code != QHX_E_FORMAT) { /* non-finite logits are reported by the caller */
        *rc = e2.code;
        if (err) *err = e2;
    }
    return t;
}

static qhx_status generate_tokens(qhx_session *s, const qhx_generate_params *p, qhx_generate_stats *stats,
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
    const bool spec = qhx_session_spec_begin(s, p); /* speculative decoding (session_spec.c) */
    for (int64_t k = 0; k < p->max_tokens; k++) {
        if (s->params.abort_cb && s->params.abort_cb(s->params.abort_user)) {
            rc = qhx_fail(err, QHX_E_ABORTED, "generate: interrupted after %lld tokens", (long long)k);
            break;
        }
        qhx_token t;
        if (!(spec && qhx_session_spec_pop(s, &t))) t = pick(s, p, &rc, err);
        if (t == -2) { /* the grammar's output is complete and nothing may follow */
            st.stop = QHX_STOP_GRAMMAR;
            break;
        }
        if (rc) break;
        if (t < 0) {
            rc = qhx_fail(err, QHX_E_FORMAT,
                          "generate: the logits after %lld tokens are not finite (NaN or Inf): the weights "
                          "or the computation overflowed", (long long)qhx_session_n_past(s));
            break;
        }
        if (!p->ignore_stop && (is_stop(s->m, t, turn_end) || qhx_constraint_is_end(p->constraint, t))) {
            s->pending = t;
            st.stop = QHX_STOP_TOKEN;
            break;
        }
        if (p->constraint && (rc = qhx_constraint_accept(p->constraint, t, err))) break;
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
        if ((rc = spec ? qhx_session_spec_feed(s, p, t, p->max_tokens - k - 1, turn_end, err)
                       : qhx_session_decode(s, t, err)))
            break;
    }
    if (spec) {
        qhx_status src = qhx_session_spec_end(s, &st, rc ? NULL : err);
        if (rc == QHX_OK) rc = src;
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

/* ---- the table -------------------------------------------------------------------------- */

static const qhx_hostop HOSTOPS[] = {
    [QHX_LOOP_TEXT] = {"text", text_feed_chat, generate_tokens},
    [QHX_LOOP_IMAGE_TEXT] = {"image_text", image_feed_chat, generate_tokens},
};

const qhx_hostop *qhx_hostop_of(const qhx_model *m) { return &HOSTOPS[m->host_op->loop]; }
