/* models/model.c: family dispatch behind model.h: read config.json, pick the family by
 * model_type, and forward the state and forward calls to its function table. */
#include "models/family.h"

#include "core/alloc.h"
#include "core/file.h"
#include "core/pool.h"
#include "io/manifest.h"
#include "models/kv.h"
#include "runtime/backend.h"
#include "text/tokenizer.h"

#include <string.h>
#include <sys/stat.h>

qhx_model_params qhx_model_default_params(void) {
    qhx_model_params p = {.max_isa = QHX_ISA_BEST, .n_threads = 0, .weights = QHX_WEIGHTS_DEFAULT,
                          .prefill_math = QHX_PREFILL_MATH_DEFAULT,
                          .decode_math = QHX_PREFILL_MATH_DEFAULT, .max_context = 0};
    return p;
}

/* How the weights of a weights mode come into memory. The default decides per file: mapped when
 * the page cache holds it, read otherwise (core/file.h QHX_FILE_AUTO; BENCHMARKS.md, "Weights
 * in memory"). */
static qhx_file_mode file_mode(qhx_weights_mode w) {
    switch (w) {
    case QHX_WEIGHTS_MMAP: return QHX_FILE_MAP_POPULATE;
    case QHX_WEIGHTS_READ: return QHX_FILE_READ;
    case QHX_WEIGHTS_DEFAULT: break;
    }
    return QHX_FILE_AUTO;
}

/* Tensors no graph of the plan reads, by name prefix: the multi-token-prediction block (never
 * used) and the vision tower unless the host-op feeds images. They are never read or paged in
 * (qhx_st_open_select), which is what keeps a released Qwen3.5 folder opened for text at the
 * decoder + head (BENCHMARKS.md, "Memory"). */
static const char *const *unused_prefixes(const qhx_plan *plan) {
    static const char *const text_only[] = {"mtp.", "model.visual.", NULL};
    static const char *const with_images[] = {"mtp.", NULL};
    return plan->host_op == QHX_HOST_OP_QWEN3_VL_GENERATE ? with_images : text_only;
}

/* Open every safetensors artifact of the plan (decoder, embedding, lm-head, vision) as one set. */
static qhx_status open_weights(const qhx_plan *plan, qhx_weights_mode wmode,
                               void (*progress_fn)(void *, uint64_t, uint64_t), void *progress_user,
                               qhx_st_set **out, qhx_error *err) {
    const char *paths[QHX_ART_ROLE_COUNT];
    int n = 0;
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) {
        const qhx_plan_file *f = &plan->artifacts[r];
        if (!f->present) continue;
        if (f->format != QHX_ART_SAFETENSORS)
            return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: artifacts.%s: format '%s' is not supported by the CPU backend",
                            plan->label, qhx_art_role_name((qhx_art_role)r), qhx_art_format_name(f->format));
        if (!f->path) return qhx_fail(err, QHX_E_ARG, "%s: artifacts.%s: no path", plan->label, qhx_art_role_name((qhx_art_role)r));
        paths[n++] = f->path;
    }
    qhx_load_progress pr = {.fn = progress_fn, .user = progress_user};
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) == 0 && S_ISREG(st.st_mode)) pr.total += (uint64_t)st.st_size;
    }
    /* total counts whole files; the left-out tensors' bytes are never loaded, so done may end short of it */
    return qhx_st_open_select(paths, n, file_mode(wmode), unused_prefixes(plan), progress_fn ? &pr : NULL, out, err);
}

/* Bind the family's weights; the family decides from the text config. */
static qhx_status open_family(qhx_model *m, const qhx_plan *plan, qhx_error *err) {
    const char *label = plan->model_config.path ? plan->model_config.path : plan->label;
    qhx_st_set *set = NULL;
    qhx_status rc;
    switch (plan->family) {
    case QHX_FAMILY_QWEN3_5:
        m->family = QHX_FAMILY_QWEN3_5;
        if ((rc = qhx_qwen35_parse_config(plan->config, label, &m->cfg, err))) return rc;
        if ((rc = open_weights(plan, m->params.weights, m->params.load_progress, m->params.load_progress_user, &set, err))) return rc;
        return qhx_qwen35_open(m, set, plan->label, err);
    case QHX_FAMILY_QWEN3_VL:
        m->family = QHX_FAMILY_QWEN3_VL;
        if ((rc = open_weights(plan, m->params.weights, m->params.load_progress, m->params.load_progress_user, &set, err))) return rc;
        return qhx_qwen3vl_open(m, plan->config, label, set,
                                plan->preprocessor.present ? plan->preprocessor.path : NULL, err);
    default:
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: family '%s' is not supported by this build", plan->label,
                        qhx_family_name(plan->family));
    }
}

/* The weight formats whose prefill matmul quantizes activations to int8 (kernels.h bit mask). */
static unsigned int8_prefill_formats(qhx_prefill_math math) {
    switch (math) {
    case QHX_PREFILL_MATH_INT8: return 1u << QHX_W_Q8 | 1u << QHX_W_Q4;
    case QHX_PREFILL_MATH_F32: return 0;
    default: return 1u << QHX_W_Q4; /* QHX_PREFILL_MATH_DEFAULT: include/qhx.h says why */
    }
}

qhx_status qhx_model_open(const char *path, const qhx_model_params *params, qhx_model **out,
                          qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "model open: out is NULL");
    *out = NULL;
    if (!path) return qhx_fail(err, QHX_E_ARG, "model path is NULL");
    qhx_model_params p = params ? *params : qhx_model_default_params();
    if (p.n_threads < 0 || p.n_threads > QHX_POOL_MAX_THREADS)
        return qhx_fail(err, QHX_E_ARG, "n_threads %d is outside [0, %d]", p.n_threads, QHX_POOL_MAX_THREADS);
    if ((unsigned)p.weights > QHX_WEIGHTS_READ)
        return qhx_fail(err, QHX_E_ARG, "weights mode %d is not one of default, mmap, read", (int)p.weights);
    if ((unsigned)p.prefill_math > QHX_PREFILL_MATH_INT8)
        return qhx_fail(err, QHX_E_ARG, "prefill_math %d is not one of default, f32, int8", (int)p.prefill_math);
    if ((unsigned)p.decode_math > QHX_PREFILL_MATH_INT8)
        return qhx_fail(err, QHX_E_ARG, "decode_math %d is not one of default, f32, int8", (int)p.decode_math);
    if ((unsigned)p.max_isa > QHX_ISA_BEST) return qhx_fail(err, QHX_E_ARG, "max_isa %d is not an instruction set", (int)p.max_isa);
    if (p.max_context < 0) return qhx_fail(err, QHX_E_ARG, "max_context %lld is negative", (long long)p.max_context);
    if ((unsigned)p.kv_cache > QHX_KV_Q8) return qhx_fail(err, QHX_E_ARG, "kv_cache %d is not one of default, f32, f16, q8", (int)p.kv_cache);
    const qhx_backend *be;
    qhx_status brc = qhx_backend_find(p.backend, &be, err);
    if (brc) return brc;
    qhx_model *m = qhx_calloc(1, sizeof *m);
    if (!m) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    m->params = p;
    m->params.backend = NULL; /* the caller's string need not outlive the call */
    m->backend = be;
    qhx_kern_select(p.max_isa, &m->kern);
    qhx_kern_use_int8(p.max_isa, int8_prefill_formats(p.prefill_math),
                      p.decode_math == QHX_PREFILL_MATH_F32 ? 0 : 1u << QHX_W_Q4, &m->kern);
    qhx_status rc = qhx_plan_open(path, &m->plan, err);
    if (rc) goto fail;
    /* what a manifest says of its weights (tensor_count, dtype, precision) is checked against the
     * safetensors headers now, at the cost of reading them once more; sha256 is left to
     * `qhx inspect --verify` (a pass over every byte: seconds per GB) */
    if (m->plan->source == QHX_PLAN_FROM_MANIFEST && (rc = qhx_plan_verify(m->plan, QHX_PLAN_VERIFY_HEADERS, err)))
        goto fail;
    if (!m->plan->config) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: the run plan has no model configuration", m->plan->label);
        goto fail;
    }
    m->max_context = p.max_context ? p.max_context : m->plan->max_context;
    m->kv_cache = p.kv_cache ? p.kv_cache : m->plan->kv_cache ? m->plan->kv_cache : QHX_KV_BUILTIN;
    /* the pool first: families keep a pointer to it */
    if ((rc = qhx_pool_create(p.n_threads, &m->pool, err))) goto fail;
    if ((rc = open_family(m, m->plan, err))) goto fail;
    if (m->plan->tokenizer.present && m->plan->tokenizer.path &&
        (rc = qhx_tok_load(m->plan->tokenizer.path, &m->tok, err)))
        goto fail;
    if (m->tok && qhx_tok_n_vocab(m->tok) > qhx_model_n_vocab(m)) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: the tokenizer has %d ids but the model only %lld embedding rows",
                      m->plan->tokenizer.path, qhx_tok_n_vocab(m->tok), (long long)qhx_model_n_vocab(m));
        goto fail;
    }
    *out = m;
    return QHX_OK;
fail:
    qhx_model_free(m);
    return rc;
}

void qhx_model_free(qhx_model *m) {
    if (!m) return;
    if (m->vt && m->impl) m->vt->free_impl(m->impl);
    qhx_pool_free(m->pool);
    qhx_tok_free(m->tok);
    qhx_plan_free(m->plan);
    qhx_free(m);
}

qhx_family qhx_model_family(const qhx_model *m) { return m->family; }
const qhx_model_config *qhx_model_get_config(const qhx_model *m) { return &m->cfg; }
int64_t qhx_model_n_vocab(const qhx_model *m) { return m ? m->cfg.vocab_size : 0; }
const qhx_st_tensor *qhx_model_find_tensor(const qhx_model *m, const char *name) {
    return m->weights ? qhx_st_find(m->weights, name) : NULL;
}

qhx_status qhx_model_state_create(const qhx_model *m, const qhx_state_params *params,
                                  qhx_model_state **out, qhx_error *err) {
    *out = NULL;
    if (!m || !params) return qhx_fail(err, QHX_E_ARG, "state: model and params are required");
    int64_t n_ctx = params->n_ctx, n_batch = params->n_batch;
    if (n_ctx < 1 || n_ctx > ((int64_t)1 << 24))
        return qhx_fail(err, QHX_E_ARG, "state: n_ctx %lld is outside [1, %lld]", (long long)n_ctx,
                        (long long)1 << 24);
    if (n_batch == 0) n_batch = n_ctx < 512 ? n_ctx : 512;
    if (n_batch < 1 || n_batch > n_ctx)
        return qhx_fail(err, QHX_E_ARG, "state: n_batch %lld is outside [1, n_ctx = %lld]",
                        (long long)n_batch, (long long)n_ctx);
    if ((unsigned)params->kv_cache > QHX_KV_Q8)
        return qhx_fail(err, QHX_E_ARG, "state: kv_cache %d is not one of default, f32, f16, q8", (int)params->kv_cache);
    qhx_model_state *st = qhx_calloc(1, sizeof *st);
    if (!st) return qhx_fail(err, QHX_E_NOMEM, "state: out of memory");
    st->m = m;
    st->kv_type = params->kv_cache ? params->kv_cache : m->kv_cache ? m->kv_cache : QHX_KV_BUILTIN;
    st->n_ctx = n_ctx;
    st->n_batch = n_batch;
    qhx_status rc = m->vt->state_create(st, err);
    if (rc) {
        qhx_free(st);
        return rc;
    }
    *out = st;
    return QHX_OK;
}

void qhx_model_state_free(qhx_model_state *st) {
    if (!st) return;
    if (st->impl) st->m->vt->state_free(st->impl);
    qhx_free(st);
}

void qhx_model_state_reset(qhx_model_state *st) {
    st->m->vt->state_reset(st);
    st->n_past = 0;
}

int64_t qhx_model_state_n_past(const qhx_model_state *st) { return st->n_past; }
void qhx_model_state_set_n_past(qhx_model_state *st, int64_t n) {
    if (n >= 0 && n <= st->n_ctx) st->n_past = n;
}
int64_t qhx_model_state_n_ctx(const qhx_model_state *st) { return st->n_ctx; }
qhx_kv_type qhx_model_state_kv_type(const qhx_model_state *st) { return st->kv_type; }

qhx_status qhx_model_forward(const qhx_model *m, qhx_model_state *st, const int32_t *ids,
                             int64_t n, const qhx_forward_opts *opts, qhx_error *err) {
    if (!m || !st || st->m != m) return qhx_fail(err, QHX_E_ARG, "forward: state does not belong to this model");
    if (n < 1 || !ids) return qhx_fail(err, QHX_E_ARG, "forward: no tokens");
    if (n > st->n_ctx - st->n_past)
        return qhx_fail(err, QHX_E_LIMIT, "forward: %lld tokens at position %lld exceed the context of %lld",
                        (long long)n, (long long)st->n_past, (long long)st->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return qhx_fail(err, QHX_E_ARG, "forward: token %lld: id %d is outside the vocabulary [0, %lld)",
                            (long long)i, ids[i], (long long)m->cfg.vocab_size);
    static const qhx_forward_opts none = {0};
    return m->vt->forward(m, st, ids, n, opts ? opts : &none, err);
}

int qhx_model_state_regions(const qhx_model_state *st, qhx_state_region *out, int cap) {
    return st->m->vt->state_regions ? st->m->vt->state_regions(st, out, cap) : 0;
}
