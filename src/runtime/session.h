/* runtime/session: one sequence on one model (the public qhx_session): the model state (KV
 * cache, conv FIFOs, recurrent states, positions, scratch; sized once at creation), the logits
 * of the last position, the sampler and the streaming detokenizer. The public calls are in
 * qhx.h; these are the internal ones host-ops and tools use. Neither prefill nor decode
 * allocates. One session is not re-entrant; sessions of one model may run concurrently. */
#ifndef QHX_RUNTIME_SESSION_H
#define QHX_RUNTIME_SESSION_H

#include "runtime/model.h"

#include <stddef.h>
#include <stdint.h>

/* Feed n >= 1 prompt tokens ids (n,) in one prompt-path call. logits_all (n, vocab): OUT, the
 * logits after every position, or NULL. The last position's logits are kept either way.
 * Errors as qhx_model_forward (QHX_E_LIMIT past n_ctx, QHX_E_ARG for a bad id). */
qhx_status qhx_session_prefill(qhx_session *s, const int32_t *ids, int64_t n, float *logits_all,
                               qhx_error *err);

/* Feed one token through the decode path; its logits become the session's logits. */
qhx_status qhx_session_decode(qhx_session *s, int32_t id, qhx_error *err);

/* Feed the token the last generate sampled and reported (its stop token, or the last one), if
 * any: a caller announcing an image for the next ids (qhx_qwen3vl_attach) does this first, so
 * the announcement covers exactly those ids. */
qhx_status qhx_session_feed_pending(qhx_session *s, qhx_error *err);

int64_t qhx_session_n_vocab(const qhx_session *s);
const qhx_model *qhx_session_model(const qhx_session *s);
qhx_seq *qhx_session_state(qhx_session *s);

/* The greedy choice over x (n,): the largest value, the lowest index among ties (NaN never
 * wins). n >= 1. */
int32_t qhx_argmax_f32(const float *x, int64_t n);

/* For session files (runtime/session_file.c). */
typedef struct qhx_session_snapshot {
    int32_t pending;       /* sampled, not yet fed; -1 if none */
    int32_t has_logits;
    int32_t last_stop;     /* qhx_stop_reason of the last generate */
} qhx_session_snapshot;
void qhx_session_get_snapshot(const qhx_session *s, qhx_session_snapshot *out);
void qhx_session_set_snapshot(qhx_session *s, const qhx_session_snapshot *in);
float *qhx_session_logits_mut(qhx_session *s);
/* qhx_session_restore from a buffer data[0..size) holding a whole session file; `label` names
 * it in messages. Same checks and results; the session is unchanged on failure. */
qhx_status qhx_session_restore_buf(qhx_session *s, const uint8_t *data, size_t size, const char *label,
                                   qhx_error *err);
struct qhx_sampler *qhx_session_sampler(qhx_session *s);

/* ---- what the host-ops' loops use (runtime/hostop.c): they write no session field ---------- */

struct qhx_tok_stream *qhx_session_stream(qhx_session *s); /* NULL without a tokenizer */
/* The token the last generate left to feed (-1: none), and setting it (the loop's last token). */
int32_t qhx_session_pending(const qhx_session *s);
void qhx_session_set_pending(qhx_session *s, int32_t token);
bool qhx_session_has_logits(const qhx_session *s);
void qhx_session_abort_cb(const qhx_session *s, int (**cb)(void *), void **user);
/* A generate's start: the tokens fed (and their time) since the last one, for its stats; its
 * end: why it stopped (qhx_session_last_stop), and the feed counts start over. */
void qhx_session_generate_begin(const qhx_session *s, int64_t *n_prompt, double *prefill_ms);
void qhx_session_generate_end(qhx_session *s, qhx_stop_reason why);
/* Feed ids (n) through the prompt path after the pending token, with the context checked first
 * (QHX_E_LIMIT) and every id checked (QHX_E_ARG); counts them for the next generate's stats. */
qhx_status qhx_session_feed_ids(qhx_session *s, const qhx_token *ids, size_t n, qhx_error *err);
/* The one way ids with images go in (chat turns, caller-made ids, a server's prompts): the
 * pending token first, then images (n_images, NULL for none) announced at their pads in ids
 * (n), the ids fed as qhx_session_feed_ids does, the announcement dropped after (the images
 * stay the caller's). Under the caller's guard. */
qhx_status qhx_session_feed_announced(qhx_session *s, const qhx_token *ids, size_t n,
                                      const struct qhx_image_embed *images, int n_images, qhx_error *err);
/* QHX_E_LIMIT when text of len bytes makes more tokens than the context leaves, by a bound that
 * needs no tokenizing (NFC and the longest token), so hostile text is refused before the work. */
qhx_status qhx_session_text_may_fit(const qhx_session *s, size_t len, qhx_error *err);
/* Tokenize text (len bytes) with the session's abort callback polled, refusing text that cannot
 * fit in the context before paying for it. *ids owned: qhx_free. */
qhx_status qhx_session_encode(qhx_session *s, const char *text, size_t len, int32_t **ids, size_t *n, qhx_error *err);
/* Speculative decoding in a generate loop (session_spec.c), for the loop of runtime/hostop.c:
 *   spec = qhx_session_spec_begin(s, p);
 *   each token: a queued one (qhx_session_spec_pop) is accepted as it is, else the step chooses;
 *               instead of qhx_session_decode(s, t): qhx_session_spec_feed(s, p, t, room, turn_end)
 *               (room: tokens the loop may still hand out after t);
 *   at the end: qhx_session_spec_end(s, &stats, err) (cuts what was fed but not handed out). */
bool qhx_session_spec_begin(qhx_session *s, const qhx_generate_params *p);
bool qhx_session_spec_pop(qhx_session *s, qhx_token *t);
qhx_status qhx_session_spec_feed(qhx_session *s, const qhx_generate_params *p, qhx_token t, int64_t room,
                                 qhx_token turn_end, qhx_error *err);
qhx_status qhx_session_spec_end(qhx_session *s, qhx_generate_stats *st, qhx_error *err);
/* qhx.h's qhx_session_spec_step / _cut with the sampler itself (the public ones unwrap a
 * qhx_sampler_handle; the decoder passes its own). */
struct qhx_sampler;
qhx_status qhx_session_spec_step_with(qhx_session *s, struct qhx_sampler *smp, qhx_token t, int room, int draft,
                                      qhx_token turn_end, int ignore_stop, qhx_token *out, int *n_out, qhx_error *err);
/* qhx.h's qhx_sessions_spec_step over n items whose sampler, end-of-turn token and ignore_stop
 * are given here (src[i] for items[i]; a NULL sampler: that item is refused with QHX_E_ARG);
 * qhx_session_spec_step_with is the call with one. */
typedef struct qhx_spec_src {
    struct qhx_sampler *smp;
    qhx_token turn_end;
    int ignore_stop;
} qhx_spec_src;
qhx_status qhx_sessions_spec_step_with(qhx_spec_step_item *items, const qhx_spec_src *src, size_t n);
/* The decoder's speculative step arguments: its sampler, end-of-turn token and ignore_stop;
 * QHX_E_ARG for a decoder not created with speculative = 1. */
qhx_status qhx_decoder_spec_args(qhx_decoder *d, struct qhx_sampler **smp, qhx_token *turn_end, int *ignore_stop,
                                 qhx_error *err);
qhx_status qhx_session_spec_cut_with(qhx_session *s, struct qhx_sampler *smp, int k, qhx_error *err);
/* Speculative decoding loses track of the sequence (a restored state): steps decode without
 * drafts until the next reset (session_spec.c). */
void qhx_session_spec_forget(qhx_session *s);
/* The re-entrancy guard of the public calls (session_file.c's save and restore use it too):
 * enter refuses a NULL or busy session with QHX_E_ARG, else marks it busy; leave clears the mark
 * and returns rc. */
qhx_status qhx_session_guard_enter(qhx_session *s, const char *what, qhx_error *err);
qhx_status qhx_session_guard_leave(qhx_session *s, qhx_status rc);

#endif
