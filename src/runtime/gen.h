/* runtime/gen.h: the generation loop's step, the one place that turns logits into the next
 * token of an answer and decides whether the answer goes on. qhx_session_generate (qhx generate,
 * qhx chat, qhx_generate) and the public decoder (qhx.h "Generation steps", qhx serve's engine)
 * both run it, so a change to sampling or stopping is made here once.
 *
 * A step is two stages:
 *   qhx_gen_choose: the candidate token from the logits: the sampler's pick, or under a
 *     constraint the sampler's among the tokens its grammar allows. This is the hook point for
 *     what changes how tokens are chosen (constrained decoding today; a speculative step
 *     verifies its drafts in its own step, session_spec.c, and the loop then accepts each accepted
 *     token in turn with qhx_gen_next_token).
 *   qhx_gen_accept: one chosen token: the stop ids (the run plan's, the caller's), the end-of-turn token, the constraint's
 *     state, the streaming detokenizer, the stop strings (matched across token boundaries, never
 *     reported), the count against max_tokens. It says whether the token is reported and fed.
 * qhx_gen_next is the two in a row with the cancellation check first. Stepping several
 * sessions at once is the caller's (qhx_sessions_decode); a step only reads logits. */
#ifndef QHX_RUNTIME_GEN_H
#define QHX_RUNTIME_GEN_H

#include "runtime/sample.h"
#include "text/tokenizer.h"

#include <stdbool.h>
#include <stddef.h>

/* Stop strings over a stream of text: the text that can no longer be the start of one is final;
 * the first complete one ends the text before it. The strings are borrowed. */
typedef struct qhx_stops {
    const char *const *strs;
    size_t n;
    bool matched;  /* a stop string completed: nothing more is given */
    char *held;    /* text that could still start a stop string (owned) */
    size_t n_held, cap_held;
    char *out;     /* the final text of the last call (owned) */
    size_t cap_out;
} qhx_stops;

/* At most this many stop strings, each a non-empty NUL-terminated string. */
#define QHX_GEN_MAX_STOPS 1024

qhx_status qhx_stops_init(qhx_stops *s, const char *const *strs, size_t n, qhx_error *err);
void qhx_stops_deinit(qhx_stops *s);
/* Push text; *out / *out_len: what became final (borrowed until the next call). Returns 1 when a
 * stop string completed (the text before it was given; nothing more is), 0 to go on, -1 out of
 * memory. */
int qhx_stops_push(qhx_stops *s, const char *text, size_t len, const char **out, size_t *out_len);
/* The end of the text: tail (the last bytes, may be empty) after what is held. *out / *out_len:
 * the final text (up to a stop string that completes here: then 1 is returned; borrowed until
 * the next call); -1 out of memory. */
int qhx_stops_flush(qhx_stops *s, const char *tail, size_t n_tail, const char **out, size_t *out_len);

typedef struct qhx_gen_params {
    qhx_sampler *smp;           /* borrowed */
    bool record;                /* record each accepted token in smp's history (a session's feed
                                   records what it feeds itself) */
    qhx_tok_stream *stream;     /* borrowed; NULL: no text */
    qhx_constraint *constraint; /* borrowed, NULL for none */
    bool ignore_stop;
    qhx_token turn_end;         /* also a stop token (-1: none) */
    int64_t max_tokens;         /* >= 1 */
    const char *const *stops;   /* stop strings (borrowed), n_stops of them */
    size_t n_stops;
    const qhx_token *stop_ids;  /* more stop tokens (borrowed), n_stop_ids of them: they end the
                                   answer under ignore_stop too */
    size_t n_stop_ids;
    int (*abort_cb)(void *user);
    void *abort_user;
} qhx_gen_params;

typedef struct qhx_gen {
    const qhx_model *m;
    qhx_gen_params p;
    qhx_stops stops;
    int64_t n_generated; /* tokens reported */
    bool done;
    bool nonfinite;      /* the last failure was logits holding NaN or Inf */
} qhx_gen;

/* What one step says. */
typedef struct qhx_gen_step {
    qhx_token token;     /* the chosen token, -1 when none */
    bool report;         /* the token is part of the answer: pass it and text on */
    bool feed;           /* the answer goes on: feed token, then step again */
    const char *text;    /* final text this token completed (borrowed until the next call) */
    size_t len;
    qhx_stop_reason stop; /* when !feed: why the answer ended */
} qhx_gen_step;

qhx_status qhx_gen_init(qhx_gen *g, const qhx_model *m, const qhx_gen_params *p, qhx_error *err);
void qhx_gen_deinit(qhx_gen *g);
/* The candidate token (>= 0), -2 when the constraint's output is complete and nothing may
 * follow, -1 on failure (err set; g->nonfinite for NaN/Inf logits). */
qhx_token qhx_gen_choose(qhx_gen *g, const float *logits, qhx_error *err);
qhx_status qhx_gen_accept(qhx_gen *g, qhx_token t, qhx_gen_step *out, qhx_error *err);
/* Cancellation (QHX_E_ABORTED), choose, accept. */
qhx_status qhx_gen_next(qhx_gen *g, const float *logits, qhx_gen_step *out, qhx_error *err);
/* Cancellation, then accept t, a token chosen elsewhere (a speculative step's, verified against
 * the model's own choice there). */
qhx_status qhx_gen_next_token(qhx_gen *g, qhx_token t, qhx_gen_step *out, qhx_error *err);
/* The text the detokenizer and the stop strings still hold, at the end of the answer
 * (borrowed until the next call); *matched: a stop string completed in it (the text ends
 * before it). */
qhx_status qhx_gen_finish(qhx_gen *g, const char **text, size_t *len, bool *matched, qhx_error *err);

#endif
