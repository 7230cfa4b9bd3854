/* runtime/sample: the sampler. Candidates are narrowed before sorting: top-k by a heap, and
 * top-p on a growing top slice, so a 248k vocabulary is never fully sorted in the common case. */
#include "runtime/sample.h"

#include "core/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct qhx_sampler {
    qhx_sample_params p;
    int64_t n_vocab;
    qhx_rng rng;
    float *work;       /* (n_vocab,) penalised, tempered logits */
    int32_t *idx;      /* (n_vocab,) candidate ids */
    float *prob;       /* (n_vocab,) candidate probabilities */
    int32_t *hist;     /* ring of the last repeat_last_n tokens */
    int32_t n_hist, hist_pos;
};

qhx_sample_params qhx_sample_default_params(void) {
    qhx_sample_params p = {0};
    p.temperature = 0.0f;
    p.top_p = 1.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    return p;
}

qhx_status qhx_sample_params_check(const qhx_sample_params *p, qhx_error *err) {
    if (!(p->temperature >= 0.0f) || !isfinite(p->temperature))
        return qhx_fail(err, QHX_E_ARG, "temperature = %g: must be >= 0", p->temperature);
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
        return qhx_fail(err, QHX_E_ARG, "top_p = %g: must be in [0, 1]", p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p < 1.0f))
        return qhx_fail(err, QHX_E_ARG, "min_p = %g: must be in [0, 1)", p->min_p);
    if (!(p->repeat_penalty >= 0.0f) || !isfinite(p->repeat_penalty))
        return qhx_fail(err, QHX_E_ARG, "repeat_penalty = %g: must be >= 0", p->repeat_penalty);
    if (p->top_k < 0) return qhx_fail(err, QHX_E_ARG, "top_k = %d: must be >= 0", p->top_k);
    if (!(p->presence_penalty >= -100.0f && p->presence_penalty <= 100.0f))
        return qhx_fail(err, QHX_E_ARG, "presence_penalty = %g: must be in [-100, 100]", p->presence_penalty);
    if (!(p->frequency_penalty >= -100.0f && p->frequency_penalty <= 100.0f))
        return qhx_fail(err, QHX_E_ARG, "frequency_penalty = %g: must be in [-100, 100]", p->frequency_penalty);
    if (p->repeat_last_n < 0 || p->repeat_last_n > 1 << 20)
        return qhx_fail(err, QHX_E_ARG, "repeat_last_n = %d: must be in [0, 1048576]", p->repeat_last_n);
    return QHX_OK;
}

qhx_status qhx_sampler_create_raw(const qhx_sample_params *p, int64_t n_vocab, qhx_sampler **out,
                                  qhx_error *err) {
    *out = NULL;
    qhx_status rc = qhx_sample_params_check(p, err);
    if (rc != QHX_OK) return rc;
    if (n_vocab <= 0 || n_vocab > (1 << 24))
        return qhx_fail(err, QHX_E_ARG, "sampler: vocabulary size %lld out of range", (long long)n_vocab);
    qhx_sampler *s = qhx_calloc(1, sizeof *s);
    if (!s) return qhx_fail(err, QHX_E_NOMEM, "sampler: out of memory");
    s->p = *p;
    /* zero means "off" */
    if (s->p.top_p <= 0.0f) s->p.top_p = 1.0f;
    if (s->p.repeat_penalty == 0.0f) s->p.repeat_penalty = 1.0f;
    if (s->p.repeat_last_n == 0) s->p.repeat_last_n = 64;
    s->n_vocab = n_vocab;
    s->work = qhx_malloc((size_t)n_vocab * sizeof *s->work);
    s->idx = qhx_malloc((size_t)n_vocab * sizeof *s->idx);
    s->prob = qhx_malloc((size_t)n_vocab * sizeof *s->prob);
    s->hist = qhx_malloc((size_t)s->p.repeat_last_n * sizeof *s->hist);
    if (!s->work || !s->idx || !s->prob || !s->hist) {
        qhx_sampler_free_raw(s);
        return qhx_fail(err, QHX_E_NOMEM, "sampler: out of memory for %lld-entry scratch", (long long)n_vocab);
    }
    qhx_sampler_reset(s);
    *out = s;
    return QHX_OK;
}

void qhx_sampler_free_raw(qhx_sampler *s) {
    if (!s) return;
    qhx_free(s->work);
    qhx_free(s->idx);
    qhx_free(s->prob);
    qhx_free(s->hist);
    qhx_free(s);
}

int qhx_sampler_is_greedy(const qhx_sampler *s) { return s->p.temperature <= 0.0f; }

void qhx_sampler_reset(qhx_sampler *s) {
    qhx_rng_seed(&s->rng, s->p.seed);
    s->n_hist = s->hist_pos = 0;
}

void qhx_sampler_accept(qhx_sampler *s, int32_t token) {
    int32_t cap = s->p.repeat_last_n;
    if (cap <= 0) return;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % cap;
    if (s->n_hist < cap) s->n_hist++;
}

int32_t qhx_argmax(const float *logits, int64_t n) {
    int32_t best = 0;
    float bv = -INFINITY;
    int found = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = logits[i];
        if (v != v) continue;
        if (!found || v > bv) { bv = v; best = (int32_t)i; found = 1; }
    }
    return best;
}

/* ---- candidate selection ------------------------------------------------------ */

/* Is candidate a ranked before b? Higher logit first, then lower id (stable, deterministic). */
static inline int before(const float *w, int32_t a, int32_t b) {
    return w[a] > w[b] || (w[a] == w[b] && a < b);
}

/* Put the k best of idx[0..n) into idx[0..k), sorted best first (min-heap of size k). */
static void select_top(const float *w, int32_t *idx, int64_t n, int64_t k) {
    /* heap over idx[0..k): the root is the worst kept candidate */
    for (int64_t i = k / 2 - 1; i >= 0; i--) {
        int64_t j = i;
        for (;;) {
            int64_t c = 2 * j + 1, m = j;
            if (c < k && before(w, idx[m], idx[c])) m = c;
            if (c + 1 < k && before(w, idx[m], idx[c + 1])) m = c + 1;
            if (m == j) break;
            int32_t t = idx[j]; idx[j] = idx[m]; idx[m] = t; j = m;
        }
    }
    for (int64_t i = k; i < n; i++) {
        if (!before(w, idx[i], idx[0])) continue;
        idx[0] = idx[i];
        int64_t j = 0;
        for (;;) {
            int64_t c = 2 * j + 1, m = j;
            if (c < k && before(w, idx[m], idx[c])) m = c;
            if (c + 1 < k && before(w, idx[m], idx[c + 1])) m = c + 1;
            if (m == j) break;
            int32_t t = idx[j]; idx[j] = idx[m]; idx[m] = t; j = m;
        }
    }
    /* heap-sort the kept k: repeatedly move the worst to the end */
    for (int64_t end = k - 1; end > 0; end--) {
        int32_t t = idx[0]; idx[0] = idx[end]; idx[end] = t;
        int64_t j = 0;
        for (;;) {
            int64_t c = 2 * j + 1, m = j;
            if (c < end && before(w, idx[m], idx[c])) m = c;
            if (c + 1 < end && before(w, idx[m], idx[c + 1])) m = c + 1;
            if (m == j) break;
            int32_t u = idx[j]; idx[j] = idx[m]; idx[m] = u; j = m;
        }
    }
}

/* prob[i] = exp(work[idx[i]] - mx) / norm for the first n candidates. */
static void probs_of(qhx_sampler *s, int64_t n, double mx, double norm) {
    for (int64_t i = 0; i < n; i++) s->prob[i] = (float)(exp((double)s->work[s->idx[i]] - mx) / norm);
}

/* Draw from the full distribution softmax(work) without sorting: one pass in id order. */
static int32_t draw_full(qhx_sampler *s) {
    int64_t V = s->n_vocab;
    double mx = s->work[qhx_argmax(s->work, V)], total = 0;
    for (int64_t i = 0; i < V; i++) total += exp((double)s->work[i] - mx);
    double r = qhx_rng_f64(&s->rng) * total, acc = 0;
    int32_t last = 0;
    for (int64_t i = 0; i < V; i++) {
        double e = exp((double)s->work[i] - mx);
        if (e > 0) last = (int32_t)i;
        acc += e;
        if (r < acc) return (int32_t)i;
    }
    return last;
}

/* Smallest sorted top slice that holds every token top-p and min-p could keep; probabilities
 * relative to the whole vocabulary. Returns the slice length. */
static int64_t top_slice(qhx_sampler *s) {
    const qhx_sample_params *p = &s->p;
    int64_t V = s->n_vocab;
    double mx = s->work[qhx_argmax(s->work, V)], total = 0;
    for (int64_t i = 0; i < V; i++) total += exp((double)s->work[i] - mx);
    int64_t k = V < 256 ? V : 256;
    for (;;) {
        select_top(s->work, s->idx, V, k);
        probs_of(s, k, mx, total);
        double cum = 0;
        for (int64_t i = 0; i < k; i++) cum += s->prob[i];
        int top_p_ok = p->top_p >= 1.0f || cum >= p->top_p;
        int min_p_ok = p->min_p <= 0.0f || s->prob[k - 1] < p->min_p * s->prob[0];
        if (k == V || (top_p_ok && min_p_ok && (p->top_p < 1.0f || p->min_p > 0.0f))) return k;
        k = k * 4 < V ? k * 4 : V;
    }
}

/* Presence and frequency penalties over the window: each distinct token once, with its count.
 * idx (re-filled before the filters use it) counts, so the sampler stays allocation-free. */
static void apply_presence_frequency(qhx_sampler *s) {
    const qhx_sample_params *p = &s->p;
    int32_t *count = s->idx;
    for (int32_t i = 0; i < s->n_hist; i++)
        if (s->hist[i] >= 0 && s->hist[i] < s->n_vocab) count[s->hist[i]] = 0;
    for (int32_t i = 0; i < s->n_hist; i++)
        if (s->hist[i] >= 0 && s->hist[i] < s->n_vocab) count[s->hist[i]]++;
    for (int32_t i = 0; i < s->n_hist; i++) {
        int32_t t = s->hist[i];
        if (t < 0 || t >= s->n_vocab || count[t] == 0) continue;
        s->work[t] -= p->presence_penalty + (float)count[t] * p->frequency_penalty;
        count[t] = 0; /* penalised once */
    }
}

/* Largest logit of a row, or NaN when the row holds a NaN or +Inf: a healthy model never makes
 * one, so such a row means non-finite weights or activations, and sampling it would give garbage
 * (every probability NaN, hence token 0) instead of an error. */
static float row_max(const float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (!(x[i] < INFINITY)) return NAN; /* NaN or +Inf */
        if (x[i] > mx) mx = x[i];
    }
    return mx;
}

/* work /= T. When the largest |logit| / T would overflow (T tiny), the shift by the row's
 * largest logit comes first: (x - max) / T <= 0 never overflows and gives the same softmax. */
static void temper(qhx_sampler *s, float mx) {
    int64_t V = s->n_vocab;
    float T = s->p.temperature, lo = INFINITY;
    for (int64_t i = 0; i < V; i++)
        if (s->work[i] > -INFINITY && s->work[i] < lo) lo = s->work[i];
    float big = fmaxf(fabsf(mx), lo < INFINITY ? fabsf(lo) : 0.0f);
    if (isfinite(big / T)) {
        for (int64_t i = 0; i < V; i++) s->work[i] /= T;
        return;
    }
    for (int64_t i = 0; i < V; i++) s->work[i] = (s->work[i] - mx) / T;
}

/* work = the logits with the repetition, presence and frequency penalties applied. */
static void penalise(qhx_sampler *s, const float *logits) {
    const qhx_sample_params *p = &s->p;
    int64_t V = s->n_vocab;
    memcpy(s->work, logits, (size_t)V * sizeof *s->work);
    if (p->repeat_penalty != 1.0f)
        for (int32_t i = 0; i < s->n_hist; i++) {
            int32_t t = s->hist[i];
            if (t < 0 || t >= V) continue;
            float v = logits[t]; /* from the original logits: a repeated token is penalised once */
            s->work[t] = v > 0 ? v / p->repeat_penalty : v * p->repeat_penalty;
        }
    if (p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f) apply_presence_frequency(s);
}

/* After penalise and temper: the candidates idx[0..n) with probabilities prob[0..n) (their
 * sum the normaliser) after top-k, top-p and min-p; 0 when nothing narrows the vocabulary
 * (the full softmax of work is the distribution). */
static int64_t narrow(qhx_sampler *s) {
    const qhx_sample_params *p = &s->p;
    int64_t V = s->n_vocab, n;
    for (int64_t i = 0; i < V; i++) s->idx[i] = (int32_t)i;
    if (p->top_k > 0 && p->top_k < V) {
        /* HF top-k: the other logits become -inf, so later steps see a renormalised top-k */
        n = p->top_k;
        select_top(s->work, s->idx, V, n);
        double mx = s->work[s->idx[0]], sum = 0;
        for (int64_t i = 0; i < n; i++) sum += exp((double)s->work[s->idx[i]] - mx);
        probs_of(s, n, mx, sum);
    } else if (p->top_p >= 1.0f && p->min_p <= 0.0f) {
        return 0;
    } else {
        n = top_slice(s);
    }
    if (p->top_p < 1.0f) { /* smallest prefix whose mass reaches top_p */
        double cum = 0;
        for (int64_t i = 0; i < n; i++) {
            cum += s->prob[i];
            if (cum >= p->top_p) { n = i + 1; break; }
        }
    }
    if (p->min_p > 0.0f) { /* drop tokens less likely than min_p x the best */
        float cut = p->min_p * s->prob[0];
        int64_t keep = 1;
        while (keep < n && s->prob[keep] >= cut) keep++;
        n = keep;
    }
    return n;
}

int32_t qhx_sampler_sample(qhx_sampler *s, const float *logits) {
    const qhx_sample_params *p = &s->p;
    int64_t V = s->n_vocab;
    if (isnan(row_max(logits, V))) return -1;
    penalise(s, logits);
    if (p->temperature <= 0.0f) return qhx_argmax(s->work, V);
    float best = row_max(s->work, V);
    if (best == -INFINITY) return qhx_argmax(s->work, V); /* every token masked: nothing to weigh */
    temper(s, best);
    int64_t n = narrow(s);
    if (n == 0) return draw_full(s);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += s->prob[i];
    double r = qhx_rng_f64(&s->rng) * sum, acc = 0;
    for (int64_t i = 0; i < n; i++) {
        acc += s->prob[i];
        if (r < acc) return s->idx[i];
    }
    return s->idx[n - 1];
}

int qhx_sampler_dist(qhx_sampler *s, const float *logits, float *dist) {
    int64_t V = s->n_vocab;
    if (isnan(row_max(logits, V))) return -1;
    penalise(s, logits);
    memset(dist, 0, (size_t)V * sizeof *dist);
    float best = row_max(s->work, V);
    if (s->p.temperature <= 0.0f || best == -INFINITY) {
        dist[qhx_argmax(s->work, V)] = 1.0f;
        return 0;
    }
    temper(s, best);
    int64_t n = narrow(s);
    if (n == 0) { /* as draw_full: softmax over the whole vocabulary */
        double mx = s->work[qhx_argmax(s->work, V)], total = 0;
        for (int64_t i = 0; i < V; i++) total += exp((double)s->work[i] - mx);
        for (int64_t i = 0; i < V; i++) dist[i] = (float)(exp((double)s->work[i] - mx) / total);
        return 0;
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += s->prob[i];
    for (int64_t i = 0; i < n; i++) dist[s->idx[i]] = (float)(s->prob[i] / sum);
    return 0;
}

double qhx_sampler_uniform(qhx_sampler *s) { return qhx_rng_f64(&s->rng); }

int32_t qhx_dist_draw(const float *dist, int64_t n, double u) {
    double total = 0;
    for (int64_t i = 0; i < n; i++) total += dist[i];
    double r = u * total, acc = 0;
    int32_t last = -1;
    for (int64_t i = 0; i < n; i++) {
        if (dist[i] > 0) last = (int32_t)i;
        acc += dist[i];
        if (r < acc && dist[i] > 0) return (int32_t)i;
    }
    return last;
}

size_t qhx_sampler_hist_bytes(const qhx_sampler *s) {
    return 2 * sizeof(int32_t) + (size_t)s->p.repeat_last_n * sizeof(int32_t);
}

void qhx_sampler_hist_save(const qhx_sampler *s, void *buf) {
    int32_t *b = buf;
    b[0] = s->n_hist, b[1] = s->hist_pos;
    memcpy(b + 2, s->hist, (size_t)s->p.repeat_last_n * sizeof(int32_t));
}

void qhx_sampler_hist_load(qhx_sampler *s, const void *buf) {
    const int32_t *b = buf;
    s->n_hist = b[0], s->hist_pos = b[1];
    memcpy(s->hist, b + 2, (size_t)s->p.repeat_last_n * sizeof(int32_t));
}

/* ---- state for session files -------------------------------------------------------------- */

size_t qhx_sampler_state_bytes(const qhx_sampler *s) {
    return 4 * sizeof(uint64_t) + 3 * sizeof(int32_t) + (size_t)s->p.repeat_last_n * sizeof(int32_t);
}

void qhx_sampler_state_write(const qhx_sampler *s, uint8_t *out) {
    int32_t hdr[3] = {s->p.repeat_last_n, s->n_hist, s->hist_pos};
    memcpy(out, s->rng.s, 4 * sizeof(uint64_t));
    memcpy(out + 32, hdr, sizeof hdr);
    memcpy(out + 44, s->hist, (size_t)s->p.repeat_last_n * sizeof(int32_t));
}

qhx_status qhx_sampler_state_read(qhx_sampler *s, const uint8_t *in, size_t n, qhx_error *err) {
    if (n != qhx_sampler_state_bytes(s))
        return qhx_fail(err, QHX_E_FORMAT, "sampler state: %zu bytes, expected %zu (different repeat window?)", n,
                        qhx_sampler_state_bytes(s));
    int32_t hdr[3];
    memcpy(hdr, in + 32, sizeof hdr);
    if (hdr[0] != s->p.repeat_last_n || hdr[1] < 0 || hdr[1] > hdr[0] || hdr[2] < 0 || hdr[2] >= hdr[0])
        return qhx_fail(err, QHX_E_FORMAT, "sampler state: window counts out of range");
    memcpy(s->rng.s, in, 4 * sizeof(uint64_t));
    s->n_hist = hdr[1];
    s->hist_pos = hdr[2];
    memcpy(s->hist, in + 44, (size_t)hdr[0] * sizeof(int32_t));
    return QHX_OK;
}
