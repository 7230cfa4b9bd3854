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
    if (qhx_spec_retired(s->spec)) { /* drafting did not pay: the plain decode path, nothing queued */
        s->spec_qn = s->spec_qi = 0;
        return qhx_session_decode(s, t, err);
    }
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

void qhx_session_spec_forget(qhx_session *s) {
    qhx_spec_reset(s->spec, true);
    s->spec_qn = s->spec_qi = 0;
}

/* ---- the step of a front end's own loop (qhx.h: qhx_session_spec_step, qhx_decoder_spec_step) */

typedef struct spec_stop {
    const qhx_model *m;
    qhx_token turn_end;
} spec_stop;

static bool spec_is_stop(void *user, int32_t t) {
    const spec_stop *c = user;
    return qhx_model_is_stop(c->m, t) || (c->turn_end >= 0 && t == c->turn_end);
}

qhx_status qhx_session_spec_step_with(qhx_session *s, qhx_sampler *smp, qhx_token t, int room, int draft,
                                      qhx_token turn_end, int ignore_stop, qhx_token *out, int *n_out, qhx_error *err) {
    if (n_out) *n_out = 0;
    if (!n_out) return qhx_fail(err, QHX_E_ARG, "speculative step: session, sampler and out are required");
    qhx_spec_step_item it = {.session = s, .token = t, .room = room, .draft = draft, .out = out};
    const qhx_spec_src src = {smp, turn_end, ignore_stop};
    qhx_status rc = qhx_sessions_spec_step_with(&it, &src, 1);
    *n_out = it.n_out;
    if (rc && err) *err = it.error;
    return rc;
}

/* Item i may step: a speculative session, idle, not an earlier item's, a token and room. */
static qhx_status item_check(qhx_spec_step_item *items, qhx_sampler *smp, size_t i) {
    qhx_spec_step_item *it = &items[i];
    qhx_session *s = it->session;
    qhx_error *err = &it->error;
    if (!s || !smp || !it->out) return qhx_fail(err, QHX_E_ARG, "speculative step: session, sampler and out are required");
    if (!s->spec) return qhx_fail(err, QHX_E_UNSUPPORTED, "speculative step: the session was created without spec_draft");
    if (s->busy || s->broken || s->pending >= 0)
        return qhx_fail(err, QHX_E_ARG, "speculative step: the session is busy, broken or holds a pending token");
    for (size_t k = 0; k < i; k++)
        if (items[k].session == s) return qhx_fail(err, QHX_E_ARG, "speculative step: the session is in the step twice");
    if (it->token < 0 || it->token >= s->n_vocab)
        return qhx_fail(err, QHX_E_ARG, "speculative step: id %d is outside the vocabulary", it->token);
    if (it->room < 1) return qhx_fail(err, QHX_E_ARG, "speculative step: room %d", it->room);
    return QHX_OK;
}

qhx_status qhx_sessions_spec_step_with(qhx_spec_step_item *items, const qhx_spec_src *src, size_t n) {
    if (n > QHX_MAX_BATCH) {
        for (size_t i = 0; i < n; i++)
            items[i].n_out = 0, items[i].status = qhx_fail(&items[i].error, QHX_E_ARG, "speculative step: more than %d sessions", QHX_MAX_BATCH);
        return n ? QHX_E_ARG : QHX_OK;
    }
    qhx_spec_job jobs[QHX_MAX_BATCH];
    spec_stop stop[QHX_MAX_BATCH];
    size_t who[QHX_MAX_BATCH], nj = 0;
    qhx_status first = QHX_OK;
    for (size_t i = 0; i < n; i++) {
        qhx_spec_step_item *it = &items[i];
        it->n_out = 0;
        it->error = (qhx_error){0};
        if ((it->status = item_check(items, src[i].smp, i))) {
            if (!first) first = it->status;
            continue;
        }
        qhx_session *s = it->session;
        const int room = it->draft >= 1 && it->room > it->draft + 1 ? it->draft + 1 : it->room;
        stop[nj] = (spec_stop){s->m, src[i].turn_end};
        jobs[nj] = (qhx_spec_job){.sp = s->spec, .smp = src[i].smp, .t0 = it->token, .room = room,
                                  .is_stop = src[i].ignore_stop ? NULL : spec_is_stop, .user = &stop[nj], .out = it->out,
                                  .logits = s->logits, .err = &it->error};
        s->busy = true;
        who[nj++] = i;
    }
    if (nj) qhx_spec_step_multi(jobs, (int)nj);
    for (size_t k = 0; k < nj; k++) {
        qhx_spec_step_item *it = &items[who[k]];
        qhx_session *s = it->session;
        s->busy = false;
        it->status = jobs[k].rc;
        if (it->status == QHX_OK) s->has_logits = true, it->n_out = jobs[k].n_out, s->n_fed += it->n_out;
        else if (!first) first = it->status;
    }
    return first;
}

qhx_status qhx_session_spec_cut_with(qhx_session *s, qhx_sampler *smp, int k, qhx_error *err) {
    if (!s || !smp || !s->spec) return qhx_fail(err, QHX_E_ARG, "speculative cut: no speculative session");
    return qhx_spec_cut(s->spec, smp, k, s->logits, err);
}
