/* runtime/session_spec.c: speculative decoding in a session's generate loop (the calls of
 * session_impl.h). The loop hands out tokens one by one as before; a speculative step
 * (runtime/spec.h) replaces the decode of a token and queues what it gave: all but the last are
 * already fed, so the loop takes them without a forward; whatever was fed but not handed out
 * when the loop stops is cut back, so that the session ends as if it had decoded token by token. */
#include "runtime/session_impl.h"

#include "runtime/model.h"

bool qhx_session_spec_begin(qhx_session *s, const qhx_generate_params *p) {
    s->spec_qn = s->spec_qi = 0;
    s->spec_done = false;
    if (!s->spec || p->constraint || p->spec_draft < 0) return false;
    s->spec_cap = p->spec_draft > 0 ? p->spec_draft : QHX_SPEC_MAX_DRAFT;
    qhx_spec_get_stats(s->spec, &s->spec_base);
    return true;
}

bool qhx_session_spec_pop(qhx_session *s, qhx_token *t) {
    if (s->spec_qi >= s->spec_qn) return false;
    *t = s->spec_q[s->spec_qi++];
    s->spec_done = false;
    return true;
}

typedef struct stop_ctx {
    const qhx_model *m;
    qhx_token turn_end;
} stop_ctx;

static bool is_stop(void *user, int32_t t) {
    const stop_ctx *c = user;
    return qhx_model_is_stop(c->m, t) || (c->turn_end >= 0 && t == c->turn_end);
}

qhx_status qhx_session_spec_feed(qhx_session *s, const qhx_generate_params *p, qhx_token t, int64_t room,
                                 qhx_token turn_end, qhx_error *err) {
    if (s->spec_qi < s->spec_qn) { /* a queued token the step fed already */
        s->spec_done = true;
        return QHX_OK;
    }
    if (s->broken)
        return qhx_fail(err, QHX_E_ARG, "session: an interrupted call left it incomplete; reset it first");
    int r = room < s->spec_cap + 1 ? (int)room : s->spec_cap + 1;
    if (r < 1) r = 1;
    stop_ctx c = {s->m, turn_end};
    int n = 0;
    qhx_status rc = qhx_spec_step(s->spec, s->smp, t, r, p->ignore_stop ? NULL : is_stop, &c, s->spec_q, &n,
                                  s->logits, err);
    s->spec_qn = rc ? 0 : n;
    s->spec_qi = 0;
    s->spec_done = false;
    if (rc == QHX_OK) s->has_logits = true;
    return rc;
}

qhx_status qhx_session_spec_end(qhx_session *s, qhx_generate_stats *st, qhx_error *err) {
    qhx_status rc = QHX_OK;
    const int li = s->spec_qi - 1;
    if (s->spec_qn > 0 && li < s->spec_qn - 1) { /* the last handed out was fed: cut back to it */
        const int keep = s->spec_done ? li + 1 : li;
        rc = qhx_spec_cut(s->spec, s->smp, keep, s->logits, err);
    }
    s->spec_qn = s->spec_qi = 0;
    if (s->spec && st) {
        qhx_spec_stats a;
        qhx_spec_get_stats(s->spec, &a);
        st->n_verify = a.steps - s->spec_base.steps;
        st->n_drafted = a.drafted - s->spec_base.drafted;
        st->n_accepted = a.accepted - s->spec_base.accepted;
        st->n_spec_tokens = a.emitted - s->spec_base.emitted;
    }
    return rc;
}

void qhx_session_spec_opts(qhx_session *s, qhx_forward_opts *o) {
    if (!s->spec) return;
    o->layer_cb = qhx_spec_layer_cb;
    o->layer_cb_user = s->spec;
}

void qhx_session_spec_fed(qhx_session *s, const int32_t *ids, int64_t n) {
    if (s->spec) qhx_spec_fed(s->spec, ids, n, NULL); /* a failure only turns the drafts off */
}

void qhx_session_spec_forget(qhx_session *s) {
    qhx_spec_reset(s->spec, true);
    s->spec_qn = s->spec_qi = 0;
}
