/* runtime/serve_api.c: the public calls a server needs (qhx.h, "Serving") beyond its prompts
 * (runtime/prompt.c): a sampler per request, a streaming detokenizer, in-memory checkpoints of
 * a session's state and one decode step over several sessions. Thin wrappers over the sampler,
 * the tokenizer's stream and the model state's regions. */
#include "core/alloc.h"
#include "runtime/constrain.h"
#include "runtime/model.h"
#include "runtime/sample.h"
#include "runtime/session.h"
#include "runtime/session_impl.h"
#include "text/tokenizer.h"

#include <string.h>

/* ==== sampling and text ====================================================================== */

struct qhx_sampler_handle {
    qhx_sampler *smp;
};

qhx_status qhx_sampler_create(const qhx_model *m, const qhx_sample_params *params, qhx_sampler_handle **out,
                              qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "sampler: out is NULL");
    *out = NULL;
    if (!m || !params) return qhx_fail(err, QHX_E_ARG, "sampler: model and params are required");
    qhx_sampler_handle *h = qhx_calloc(1, sizeof *h);
    if (!h) return qhx_fail(err, QHX_E_NOMEM, "sampler: out of memory");
    qhx_status rc = qhx_sampler_create_raw(params, qhx_model_n_vocab(m), &h->smp, err);
    if (rc) {
        qhx_free(h);
        return rc;
    }
    *out = h;
    return QHX_OK;
}

void qhx_sampler_free(qhx_sampler_handle *h) {
    if (!h) return;
    qhx_sampler_free_raw(h->smp);
    qhx_free(h);
}

/* the former names (deprecated in qhx.h) */
qhx_status qhx_sampler_new(const qhx_model *m, const qhx_sample_params *params, qhx_sampler_handle **out,
                           qhx_error *err) {
    return qhx_sampler_create(m, params, out, err);
}

void qhx_sampler_delete(qhx_sampler_handle *h) { qhx_sampler_free(h); }

void qhx_sampler_push(qhx_sampler_handle *h, qhx_token t) {
    if (h) qhx_sampler_accept(h->smp, t);
}

qhx_token qhx_sampler_pick(qhx_sampler_handle *h, const float *logits) {
    return h && logits ? qhx_sampler_sample(h->smp, logits) : -1;
}

qhx_token qhx_constraint_pick(qhx_constraint *c, qhx_sampler_handle *h, const float *logits, int allow_end,
                              qhx_error *err) {
    if (!c || !h || !logits) return qhx_fail(err, QHX_E_ARG, "constraint: constraint, sampler and logits are required"), -1;
    return qhx_constraint_sample(c, h->smp, logits, allow_end, err);
}

struct qhx_text_stream {
    qhx_tok_stream *st;
    const qhx_model *m; /* a reference: the stream reads its tokenizer */
};

qhx_status qhx_text_stream_new(const qhx_model *m, qhx_text_stream **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "text stream: out is NULL");
    *out = NULL;
    if (!m || !m->tok) return qhx_fail(err, QHX_E_ARG, "text stream: the model has no tokenizer");
    qhx_text_stream *t = qhx_calloc(1, sizeof *t);
    if (!t) return qhx_fail(err, QHX_E_NOMEM, "text stream: out of memory");
    qhx_status rc = qhx_tok_stream_create(m->tok, 0, &t->st, err);
    if (rc) {
        qhx_free(t);
        return rc;
    }
    t->m = qhx_model_retain(m);
    *out = t;
    return QHX_OK;
}

qhx_status qhx_text_stream_push(qhx_text_stream *t, qhx_token token, const char **text, size_t *len, qhx_error *err) {
    if (!t || !text || !len) return qhx_fail(err, QHX_E_ARG, "text stream: stream and outputs are required");
    return qhx_tok_stream_push(t->st, token, text, len, err);
}

qhx_status qhx_text_stream_flush(qhx_text_stream *t, const char **text, size_t *len, qhx_error *err) {
    if (!t || !text || !len) return qhx_fail(err, QHX_E_ARG, "text stream: stream and outputs are required");
    return qhx_tok_stream_flush(t->st, text, len, err);
}

void qhx_text_stream_free(qhx_text_stream *t) {
    if (!t) return;
    qhx_tok_stream_free(t->st);
    qhx_model_release(t->m);
    qhx_free(t);
}

/* ==== checkpoints ============================================================================ */

struct qhx_checkpoint {
    const qhx_session *owner;
    int64_t n_past;
    qhx_session_snapshot snap;
    size_t bytes;   /* of data */
    uint8_t *data;  /* the regions that are not per token, in order, then the logits */
};

static int state_regions(qhx_session *s, qhx_state_region *r) {
    return qhx_model_state_regions(qhx_session_state(s), r, QHX_STATE_MAX_REGIONS);
}

static size_t fixed_bytes(const qhx_state_region *r, int nr, size_t logit_bytes) {
    size_t b = logit_bytes;
    for (int i = 0; i < nr; i++)
        if (!r[i].per_token) b += (size_t)r[i].n_rows * r[i].row_bytes;
    return b;
}

qhx_status qhx_session_checkpoint(qhx_session *s, qhx_checkpoint **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "checkpoint: out is NULL");
    *out = NULL;
    if (!s) return qhx_fail(err, QHX_E_ARG, "checkpoint: session is NULL");
    qhx_state_region *r = qhx_malloc(QHX_STATE_MAX_REGIONS * sizeof *r);
    qhx_checkpoint *cp = qhx_calloc(1, sizeof *cp);
    if (!r || !cp) goto nomem;
    int nr = state_regions(s, r);
    if (nr <= 0) {
        qhx_free(r);
        qhx_free(cp);
        return qhx_fail(err, QHX_E_UNSUPPORTED, "checkpoint: this model family has no state description");
    }
    size_t lb = (size_t)qhx_session_n_vocab(s) * sizeof(float);
    cp->bytes = fixed_bytes(r, nr, lb);
    if (!(cp->data = qhx_malloc(cp->bytes))) goto nomem;
    uint8_t *d = cp->data;
    for (int i = 0; i < nr; i++) {
        if (r[i].per_token) continue;
        size_t b = (size_t)r[i].n_rows * r[i].row_bytes;
        qhx_state_read(&r[i], 0, d, b); /* through the device that holds it */
        d += b;
    }
    memcpy(d, qhx_session_logits(s), lb);
    qhx_status rc = qhx_state_sync(r, nr, err);
    if (rc) {
        qhx_free(r);
        qhx_checkpoint_free(cp);
        return rc;
    }
    cp->owner = s;
    cp->n_past = qhx_session_n_past(s);
    qhx_session_get_snapshot(s, &cp->snap);
    qhx_free(r);
    *out = cp;
    return QHX_OK;
nomem:
    qhx_free(r);
    qhx_checkpoint_free(cp);
    return qhx_fail(err, QHX_E_NOMEM, "checkpoint: out of memory");
}

qhx_status qhx_session_rollback(qhx_session *s, const qhx_checkpoint *cp, qhx_error *err) {
    if (!s || !cp) return qhx_fail(err, QHX_E_ARG, "rollback: session and checkpoint are required");
    if (cp->owner != s) return qhx_fail(err, QHX_E_ARG, "rollback: the checkpoint was taken on another session");
    qhx_status rc = qhx_session_guard_enter(s, "rollback", err);
    if (rc) return rc;
    qhx_state_region *r = qhx_malloc(QHX_STATE_MAX_REGIONS * sizeof *r);
    if (!r) return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_NOMEM, "rollback: out of memory"));
    int nr = state_regions(s, r);
    size_t lb = (size_t)qhx_session_n_vocab(s) * sizeof(float);
    if (nr <= 0 || fixed_bytes(r, nr, lb) != cp->bytes) {
        qhx_free(r);
        return qhx_session_guard_leave(s, qhx_fail(err, QHX_E_ARG, "rollback: the checkpoint does not fit this session"));
    }
    const uint8_t *d = cp->data;
    for (int i = 0; i < nr; i++) {
        if (r[i].per_token) continue;
        size_t b = (size_t)r[i].n_rows * r[i].row_bytes;
        qhx_state_write(&r[i], 0, d, b);
        d += b;
    }
    memcpy(qhx_session_logits_mut(s), d, lb);
    rc = qhx_state_sync(r, nr, err);
    if (rc) {
        qhx_free(r);
        return qhx_session_guard_leave(s, rc);
    }
    qhx_model_state_set_n_past(qhx_session_state(s), cp->n_past);
    qhx_session_spec_forget(s); /* the MTP block's cache is not in a checkpoint */
    qhx_session_set_snapshot(s, &cp->snap);
    qhx_free(r);
    return qhx_session_guard_leave(s, QHX_OK);
}

int64_t qhx_checkpoint_n_past(const qhx_checkpoint *cp) { return cp ? cp->n_past : 0; }
size_t qhx_checkpoint_bytes(const qhx_checkpoint *cp) { return cp ? cp->bytes + sizeof *cp : 0; }

void qhx_checkpoint_free(qhx_checkpoint *cp) {
    if (!cp) return;
    qhx_free(cp->data);
    qhx_free(cp);
}

/* ==== several sessions ======================================================================= */

/* One batched forward when every session can take it (same model, idle, nothing pending) and
 * the backend has the batched step; else one qhx_session_feed after the other. */
static bool batchable(qhx_session *const *ss, size_t n) {
    if (n < 2 || n > QHX_MAX_BATCH) return false;
    for (size_t i = 0; i < n; i++) /* speculation follows every forward of its session: fed alone */
        if (!ss[i] || ss[i]->m != ss[0]->m || ss[i]->busy || ss[i]->broken || ss[i]->pending >= 0 ||
            (ss[i]->spec && !qhx_spec_retired(ss[i]->spec)))
            return false;
    return true;
}

/* ==== speculative decoding for a front end's own loop (the engine of qhx serve) ============== */

int qhx_session_spec_enabled(const qhx_session *s) { return s && s->spec != NULL; }

int qhx_session_spec_retired(const qhx_session *s) { return s && qhx_spec_retired(s->spec); }

qhx_status qhx_session_spec_step(qhx_session *s, qhx_sampler_handle *smp, qhx_token t, int room, int draft,
                                 qhx_token turn_end, int ignore_stop, qhx_token *out, int *n_out, qhx_error *err) {
    if (n_out) *n_out = 0;
    if (!smp) return qhx_fail(err, QHX_E_ARG, "speculative step: session, sampler and out are required");
    return qhx_session_spec_step_with(s, smp->smp, t, room, draft, turn_end, ignore_stop, out, n_out, err);
}

qhx_status qhx_sessions_spec_step(qhx_spec_step_item *items, size_t n) {
    if (n && !items) return QHX_E_ARG;
    if (n > QHX_MAX_BATCH) return qhx_sessions_spec_step_with(items, NULL, n);
    qhx_spec_src src[QHX_MAX_BATCH];
    for (size_t i = 0; i < n; i++) {
        const qhx_spec_step_item *it = &items[i];
        src[i] = (qhx_spec_src){it->sampler ? it->sampler->smp : NULL, it->turn_end, it->ignore_stop};
        if (it->decoder && qhx_decoder_spec_args(it->decoder, &src[i].smp, &src[i].turn_end, &src[i].ignore_stop, NULL))
            src[i].smp = NULL; /* not a speculative decoder: refused */
    }
    return qhx_sessions_spec_step_with(items, src, n);
}

qhx_status qhx_session_spec_cut(qhx_session *s, qhx_sampler_handle *smp, int k, qhx_error *err) {
    if (!smp) return qhx_fail(err, QHX_E_ARG, "speculative cut: no speculative session");
    return qhx_session_spec_cut_with(s, smp->smp, k, err);
}

void qhx_session_spec_totals(const qhx_session *s, int64_t out[4]) {
    qhx_spec_stats a = {0};
    if (s && s->spec) qhx_spec_get_stats(s->spec, &a);
    out[0] = a.steps, out[1] = a.drafted, out[2] = a.accepted, out[3] = a.emitted;
}

qhx_status qhx_sessions_decode(qhx_session *const *ss, const qhx_token *tokens, size_t n, size_t *n_done,
                               qhx_error *err) {
    if (n_done) *n_done = 0;
    if (n && (!ss || !tokens)) return qhx_fail(err, QHX_E_ARG, "decode: sessions and tokens are required");
    if (batchable(ss, n)) {
        qhx_seq *sts[QHX_MAX_BATCH];
        float *lg[QHX_MAX_BATCH];
        for (size_t i = 0; i < n; i++) sts[i] = ss[i]->st, lg[i] = ss[i]->logits;
        for (size_t i = 0; i < n; i++) ss[i]->busy = true;
        qhx_status rc = qhx_model_decode_multi(ss[0]->m, sts, tokens, (int64_t)n, lg, err);
        for (size_t i = 0; i < n; i++) ss[i]->busy = false;
        if (rc == QHX_OK) {
            for (size_t i = 0; i < n; i++) {
                qhx_sampler_accept(ss[i]->smp, tokens[i]);
                ss[i]->has_logits = true;
                ss[i]->n_fed++;
            }
            if (n_done) *n_done = n;
            return QHX_OK;
        }
        if (rc != QHX_E_UNSUPPORTED) return rc; /* refused before anything was fed */
        if (err) *err = (qhx_error){0};
    }
    for (size_t i = 0; i < n; i++) {
        qhx_status rc = qhx_session_feed(ss[i], &tokens[i], 1, err);
        if (rc) return rc;
        if (n_done) *n_done = i + 1;
    }
    return QHX_OK;
}
