/* forge_calib: the calibration pass of qhx forge --calibrate (docs/bundle.md, "Calibration").
 *
 * The source checkpoint is opened as a model with f32 arithmetic on the CPU device, wrapped by
 * the statistics-taking device (devices/calib.h); the calibration text runs through it in
 * windows of FORGE_CALIB_WINDOW tokens, each from an empty state, with the lm-head over every
 * row. The sums the wrapper took per weight (keyed by data pointer) are then given the names of
 * the checkpoint tensors they came from, and turned into the per-column importance the row
 * quantizers weigh their squared error by.
 *
 * Mapping weights to names. A family binds a linear weight as a view of its tensor in the
 * loaded set (ops/weights.c qhx_wbind_linear), so a weight's data pointer is its tensor's data
 * pointer; only a tensor misaligned for its element type is bound as a copy, and that copy is
 * found by comparing bytes with the tensors of the same size and dtype. This needs nothing from
 * the families: the model binds as always, and the forge reads the names back from the same set
 * (qhx_model_tensors), which are the names its own plan of the checkpoint uses. */
#include "forge/forge_internal.h"

#include "core/alloc.h"
#include "core/file.h"
#include "core/json_scan.h"
#include "core/time.h"
#include "devices/calib.h"
#include "runtime/model.h"

#include <stdio.h>
#include <string.h>

/* The floor added to every column's importance, as a fraction of the mean over the columns
 * (devices/calib.h qhx_calib_importance): small enough not to flatten the statistics, large
 * enough that a column the text never lit is still fitted. The tied embedding gets a floor of
 * the whole mean: the same bytes serve the lookup, whose error enters the residual stream with
 * every column weighing alike, and the head, whose error the activations weigh. */
#define FLOOR_FRAC 0.01
#define FLOOR_FRAC_TIED 1.0

/* The largest calibration text read (bytes). */
#define MAX_TEXT_BYTES ((size_t)64 << 20)

/* Floats of logits per forward call: the head runs over every row, in as many rows at a time
 * as fit (at least one). */
#define LOGIT_FLOATS ((int64_t)1 << 24)

typedef struct calib_tensor {
    char *name;
    int64_t cols;
    float *imp; /* (cols) */
} calib_tensor;

struct forge_calib {
    calib_tensor *t;
    int64_t n;
    int64_t n_tokens; /* tokens run */
    int64_t n_unnamed; /* weights seen that matched no tensor */
};

void forge_calib_free(forge_calib *c) {
    if (!c) return;
    for (int64_t i = 0; i < c->n; i++) qhx_free(c->t[i].name), qhx_free(c->t[i].imp);
    qhx_free(c->t);
    qhx_free(c);
}

const float *forge_calib_importance(const forge_calib *c, const char *name, int64_t cols) {
    for (int64_t i = 0; c && i < c->n; i++)
        if (c->t[i].cols == cols && !strcmp(c->t[i].name, name)) return c->t[i].imp;
    return NULL;
}

int64_t forge_calib_tokens(const forge_calib *c) { return c ? c->n_tokens : 0; }
int64_t forge_calib_matrices(const forge_calib *c) { return c ? c->n : 0; }

// ---- the text ----------------------------------------------------------------------------------

/* The calibration file as UTF-8 text: a regular file (a FIFO, a device or a folder is refused
 * as what it is, never waited on), not empty, no NUL byte, well-formed. */
static qhx_status read_text(const char *path, char **out, size_t *len, qhx_error *err) {
    *out = NULL;
    qhx_status rc = qhx_file_read_all(path, MAX_TEXT_BYTES, out, len, err);
    if (rc == QHX_OK && *len == 0) rc = qhx_fail(err, QHX_E_FORMAT, "%s: the file is empty (expected calibration text)", path);
    if (rc == QHX_OK) rc = qhx_text_check_utf8(path, *out, *len, err);
    if (rc) qhx_free(*out), *out = NULL;
    if (rc && err) { /* which option named the file */
        static const char opt[] = "--calibrate ";
        char msg[sizeof err->msg];
        size_t n = strnlen(err->msg, sizeof msg - sizeof opt);
        memcpy(msg, opt, sizeof opt - 1);
        memcpy(msg + sizeof opt - 1, err->msg, n);
        msg[sizeof opt - 1 + n] = 0;
        memcpy(err->msg, msg, sizeof msg);
    }
    return rc;
}

// ---- the pass ----------------------------------------------------------------------------------

static qhx_status wrap_device(void *user, qhx_device *inner, qhx_device **out, qhx_error *err) {
    return qhx_calib_wrap(inner, user, out, err);
}

/* Every window of the token stream through the model, the head over every row. */
static qhx_status run_windows(qhx_model *m, const int32_t *ids, int64_t n, const forge_job *job, qhx_error *err) {
    const int64_t vocab = qhx_model_get_config(m)->vocab_size;
    int64_t batch = LOGIT_FLOATS / (vocab > 0 ? vocab : 1);
    batch = batch < 1 ? 1 : batch > FORGE_CALIB_WINDOW ? FORGE_CALIB_WINDOW : batch;
    float *logits = qhx_malloc((size_t)batch * (size_t)vocab * sizeof *logits);
    qhx_seq *st = NULL;
    qhx_status rc = logits ? QHX_OK : qhx_fail(err, QHX_E_NOMEM, "calibration: out of memory for %lld logits rows", (long long)batch);
    if (rc == QHX_OK) rc = qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = FORGE_CALIB_WINDOW}, &st, err);
    const qhx_forge_params *p = job->p;
    const qhx_forward_opts o = {.flags = QHX_FWD_LOGITS_ALL, .logits = logits, .abort_cb = p->cancel, .abort_cb_user = p->user};
    const uint64_t t0 = qhx_time_ns();
    int64_t shown = 0;
    for (int64_t w0 = 0; rc == QHX_OK && w0 < n; w0 += FORGE_CALIB_WINDOW) {
        const int64_t wn = n - w0 < FORGE_CALIB_WINDOW ? n - w0 : FORGE_CALIB_WINDOW;
        qhx_model_state_reset(st);
        for (int64_t b = 0; rc == QHX_OK && b < wn; b += batch)
            rc = qhx_model_forward(m, st, ids + w0 + b, wn - b < batch ? wn - b : batch, &o, err);
        /* a line at every tenth of the way (and the last window) */
        if (rc == QHX_OK && ((w0 + wn) * 10 / n > shown || w0 + wn == n)) {
            shown = (w0 + wn) * 10 / n;
            const double s = (double)(qhx_time_ns() - t0) * 1e-9;
            forge_job_log(job, "calibration: %lld / %lld tokens (%.0f tokens/s)", (long long)(w0 + wn), (long long)n,
                          s > 0 ? (double)(w0 + wn) / s : 0.0);
        }
    }
    qhx_model_state_free(st);
    qhx_free(logits);
    return rc;
}

/* The tensor of the set whose data the entry's weight is: the same pointer, else (an aligned
 * copy) the same bytes in a float tensor of the same size. NULL when none. */
static const qhx_st_tensor *tensor_of(const qhx_st_set *set, const qhx_calib_entry *e) {
    const int64_t n = qhx_st_n_tensors(set);
    for (int64_t i = 0; i < n; i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        if ((const void *)t->data == e->key) return t;
    }
    const qhx_dtype dt = e->fmt == QHX_W_F32 ? QHX_DTYPE_F32 : e->fmt == QHX_W_F16 ? QHX_DTYPE_F16
                       : e->fmt == QHX_W_BF16 ? QHX_DTYPE_BF16 : QHX_DTYPE_COUNT;
    for (int64_t i = 0; dt != QHX_DTYPE_COUNT && i < n; i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        if (t->dtype == dt && t->n_elements == e->rows * e->cols && !memcmp(t->data, e->key, t->size)) return t;
    }
    return NULL;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* The statistics of every weight, under its tensor's name, as importance vectors. */
static qhx_status name_stats(const qhx_model *m, const qhx_calib_stats *s, forge_calib *c, qhx_error *err) {
    const qhx_st_set *set = qhx_model_tensors(m);
    const bool tied = qhx_model_get_config(m)->tie_word_embeddings;
    const int64_t n = qhx_calib_stats_count(s);
    if (!set) return qhx_fail(err, QHX_E_INTERNAL, "calibration: the backend keeps no tensors on the host");
    if (!(c->t = qhx_calloc((size_t)(n > 0 ? n : 1), sizeof *c->t))) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        const qhx_calib_entry *e = qhx_calib_stats_at(s, i);
        const qhx_st_tensor *t = tensor_of(set, e);
        if (!t) {
            c->n_unnamed++;
            continue;
        }
        calib_tensor *ct = &c->t[c->n];
        ct->cols = e->cols;
        if (!(ct->imp = qhx_malloc((size_t)e->cols * sizeof *ct->imp)) || !(ct->name = qhx_strdup(t->name))) {
            qhx_free(ct->imp);
            return qhx_fail(err, QHX_E_NOMEM, "out of memory");
        }
        const double floor = tied && ends_with(t->name, "embed_tokens.weight") ? FLOOR_FRAC_TIED : FLOOR_FRAC;
        if (qhx_calib_importance(e, floor, ct->imp)) { /* never lit: quantized unweighted */
            qhx_free(ct->imp), qhx_free(ct->name);
            continue;
        }
        c->n++;
    }
    return QHX_OK;
}

qhx_status forge_calib_run(const char *hf_dir, const forge_job *job, forge_calib **out, qhx_error *err) {
    *out = NULL;
    const qhx_forge_params *p = job->p;
    char *text = NULL;
    size_t len = 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    qhx_calib_stats *stats = NULL;
    qhx_model *m = NULL;
    forge_calib *c = NULL;
    qhx_status rc = read_text(p->calibrate, &text, &len, err);
    if (rc == QHX_OK) rc = qhx_calib_stats_create(&stats, err);
    qhx_model_params mp = qhx_model_default_params();
    mp.prefill_math = mp.decode_math = QHX_PREFILL_MATH_F32;
    mp.n_threads = p->threads;
    mp.backend = "cpu";
    mp.vision = -1;
    mp.max_context = FORGE_CALIB_WINDOW;
    const qhx_device_wrap wrap = {.fn = wrap_device, .user = stats};
    if (rc == QHX_OK) rc = qhx_model_open_wrapped(hf_dir, &mp, &wrap, &m, err);
    if (rc == QHX_OK && !m->tok) rc = qhx_fail(err, QHX_E_FORMAT, "%s: no tokenizer to read the calibration text with", hf_dir);
    if (rc == QHX_OK) rc = qhx_tok_encode_alloc(m->tok, text, len, &ids, &n_ids, err);
    if (rc == QHX_OK && n_ids == 0) rc = qhx_fail(err, QHX_E_FORMAT, "--calibrate %s: no tokens", p->calibrate);
    const int64_t cap = p->calibrate_tokens > 0 ? p->calibrate_tokens : FORGE_CALIB_TOKENS;
    const int64_t n = (int64_t)n_ids < cap ? (int64_t)n_ids : cap;
    if (rc == QHX_OK)
        forge_job_log(job, "calibration: %lld tokens of %s (%lld in the file), windows of %d", (long long)n, p->calibrate,
                      (long long)n_ids, FORGE_CALIB_WINDOW);
    if (rc == QHX_OK) rc = run_windows(m, ids, n, job, err);
    if (rc == QHX_OK && qhx_calib_stats_missed(stats))
        rc = qhx_fail(err, QHX_E_INTERNAL, "calibration: %lld linear inputs were not counted",
                      (long long)qhx_calib_stats_missed(stats));
    if (rc == QHX_OK && !(c = qhx_calloc(1, sizeof *c))) rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
    if (rc == QHX_OK) rc = name_stats(m, stats, c, err);
    if (rc == QHX_OK) {
        c->n_tokens = n;
        forge_job_log(job, "calibration: statistics of %lld matrices%s", (long long)c->n,
                      c->n_unnamed ? " (some weights matched no tensor: quantized unweighted)" : "");
        *out = c;
        c = NULL;
    }
    forge_calib_free(c);
    qhx_model_free(m); /* before the statistics: its wrapper points at them */
    qhx_calib_stats_free(stats);
    qhx_free(ids);
    qhx_free(text);
    return rc;
}
