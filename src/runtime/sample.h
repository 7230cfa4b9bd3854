/* runtime/sample: turning logits into the next token. Greedy (argmax, lowest id on ties) or
 * sampling with repetition penalty, temperature, top-k, top-p and min-p, applied in that order
 * (the order of the Hugging Face logits processors). Deterministic for a seed: the sampler is
 * single-threaded and the logits it sees do not depend on the thread count. */
#ifndef QHX_RUNTIME_SAMPLE_H
#define QHX_RUNTIME_SAMPLE_H

#include "core/rng.h"
#include "core/status.h"

#include <stdint.h>

/* qhx_sample_params is public (include/qhx.h): zero fields mean "off". */

/* Greedy defaults: temperature 0, everything else off, seed 0, penalty window 64. */
qhx_sample_params qhx_sample_default_params(void);

/* Check ranges; message names the parameter ("top_p = 2: must be in [0, 1]"). */
qhx_status qhx_sample_params_check(const qhx_sample_params *p, qhx_error *err);

typedef struct qhx_sampler qhx_sampler;

/* The bare sampler over n_vocab logits per call (qhx.h's qhx_sampler_create wraps one for a
 * model). Scratch for the whole vocabulary is allocated here, once. */
qhx_status qhx_sampler_create_raw(const qhx_sample_params *p, int64_t n_vocab,
                                  qhx_sampler **out /* OUT */, qhx_error *err);
void qhx_sampler_free_raw(qhx_sampler *s); /* NULL allowed */

/* Whether s picks the argmax (temperature 0): no randomness, so a grammar may check the pick
 * first and mask only when it is refused. */
int qhx_sampler_is_greedy(const qhx_sampler *s);

/* Forget the history and reseed. */
void qhx_sampler_reset(qhx_sampler *s);
/* Record a token (prompt or generated) for the repetition penalty window. */
void qhx_sampler_accept(qhx_sampler *s, int32_t token);
/* Choose the next token from logits[0..n_vocab). Does not modify logits; does not record the
 * token (call accept). Never allocates. Returns -1 for a row holding a NaN or +Inf. */
int32_t qhx_sampler_sample(qhx_sampler *s, const float *logits);

/* Speculative sampling (runtime/spec.c) needs the distributions themselves. dist (n_vocab) = the
 * distribution qhx_sampler_sample draws from for logits, the same penalties, temperature,
 * top-k, top-p and min-p (one-hot at the argmax when greedy); -1 for a non-finite row. */
int qhx_sampler_dist(qhx_sampler *s, const float *logits, float *dist);
/* One uniform draw in [0, 1) from the sampler's stream. */
double qhx_sampler_uniform(qhx_sampler *s);
/* The id where the running sum of dist[0..n) (normalised by its total) first passes u; only
 * ids with dist > 0 are drawn; -1 when all are 0. */
int32_t qhx_dist_draw(const float *dist, int64_t n, double u);
/* The penalty window alone (not the rng), to take back tokens accepted tentatively. */
size_t qhx_sampler_hist_bytes(const qhx_sampler *s);
void qhx_sampler_hist_save(const qhx_sampler *s, void *buf /* hist_bytes */);
void qhx_sampler_hist_load(qhx_sampler *s, const void *buf);

/* Sampler state (rng + penalty window) as bytes, for session files. Layout: 4 x u64 rng,
 * i32 window, i32 count, i32 position, window x i32 tokens; little-endian host order. */
size_t qhx_sampler_state_bytes(const qhx_sampler *s);
void qhx_sampler_state_write(const qhx_sampler *s, uint8_t *out /* state_bytes */);
/* Refuses (QHX_E_FORMAT) bytes of another size or with counts out of range; s unchanged then. */
qhx_status qhx_sampler_state_read(qhx_sampler *s, const uint8_t *in, size_t n, qhx_error *err);

/* Argmax, lowest index on ties; NaN never wins. */
int32_t qhx_argmax(const float *logits, int64_t n);

#endif
