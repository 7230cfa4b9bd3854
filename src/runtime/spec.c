/* runtime/spec.c: speculative decoding with the model's MTP block (runtime/spec.h).
 *
 * Positions: the sequence holds P tokens; the rows buffer keeps the main model's hidden rows
 * (after the last decoder layer) of positions row0 .. P - 1 not yet fed to the block, and
 * tok[r] the token at row0 + r + 1 (the block's row r reads hidden r and tok[r] and predicts the
 * token after tok[r]). The block's KV cache holds rows 0 .. row0 - 1 for real; rows past them
 * written by chained drafts are provisional and overwritten by the next step (the family's mtp
 * rewinds to its pos0).
 *
 * Exactness: every token the step gives comes from the verify logits, which are bit for bit the
 * logits of one-token decode steps (qhx_model_verify), so greedy output is the non-speculative
 * one. Sampled output uses the rule of speculative sampling (Leviathan et al. 2023, Chen et al.
 * 2023): the draft x ~ q is kept with probability min(1, p(x) / q(x)), else the token is drawn
 * from normalize(max(0, p - q)); p and q are the sampler's distributions (penalties,
 * temperature, top-k, top-p, min-p applied the same way, with the same penalty window), so each
 * token has exactly the distribution p of the model.
 *
 * Adaptive draft length (spec_choose): the step measures itself. rate[k], a moving average
 * (the mean of the first 8 observations, then weight 1/8) of the tokens a step with k drafts
 * gave per millisecond of the whole step
 * (drafting, verify, acceptance, cut-back; a step that shares its verify pass with other
 * sessions' counts that whole pass and its own parts, not the others' drafts), is kept for
 * every k in 0 .. draft; k = 0 is one
 * verify of one token, a plain decode step. A session's first steps try k = 0, then draft, then
 * the lengths between, once each; after that a step uses the k with the best rate (a k > 0 only
 * when it beats k = 0 by 10 %: single timings are noisy), except that while drafting wins every
 * 4th step is a plain one (free against decoding without speculation), and a trial step tries a
 * neighbour of the best (k + 1 and k - 1 in turn) 16 steps after the last trial, a wait that
 * doubles (up to 1024) each time a trial leaves the best length as it was and goes back to 16
 * when one changes it, so that the rates follow the text (acceptance) and the machine's load at
 * a cost that fades where nothing changes. The rates outlive a reset; they are the machine's and the model's. Where
 * drafting does not pay (drafting_loses: k = 0 still the best after every length was measured
 * and one trial more), the rule retires until the next reset: no drafts, no trials, and the
 * block no longer follows the sequence, so decode runs at the plain speed. A reset brings it
 * back for the new text with one trial 16 steps in. */
#include "runtime/spec.h"

#include "core/alloc.h"
#include "core/time.h"

#include <string.h>

#define MTP_CHUNK 16   /* rows per cache-only MTP call */
#define ACC_W 0.125    /* weight of a new observation in the moving averages */
#define TRY_EVERY 16   /* steps before a trial of a neighbouring draft length (doubling, below) */
#define PLAIN_EVERY 4  /* steps between plain steps while drafting wins */
#define MARGIN 1.1     /* drafting must beat plain steps by this factor (timings are noisy) */

struct qhx_spec {
    const qhx_model *m;
    qhx_seq *st;
    qhx_spec_params p;
    int64_t H, V, L;
    bool cold;
    /* rows not yet fed to the block */
    float *rows;
    int32_t *tok;
    int64_t n_rows, cap_rows, row0;
    /* the step's buffers */
    float *qlog, *hid;   /* (V), (H): the draft step's logits and the block's output row */
    float *qd;           /* (draft, V) draft distributions (sampling) */
    float *vlog, *vhid;  /* (draft + 1, V), (draft + 1, H): the verify's rows */
    float *pd;           /* (V) the model's distribution at one row, then the residual */
    void *hist0;         /* the sampler's window before the step */
    size_t hist_cap;
    int32_t vid[QHX_SPEC_MAX_DRAFT + 1];
    int last_n_out;      /* of the last step, for qhx_spec_cut; 0: none */
    /* the step in hand: the rule's length (-1: cut short), the drafts made, their time */
    int chosen, made, made_k; /* made_k: the drafts the model kept */
    double draft_ms, own_ms;  /* the drafts' time; the step's own time (all but the verify) */
    int32_t last_out[QHX_SPEC_MAX_DRAFT + 1];
    /* adaptive rule */
    double rate[QHX_SPEC_MAX_DRAFT + 1]; /* tokens per ms of a step with k drafts; < 0 untried */
    int n_rate[QHX_SPEC_MAX_DRAFT + 1];  /* observations behind rate[k] */
    int64_t n_choices;   /* steps chosen by the rule */
    int64_t next_trial, trial_gap, n_trials; /* when the next trial comes, the wait, how many so far */
    int trial_best;      /* the best length after the last trial */
    bool retired;        /* drafting did not pay: no drafts, no following until the next reset */
    int64_t retire_from; /* the first step at which the rule may retire */
    qhx_spec_stats stats;
};

qhx_status qhx_spec_create(const qhx_model *m, qhx_seq *seq, const qhx_spec_params *p, qhx_spec **out,
                           qhx_error *err) {
    *out = NULL;
    if (!p || p->draft < 1 || p->draft > QHX_SPEC_MAX_DRAFT)
        return qhx_fail(err, QHX_E_ARG, "speculative decoding: draft %d is not in 1 .. %d", p ? p->draft : 0,
                        QHX_SPEC_MAX_DRAFT);
    if (!qhx_model_has_mtp(m))
        return qhx_fail(err, QHX_E_UNSUPPORTED,
                        "speculative decoding: the model has no multi-token-prediction block loaded (open it with "
                        "mtp, from a checkpoint folder or a bundle forged with --mtp)");
    if (!qhx_model_can_verify(m))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "speculative decoding: this backend has no verify graph");
    const qhx_model_config *c = qhx_model_get_config(m);
    qhx_spec *sp = qhx_calloc(1, sizeof *sp);
    if (!sp) return qhx_fail(err, QHX_E_NOMEM, "speculative decoding: out of memory");
    sp->m = m, sp->st = seq, sp->p = *p;
    sp->H = c->hidden_size, sp->V = c->vocab_size, sp->L = c->num_hidden_layers;
    const size_t H = (size_t)sp->H, V = (size_t)sp->V, D = (size_t)p->draft;
    sp->qlog = qhx_malloc(V * sizeof(float));
    sp->hid = qhx_malloc(H * sizeof(float));
    sp->qd = qhx_malloc(D * V * sizeof(float));
    sp->vlog = qhx_malloc((D + 1) * V * sizeof(float));
    sp->vhid = qhx_malloc((D + 1) * H * sizeof(float));
    sp->pd = qhx_malloc(V * sizeof(float));
    if (!sp->qlog || !sp->hid || !sp->qd || !sp->vlog || !sp->vhid || !sp->pd) {
        qhx_spec_free(sp);
        return qhx_fail(err, QHX_E_NOMEM, "speculative decoding: out of memory for %lld-entry rows", (long long)V);
    }
    for (int i = 0; i <= QHX_SPEC_MAX_DRAFT; i++) sp->rate[i] = -1.0;
    sp->next_trial = TRY_EVERY + p->draft + 1, sp->trial_gap = TRY_EVERY, sp->trial_best = -1;
    qhx_spec_reset(sp, qhx_model_state_n_past(seq) > 0);
    *out = sp;
    return QHX_OK;
}

void qhx_spec_free(qhx_spec *sp) {
    if (!sp) return;
    qhx_free(sp->rows);
    qhx_free(sp->tok);
    qhx_free(sp->qlog);
    qhx_free(sp->hid);
    qhx_free(sp->qd);
    qhx_free(sp->vlog);
    qhx_free(sp->vhid);
    qhx_free(sp->pd);
    qhx_free(sp->hist0);
    qhx_free(sp);
}

void qhx_spec_reset(qhx_spec *sp, bool cold) {
    if (!sp) return;
    sp->cold = cold;
    sp->n_rows = 0;
    sp->row0 = 0;
    sp->last_n_out = 0;
    /* the rates and timings are the machine's and the model's: they stay. A retired rule comes
       back for the new text, which may be drafted better: a trial soon, and only after it may
       it retire again */
    if (sp->retired) {
        sp->retired = false;
        sp->next_trial = sp->n_choices + TRY_EVERY;
        sp->retire_from = sp->next_trial + 1;
    }
}

/* ---- following the sequence -------------------------------------------------------------- */

static bool grow_rows(qhx_spec *sp, int64_t need) {
    if (need <= sp->cap_rows) return true;
    int64_t cap = sp->cap_rows ? sp->cap_rows : 64;
    while (cap < need) cap *= 2;
    float *r = qhx_realloc(sp->rows, (size_t)cap * (size_t)sp->H * sizeof(float));
    if (!r) return false;
    sp->rows = r;
    int32_t *t = qhx_realloc(sp->tok, (size_t)cap * sizeof(int32_t));
    if (!t) return false;
    sp->tok = t;
    sp->cap_rows = cap;
    return true;
}

void qhx_spec_layer_cb(void *user, int64_t layer, int64_t pos0, const float *x, int64_t n) {
    qhx_spec *sp = user;
    if (sp->cold || layer != sp->L - 1) return;
    if (pos0 != sp->row0 + sp->n_rows || !grow_rows(sp, sp->n_rows + n)) {
        sp->cold = true; /* a gap (or no memory): the block cannot follow */
        return;
    }
    memcpy(sp->rows + sp->n_rows * sp->H, x, (size_t)(n * sp->H) * sizeof(float));
    sp->n_rows += n;
}

/* The block's cache rows for rows[0 .. k) (their next tokens known), then those rows dropped. */
static qhx_status flush_rows(qhx_spec *sp, int64_t k, qhx_error *err) {
    for (int64_t r = 0; r < k; r += MTP_CHUNK) {
        const int64_t nb = k - r < MTP_CHUNK ? k - r : MTP_CHUNK;
        qhx_status rc = qhx_model_mtp_ex(sp->m, sp->st, sp->row0 + r, sp->rows + r * sp->H, false, sp->tok + r, nb,
                                         NULL, NULL, err);
        if (rc) return rc;
    }
    memmove(sp->rows, sp->rows + k * sp->H, (size_t)((sp->n_rows - k) * sp->H) * sizeof(float));
    memmove(sp->tok, sp->tok + k, (size_t)(sp->n_rows - k) * sizeof(int32_t));
    sp->n_rows -= k;
    sp->row0 += k;
    return QHX_OK;
}

qhx_status qhx_spec_fed(qhx_spec *sp, const int32_t *ids, int64_t n, qhx_error *err) {
    sp->last_n_out = 0;
    if (sp->cold) return QHX_OK;
    const int64_t P = qhx_model_state_n_past(sp->st);
    if (sp->row0 + sp->n_rows != P) { /* the callback did not see this forward */
        sp->cold = true;
        return QHX_OK;
    }
    /* the token at position q is the next token of row q - 1 (index q - 1 - row0) */
    for (int64_t i = 0; i < n; i++) {
        const int64_t r = P - n + i - 1 - sp->row0;
        if (r >= 0) sp->tok[r] = ids[i];
    }
    /* keep the last row (its next token comes later) and a few more: the next step feeds them */
    if (sp->n_rows > MTP_CHUNK) {
        qhx_status rc = flush_rows(sp, sp->n_rows - 1, err);
        if (rc) sp->cold = true;
        return rc;
    }
    return QHX_OK;
}

/* ---- the adaptive rule ------------------------------------------------------------------- */

/* The length with the best rate (a k > 0 must beat k = 0 by MARGIN); -1 while one is untried. */
static int best_length(const qhx_spec *sp) {
    int best = 0;
    double br = sp->rate[0] * MARGIN;
    for (int k = 1; k <= sp->p.draft; k++) {
        if (sp->rate[k] < 0) return -1;
        if (sp->rate[k] > br) best = k, br = sp->rate[k];
    }
    return best;
}

/* Drafting does not pay: every length measured, at least once more after the first round, and
 * plain steps the best. Following the sequence with the block costs one block layer per token
 * even while every step is a plain one (on the demo model a fifth of a step), so a rule that
 * only chose plain steps would still be slower than decoding without speculation. */
static bool drafting_loses(const qhx_spec *sp) {
    int seen = 0;
    for (int k = 1; k <= sp->p.draft; k++) seen += sp->n_rate[k];
    return seen > sp->p.draft && best_length(sp) == 0;
}

static int spec_choose(const qhx_spec *sp) {
    const int D = sp->p.draft;
    if (sp->p.fixed) return D;
    if (sp->rate[0] < 0) return 0; /* first a plain step */
    if (sp->rate[D] < 0) return D; /* then the most drafts */
    for (int k = 1; k < D; k++)
        if (sp->rate[k] < 0) return k; /* then each length once */
    const int best = best_length(sp);
    /* trials: a plain step costs nothing against decoding without speculation, so it comes
       often while drafting wins; a trial of a drafting length comes when next_trial says */
    if (best > 0 && sp->n_choices % PLAIN_EVERY == PLAIN_EVERY - 1) return 0;
    if (sp->n_choices >= sp->next_trial) { /* a neighbour, above and below in turn */
        const int up = (int)(sp->n_trials % 2) == 0;
        const int k = up ? (best < D ? best + 1 : best - 1) : (best > 0 ? best - 1 : best + 1);
        return k < 0 ? 0 : k > D ? D : k;
    }
    return best;
}



/* ---- one step ---------------------------------------------------------------------------- */

/* Draft token j (1-based) from the block's logits in qlog: the sampler's pick when greedy, else
 * drawn from its distribution, kept in qd[j - 1] for the acceptance test. */
static int32_t draw_draft(qhx_spec *sp, qhx_sampler *smp, int j) {
    if (qhx_sampler_is_greedy(smp)) return qhx_sampler_sample(smp, sp->qlog);
    float *q = sp->qd + (size_t)(j - 1) * (size_t)sp->V;
    if (qhx_sampler_dist(smp, sp->qlog, q)) return -1;
    return qhx_dist_draw(q, sp->V, qhx_sampler_uniform(smp));
}

/* Up to N drafts after t0 into vid[1 ..]; returns how many were made. */
static qhx_status draft(qhx_spec *sp, qhx_sampler *smp, int32_t t0, int N, int *made, qhx_error *err) {
    *made = 0;
    sp->tok[sp->n_rows - 1] = t0;
    qhx_status rc = flush_rows(sp, sp->n_rows - 1, err); /* rows whose next token was known */
    if (rc) return rc;
    const int64_t P = qhx_model_state_n_past(sp->st);
    /* the last real row: the main model's hidden at P - 1 and t0 -> the token at P + 1 */
    rc = qhx_model_mtp_ex(sp->m, sp->st, P - 1, sp->rows, false, &t0, 1, sp->qlog, sp->hid, err);
    if (rc == QHX_OK) sp->n_rows = 0, sp->row0 = P; /* the block holds every real row now */
    for (int j = 1; rc == QHX_OK && j <= N; j++) {
        const int32_t d = draw_draft(sp, smp, j);
        if (d < 0) break;
        sp->vid[j] = d;
        *made = j;
        qhx_sampler_accept(smp, d); /* the window of the next draft's distribution */
        if (j == N) break;
        /* chained: the block's own output row and the draft -> the token after it */
        rc = qhx_model_mtp_ex(sp->m, sp->st, P + j - 1, sp->hid, true, &sp->vid[j], 1, sp->qlog, sp->hid, err);
    }
    return rc;
}

/* Which drafts the model keeps: returns k (0 .. made) and the token after them in *c. The
 * sampler's window walks along the accepted tokens. */
static int accept(qhx_spec *sp, qhx_sampler *smp, int made, int32_t *c) {
    const int64_t V = sp->V;
    const bool greedy = qhx_sampler_is_greedy(smp);
    for (int i = 1; i <= made; i++) {
        const float *row = sp->vlog + (size_t)(i - 1) * (size_t)V;
        const int32_t d = sp->vid[i];
        if (greedy) {
            const int32_t g = qhx_sampler_sample(smp, row);
            if (g != d) {
                *c = g;
                return i - 1;
            }
        } else {
            const float *q = sp->qd + (size_t)(i - 1) * (size_t)V;
            if (qhx_sampler_dist(smp, row, sp->pd)) {
                *c = -1; /* non-finite logits: the caller reports them */
                return i - 1;
            }
            const double u = qhx_sampler_uniform(smp);
            if (!(u * (double)q[d] < (double)sp->pd[d])) { /* rejected: the residual max(0, p - q) */
                double sum = 0;
                for (int64_t x = 0; x < V; x++) {
                    const float r = sp->pd[x] - q[x];
                    sp->pd[x] = r > 0 ? r : 0.0f;
                    sum += sp->pd[x];
                }
                if (!(sum > 0)) qhx_sampler_dist(smp, row, sp->pd); /* p == q up to rounding: p itself */
                *c = qhx_dist_draw(sp->pd, V, qhx_sampler_uniform(smp));
                return i - 1;
            }
        }
        qhx_sampler_accept(smp, d);
    }
    *c = qhx_sampler_sample(smp, sp->vlog + (size_t)made * (size_t)V); /* every draft kept: the bonus */
    return made;
}

static void note(qhx_spec *sp, int chosen, int made, int k, int n_out, double t_draft, double t_verify, double t_step) {
    qhx_spec_stats *s = &sp->stats;
    s->steps++;
    s->drafted += made;
    s->accepted += n_out - 1 < k ? n_out - 1 : k;
    s->emitted += n_out;
    s->draft_ms += t_draft;
    s->verify_ms += t_verify;
    for (int i = 0; i < made; i++) {
        s->pos_drafted[i]++;
        if (i < k) s->pos_accepted[i]++;
    }
    /* a step cut short (room, context, a failed draft) says nothing about its length's rate */
    if (chosen >= 0 && made == chosen && t_step > 0) { /* the mean of the first 8, then a moving average */
        const int c = ++sp->n_rate[chosen];
        const double x = (double)n_out / t_step, w = c < 8 ? 1.0 / c : ACC_W;
        sp->rate[chosen] = c == 1 ? x : sp->rate[chosen] + w * (x - sp->rate[chosen]);
    }
    /* a trial that does not change the best length makes the next one wait twice as long
       (16, 32, ... 1024 steps), one that does brings the wait back to 16 */
    if (sp->n_choices >= sp->next_trial && best_length(sp) >= 0 && !sp->p.fixed) {
        const int before = sp->trial_best;
        sp->trial_best = best_length(sp);
        sp->trial_gap = sp->trial_best != before || sp->trial_gap < TRY_EVERY ? TRY_EVERY
                        : sp->trial_gap < 1024 ? 2 * sp->trial_gap : 1024;
        sp->next_trial = sp->n_choices + sp->trial_gap;
        sp->n_trials++;
    }
    if (!sp->p.fixed && !sp->retired && sp->n_choices >= sp->retire_from && drafting_loses(sp)) {
        sp->retired = true;
        sp->cold = true; /* the layer callback and the step stop feeding the block */
        sp->n_rows = 0;
    }
    sp->n_choices++;
}

/* The sequence after t0 and out[0 .. n_fed - 1): position, sampler window, rows, logits. */
static qhx_status settle(qhx_spec *sp, qhx_sampler *smp, int32_t t0, int n_fed, int made, float *logits,
                         qhx_error *err) {
    if (n_fed < made + 1) {
        qhx_status rc = qhx_model_verify_keep(sp->m, sp->st, n_fed, err);
        if (rc) return rc;
    }
    qhx_sampler_hist_load(smp, sp->hist0);
    qhx_sampler_accept(smp, t0);
    for (int i = 0; i + 1 < n_fed; i++) qhx_sampler_accept(smp, sp->last_out[i]);
    if (!sp->cold) { /* the verified rows wait for the block (their next tokens: the outputs) */
        if (sp->row0 + sp->n_rows != qhx_model_state_n_past(sp->st) - n_fed || !grow_rows(sp, sp->n_rows + n_fed)) {
            sp->cold = true;
        } else {
            memcpy(sp->rows + sp->n_rows * sp->H, sp->vhid, (size_t)(n_fed * sp->H) * sizeof(float));
            if (sp->n_rows) sp->tok[sp->n_rows - 1] = t0;
            for (int i = 0; i < n_fed; i++) sp->tok[sp->n_rows + i] = sp->last_out[i];
            sp->n_rows += n_fed;
        }
    }
    memcpy(logits, sp->vlog + (size_t)(n_fed - 1) * (size_t)sp->V, (size_t)sp->V * sizeof(float));
    return QHX_OK;
}

/* The first half of a step: the length, the window saved, t0 and the drafts after it in vid. */
static qhx_status step_draft(qhx_spec *sp, qhx_sampler *smp, int32_t t0, int room, qhx_error *err) {
    const uint64_t t_start = qhx_time_ns();
    sp->last_n_out = 0;
    sp->made = 0;
    if (room < 1) return qhx_fail(err, QHX_E_ARG, "speculative step: no room for a token");
    const int64_t P = qhx_model_state_n_past(sp->st), n_ctx = qhx_model_state_n_ctx(sp->st);
    if (P >= n_ctx) return qhx_fail(err, QHX_E_LIMIT, "speculative step: the context of %lld is full", (long long)n_ctx);
    int N = spec_choose(sp);
    sp->chosen = N;
    if (N > room - 1) N = room - 1, sp->chosen = -1;
    if (N > n_ctx - P - 1) N = (int)(n_ctx - P - 1);
    if (sp->cold || sp->n_rows < 1 || sp->row0 + sp->n_rows != P) N = 0, sp->chosen = -1;
    if (qhx_sampler_hist_bytes(smp) > sp->hist_cap) { /* sized here: the window is the sampler's */
        void *h = qhx_realloc(sp->hist0, qhx_sampler_hist_bytes(smp));
        if (!h) return qhx_fail(err, QHX_E_NOMEM, "speculative step: out of memory");
        sp->hist0 = h;
        sp->hist_cap = qhx_sampler_hist_bytes(smp);
    }
    qhx_sampler_hist_save(smp, sp->hist0);
    qhx_sampler_accept(smp, t0);
    sp->vid[0] = t0;
    const uint64_t t_a = qhx_time_ns();
    qhx_status rc = N > 0 ? draft(sp, smp, t0, N, &sp->made, err) : QHX_OK;
    sp->draft_ms = (double)(qhx_time_ns() - t_a) / 1e6;
    if (rc) { /* the block failed: this step and the following ones go without drafts */
        sp->cold = true;
        sp->made = 0;
        if (rc == QHX_E_NOMEM || rc == QHX_E_ABORTED) {
            qhx_sampler_hist_load(smp, sp->hist0);
            return rc;
        }
        if (err) *err = (qhx_error){0};
    }
    sp->own_ms = (double)(qhx_time_ns() - t_start) / 1e6;
    return QHX_OK;
}

/* The second half, after the verify filled vlog and vhid: acceptance, stop tokens, cut-back. */
static qhx_status step_settle(qhx_spec *sp, qhx_spec_job *j) {
    qhx_sampler *smp = j->smp;
    const int32_t t0 = sp->vid[0];
    qhx_sampler_hist_load(smp, sp->hist0);
    qhx_sampler_accept(smp, t0);
    int32_t c;
    const int k = accept(sp, smp, sp->made, &c);
    int n = 0;
    for (int i = 0; i < k; i++) sp->last_out[n++] = sp->vid[i + 1];
    sp->last_out[n++] = c;
    for (int i = 0; i < n; i++) /* a stop token ends the step: it is the next token, not fed */
        if (j->is_stop && sp->last_out[i] >= 0 && j->is_stop(j->user, sp->last_out[i])) {
            n = i + 1;
            break;
        }
    if (n > j->room) n = j->room;
    qhx_status rc = settle(sp, smp, t0, n, sp->made, j->logits, j->err);
    if (rc) return rc;
    memcpy(j->out, sp->last_out, (size_t)n * sizeof(int32_t));
    j->n_out = n;
    sp->last_n_out = n;
    if (n != k + 1) sp->chosen = -1; /* cut short: says nothing of its length's rate */
    sp->made_k = k;
    return QHX_OK;
}

/* Verify jobs[a .. b) (those still going) in one pass; a refused pass is retried one job at a
 * time, so that each job gets its own result. Returns the verify time in ms. */
static double verify_group(qhx_spec_job *jobs, int a, int b) {
    qhx_seq *sts[QHX_MAX_BATCH];
    const int32_t *ids[QHX_MAX_BATCH];
    int64_t n[QHX_MAX_BATCH];
    float *lg[QHX_MAX_BATCH], *hid[QHX_MAX_BATCH];
    int who[QHX_MAX_BATCH], nv = 0;
    for (int i = a; i < b; i++) {
        if (jobs[i].rc) continue;
        qhx_spec *sp = jobs[i].sp;
        sts[nv] = sp->st, ids[nv] = sp->vid, n[nv] = sp->made + 1, lg[nv] = sp->vlog, hid[nv] = sp->vhid;
        who[nv++] = i;
    }
    if (!nv) return 0;
    const uint64_t t0 = qhx_time_ns();
    qhx_error e1 = {0};
    qhx_status rc = qhx_model_verify_multi(jobs[who[0]].sp->m, sts, ids, n, nv, lg, hid, nv == 1 ? jobs[who[0]].err : &e1);
    if (rc && nv == 1) jobs[who[0]].rc = rc;
    for (int v = 0; rc && nv > 1 && v < nv; v++) { /* nothing ran: each alone, for its own error */
        qhx_spec_job *j = &jobs[who[v]];
        j->rc = qhx_model_verify(j->sp->m, sts[v], ids[v], n[v], lg[v], hid[v], j->err);
    }
    return (double)(qhx_time_ns() - t0) / 1e6;
}

qhx_status qhx_spec_step_multi(qhx_spec_job *jobs, int n_jobs) {
    bool drafted[QHX_MAX_BATCH]; /* the window saved and t0 with the drafts in vid */
    for (int i = 0; i < n_jobs; i++) {
        qhx_spec_job *j = &jobs[i];
        j->n_out = 0;
        j->rc = n_jobs > QHX_MAX_BATCH ? qhx_fail(j->err, QHX_E_ARG, "speculative step: more than %d sessions", QHX_MAX_BATCH)
                : j->sp->m != jobs[0].sp->m ? qhx_fail(j->err, QHX_E_ARG, "speculative step: sessions of different models")
                : step_draft(j->sp, j->smp, j->t0, j->room, j->err);
        if (i < QHX_MAX_BATCH) drafted[i] = j->rc == QHX_OK;
    }
    if (n_jobs > QHX_MAX_BATCH) return QHX_E_ARG;
    /* the verifies: as many jobs per pass as the rows allow (each pass reads the weights once) */
    double verify_ms[QHX_MAX_BATCH]; /* per job: the time of the pass it was in */
    for (int a = 0; a < n_jobs;) {
        int b = a, rows = 0;
        while (b < n_jobs && (jobs[b].rc || rows + jobs[b].sp->made + 1 <= QHX_MAX_BATCH) && b - a < QHX_MAX_BATCH) {
            if (!jobs[b].rc) rows += jobs[b].sp->made + 1;
            b++;
        }
        const double ms = verify_group(jobs, a, b);
        for (int i = a; i < b; i++) verify_ms[i] = ms;
        a = b;
    }
    /* each step is timed as its own drafts and acceptance plus the whole verify pass it was in,
       not the other sessions' drafts (docs/generation.md: their cost does not depend on this
       session's length, and counting it would make every length look alike) */
    qhx_status first = QHX_OK;
    for (int i = 0; i < n_jobs; i++) {
        qhx_spec_job *j = &jobs[i];
        qhx_spec *sp = j->sp;
        const uint64_t t0 = qhx_time_ns();
        if (j->rc == QHX_OK) j->rc = step_settle(sp, j);
        else if (drafted[i]) qhx_sampler_hist_load(j->smp, sp->hist0); /* its verify failed */
        if (j->rc == QHX_OK)
            note(sp, sp->chosen, sp->made, sp->made_k, j->n_out, sp->draft_ms, verify_ms[i],
                 sp->own_ms + verify_ms[i] + (double)(qhx_time_ns() - t0) / 1e6);
        if (j->rc && !first) first = j->rc;
    }
    return first;
}

qhx_status qhx_spec_step(qhx_spec *sp, qhx_sampler *smp, int32_t t0, int room, bool (*is_stop)(void *user, int32_t t),
                         void *user, int32_t *out, int *n_out, float *logits, qhx_error *err) {
    qhx_spec_job j = {.sp = sp, .smp = smp, .t0 = t0, .room = room, .is_stop = is_stop, .user = user, .out = out,
                      .logits = logits, .err = err};
    qhx_status rc = qhx_spec_step_multi(&j, 1);
    *n_out = j.n_out;
    return rc;
}

qhx_status qhx_spec_cut(qhx_spec *sp, qhx_sampler *smp, int k, float *logits, qhx_error *err) {
    if (sp->last_n_out < 1 || k < 0 || k >= sp->last_n_out)
        return qhx_fail(err, QHX_E_ARG, "speculative step: cannot cut to %d of %d tokens", k, sp->last_n_out);
    if (k == sp->last_n_out - 1) return QHX_OK;
    const int32_t t0 = sp->vid[0];
    if (!sp->cold) sp->n_rows -= sp->last_n_out; /* the rows settle added */
    const int made = sp->last_n_out - 1; /* the verify holds at least the fed ones */
    qhx_status rc = settle(sp, smp, t0, k + 1, made, logits, err);
    if (rc == QHX_OK) sp->last_n_out = k + 1;
    return rc;
}

void qhx_spec_get_stats(const qhx_spec *sp, qhx_spec_stats *out) { *out = sp->stats; }

bool qhx_spec_retired(const qhx_spec *sp) { return sp && sp->retired; }
