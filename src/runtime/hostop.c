/* runtime/hostop.c: the generate loops (runtime/hostop.h). */
#include "runtime/hostop.h"

#include "core/alloc.h"
#include "core/time.h"
#include "runtime/constrain.h"
#include "runtime/gen.h"
#include "runtime/session.h"

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
    if (!s || (qhx_session_n_past(s) == 0 && qhx_session_pending(s) < 0)) {
        *out = body;
        *len_out = len;
        return QHX_OK;
    }
    /* close the previous answer: its stop token (the end of turn) is pending and fed with this
     * turn; after any other stop (length, a stop string, a callback) the marker has to be added */
    const qhx_chat_style *f = qhx_model_chat_style(m);
    const char *end = qhx_session_last_stop(s) == QHX_STOP_TOKEN ? "" : f->turn_end;
    size_t n_end = strlen(end), n_sep = n_end + strlen(f->turn_sep);
    char *t = qhx_malloc(n_sep + len + 1);
    if (!t) {
        qhx_free(body);
        return qhx_fail(err, QHX_E_NOMEM, "chat: out of memory");
    }
    memcpy(t, end, n_end);
    memcpy(t + n_end, f->turn_sep, n_sep - n_end);
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
    if ((rc = qhx_chat_turn_text(qhx_session_model(s), s, msgs, n, tokens, n_images, 1, thinking, &text, &len, err))) goto done;
    if ((rc = qhx_session_encode(s, text, strlen(text), &ids, &n_ids, err))) goto done;
    rc = qhx_session_feed_announced(s, ids, n_ids, images, n_images, err);
done:
    qhx_free(text);
    qhx_free(ids);
    return rc;
}

static qhx_status check_turn(const qhx_session *s, const qhx_chat_msg *msgs, size_t n, qhx_error *err) {
    if (!qhx_session_model(s)->tok) return qhx_fail(err, QHX_E_ARG, "session: the model has no tokenizer");
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
        return qhx_model_image_load(qhx_session_model(s), images[0], 0, &none, err);
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
    qhx_status rc = qhx_chat_turn_text(qhx_session_model(s), s, msgs, n, one, n_images, 1, thinking, &text, &len, err);
    if (!rc) rc = qhx_session_encode(s, text, strlen(text), &ids, &n_ids, err);
    qhx_free(text);
    qhx_free(ids);
    if (rc) return rc;
    const int64_t text_tokens = (int64_t)n_ids - n_images, pending = qhx_session_pending(s) >= 0 ? 1 : 0;
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
        rc = qhx_model_images_load(qhx_session_model(s), images, n_images, budget, im, err);
    }
    if (rc == QHX_OK) rc = feed_turn(s, msgs, n, im, n_images, thinking, err);
    for (int k = 0; k < n_images; k++) qhx_image_embed_deinit(&im[k]);
    return rc;
}

/* ---- generation ---------------------------------------------------------------------------- */

static qhx_status generate_tokens(qhx_session *s, const qhx_generate_params *p, qhx_generate_stats *stats,
                           qhx_error *err) {
    qhx_generate_stats st = {0};
    qhx_session_generate_begin(s, &st.n_prompt, &st.prefill_ms);
    const qhx_model *m = qhx_session_model(s);
    if (stats) *stats = st;
    if (!p || p->max_tokens < 1) return qhx_fail(err, QHX_E_ARG, "generate: max_tokens must be >= 1");
    int64_t held = qhx_session_n_past(s) + (qhx_session_pending(s) >= 0 ? 1 : 0), n_ctx = qhx_session_n_ctx(s);
    if (p->max_tokens > n_ctx - held)
        return qhx_fail(err, QHX_E_LIMIT,
                        "prompt (%lld tokens) + generation (%lld) would pass the context of %lld tokens",
                        (long long)held, (long long)p->max_tokens, (long long)n_ctx);
    qhx_gen g;
    qhx_gen_params gp = {.smp = qhx_session_sampler(s), .record = false /* the feed records what it feeds */,
                         .stream = qhx_session_stream(s),
                         .constraint = p->constraint, .ignore_stop = p->ignore_stop != 0,
                         .turn_end = p->stop_at_turn_end ? qhx_model_turn_end(m) : -1,
                         .max_tokens = p->max_tokens, .stops = p->stops, .n_stops = p->stops ? p->n_stops : 0};
    qhx_session_abort_cb(s, &gp.abort_cb, &gp.abort_user);
    qhx_status rc = qhx_gen_init(&g, m, &gp, err);
    if (rc) return rc;
    if ((rc = qhx_session_feed_pending(s, err))) goto out;
    if (!qhx_session_has_logits(s)) {
        rc = qhx_fail(err, QHX_E_ARG, "generate: feed a prompt first");
        goto out;
    }
    uint64_t t0 = qhx_time_ns();
    st.stop = QHX_STOP_LENGTH;
    const bool spec = qhx_session_spec_begin(s, p); /* speculative decoding (session_spec.c) */
    for (;;) {
        qhx_gen_step step;
        qhx_token t;
        /* a speculative step's queued tokens are chosen already (all but the last also fed) */
        if ((rc = spec && qhx_session_spec_pop(s, &t) ? qhx_gen_next_token(&g, t, &step, err)
                                                       : qhx_gen_next(&g, qhx_session_logits(s), &step, err))) {
            if (g.nonfinite)
                rc = qhx_fail(err, QHX_E_FORMAT,
                              "generate: the logits after %lld tokens are not finite (NaN or Inf): the weights "
                              "or the computation overflowed", (long long)qhx_session_n_past(s));
            break; /* a token the step refused is dropped: the state never held it */
        }
        st.stop = step.stop;
        if (!step.report) { /* a stop token stays pending: fed by the next call, closing the turn */
            if (step.token >= 0) qhx_session_set_pending(s, step.token);
            break;
        }
        st.n_generated++;
        int e = p->on_token ? p->on_token(p->user, step.token, step.text, step.len) != 0 : 0;
        if (e && step.stop != QHX_STOP_STRING) st.stop = QHX_STOP_CALLBACK; /* before the length */
        if (e || !step.feed) {
            qhx_session_set_pending(s, step.token); /* fed by the next call, so the state never holds a token twice */
            break;
        }
        /* room: the tokens the answer may still take after this one */
        if ((rc = spec ? qhx_session_spec_feed(s, p, step.token, p->max_tokens - g.n_generated, gp.turn_end, err)
                       : qhx_session_decode(s, step.token, err)))
            break;
    }
    if (spec) { /* what was fed but not handed out is cut back */
        qhx_status src = qhx_session_spec_end(s, &st, rc ? NULL : err);
        if (rc == QHX_OK) rc = src;
    }
    const char *tail;
    size_t n_tail = 0;
    bool matched = false;
    qhx_status frc = qhx_gen_finish(&g, &tail, &n_tail, &matched, rc ? NULL : err);
    if (frc == QHX_OK && n_tail && p->on_token) p->on_token(p->user, -1, tail, n_tail);
    if (rc == QHX_OK) rc = frc;
    /* a stop string completed by the detokenizer's last bytes ends the text there too */
    if (matched && st.stop != QHX_STOP_TOKEN && st.stop != QHX_STOP_GRAMMAR) st.stop = QHX_STOP_STRING;
    qhx_session_generate_end(s, st.stop);
    st.decode_ms = (double)(qhx_time_ns() - t0) / 1e6;
out:
    qhx_gen_deinit(&g);
    if (stats) *stats = st;
    return rc;
}

/* ---- the loops ------------------------------------------------------------------------------ */

const qhx_hostop qhx_hostop_text = {"text", false, text_feed_chat, generate_tokens};
const qhx_hostop qhx_hostop_image_text = {"image_text", true, image_feed_chat, generate_tokens};

const qhx_hostop *qhx_hostop_of(const qhx_model *m) { return m->host_op->loop; }
