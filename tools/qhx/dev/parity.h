/* tools/qhx/dev/parity: checking a model against a parity fixture (tests/data/fixtures/parity/<case>/:
 * prompts.json, golden.json, <name>.logits.f32), and comparing two models on the same prompts.
 * This is the C form of tests/data/oracle/parity_gate.py plus a distribution-level comparison for
 * quantized bundles; `qhx parity` (tools/qhx/dev/cmd_parity.c) prints what these functions measure.
 * Not here: image prompts (the vision path drives those; they are loaded but marked). */
#ifndef QHX_DEV_PARITY_H
#define QHX_DEV_PARITY_H

#include "runtime/model.h"

#include <stdbool.h>
#include <stdint.h>

/* Caps on what a fixture may declare (the real ones: 8 prompts, 300 ids, 32 steps). */
#define QHX_PARITY_MAX_PROMPTS 4096
#define QHX_PARITY_MAX_IDS ((int64_t)1 << 20)
#define QHX_PARITY_MAX_STEPS 4096

/* ---- fixture ------------------------------------------------------------------------------ */

/* One prompt of prompts.json with its golden.json entry. */
typedef struct qhx_parity_prompt {
    char *name;               /* owned */
    int32_t *ids;             /* (n_ids,) the prompt, no BOS added */
    int64_t n_ids;
    bool has_image;           /* the prompt carries an "image" key */
    char *image;              /* its file name in the fixture folder (owned), NULL for text */
    int32_t *greedy;          /* (n_steps,) golden free-running greedy ids */
    double *greedy_margins;   /* (n_steps,) golden top1 - top2 at the step that chose greedy[k] */
    int64_t n_steps;
    int32_t *row_top1;        /* (n_rows,) golden argmax of every teacher-forced row */
    double *row_margins;      /* (n_rows,) golden top1 - top2 of every row */
    int64_t n_rows;           /* n_ids + n_steps - 1 */
} qhx_parity_prompt;

typedef struct qhx_parity_fixture {
    char *dir;                     /* owned copy of the folder path */
    qhx_parity_prompt *prompts;    /* (n_prompts,) in prompts.json order */
    int64_t n_prompts;
} qhx_parity_fixture;

/* Read dir/prompts.json and dir/golden.json. Every array length is checked against the others
 * (greedy and greedy_margins: n_steps >= 1; row_top1 and row_margins: n_ids + n_steps - 1) and
 * capped (QHX_PARITY_MAX_*). The logits files are read later, per prompt.
 * Returns QHX_OK, QHX_E_IO (a missing file), QHX_E_FORMAT (naming file and JSON path),
 * QHX_E_LIMIT or QHX_E_NOMEM; *out is NULL on failure. */
qhx_status qhx_parity_fixture_open(const char *dir, qhx_parity_fixture **out /* OUT, owned */,
                                   qhx_error *err);
/* The same from the two files' bytes (need not be NUL-terminated); dir is kept for the logits
 * files and names the files in messages. For tests and fuzzing. */
qhx_status qhx_parity_fixture_parse(const char *dir, const char *prompts, size_t prompts_len,
                                    const char *golden, size_t golden_len,
                                    qhx_parity_fixture **out /* OUT, owned */, qhx_error *err);
void qhx_parity_fixture_free(qhx_parity_fixture *fx); /* NULL allowed */

/* Read dir/<name>.logits.f32 of prompt i: little-endian float32 (n_rows, vocab). The file size
 * must be exactly n_rows * vocab * 4 bytes (QHX_E_FORMAT naming both sizes otherwise).
 * *rows is owned (qhx_free). */
qhx_status qhx_parity_golden_logits(const qhx_parity_fixture *fx, int64_t i, int64_t vocab,
                                    float **rows /* OUT, owned */, qhx_error *err);

/* Read dir/<name>.image_embd.f32 of prompt i: float32 (n_floats,) exactly (QHX_E_FORMAT naming
 * both sizes otherwise). *embd is owned (qhx_free). */
qhx_status qhx_parity_golden_embd(const qhx_parity_fixture *fx, int64_t i, int64_t n_floats,
                                  float **embd /* OUT, owned */, qhx_error *err);

/* ---- running a model ------------------------------------------------------------------------ */

/* Free-running greedy: reset s, feed ids (n_ids,) through the prompt path, then take n_steps
 * argmax picks (qhx_argmax_f32: lowest id on ties), feeding each back one token at a time
 * except the last. out (n_steps,). s must hold n_ids + n_steps tokens. */
qhx_status qhx_parity_greedy(qhx_session *s, const int32_t *ids, int64_t n_ids, int64_t n_steps,
                             int32_t *out /* OUT */, qhx_error *err);

/* Teacher-forced rows, laid out as the golden files: reset s, feed ids (n_ids,) through the
 * prompt path in one call with the logits of every position (rows 0 .. n_ids - 1), then feed
 * forced (n_forced,) one token at a time through the decode path (rows n_ids ..).
 * rows (n_ids + n_forced, vocab): OUT. */
/* The greedy and teacher-forced runs with the prompt's ids announced with images (n_images,)
 * (runtime/model.h qhx_model_state_attach; n_images 0: the same as the plain ones). The
 * announcement is dropped after the prompt. */
qhx_status qhx_parity_greedy_images(qhx_session *s, const qhx_image_embed *images, int n_images, const int32_t *ids,
                                    int64_t n_ids, int64_t n_steps, int32_t *out /* OUT */, qhx_error *err);
qhx_status qhx_parity_forced_images(qhx_session *s, const qhx_image_embed *images, int n_images, const int32_t *ids,
                                    int64_t n_ids, const int32_t *forced, int64_t n_forced, float *rows /* OUT */,
                                    qhx_error *err);
qhx_status qhx_parity_forced(qhx_session *s, const int32_t *ids, int64_t n_ids,
                             const int32_t *forced, int64_t n_forced, float *rows /* OUT */,
                             qhx_error *err);

/* ---- gates ---------------------------------------------------------------------------------- */

typedef enum qhx_parity_gate_kind {
    QHX_PARITY_GATE_EXACT = 0, /* free-running greedy identical at every step */
    QHX_PARITY_GATE_TOL = 1,   /* fixtures README §5 "tolerant gate" */
} qhx_parity_gate_kind;

typedef struct qhx_parity_gate {
    qhx_parity_gate_kind kind;
    double tau;       /* near-tie margin: a mismatch at a golden margin < tau is excused */
    double tol;       /* TOL: max |logit - golden| on every teacher-forced row; < 0: not applied */
    bool check_rows;  /* TOL: every row's argmax == row_top1 unless row_margins < tau */
} qhx_parity_gate;

typedef struct qhx_parity_result {
    int64_t first_diff;       /* first greedy step that differs from the golden; n_steps: none */
    double first_diff_margin; /* golden greedy_margins[first_diff]; 0 when none differs */
    double max_abs;           /* max |logit - golden| over every element of every row */
    int64_t rows_over_tol;    /* rows whose max |diff| > tol (0 when tol is not applied) */
    int64_t flips;            /* rows whose argmax != row_top1 */
    int64_t hard_flips;       /* of those, rows whose golden margin >= tau */
    bool pass;                /* by the gate */
} qhx_parity_result;

/* Judge one prompt: greedy (p->n_steps,) is the model's free-running continuation, rows and
 * golden (p->n_rows, vocab) the teacher-forced logits and the golden file's. Pure. */
void qhx_parity_judge(const qhx_parity_prompt *p, const int32_t *greedy, const float *rows,
                      const float *golden, int64_t vocab, const qhx_parity_gate *gate,
                      qhx_parity_result *out /* OUT */);

/* ---- comparing two models ------------------------------------------------------------------- */

/* KL(P || Q) in nats for P = softmax(p), Q = softmax(q), both (n,) logits; double throughout
 * (log-sum-exp with the max subtracted). 0 for identical inputs, never negative. */
double qhx_parity_kl(const float *p, const float *q, int64_t n);

/* Per-row KL counted in log-spaced bins for its quantiles: QHX_PARITY_KL_PER_DECADE bins per
 * decade from 1e-12 to 1e2 nats, bin 0 below, the last at or above (NaN is counted in it). */
#define QHX_PARITY_KL_PER_DECADE 20
#define QHX_PARITY_KL_BINS (14 * QHX_PARITY_KL_PER_DECADE + 2)

typedef struct qhx_parity_cmp {
    int64_t n_rows;
    int64_t agree;    /* rows where argmax(test) == argmax(ref) */
    double kl_sum;    /* sum over rows of KL(P_ref || P_test) */
    double kl_max;
    int64_t kl_hist[QHX_PARITY_KL_BINS];
} qhx_parity_cmp;

/* The q-quantile (0 < q <= 1) of the rows' KL, as the upper edge of the bin it falls in (so the
 * true quantile is at most this, and above the edge below it: within 12 %). 0 for no rows. */
double qhx_parity_kl_quantile(const qhx_parity_cmp *c, double q);

/* Add b's rows to a (histograms included); a NaN maximum sticks. */
void qhx_parity_cmp_merge(qhx_parity_cmp *a, const qhx_parity_cmp *b);

/* Add n_rows rows of ref and test (n_rows, vocab) to *acc (zero it first). */
void qhx_parity_compare(const float *ref, const float *test, int64_t n_rows, int64_t vocab,
                        qhx_parity_cmp *acc /* IN/OUT */);

/* ---- model precision ------------------------------------------------------------------------ */

typedef struct qhx_parity_precision {
    const char *decoder; /* "f32", "f16", "bf16", "w8", "q4", "mixed" or "?" (static text) */
    const char *lm_head; /* dtype of lm_head.weight, else of the (tied) embedding */
    bool quantized;      /* any decoder MLP matrix or the lm-head is Q8/Q4 */
} qhx_parity_precision;

/* What the model's weights are stored as, from the dtypes of its MLP matrices (every layer)
 * and its lm-head (docs/formats.md "Naming and recognition"). */
void qhx_parity_model_precision(const qhx_model *m, qhx_parity_precision *out /* OUT */);

#endif
