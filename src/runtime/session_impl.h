/* runtime/session_impl.h: the session object, shared by the files that implement it
 * (session.c: lifetime and feeding; session_file.c: save and restore; serve_api.c: the
 * checkpoints). The host-ops' loops (hostop.c) use the calls of runtime/session.h instead. Not for other layers: they use qhx.h and runtime/session.h. */
#ifndef QHX_RUNTIME_SESSION_IMPL_H
#define QHX_RUNTIME_SESSION_IMPL_H

#include "runtime/model.h"
#include "runtime/sample.h"
#include "runtime/session.h"
#include "runtime/spec.h"
#include "text/tokenizer.h"

#include <stdbool.h>

struct qhx_session {
    const qhx_model *m;
    qhx_seq *st;
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
    /* speculative decoding (runtime/spec.h; session_spec.c): NULL when off. spec_q[0 ..
       spec_qn - 1) are fed, spec_q[spec_qn - 1] is not; spec_qi: the next to hand out;
       spec_done: the last handed out went through the whole loop body */
    struct qhx_spec *spec;
    int32_t spec_q[QHX_SPEC_MAX_DRAFT + 1];
    int spec_qn, spec_qi, spec_cap;
    bool spec_done;
    qhx_spec_stats spec_base; /* the step counters when the generate began */
};

#endif
