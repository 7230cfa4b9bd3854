/* runtime/hostop.c: the generate loop of the host-ops (runtime/hostop.h). */
#include "runtime/hostop.h"

#include "core/alloc.h"
#include "core/time.h"
#include "runtime/constrain.h"
#include "runtime/gen.h"
#include "runtime/session.h"


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
                         .max_tokens = p->max_tokens, .stops = p->stops, .n_stops = p->stops ? p->n_stops : 0,
                         .stop_ids = p->stop_ids, .n_stop_ids = p->n_stop_ids};
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
    /* speculative decoding (session_spec.c); its step knows the run plan's stop ids only, so the
     * caller's turn it off */
    qhx_generate_params sp = *p;
    if (p->n_stop_ids) sp.spec_draft = -1;
    const bool spec = qhx_session_spec_begin(s, &sp);
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
        if ((rc = spec ? qhx_session_spec_feed(s, &sp, step.token, p->max_tokens - g.n_generated, gp.turn_end, err)
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

const qhx_hostop qhx_hostop_text = {"text", false, generate_tokens};
const qhx_hostop qhx_hostop_image_text = {"image_text", true, generate_tokens};

const qhx_hostop *qhx_hostop_of(const qhx_model *m) { return m->host_op->loop; }
