/* runtime/spec.h: speculative decoding with the checkpoint's own multi-token-prediction block.
 *
 * One step: the MTP block drafts up to N tokens (each step fed the main model's last hidden row,
 * or the block's own output for the later ones, and the token before), one verify pass of the
 * main model (qhx_model_verify: every weight read once for the N + 1 rows, each row with the
 * bits of a one-token decode) gives the model's logits at every row, the speculative-sampling
 * rule accepts a prefix of the drafts and draws one more token (the correction, or the bonus
 * after a fully accepted draft), and the sequence is cut back to what was accepted (KV rows by
 * position, the recurrent state from the verify's per-token snapshots). Greedy output is the
 * argmax chain itself; sampled output has exactly the model's distribution (docs/generation.md).
 *
 * The object knows only a model, one sequence of it and a sampler: front ends drive it through
 * qhx_spec_step (runtime/hostop.c) and tell it every other forward of the sequence
 * (qhx_spec_layer_cb as the forward's layer callback, then qhx_spec_fed), so that the block's
 * own KV cache follows the sequence.
 *
 * Usage:
 *   qhx_spec_create(model, seq, &(qhx_spec_params){.draft = 4}, &sp, &err);
 *   forward(prompt, layer_cb = qhx_spec_layer_cb, user = sp); qhx_spec_fed(sp, prompt, n, &err);
 *   t = sample(logits);
 *   loop: qhx_spec_step(sp, smp, t, room, is_stop, user, out, &n_out, logits, &err):
 *         out[0 .. n_out - 1) are fed, out[n_out - 1] is the next t (not fed)
 */
#ifndef QHX_RUNTIME_SPEC_H
#define QHX_RUNTIME_SPEC_H

#include "runtime/model.h"
#include "runtime/sample.h"

#include <stdbool.h>
#include <stdint.h>

#define QHX_SPEC_MAX_DRAFT 8

typedef struct qhx_spec qhx_spec;

typedef struct qhx_spec_params {
    int draft;  /* most draft tokens per step, 1 .. QHX_SPEC_MAX_DRAFT */
    bool fixed; /* always draft tokens; false: adaptive (the rule in spec.c, docs/generation.md) */
} qhx_spec_params;

/* What the steps so far did. */
typedef struct qhx_spec_stats {
    int64_t steps;                            /* verify passes */
    int64_t drafted, accepted;                /* draft tokens proposed / accepted */
    int64_t emitted;                          /* tokens the steps gave (accepted + one per step) */
    int64_t pos_drafted[QHX_SPEC_MAX_DRAFT];  /* per draft position: proposed */
    int64_t pos_accepted[QHX_SPEC_MAX_DRAFT]; /* per draft position: accepted */
    double draft_ms, verify_ms;
} qhx_spec_stats;

/* QHX_E_UNSUPPORTED when the model has no MTP block loaded (qhx_model_params.mtp) or no verify
 * graph; QHX_E_ARG for a draft length out of range. seq stays the caller's. */
qhx_status qhx_spec_create(const qhx_model *m, qhx_seq *seq, const qhx_spec_params *p,
                           qhx_spec **out /* OUT, owned: qhx_spec_free */, qhx_error *err);
void qhx_spec_free(qhx_spec *sp); /* NULL allowed */
/* The sequence was reset (or restored from a file: the block's cache is then cold, and steps
 * decode without drafts until the next reset). */
void qhx_spec_reset(qhx_spec *sp, bool cold);

/* The layer callback (qhx_forward_opts.layer_cb, user sp) of every other forward of the
 * sequence; qhx_spec_fed after it succeeded (ids, n: what it fed) feeds the block the rows
 * whose next token is now known. A failed feed makes the block cold. */
void qhx_spec_layer_cb(void *user, int64_t layer, int64_t pos0, const float *x, int64_t n);
qhx_status qhx_spec_fed(qhx_spec *sp, const int32_t *ids, int64_t n, qhx_error *err);

/* One step: t0, the token chosen after the sequence (not yet fed), is fed with the drafts;
 * out (room, room >= 1) gets what the step gives: out[0 .. *n_out - 1) fed after t0, and
 * out[*n_out - 1] the next token, not fed (the caller's next t0). The step stops early at the
 * first token is_stop accepts (NULL: none), which is then that last one. logits (vocab) get the
 * model's logits after the last fed token. smp: the session's sampler (its penalty window gets
 * every fed token, as a forward's caller does). */
qhx_status qhx_spec_step(qhx_spec *sp, qhx_sampler *smp, int32_t t0, int room,
                         bool (*is_stop)(void *user, int32_t t), void *user, int32_t *out, int *n_out,
                         float *logits, qhx_error *err);
/* One step of several sequences of one model (runtime/spec.c), each job that of qhx_spec_step:
 * every job drafts, then one verify pass covers the rows of all (several passes only past
 * QHX_MAX_BATCH rows), then each job settles. Each job gets exactly what qhx_spec_step would
 * give it; its result is in rc (and *err), n_out set on success. Returns QHX_OK when every job
 * succeeded, else the first failure's code. At most QHX_MAX_BATCH jobs, their sequences
 * distinct. */
typedef struct qhx_spec_job {
    qhx_spec *sp;
    qhx_sampler *smp;
    int32_t t0;
    int room;
    bool (*is_stop)(void *user, int32_t t);
    void *user;
    int32_t *out;   /* OUT (room) */
    float *logits;  /* OUT (vocab) */
    int n_out;      /* OUT */
    qhx_status rc;  /* OUT */
    qhx_error *err; /* OUT, NULL allowed */
} qhx_spec_job;
qhx_status qhx_spec_step_multi(qhx_spec_job *jobs, int n_jobs);
/* After a step: keep only out[0 .. k) fed (0 <= k < *n_out - 1 of that step), out[k] then being
 * the next token, not fed; logits get the model's logits after out[k - 1] (t0 for k = 0). The
 * sampler's window drops the cut tokens. */
qhx_status qhx_spec_cut(qhx_spec *sp, qhx_sampler *smp, int k, float *logits, qhx_error *err);

void qhx_spec_get_stats(const qhx_spec *sp, qhx_spec_stats *out);
/* Whether the adaptive rule retired (drafting did not pay; spec.c): until the next reset the
 * caller may decode plainly instead of calling qhx_spec_step, which would only verify one token. */
bool qhx_spec_retired(const qhx_spec *sp);

#endif
