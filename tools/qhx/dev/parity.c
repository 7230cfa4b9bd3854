/* tools/qhx/dev/parity.c: parity fixtures (prompts.json + golden.json + logits files), running a
 * model the way the goldens were made, the greedy-exact and tolerant gates of the fixtures
 * README §5 (as tests/data/oracle/parity_gate.py), and the top-1 / KL comparison of two models. */
#include "parity.h"

#include "core/alloc.h"
#include "core/file.h"
#include "io/json.h"
#include "runtime/session.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- fixture: JSON arrays ------------------------------------------------------------------ */

/* obj[key] as an array of n_want (or, when n_want < 0, 1 .. cap) integers in [lo, hi].
 * *out is owned; *n_out gets the count. */
static qhx_status get_ids(const json_t *obj, const char *key, const char *label, const char *path,
                          int64_t n_want, int64_t cap, int64_t lo, int64_t hi, int32_t **out,
                          int64_t *n_out, qhx_error *err) {
    *out = NULL;
    const json_t *a = json_object_get(obj, key);
    if (!a || !json_is_array(a)) return qhx_fail(err, QHX_E_FORMAT, "%s: %s.%s: expected an array", label, path, key);
    int64_t n = (int64_t)json_array_size(a);
    if (n_want >= 0 && n != n_want)
        return qhx_fail(err, QHX_E_FORMAT, "%s: %s.%s: %lld entries, expected %lld", label, path, key, (long long)n,
                        (long long)n_want);
    if (n < 1) return qhx_fail(err, QHX_E_FORMAT, "%s: %s.%s: empty", label, path, key);
    if (n > cap)
        return qhx_fail(err, QHX_E_LIMIT, "%s: %s.%s: %lld entries, more than the cap of %lld", label, path, key,
                        (long long)n, (long long)cap);
    int32_t *v = qhx_malloc((size_t)n * sizeof *v);
    if (!v) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory for %s.%s", label, path, key);
    for (int64_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(a, (size_t)i);
        json_int_t x = json_is_integer(e) ? json_integer_value(e) : lo - 1;
        if (!json_is_integer(e) || x < lo || x > hi) {
            qhx_free(v);
            return qhx_fail(err, QHX_E_FORMAT, "%s: %s.%s[%lld]: expected an integer in [%lld, %lld]", label, path, key,
                            (long long)i, (long long)lo, (long long)hi);
        }
        v[i] = (int32_t)x;
    }
    *out = v;
    *n_out = n;
    return QHX_OK;
}

/* obj[key] as an array of exactly n finite numbers (margins: >= 0). *out is owned. */
static qhx_status get_margins(const json_t *obj, const char *key, const char *label, const char *path,
                              int64_t n, double **out, qhx_error *err) {
    *out = NULL;
    const json_t *a = json_object_get(obj, key);
    if (!a || !json_is_array(a)) return qhx_fail(err, QHX_E_FORMAT, "%s: %s.%s: expected an array", label, path, key);
    if ((int64_t)json_array_size(a) != n)
        return qhx_fail(err, QHX_E_FORMAT, "%s: %s.%s: %lld entries, expected %lld", label, path, key,
                        (long long)json_array_size(a), (long long)n);
    double *v = qhx_malloc((size_t)n * sizeof *v);
    if (!v) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory for %s.%s", label, path, key);
    for (int64_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(a, (size_t)i);
        double x = json_is_number(e) ? json_number_value(e) : -1.0;
        if (!json_is_number(e) || !isfinite(x) || x < 0) {
            qhx_free(v);
            return qhx_fail(err, QHX_E_FORMAT, "%s: %s.%s[%lld]: expected a finite number >= 0", label, path, key,
                            (long long)i);
        }
        v[i] = x;
    }
    *out = v;
    return QHX_OK;
}

/* ---- fixture ------------------------------------------------------------------------------- */

static void prompt_free(qhx_parity_prompt *p) {
    qhx_free(p->name);
    qhx_free(p->image);
    qhx_free(p->ids);
    qhx_free(p->greedy);
    qhx_free(p->greedy_margins);
    qhx_free(p->row_top1);
    qhx_free(p->row_margins);
}

void qhx_parity_fixture_free(qhx_parity_fixture *fx) {
    if (!fx) return;
    for (int64_t i = 0; i < fx->n_prompts; i++) prompt_free(&fx->prompts[i]);
    qhx_free(fx->prompts);
    qhx_free(fx->dir);
    qhx_free(fx);
}

/* Fill p from its prompts.json entry pj and the golden.json "prompts" object gp. */
static qhx_status read_prompt(const json_t *pj, int64_t index, const json_t *gp, const char *plabel,
                              const char *glabel, qhx_parity_prompt *p, qhx_error *err) {
    char path[96];
    snprintf(path, sizeof path, "[%lld]", (long long)index);
    if (!json_is_object(pj)) return qhx_fail(err, QHX_E_FORMAT, "%s: %s: expected an object", plabel, path);
    const char *name;
    qhx_status rc = qhx_json_get_str(pj, "name", plabel, path, true, &name, err);
    if (rc) return rc;
    size_t len = strlen(name);
    /* the name becomes a file name: <name>.logits.f32 */
    if (len == 0 || len > 64 || strchr(name, '/') || name[0] == '.')
        return qhx_fail(err, QHX_E_FORMAT, "%s: %s.name: '%.64s' is not a plain file name of 1-64 characters", plabel,
                        path, name);
    if (!(p->name = qhx_strdup(name))) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", plabel);
    const json_t *im = json_object_get(pj, "image");
    p->has_image = im != NULL;
    if (im) { /* a file in the fixture folder */
        const char *f = json_string_value(im);
        if (!f || !f[0] || strlen(f) > 128 || strchr(f, '/') || f[0] == '.')
            return qhx_fail(err, QHX_E_FORMAT, "%s: %s.image: expected a plain file name of 1-128 characters", plabel, path);
        if (!(p->image = qhx_strdup(f))) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", plabel);
    }
    if ((rc = get_ids(pj, "ids", plabel, path, -1, QHX_PARITY_MAX_IDS, 0, INT32_MAX, &p->ids, &p->n_ids, err)))
        return rc;

    const json_t *g = json_object_get(gp, name);
    snprintf(path, sizeof path, "prompts.%s", name);
    if (!json_is_object(g)) return qhx_fail(err, QHX_E_FORMAT, "%s: %s: missing (prompt of %s)", glabel, path, plabel);
    if ((rc = get_ids(g, "greedy", glabel, path, -1, QHX_PARITY_MAX_STEPS, 0, INT32_MAX, &p->greedy, &p->n_steps,
                      err)))
        return rc;
    if ((rc = get_margins(g, "greedy_margins", glabel, path, p->n_steps, &p->greedy_margins, err))) return rc;
    int64_t n_rows = p->n_ids + p->n_steps - 1;
    if ((rc = get_ids(g, "row_top1", glabel, path, n_rows, QHX_PARITY_MAX_IDS + QHX_PARITY_MAX_STEPS, 0, INT32_MAX,
                      &p->row_top1, &p->n_rows, err)))
        return rc;
    return get_margins(g, "row_margins", glabel, path, n_rows, &p->row_margins, err);
}

qhx_status qhx_parity_fixture_parse(const char *dir, const char *prompts, size_t prompts_len, const char *golden,
                                    size_t golden_len, qhx_parity_fixture **out, qhx_error *err) {
    *out = NULL;
    qhx_status rc;
    json_t *pj = NULL, *gj = NULL;
    char *plabel = qhx_path_join(dir, "prompts.json"), *glabel = qhx_path_join(dir, "golden.json");
    qhx_parity_fixture *fx = qhx_calloc(1, sizeof *fx);
    if (!plabel || !glabel || !fx || !(fx->dir = qhx_strdup(dir))) {
        rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", dir);
        goto fail;
    }
    if (!(pj = qhx_json_parse(prompts, prompts_len, plabel, err)) ||
        !(gj = qhx_json_parse(golden, golden_len, glabel, err))) {
        rc = err ? err->code : QHX_E_FORMAT;
        goto fail;
    }
    if (!json_is_array(pj) || json_array_size(pj) == 0) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: expected a non-empty array of prompts", plabel);
        goto fail;
    }
    if (json_array_size(pj) > QHX_PARITY_MAX_PROMPTS) {
        rc = qhx_fail(err, QHX_E_LIMIT, "%s: %zu prompts, more than the cap of %d", plabel, json_array_size(pj),
                      QHX_PARITY_MAX_PROMPTS);
        goto fail;
    }
    const json_t *gp = json_is_object(gj) ? json_object_get(gj, "prompts") : NULL;
    if (!json_is_object(gp)) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: prompts: expected an object", glabel);
        goto fail;
    }
    int64_t n = (int64_t)json_array_size(pj);
    if (!(fx->prompts = qhx_calloc((size_t)n, sizeof *fx->prompts))) {
        rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", plabel);
        goto fail;
    }
    for (int64_t i = 0; i < n; i++) {
        fx->n_prompts = i + 1; /* so fail frees the partly read prompt */
        if ((rc = read_prompt(json_array_get(pj, (size_t)i), i, gp, plabel, glabel, &fx->prompts[i], err))) goto fail;
        for (int64_t j = 0; j < i; j++)
            if (!strcmp(fx->prompts[j].name, fx->prompts[i].name)) {
                rc = qhx_fail(err, QHX_E_FORMAT, "%s: [%lld].name: '%s' appears twice", plabel, (long long)i,
                              fx->prompts[i].name);
                goto fail;
            }
    }
    json_decref(pj);
    json_decref(gj);
    qhx_free(plabel);
    qhx_free(glabel);
    *out = fx;
    return QHX_OK;
fail:
    json_decref(gj);
    json_decref(pj);
    qhx_parity_fixture_free(fx);
    qhx_free(glabel);
    qhx_free(plabel);
    return rc;
}

qhx_status qhx_parity_fixture_open(const char *dir, qhx_parity_fixture **out, qhx_error *err) {
    *out = NULL;
    if (!qhx_path_is_dir(dir)) return qhx_fail(err, QHX_E_IO, "%s: not a fixture folder (no such directory)", dir);
    qhx_status rc = QHX_E_NOMEM;
    char *ppath = qhx_path_join(dir, "prompts.json"), *gpath = qhx_path_join(dir, "golden.json");
    char *pbuf = NULL, *gbuf = NULL;
    size_t plen = 0, glen = 0;
    if (!ppath || !gpath) rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", dir);
    else if (!(rc = qhx_file_read_all(ppath, QHX_JSON_MAX_BYTES, &pbuf, &plen, err)) &&
             !(rc = qhx_file_read_all(gpath, QHX_JSON_MAX_BYTES, &gbuf, &glen, err)))
        rc = qhx_parity_fixture_parse(dir, pbuf, plen, gbuf, glen, out, err);
    qhx_free(gbuf);
    qhx_free(pbuf);
    qhx_free(gpath);
    qhx_free(ppath);
    return rc;
}

qhx_status qhx_parity_golden_logits(const qhx_parity_fixture *fx, int64_t i, int64_t vocab, float **rows,
                                    qhx_error *err) {
    *rows = NULL;
    if (i < 0 || i >= fx->n_prompts || vocab < 1)
        return qhx_fail(err, QHX_E_ARG, "golden logits: prompt %lld of %lld, vocab %lld", (long long)i,
                        (long long)fx->n_prompts, (long long)vocab);
    const qhx_parity_prompt *p = &fx->prompts[i];
    char file[96];
    snprintf(file, sizeof file, "%s.logits.f32", p->name);
    char *path = qhx_path_join(fx->dir, file);
    if (!path) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", file);
    qhx_file_map map;
    qhx_status rc = qhx_file_map_open(path, &map, err);
    if (rc) {
        qhx_free(path);
        return rc;
    }
    size_t want = 0;
    if (!qhx_size_mul((size_t)p->n_rows, (size_t)vocab * sizeof(float), &want) || map.size != want) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: %zu bytes, expected %lld rows x %lld logits x 4 = %zu", path, map.size,
                      (long long)p->n_rows, (long long)vocab, want);
        goto done;
    }
    float *r = qhx_malloc(want);
    if (!r) {
        rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory for %zu bytes", path, want);
        goto done;
    }
    /* little-endian on disk; every host we build for is little-endian (core/dtype) */
    memcpy(r, map.data, want);
    *rows = r;
done:
    qhx_file_map_close(&map);
    qhx_free(path);
    return rc;
}

/* ---- running a model ------------------------------------------------------------------------ */

qhx_status qhx_parity_golden_embd(const qhx_parity_fixture *fx, int64_t i, int64_t n_floats, float **embd,
                                  qhx_error *err) {
    *embd = NULL;
    if (i < 0 || i >= fx->n_prompts || n_floats < 1)
        return qhx_fail(err, QHX_E_ARG, "golden image embeddings: prompt %lld of %lld, %lld floats", (long long)i,
                        (long long)fx->n_prompts, (long long)n_floats);
    char file[96];
    snprintf(file, sizeof file, "%s.image_embd.f32", fx->prompts[i].name);
    char *path = qhx_path_join(fx->dir, file);
    if (!path) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", file);
    qhx_file_map map;
    qhx_status rc = qhx_file_map_open(path, &map, err);
    if (rc) {
        qhx_free(path);
        return rc;
    }
    size_t want = 0;
    float *e = NULL;
    if (!qhx_size_mul((size_t)n_floats, sizeof(float), &want) || map.size != want)
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: %zu bytes, expected %lld floats x 4 = %zu (the image's tokens x row width)",
                      path, map.size, (long long)n_floats, want);
    else if (!(e = qhx_malloc(want)))
        rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory for %zu bytes", path, want);
    else
        memcpy(e, map.data, want); /* little-endian, as the logits files */
    *embd = e;
    qhx_file_map_close(&map);
    qhx_free(path);
    return rc;
}

/* Reset s and prefill ids (n_ids,) announced with the images (none: text), logits of every row
 * into rows (NULL: none); the announcement is dropped after the prompt. */
static qhx_status prefill_images(qhx_session *s, const qhx_image_embed *images, int n_images, const int32_t *ids,
                                 int64_t n_ids, float *rows, qhx_error *err) {
    qhx_session_reset(s);
    qhx_seq *st = qhx_session_state(s);
    qhx_status rc = n_images ? qhx_model_state_attach(st, images, n_images, ids, n_ids, err) : QHX_OK;
    if (!rc) rc = qhx_session_prefill(s, ids, n_ids, rows, err);
    if (n_images) qhx_model_state_attach(st, NULL, 0, NULL, 0, NULL);
    return rc;
}

qhx_status qhx_parity_greedy(qhx_session *s, const int32_t *ids, int64_t n_ids, int64_t n_steps, int32_t *out,
                             qhx_error *err) {
    return qhx_parity_greedy_images(s, NULL, 0, ids, n_ids, n_steps, out, err);
}

qhx_status qhx_parity_greedy_images(qhx_session *s, const qhx_image_embed *images, int n_images, const int32_t *ids,
                                    int64_t n_ids, int64_t n_steps, int32_t *out, qhx_error *err) {
    qhx_status rc = prefill_images(s, images, n_images, ids, n_ids, NULL, err);
    if (rc) return rc;
    int64_t V = qhx_session_n_vocab(s);
    for (int64_t k = 0; k < n_steps; k++) {
        out[k] = qhx_argmax_f32(qhx_session_logits(s), V);
        if (k + 1 < n_steps && (rc = qhx_session_decode(s, out[k], err))) return rc;
    }
    return QHX_OK;
}

qhx_status qhx_parity_forced(qhx_session *s, const int32_t *ids, int64_t n_ids, const int32_t *forced,
                             int64_t n_forced, float *rows, qhx_error *err) {
    return qhx_parity_forced_images(s, NULL, 0, ids, n_ids, forced, n_forced, rows, err);
}

qhx_status qhx_parity_forced_images(qhx_session *s, const qhx_image_embed *images, int n_images, const int32_t *ids,
                                    int64_t n_ids, const int32_t *forced, int64_t n_forced, float *rows,
                                    qhx_error *err) {
    qhx_status rc = prefill_images(s, images, n_images, ids, n_ids, rows, err);
    if (rc) return rc;
    int64_t V = qhx_session_n_vocab(s);
    for (int64_t k = 0; k < n_forced; k++) {
        if ((rc = qhx_session_decode(s, forced[k], err))) return rc;
        memcpy(rows + (n_ids + k) * V, qhx_session_logits(s), (size_t)V * sizeof(float));
    }
    return QHX_OK;
}

/* ---- gates ---------------------------------------------------------------------------------- */

/* max(a, b) where a NaN, once seen, stays the maximum (a NaN logit must not pass as 0). */
static double max_nan(double a, double b) { return isnan(a) || b <= a ? a : b; }

void qhx_parity_judge(const qhx_parity_prompt *p, const int32_t *greedy, const float *rows, const float *golden,
                      int64_t vocab, const qhx_parity_gate *gate, qhx_parity_result *out) {
    memset(out, 0, sizeof *out);
    int64_t k = 0;
    while (k < p->n_steps && greedy[k] == p->greedy[k]) k++;
    out->first_diff = k;
    out->first_diff_margin = k < p->n_steps ? p->greedy_margins[k] : 0.0;

    bool apply_tol = gate->kind == QHX_PARITY_GATE_TOL && gate->tol >= 0;
    for (int64_t r = 0; r < p->n_rows; r++) {
        const float *a = rows + r * vocab, *g = golden + r * vocab;
        double row_max = 0;
        for (int64_t j = 0; j < vocab; j++) row_max = max_nan(row_max, fabs((double)a[j] - (double)g[j]));
        out->max_abs = max_nan(out->max_abs, row_max);
        if (apply_tol && !(row_max <= gate->tol)) out->rows_over_tol++;
        if (qhx_argmax_f32(a, vocab) != p->row_top1[r]) {
            out->flips++;
            if (p->row_margins[r] >= gate->tau) out->hard_flips++;
        }
    }

    if (gate->kind == QHX_PARITY_GATE_EXACT) {
        out->pass = k == p->n_steps;
        return;
    }
    bool greedy_ok = k == p->n_steps || out->first_diff_margin < gate->tau;
    bool rows_ok = out->rows_over_tol == 0 && (!gate->check_rows || out->hard_flips == 0);
    out->pass = greedy_ok && rows_ok;
}

/* ---- comparing two models ------------------------------------------------------------------- */

static double log_sum_exp(const float *x, int64_t n) {
    double m = x[0];
    for (int64_t i = 1; i < n; i++)
        if (x[i] > m) m = x[i];
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - m);
    return m + log(s);
}

double qhx_parity_kl(const float *p, const float *q, int64_t n) {
    double lp = log_sum_exp(p, n), lq = log_sum_exp(q, n), kl = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = (double)p[i] - lp; /* log P_i */
        kl += exp(a) * (a - ((double)q[i] - lq));
    }
    return kl < 0 ? 0 : kl; /* rounding can leave -1e-17 for identical inputs; NaN stays NaN */
}

static int kl_bin(double kl) {
    if (!(kl < 1e2)) return QHX_PARITY_KL_BINS - 1; /* also NaN */
    if (kl < 1e-12) return 0;
    int b = 1 + (int)floor((log10(kl) + 12.0) * QHX_PARITY_KL_PER_DECADE);
    return b < 1 ? 1 : b > QHX_PARITY_KL_BINS - 2 ? QHX_PARITY_KL_BINS - 2 : b;
}

/* Upper edge of bin b (bin 0: 1e-12; the last: infinity). */
static double kl_bin_top(int b) {
    if (b == 0) return 1e-12;
    if (b >= QHX_PARITY_KL_BINS - 1) return INFINITY;
    return pow(10.0, -12.0 + (double)b / QHX_PARITY_KL_PER_DECADE);
}

double qhx_parity_kl_quantile(const qhx_parity_cmp *c, double q) {
    if (c->n_rows <= 0) return 0;
    const double want = q * (double)c->n_rows;
    int64_t seen = 0;
    for (int b = 0; b < QHX_PARITY_KL_BINS; b++) {
        seen += c->kl_hist[b];
        if ((double)seen >= want) return kl_bin_top(b);
    }
    return INFINITY;
}

void qhx_parity_cmp_merge(qhx_parity_cmp *a, const qhx_parity_cmp *b) {
    a->n_rows += b->n_rows;
    a->agree += b->agree;
    a->kl_sum += b->kl_sum;
    a->kl_max = max_nan(a->kl_max, b->kl_max);
    for (int i = 0; i < QHX_PARITY_KL_BINS; i++) a->kl_hist[i] += b->kl_hist[i];
}

void qhx_parity_compare(const float *ref, const float *test, int64_t n_rows, int64_t vocab, qhx_parity_cmp *acc) {
    for (int64_t r = 0; r < n_rows; r++) {
        const float *a = ref + r * vocab, *b = test + r * vocab;
        acc->agree += qhx_argmax_f32(a, vocab) == qhx_argmax_f32(b, vocab);
        double kl = qhx_parity_kl(a, b, vocab);
        acc->kl_sum += kl;
        acc->kl_max = max_nan(acc->kl_max, kl);
        acc->kl_hist[kl_bin(kl)]++;
    }
    acc->n_rows += n_rows;
}

/* ---- model precision ------------------------------------------------------------------------ */

static const char *dtype_label(qhx_dtype t) {
    switch (t) {
    case QHX_DTYPE_F32: return "f32";
    case QHX_DTYPE_F16: return "f16";
    case QHX_DTYPE_BF16: return "bf16";
    case QHX_DTYPE_I8: return "w8";
    case QHX_DTYPE_U8: return "q4";
    default: return "?";
    }
}

static bool is_quant(qhx_dtype t) { return t == QHX_DTYPE_I8 || t == QHX_DTYPE_U8; }

void qhx_parity_model_precision(const qhx_model *m, qhx_parity_precision *out) {
    static const char *const prefixes[] = {"model.language_model.", "model."};
    static const char *const mats[] = {"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"};
    out->decoder = "?";
    out->lm_head = "?";
    out->quantized = false;
    const qhx_model_config *cfg = qhx_model_get_config(m);
    char name[160];
    const char *pre = NULL;
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes && !pre; i++) {
        snprintf(name, sizeof name, "%snorm.weight", prefixes[i]); /* a tied bundle has no embed_tokens */
        if (qhx_model_find_tensor(m, name)) pre = prefixes[i];
    }
    if (!pre) return;
    bool first = true;
    for (int64_t l = 0; l < cfg->num_hidden_layers; l++)
        for (size_t j = 0; j < sizeof mats / sizeof *mats; j++) {
            snprintf(name, sizeof name, "%slayers.%lld.%s.weight", pre, (long long)l, mats[j]);
            const qhx_st_tensor *t = qhx_model_find_tensor(m, name);
            if (!t) continue;
            const char *lab = dtype_label(t->dtype);
            if (first) out->decoder = lab;
            else if (strcmp(out->decoder, lab)) out->decoder = "mixed";
            first = false;
            out->quantized |= is_quant(t->dtype);
        }
    const qhx_st_tensor *h = qhx_model_find_tensor(m, "lm_head.weight");
    if (!h) {
        snprintf(name, sizeof name, "%sembed_tokens.weight", pre);
        h = qhx_model_find_tensor(m, name);
    }
    if (h) {
        out->lm_head = dtype_label(h->dtype);
        out->quantized |= is_quant(h->dtype);
    }
}
