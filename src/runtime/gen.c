/* runtime/gen.c: the generation loop's step (runtime/gen.h). */
#include "runtime/gen.h"

#include "core/alloc.h"
#include "runtime/constrain.h"
#include "runtime/model.h"
#include "runtime/session.h"

#include <string.h>

/* ---- stop strings ------------------------------------------------------------------------ */

qhx_status qhx_stops_init(qhx_stops *s, const char *const *strs, size_t n, qhx_error *err) {
    memset(s, 0, sizeof *s);
    if (n > QHX_GEN_MAX_STOPS) return qhx_fail(err, QHX_E_LIMIT, "stop strings: %zu, at most %d", n, QHX_GEN_MAX_STOPS);
    if (n && !strs) return qhx_fail(err, QHX_E_ARG, "stop strings: the list is NULL");
    for (size_t i = 0; i < n; i++)
        if (!strs[i] || !strs[i][0]) return qhx_fail(err, QHX_E_ARG, "stop strings: string %zu is empty", i);
    s->strs = strs;
    s->n = n;
    return QHX_OK;
}

void qhx_stops_deinit(qhx_stops *s) {
    qhx_free(s->held);
    qhx_free(s->out);
    memset(s, 0, sizeof *s);
}

/* Make room for n more bytes (and a NUL) in *buf of *cap bytes. */
static bool reserve(char **buf, size_t *cap, size_t need) {
    if (need + 1 <= *cap) return true;
    size_t c = *cap ? *cap : 256;
    while (c < need + 1) {
        if (c > SIZE_MAX / 2) return false;
        c *= 2;
    }
    char *q = qhx_realloc(*buf, c);
    if (!q) return false;
    *buf = q;
    *cap = c;
    return true;
}

/* Offset of the earliest complete stop string in held, or -1. */
static ptrdiff_t first_stop(const qhx_stops *s) {
    ptrdiff_t best = -1;
    for (size_t k = 0; k < s->n; k++) {
        size_t m = strlen(s->strs[k]);
        for (size_t i = 0; i + m <= s->n_held && (best < 0 || (ptrdiff_t)i < best); i++)
            if (!memcmp(s->held + i, s->strs[k], m)) {
                best = (ptrdiff_t)i;
                break;
            }
    }
    return best;
}

/* The longest tail of held that is a proper prefix of a stop string: it waits for more text. */
static size_t prefix_tail(const qhx_stops *s) {
    size_t keep = 0;
    for (size_t k = 0; k < s->n; k++) {
        size_t m = strlen(s->strs[k]);
        for (size_t t = m - 1 < s->n_held ? m - 1 : s->n_held; t > keep; t--)
            if (!memcmp(s->held + s->n_held - t, s->strs[k], t)) {
                keep = t;
                break;
            }
    }
    return keep;
}

/* held[0..n) becomes the final text of this call (copied out: held moves on) */
static int give(qhx_stops *s, size_t n, const char **out, size_t *out_len) {
    if (!reserve(&s->out, &s->cap_out, n)) return -1;
    if (n) memcpy(s->out, s->held, n);
    s->out[n] = '\0';
    memmove(s->held, s->held + n, s->n_held - n);
    s->n_held -= n;
    *out = s->out;
    *out_len = n;
    return 0;
}

int qhx_stops_push(qhx_stops *s, const char *text, size_t len, const char **out, size_t *out_len) {
    *out = "";
    *out_len = 0;
    if (s->matched) return 1;
    if (!s->n) {
        *out = text;
        *out_len = len;
        return 0;
    }
    if (!reserve(&s->held, &s->cap_held, s->n_held + len)) return -1;
    if (len) memcpy(s->held + s->n_held, text, len);
    s->n_held += len;
    ptrdiff_t at = first_stop(s);
    if (at >= 0) {
        if (give(s, (size_t)at, out, out_len)) return -1;
        s->n_held = 0;
        s->matched = true;
        return 1;
    }
    return give(s, s->n_held - prefix_tail(s), out, out_len);
}

int qhx_stops_flush(qhx_stops *s, const char *tail, size_t n_tail, const char **out, size_t *out_len) {
    *out = tail;
    *out_len = n_tail;
    if (s->matched) {
        *out_len = 0;
        return 1;
    }
    if (!s->n) return 0;
    if (!reserve(&s->held, &s->cap_held, s->n_held + n_tail)) return -1;
    if (n_tail) memcpy(s->held + s->n_held, tail, n_tail);
    s->n_held += n_tail;
    ptrdiff_t at = first_stop(s);
    *out = s->held ? s->held : ""; /* held stays as it is until the next call: the caller's text now */
    *out_len = at >= 0 ? (size_t)at : s->n_held;
    s->n_held = 0;
    if (at >= 0) s->matched = true;
    return at >= 0;
}

/* ---- the step ------------------------------------------------------------------------------ */

qhx_status qhx_gen_init(qhx_gen *g, const qhx_model *m, const qhx_gen_params *p, qhx_error *err) {
    memset(g, 0, sizeof *g);
    if (!p->smp) return qhx_fail(err, QHX_E_ARG, "generate: no sampler");
    if (p->max_tokens < 1) return qhx_fail(err, QHX_E_ARG, "generate: max_tokens must be >= 1");
    if (p->n_stop_ids > QHX_GEN_MAX_STOPS)
        return qhx_fail(err, QHX_E_LIMIT, "stop ids: %zu, at most %d", p->n_stop_ids, QHX_GEN_MAX_STOPS);
    if (p->n_stop_ids && !p->stop_ids) return qhx_fail(err, QHX_E_ARG, "stop ids: the list is NULL");
    const int64_t vocab = qhx_model_n_vocab(m);
    for (size_t i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] < 0 || p->stop_ids[i] >= vocab)
            return qhx_fail(err, QHX_E_ARG, "stop ids: %d is outside the vocabulary [0, %lld)", p->stop_ids[i],
                            (long long)vocab);
    qhx_status rc = qhx_stops_init(&g->stops, p->stops, p->n_stops, err);
    if (rc) return rc;
    g->m = m;
    g->p = *p;
    return QHX_OK;
}

void qhx_gen_deinit(qhx_gen *g) { qhx_stops_deinit(&g->stops); }

qhx_token qhx_gen_choose(qhx_gen *g, const float *logits, qhx_error *err) {
    g->nonfinite = false;
    if (!g->p.constraint) {
        qhx_token t = qhx_sampler_sample(g->p.smp, logits);
        if (t < 0) {
            g->nonfinite = true;
            qhx_fail(err, QHX_E_FORMAT, "the logits are not finite (NaN or Inf)");
        }
        return t;
    }
    qhx_error e2 = {0};
    qhx_token t = qhx_constraint_sample(g->p.constraint, g->p.smp, logits, !g->p.ignore_stop, &e2);
    if (t == -1) { /* QHX_E_FORMAT: non-finite logits; anything else: a grammar cap */
        g->nonfinite = e2.code == QHX_E_FORMAT;
        if (err) *err = e2;
        if (!e2.code) qhx_fail(err, QHX_E_FORMAT, "the logits are not finite (NaN or Inf)");
    }
    return t;
}

static bool is_stop(const qhx_gen *g, qhx_token t) {
    return qhx_model_is_stop(g->m, t) || (g->p.turn_end >= 0 && t == g->p.turn_end) ||
           qhx_constraint_is_end(g->p.constraint, t);
}

/* one of the caller's stop ids: it ends the answer whatever ignore_stop says */
static bool is_caller_stop(const qhx_gen *g, qhx_token t) {
    for (size_t i = 0; i < g->p.n_stop_ids; i++)
        if (g->p.stop_ids[i] == t) return true;
    return false;
}

static void ends(qhx_gen *g, qhx_gen_step *out, qhx_stop_reason why) {
    out->feed = false;
    out->stop = why;
    g->done = true;
}

qhx_status qhx_gen_accept(qhx_gen *g, qhx_token t, qhx_gen_step *out, qhx_error *err) {
    *out = (qhx_gen_step){.token = t, .text = "", .stop = QHX_STOP_LENGTH};
    if (t == -2) { /* the grammar's output is complete and nothing may follow */
        out->token = -1;
        ends(g, out, QHX_STOP_GRAMMAR);
        return QHX_OK;
    }
    if (t < 0) return qhx_fail(err, QHX_E_ARG, "generate: no token");
    if ((!g->p.ignore_stop && is_stop(g, t)) || is_caller_stop(g, t)) { /* not reported: the caller keeps it pending */
        ends(g, out, QHX_STOP_TOKEN);
        return QHX_OK;
    }
    qhx_status rc;
    if (g->p.constraint && (rc = qhx_constraint_accept(g->p.constraint, t, err))) return rc;
    const char *text = "";
    size_t len = 0;
    if (g->p.stream && (rc = qhx_tok_stream_push(g->p.stream, t, &text, &len, err))) return rc;
    int hit = qhx_stops_push(&g->stops, text, len, &out->text, &out->len);
    if (hit < 0) return qhx_fail(err, QHX_E_NOMEM, "generate: out of memory for the stop strings");
    out->report = true;
    out->feed = true;
    g->n_generated++;
    if (g->p.record) qhx_sampler_accept(g->p.smp, t);
    if (hit) ends(g, out, QHX_STOP_STRING);
    else if (g->n_generated >= g->p.max_tokens) ends(g, out, QHX_STOP_LENGTH);
    return QHX_OK;
}

qhx_status qhx_gen_next(qhx_gen *g, const float *logits, qhx_gen_step *out, qhx_error *err) {
    *out = (qhx_gen_step){.token = -1, .text = "", .stop = QHX_STOP_LENGTH};
    if (g->done) return qhx_fail(err, QHX_E_ARG, "generate: the answer has ended");
    if (g->p.abort_cb && g->p.abort_cb(g->p.abort_user))
        return qhx_fail(err, QHX_E_ABORTED, "generate: interrupted after %lld tokens", (long long)g->n_generated);
    qhx_token t = qhx_gen_choose(g, logits, err);
    if (t == -1) return err && err->code ? err->code : QHX_E_FORMAT;
    return qhx_gen_accept(g, t, out, err);
}

qhx_status qhx_gen_next_token(qhx_gen *g, qhx_token t, qhx_gen_step *out, qhx_error *err) {
    *out = (qhx_gen_step){.token = -1, .text = "", .stop = QHX_STOP_LENGTH};
    if (g->done) return qhx_fail(err, QHX_E_ARG, "generate: the answer has ended");
    if (g->p.abort_cb && g->p.abort_cb(g->p.abort_user))
        return qhx_fail(err, QHX_E_ABORTED, "generate: interrupted after %lld tokens", (long long)g->n_generated);
    return qhx_gen_accept(g, t, out, err);
}

qhx_status qhx_gen_finish(qhx_gen *g, const char **text, size_t *len, bool *matched, qhx_error *err) {
    *text = "";
    *len = 0;
    *matched = false;
    const char *tail = "";
    size_t n_tail = 0;
    qhx_status rc = g->p.stream ? qhx_tok_stream_flush(g->p.stream, &tail, &n_tail, err) : QHX_OK;
    if (rc) return rc;
    if (g->stops.matched) return QHX_OK; /* after a stop string nothing is given */
    int hit = qhx_stops_flush(&g->stops, tail, n_tail, text, len);
    if (hit < 0) return qhx_fail(err, QHX_E_NOMEM, "generate: out of memory for the stop strings");
    *matched = hit == 1;
    return QHX_OK;
}

/* ---- the public decoder and stop matcher (qhx.h "Generation steps") ---------------------- */

struct qhx_decoder {
    const qhx_model *m; /* a reference */
    qhx_sampler *smp;
    qhx_tok_stream *stream;
    qhx_gen g;
};

void qhx_decoder_free(qhx_decoder *d) {
    if (!d) return;
    qhx_gen_deinit(&d->g);
    qhx_tok_stream_free(d->stream);
    qhx_sampler_free_raw(d->smp);
    qhx_model_release(d->m);
    qhx_free(d);
}

qhx_status qhx_decoder_create(const qhx_model *m, const qhx_decoder_params *p, qhx_decoder **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "decoder: out is NULL");
    *out = NULL;
    if (!m || !p) return qhx_fail(err, QHX_E_ARG, "decoder: model and params are required");
    if (!m->tok) return qhx_fail(err, QHX_E_ARG, "decoder: the model has no tokenizer");
    qhx_decoder *d = qhx_calloc(1, sizeof *d);
    if (!d) return qhx_fail(err, QHX_E_NOMEM, "decoder: out of memory");
    d->m = qhx_model_retain(m);
    qhx_status rc = qhx_sampler_create_raw(&p->sampling, qhx_model_n_vocab(m), &d->smp, err);
    if (!rc) rc = qhx_tok_stream_create(m->tok, 0, &d->stream, err);
    if (!rc) {
        /* a speculative step adds what it feeds to the sampler's window itself */
        qhx_gen_params gp = {.smp = d->smp, .record = !p->speculative, .stream = d->stream, .constraint = p->constraint,
                             .ignore_stop = p->ignore_stop != 0,
                             .turn_end = p->stop_at_turn_end ? qhx_model_turn_end(m) : -1,
                             .max_tokens = p->max_tokens, .stops = p->stops, .n_stops = p->n_stops,
                             .stop_ids = p->stop_ids, .n_stop_ids = p->n_stop_ids,
                             .abort_cb = p->abort_cb, .abort_user = p->abort_user};
        rc = qhx_gen_init(&d->g, m, &gp, err);
    }
    if (rc) {
        qhx_decoder_free(d);
        return rc;
    }
    *out = d;
    return QHX_OK;
}

void qhx_decoder_push(qhx_decoder *d, const qhx_token *ids, size_t n) {
    for (size_t i = 0; d && ids && i < n; i++) qhx_sampler_accept(d->smp, ids[i]);
}

qhx_status qhx_decoder_next(qhx_decoder *d, const float *logits, qhx_decoder_step *out, qhx_error *err) {
    if (!d || !logits || !out) return qhx_fail(err, QHX_E_ARG, "decoder: decoder, logits and out are required");
    qhx_gen_step st;
    qhx_status rc = qhx_gen_next(&d->g, logits, &st, err);
    *out = (qhx_decoder_step){.token = st.token, .report = st.report, .feed = st.feed, .text = st.text,
                              .len = st.len, .stop = st.stop};
    return rc;
}

qhx_status qhx_decoder_accept(qhx_decoder *d, qhx_token t, qhx_decoder_step *out, qhx_error *err) {
    if (!d || !out) return qhx_fail(err, QHX_E_ARG, "decoder: decoder and out are required");
    qhx_gen_step st;
    qhx_status rc = qhx_gen_next_token(&d->g, t, &st, err);
    *out = (qhx_decoder_step){.token = st.token, .report = st.report, .feed = st.feed, .text = st.text,
                              .len = st.len, .stop = st.stop};
    return rc;
}

qhx_status qhx_decoder_spec_args(qhx_decoder *d, qhx_sampler **smp, qhx_token *turn_end, int *ignore_stop,
                                 qhx_error *err) {
    if (!d || d->g.p.record) return qhx_fail(err, QHX_E_ARG, "decoder: not created for speculative decoding");
    *smp = d->smp, *turn_end = d->g.p.turn_end, *ignore_stop = d->g.p.ignore_stop;
    return QHX_OK;
}

qhx_status qhx_decoder_spec_step(qhx_decoder *d, qhx_session *s, qhx_token t, int room, int draft, qhx_token *out,
                                 int *n_out, qhx_error *err) {
    if (n_out) *n_out = 0;
    qhx_sampler *smp = NULL;
    qhx_token turn_end = -1;
    int ignore_stop = 0;
    qhx_status rc = qhx_decoder_spec_args(d, &smp, &turn_end, &ignore_stop, err);
    if (rc) return rc;
    return qhx_session_spec_step_with(s, smp, t, room, draft, turn_end, ignore_stop, out, n_out, err);
}

qhx_status qhx_decoder_spec_cut(qhx_decoder *d, qhx_session *s, int k, qhx_error *err) {
    if (!d || d->g.p.record) return qhx_fail(err, QHX_E_ARG, "decoder: not created for speculative decoding");
    return qhx_session_spec_cut_with(s, d->smp, k, err);
}

qhx_status qhx_decoder_finish(qhx_decoder *d, const char **text, size_t *len, qhx_error *err) {
    if (!d || !text || !len) return qhx_fail(err, QHX_E_ARG, "decoder: decoder and outputs are required");
    bool matched;
    return qhx_gen_finish(&d->g, text, len, &matched, err);
}

struct qhx_stop_matcher {
    qhx_stops s;
};

qhx_status qhx_stop_matcher_create(const char *const *stops, size_t n, qhx_stop_matcher **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "stop strings: out is NULL");
    *out = NULL;
    qhx_stop_matcher *sm = qhx_calloc(1, sizeof *sm);
    if (!sm) return qhx_fail(err, QHX_E_NOMEM, "stop strings: out of memory");
    qhx_status rc = qhx_stops_init(&sm->s, stops, n, err);
    if (rc) {
        qhx_free(sm);
        return rc;
    }
    *out = sm;
    return QHX_OK;
}

int qhx_stop_matcher_push(qhx_stop_matcher *sm, const char *text, size_t len, const char **out, size_t *out_len) {
    if (!sm || !out || !out_len || (!text && len)) return -1;
    return qhx_stops_push(&sm->s, text ? text : "", len, out, out_len);
}

int qhx_stop_matcher_finish(qhx_stop_matcher *sm, const char **out, size_t *out_len) {
    if (!sm || !out || !out_len) return -1;
    return qhx_stops_flush(&sm->s, "", 0, out, out_len);
}

void qhx_stop_matcher_free(qhx_stop_matcher *sm) {
    if (!sm) return;
    qhx_stops_deinit(&sm->s);
    qhx_free(sm);
}
