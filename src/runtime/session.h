/* runtime/session: one sequence on one model, as a host-op sees it: the model state (KV cache,
 * conv FIFOs, recurrent states, positions, scratch; sized once at creation) plus the logits of
 * the last position. Prefill takes the prompt path, decode the single-token path; neither
 * allocates. One session is not re-entrant; sessions of one model may run concurrently. */
#ifndef QHX_RUNTIME_SESSION_H
#define QHX_RUNTIME_SESSION_H

#include "models/model.h"

#include <stdint.h>

typedef struct qhx_session qhx_session;

typedef struct qhx_session_params {
    int64_t n_ctx;    /* most tokens the sequence may hold */
    int64_t n_batch;  /* most tokens per internal prefill step; 0 = default (min(n_ctx, 512)) */
} qhx_session_params;

/* Create a session on m (which must outlive it). */
qhx_status qhx_session_create(const qhx_model *m, const qhx_session_params *params,
                              qhx_session **out /* OUT, owned: qhx_session_free */, qhx_error *err);
void qhx_session_free(qhx_session *s); /* NULL allowed */

/* Start a new sequence (position 0, zero recurrent state). */
void qhx_session_reset(qhx_session *s);

/* Feed n >= 1 prompt tokens ids (n,) in one prompt-path call. logits_all (n, vocab): OUT, the
 * logits after every position, or NULL. The last position's logits are kept either way.
 * Errors as qhx_model_forward (QHX_E_LIMIT past n_ctx, QHX_E_ARG for a bad id). */
qhx_status qhx_session_prefill(qhx_session *s, const int32_t *ids, int64_t n, float *logits_all,
                               qhx_error *err);

/* Feed one token through the decode path; its logits become the session's logits. */
qhx_status qhx_session_decode(qhx_session *s, int32_t id, qhx_error *err);

/* Logits (vocab,) after the last prefill/decode. Borrowed: valid until the next mutating call. */
const float *qhx_session_logits(const qhx_session *s);
int64_t qhx_session_n_vocab(const qhx_session *s);
int64_t qhx_session_n_past(const qhx_session *s);

/* The greedy choice over x (n,): the largest value, the lowest index among ties (NaN never
 * wins). n >= 1. */
int32_t qhx_argmax_f32(const float *x, int64_t n);

#endif
