/* runtime/model.c: opening a model (qhx.h qhx_model_open): the run plan, its family (from the
 * registry) and the only parse of its config, the host-op, the backend and its graphs, the
 * tokenizer and the image preprocessing; then the sequence calls, each through the backend. */
#include "runtime/model.h"

#include "core/alloc.h"
#include "core/time.h"
#include "core/pool.h"
#include "grammar/grammar.h"
#include "io/gguf.h"
#include "families/family.h"
#include "ops/kv.h"
#include "ops/mrope.h"

#include <stdio.h>
#include <string.h>

qhx_model_params qhx_model_default_params(void) {
    qhx_model_params p = {.max_isa = QHX_ISA_BEST, .n_threads = 0, .weights = QHX_WEIGHTS_DEFAULT,
                          .prefill_math = QHX_PREFILL_MATH_DEFAULT,
                          .decode_math = QHX_PREFILL_MATH_DEFAULT, .max_context = 0};
    return p;
}

/* ---- opening ------------------------------------------------------------------------------ */

static qhx_status check_params(const qhx_model_params *p, qhx_error *err) {
    if (p->n_threads < 0 || p->n_threads > QHX_POOL_MAX_THREADS)
        return qhx_fail(err, QHX_E_ARG, "n_threads %d is outside [0, %d]", p->n_threads, QHX_POOL_MAX_THREADS);
    if ((unsigned)p->weights > QHX_WEIGHTS_READ)
        return qhx_fail(err, QHX_E_ARG, "weights mode %d is not one of default, mmap, read", (int)p->weights);
    if ((unsigned)p->prefill_math > QHX_PREFILL_MATH_INT8)
        return qhx_fail(err, QHX_E_ARG, "prefill_math %d is not one of default, f32, int8", (int)p->prefill_math);
    if ((unsigned)p->decode_math > QHX_PREFILL_MATH_INT8)
        return qhx_fail(err, QHX_E_ARG, "decode_math %d is not one of default, f32, int8", (int)p->decode_math);
    if ((unsigned)p->max_isa > QHX_ISA_BEST) return qhx_fail(err, QHX_E_ARG, "max_isa %d is not an instruction set", (int)p->max_isa);
    if (p->max_context < 0) return qhx_fail(err, QHX_E_ARG, "max_context %lld is negative", (long long)p->max_context);
    if (p->vision < -1 || p->vision > 1) return qhx_fail(err, QHX_E_ARG, "vision %d is not -1, 0 or 1", p->vision);
    if (p->mtp < 0 || p->mtp > 1) return qhx_fail(err, QHX_E_ARG, "mtp %d is not 0 or 1", p->mtp);
    if ((unsigned)p->kv_cache > QHX_KV_Q8) return qhx_fail(err, QHX_E_ARG, "kv_cache %d is not one of default, f32, f16, q8", (int)p->kv_cache);
    return QHX_OK;
}

/* The family the plan names (a manifest), or the one that reads its config's model_type (a
 * checkpoint folder); a manifest's family must also read its config. */
static qhx_status find_family(const qhx_plan *plan, qhx_plan_resolved *r, qhx_error *err) {
    char names[256];
    const qhx_family_desc *by_type = qhx_family_for_model_type(plan->model_type);
    if (plan->family[0]) {
        r->family = qhx_family_find(plan->family);
        if (!r->family)
            return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: family: '%s' is not supported by this build (known: %s)",
                            plan->label, plan->family, qhx_family_names(names, sizeof names));
        if (by_type != r->family)
            return qhx_fail(err, QHX_E_FORMAT, "%s: family: '%s' does not match the model config's model_type '%s'",
                            plan->label, plan->family, plan->model_type);
        return QHX_OK;
    }
    if (!by_type)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: model_type: '%s' is not supported (families: %s)",
                        plan->model_config.path ? plan->model_config.path : plan->label, plan->model_type,
                        qhx_family_names(names, sizeof names));
    r->family = by_type;
    return QHX_OK;
}

static qhx_status find_host_op(const qhx_plan *plan, qhx_plan_resolved *r, qhx_error *err) {
    if (!plan->host_op[0]) { /* a checkpoint folder: images when it carries a vision tower */
        r->host_op = qhx_family_default_host_op(r->family, r->cfg.has_vision && plan->vision_tensors);
        return QHX_OK;
    }
    r->host_op = qhx_family_host_op_find(r->family, plan->host_op);
    if (!r->host_op) {
        char offered[256];
        size_t at = 0;
        offered[0] = '\0';
        for (const qhx_family_host_op *h = r->family->host_ops; h->name && at < sizeof offered; h++)
            at += (size_t)snprintf(offered + at, sizeof offered - at, "%s%s", at ? ", " : "", h->name);
        return qhx_fail(err, QHX_E_FORMAT, "%s: host_op: '%s' is not a host-op of family %s (it offers: %s)",
                        plan->label, plan->host_op, r->family->name, offered);
    }
    if (r->host_op->loop->images && !r->cfg.has_vision)
        return qhx_fail(err, QHX_E_FORMAT, "%s: host_op: %s needs a vision_config in the model config", plan->label,
                        r->host_op->name);
    return QHX_OK;
}

/* What the plan says that only the parsed config can check: the context against the trained
 * one, special ids against the vocabulary. */
static qhx_status check_plan_against_config(const qhx_plan *plan, const qhx_plan_resolved *r, qhx_error *err) {
    const qhx_model_config *c = &r->cfg;
    if (plan->source == QHX_PLAN_FROM_MANIFEST && c->max_position_embeddings > 0 &&
        plan->max_context > c->max_position_embeddings)
        return qhx_fail(err, QHX_E_FORMAT, "%s: max_context: %lld exceeds the model's max_position_embeddings %lld",
                        plan->label, (long long)plan->max_context, (long long)c->max_position_embeddings);
    const qhx_plan_tokens *t = &plan->special;
    if (plan->source == QHX_PLAN_FROM_MANIFEST && r->host_op->loop->images) {
        const char *need[] = {"image_pad", "vision_start", "vision_end"};
        int32_t have[] = {t->image_pad, t->vision_start, t->vision_end};
        for (int i = 0; i < 3; i++)
            if (have[i] < 0)
                return qhx_fail(err, QHX_E_FORMAT, "%s: special_tokens.%s: missing (%s needs it)", plan->label, need[i],
                                r->host_op->name);
    }
    for (int i = 0; i < t->n_stop_ids; i++)
        if (t->stop_ids[i] >= c->vocab_size)
            return qhx_fail(err, QHX_E_FORMAT, "%s: special_tokens.stop_ids: [%d]: %d is not below vocab_size %lld",
                            plan->label, i, t->stop_ids[i], (long long)c->vocab_size);
    for (int i = 0; i < QHX_PLAN_N_TOKEN_IDS; i++) {
        int32_t v = qhx_plan_token_id(t, i);
        if (v >= c->vocab_size)
            return qhx_fail(err, QHX_E_FORMAT, "%s: special_tokens.%s: %d is not below vocab_size %lld", plan->label,
                            qhx_plan_token_key(i), v, (long long)c->vocab_size);
    }
    return QHX_OK;
}

qhx_status qhx_plan_resolve(const qhx_plan *plan, qhx_plan_resolved *r, qhx_error *err) {
    memset(r, 0, sizeof *r);
    if (!plan->config) return qhx_fail(err, QHX_E_FORMAT, "%s: the run plan has no model configuration", plan->label);
    qhx_status rc = find_family(plan, r, err);
    if (rc) return rc;
    const char *label = plan->model_config.path ? plan->model_config.path : plan->label;
    if ((rc = r->family->parse_config(plan->config, label, &r->cfg, err)) || (rc = find_host_op(plan, r, err)))
        return rc;
    return check_plan_against_config(plan, r, err);
}

/* The context: the caller's, else the plan's; a checkpoint folder's default is capped by the
 * trained length, and a bundle that keeps the whole trained length gives its sessions a
 * folder's default too (a session of the library reserves what it is given, whole). The
 * trained length bounds every session. */
static void set_context(qhx_model *m) {
    const qhx_plan *plan = m->plan;
    int64_t mpe = m->cfg.max_position_embeddings, ctx = plan->max_context;
    if (plan->source == QHX_PLAN_FROM_CHECKPOINT && mpe > 0 && mpe < ctx) ctx = mpe;
    if (plan->source == QHX_PLAN_FROM_MANIFEST && mpe > 0 && ctx >= mpe && ctx > QHX_PLAN_DEFAULT_CONTEXT)
        ctx = QHX_PLAN_DEFAULT_CONTEXT;
    if (m->params.max_context) ctx = m->params.max_context;
    m->max_context = ctx;
    m->trained_context = mpe > ctx ? mpe : ctx;
}

/* Video preprocessing, as transformers finds it: video_preprocessor_config.json next to the
 * preprocessor_config.json, else preprocessor_config.json itself read over the video
 * processor's defaults (its size then bounds all frames together), else the defaults. */
static qhx_status set_video_prep(qhx_model *m, qhx_error *err) {
    m->vprep = qhx_video_prep_default();
    const qhx_plan_file *pf = &m->plan->preprocessor;
    qhx_status rc = QHX_OK;
    if (pf->present && pf->path) {
        const char *slash = strrchr(pf->path, '/');
        size_t dir = slash ? (size_t)(slash - pf->path) + 1 : 0;
        char *vpath = qhx_malloc(dir + 40);
        if (!vpath) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
        memcpy(vpath, pf->path, dir);
        strcpy(vpath + dir, "video_preprocessor_config.json");
        FILE *f = fopen(vpath, "rb");
        if (f) fclose(f);
        rc = qhx_video_prep_load(f ? vpath : pf->path, &m->vprep, err);
        qhx_free(vpath);
    }
    const qhx_vit_config *v = &m->cfg.vision;
    m->vprep.img.patch_size = v->patch_size;
    m->vprep.img.temporal_patch_size = v->temporal_patch_size;
    m->vprep.img.merge_size = v->spatial_merge_size;
    return rc;
}

/* Image preprocessing: the vision config's patch, temporal patch and merge sizes, then the
 * plan's preprocessor_config.json, which must agree with them. */
static qhx_status set_image_prep(qhx_model *m, qhx_error *err) {
    const qhx_vit_config *v = &m->cfg.vision;
    m->prep = qhx_image_prep_default();
    m->prep.patch_size = v->patch_size;
    m->prep.temporal_patch_size = v->temporal_patch_size;
    m->prep.merge_size = v->spatial_merge_size;
    const qhx_plan_file *pf = &m->plan->preprocessor;
    qhx_status rc;
    if (pf->present && pf->path && (rc = qhx_image_prep_load(pf->path, &m->prep, err))) return rc;
    if (m->prep.patch_size != v->patch_size || m->prep.temporal_patch_size != v->temporal_patch_size ||
        m->prep.merge_size != v->spatial_merge_size)
        return qhx_fail(err, QHX_E_FORMAT, "%s: patch_size / temporal_patch_size / merge_size disagree with config.json vision_config",
                        pf->present && pf->path ? pf->path : m->plan->label);
    return set_video_prep(m, err);
}

static qhx_status load_graphs(qhx_model *m, qhx_error *err) {
    bool images = m->host_op->loop->images;
    const qhx_backend_load_args a = {.plan = m->plan, .family = m->family, .cfg = &m->cfg, .params = &m->params,
                                     .vision = images, .mtp = m->params.mtp == 1,
                                     .device = m->device, .wrap = m->wrap.fn ? &m->wrap : NULL};
    qhx_status rc = m->backend->load(&a, &m->graphs, err);
    if (rc) return rc;
    if (!images) return QHX_OK;
    if (!m->backend->has_graph(m->graphs, QHX_GRAPH_VISION)) {
        if (m->plan->host_op[0])
            return qhx_fail(err, QHX_E_FORMAT, "%s: host_op: %s needs the vision tower, which the weights lack",
                            m->plan->label, m->host_op->name);
        m->host_op = qhx_family_default_host_op(m->family, false);
        return QHX_OK;
    }
    m->images = true;
    return set_image_prep(m, err);
}

static qhx_status load_tokenizer(qhx_model *m, qhx_error *err) {
    const qhx_plan_file *t = &m->plan->tokenizer;
    if (!t->present || !t->path) return QHX_OK;
    qhx_status rc = t->format == QHX_ART_GGUF ? qhx_family_gguf_tokenizer(t->path, &m->tok, err) : qhx_tok_load(t->path, &m->tok, err);
    if (rc) return rc;
    if (qhx_tok_n_vocab(m->tok) > m->cfg.vocab_size)
        return qhx_fail(err, QHX_E_FORMAT, "%s: the tokenizer has %d ids but the model only %lld embedding rows",
                        t->path, qhx_tok_n_vocab(m->tok), (long long)m->cfg.vocab_size);
    return QHX_OK;
}

static qhx_status open_plan(qhx_model *m, const char *path, qhx_error *err) {
    const bool gguf = qhx_gguf_path_has_magic(path);
    if (m->params.mmproj && !gguf)
        return qhx_fail(err, QHX_E_ARG, "%s: --mmproj goes with a GGUF model file; this model brings its own vision tower", path);
    qhx_status rc = gguf ? qhx_family_gguf_plan(path, m->params.mmproj, &m->plan, err) : qhx_plan_open(path, &m->plan, err);
    m->params.mmproj = NULL; /* the caller's string: read during the open only */
    if (rc) return rc;
    /* a checkpoint folder's special ids by its family's names; with no family that reads its
     * model_type, resolving reports that */
    if (m->plan->source == QHX_PLAN_FROM_CHECKPOINT && qhx_family_for_model_type(m->plan->model_type) &&
        (rc = qhx_family_name_plan_tokens(m->plan, err)))
        return rc;
    /* what a manifest says of its weights (tensor_count, dtype, precision) is checked against the
     * safetensors headers now, at the cost of reading them once more; sha256 is left to
     * `qhx inspect --verify` (a pass over every byte: seconds per GB) */
    if (m->plan->source == QHX_PLAN_FROM_MANIFEST && (rc = qhx_plan_verify(m->plan, QHX_PLAN_VERIFY_HEADERS, err)))
        return rc;
    return QHX_OK;
}

/* qhx_model_open, with the device wrapped when wrap is given (qhx_model_open_wrapped). */
static qhx_status open_model(const char *path, const qhx_model_params *params, const qhx_device_wrap *wrap,
                             qhx_model **out, qhx_error *err) {
    if (!out) return qhx_fail(err, QHX_E_ARG, "model open: out is NULL");
    *out = NULL;
    if (!path) return qhx_fail(err, QHX_E_ARG, "model path is NULL");
    qhx_model_params p = params ? *params : qhx_model_default_params();
    qhx_status rc = check_params(&p, err);
    const qhx_backend *be = NULL;
    const qhx_device_desc *dev = NULL;
    if (rc || (rc = qhx_backend_find(p.backend, &be, &dev, err))) return rc;
    if (wrap && !dev) return qhx_fail(err, QHX_E_UNSUPPORTED, "backend '%s' runs whole graphs: no device to watch", be->name);
    qhx_model *m = qhx_calloc(1, sizeof *m);
    if (!m) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    atomic_init(&m->refs, 1);
    m->params = p;
    pthread_mutex_init(&m->gm_lock, NULL);
    m->params.backend = NULL; /* the caller's string need not outlive the call */
    if (dev && p.backend && strlen(p.backend) < sizeof m->device_spec) { /* a device's index ("opencl:1") */
        memcpy(m->device_spec, p.backend, strlen(p.backend) + 1);
        m->params.backend = m->device_spec;
    }
    m->backend = be;
    m->device = dev;
    if (wrap) m->wrap = *wrap;
    qhx_plan_resolved *r = qhx_malloc(sizeof *r); /* a config is 8 KB: not on the stack */
    if (!r) {
        rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
        goto fail;
    }
    if ((rc = open_plan(m, path, err)) == QHX_OK && (rc = qhx_plan_resolve(m->plan, r, err)) == QHX_OK) {
        m->family = r->family;
        m->host_op = r->host_op;
        m->cfg = r->cfg;
        m->cfg.llama_cpp_layout = m->plan->artifacts[QHX_ART_WEIGHTS].format == QHX_ART_GGUF;
        /* a checkpoint folder with a tower: images as the caller asks, else as the family says */
        if (m->plan->source == QHX_PLAN_FROM_CHECKPOINT && m->cfg.has_vision && m->plan->vision_tensors) {
            /* a GGUF model's tower file was asked for by name: images unless told otherwise */
            const bool named_tower = m->plan->artifacts[QHX_ART_VISION].format == QHX_ART_GGUF;
            bool images = p.vision > 0 || (p.vision == 0 && (m->family->folder_images || named_tower));
            m->host_op = qhx_family_default_host_op(m->family, images);
        }
    }
    qhx_free(r);
    if (rc) goto fail;
    set_context(m);
    m->kv_cache = p.kv_cache ? p.kv_cache : m->plan->kv_cache ? m->plan->kv_cache : QHX_KV_BUILTIN;
    if ((rc = load_graphs(m, err)) || (rc = load_tokenizer(m, err))) goto fail;
    *out = m;
    return QHX_OK;
fail:
    qhx_model_free(m);
    return rc;
}

qhx_status qhx_model_open(const char *path, const qhx_model_params *params, qhx_model **out, qhx_error *err) {
    return open_model(path, params, NULL, out, err);
}

qhx_status qhx_model_open_wrapped(const char *path, const qhx_model_params *params, const qhx_device_wrap *wrap,
                                  qhx_model **out, qhx_error *err) {
    return open_model(path, params, wrap, out, err);
}

static void model_destroy(qhx_model *m) {
    if (m->backend) m->backend->unload(m->graphs);
    qhx_tok_free(m->tok);
    qhx_plan_free(m->plan);
    qhx_gm_vocab_free(m->gm_vocab);
    pthread_mutex_destroy(&m->gm_lock);
    qhx_free(m);
}

/* The count is the one field of a model that changes after open, hence the casts: every other
   call takes it as const. */
const qhx_model *qhx_model_retain(const qhx_model *m) {
    if (m) atomic_fetch_add(&((qhx_model *)m)->refs, 1);
    return m;
}

void qhx_model_release(const qhx_model *m) {
    if (m && atomic_fetch_sub(&((qhx_model *)m)->refs, 1) == 1) model_destroy((qhx_model *)m);
}

void qhx_model_free(qhx_model *m) { qhx_model_release(m); }

const qhx_model_config *qhx_model_get_config(const qhx_model *m) { return &m->cfg; }
int64_t qhx_model_n_vocab(const qhx_model *m) { return m ? m->cfg.vocab_size : 0; }
void qhx_model_backend_info(const qhx_model *m, qhx_backend_info *out) { m->backend->info(m->graphs, out); }

bool qhx_model_op_profile(const qhx_model *m, qhx_op_profile *out, bool clear) {
    if (m->backend->profile) return m->backend->profile(m->graphs, out, clear);
    memset(out, 0, sizeof *out);
    return false;
}
qhx_chat_family qhx_model_chat_style(const qhx_model *m) { return m->family->chat; }
qhx_token qhx_model_turn_end(const qhx_model *m) {
    const qhx_chat_style *f = m ? m->family->chat : NULL;
    return f && f->turn_end && m->tok ? qhx_tok_token_to_id(m->tok, f->turn_end) : -1;
}

const qhx_st_set *qhx_model_tensors(const qhx_model *m) { return m->backend->tensors(m->graphs); }

const qhx_st_tensor *qhx_model_find_tensor(const qhx_model *m, const char *name) {
    const qhx_st_set *set = qhx_model_tensors(m);
    return set ? qhx_st_find(set, name) : NULL;
}

/* ---- images ------------------------------------------------------------------------------- */

/* The preprocessing with at most max_tokens image tokens (0: no cap): smart_resize's pixel
 * ceiling lowered to max_tokens merged patches, so the image is scaled down before the tower. */
static qhx_status capped_prep(const qhx_model *m, int64_t max_tokens, qhx_image_prep *prep, qhx_error *err) {
    *prep = m->prep;
    if (max_tokens <= 0) return QHX_OK;
    int64_t side = prep->patch_size * prep->merge_size;
    if (max_tokens > INT64_MAX / (side * side)) return QHX_OK;
    int64_t cap = max_tokens * side * side;
    if (prep->do_resize && cap < prep->min_pixels)
        return qhx_fail(err, QHX_E_LIMIT, "an image takes at least %lld tokens (min_pixels %lld), only %lld fit",
                        (long long)((prep->min_pixels + side * side - 1) / (side * side)), (long long)prep->min_pixels,
                        (long long)max_tokens);
    if (cap < prep->max_pixels) prep->max_pixels = cap;
    return QHX_OK;
}

/* Preprocess on the host, then the vision graph into rows the host allocates. */
static qhx_status encode_with(const qhx_model *m, const qhx_image *img, const qhx_image_prep *prep,
                              int64_t max_tokens, qhx_image_embed *out, qhx_error *err) {
    qhx_image_patches p;
    qhx_status rc = qhx_image_preprocess(img, prep, &p, err);
    if (rc) return rc;
    int64_t M = prep->merge_size;
    int64_t n_tokens = (p.grid_h / M) * (p.grid_w / M);
    if (max_tokens > 0 && n_tokens > max_tokens) { /* not resized (do_resize false): cannot be capped */
        qhx_image_patches_deinit(&p);
        return qhx_fail(err, QHX_E_LIMIT, "the image takes %lld tokens, only %lld fit", (long long)n_tokens,
                        (long long)max_tokens);
    }
    out->grid_h = p.grid_h;
    out->grid_w = p.grid_w;
    out->n_tokens = n_tokens;
    out->row_width = m->cfg.image_row_width;
    size_t bytes;
    if (!qhx_size_mul((size_t)out->n_tokens * (size_t)out->row_width, sizeof(float), &bytes) ||
        !(out->embd = qhx_malloc(bytes))) {
        rc = qhx_fail(err, QHX_E_NOMEM, "image: out of memory for %lld token embeddings", (long long)out->n_tokens);
    } else {
        const qhx_graph_io io = {.pixels = &p, .image = out};
        rc = m->backend->run(m->graphs, NULL, QHX_GRAPH_VISION, &io, err);
    }
    qhx_image_patches_deinit(&p);
    if (rc) qhx_image_embed_deinit(out);
    return rc;
}

static qhx_status need_images(const qhx_model *m, const char *what, qhx_error *err) {
    if (!m) return qhx_fail(err, QHX_E_ARG, "image: model is NULL");
    if (m->images) return QHX_OK;
    if (m->cfg.has_vision)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: the run plan's host-op %s takes no images (use the -vlm- manifest)",
                        what, m->host_op->name);
    return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: this model takes no images (host-op %s)", what, m->host_op->name);
}

qhx_status qhx_model_image_load(const qhx_model *m, const char *path, int64_t max_tokens, qhx_image_embed *out,
                                qhx_error *err) {
    *out = (qhx_image_embed){0};
    qhx_status rc = need_images(m, path, err);
    if (rc) return rc;
    qhx_image_prep prep;
    if ((rc = capped_prep(m, max_tokens, &prep, err))) {
        qhx_fail_prefix(err, "%s", path);
        return rc;
    }
    qhx_image img;
    if ((rc = qhx_image_load(path, NULL, &img, err))) return rc;
    rc = encode_with(m, &img, &prep, max_tokens, out, err);
    qhx_image_deinit(&img);
    if (rc && rc != QHX_E_NOMEM) qhx_fail_prefix(err, "%s", path);
    return rc;
}

/* Tokens each decoded image takes uncapped (smart_resize), then the budget split into caps. */
static qhx_status image_caps(const qhx_model *m, const qhx_image *img, int n, int64_t budget, int64_t *cap,
                             qhx_error *err) {
    const qhx_image_prep *p = &m->prep;
    const int64_t side = p->patch_size * p->merge_size;
    int64_t *need = qhx_malloc((size_t)n * sizeof *need);
    if (!need) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    qhx_status rc = QHX_OK;
    for (int k = 0; k < n && !rc; k++) {
        int64_t h = img[k].height, w = img[k].width;
        if (p->do_resize) rc = qhx_smart_resize(img[k].height, img[k].width, side, p->min_pixels, p->max_pixels, &h, &w, err);
        need[k] = (h / side) * (w / side);
    }
    int64_t min_tokens = p->do_resize ? (p->min_pixels + side * side - 1) / (side * side) : 1;
    if (!rc) rc = qhx_image_budget_split(need, n, budget, min_tokens, cap, err);
    qhx_free(need);
    return rc;
}

qhx_status qhx_model_images_load(const qhx_model *m, const char *const *paths, int n, int64_t budget,
                                 qhx_image_embed *out, qhx_error *err) {
    if (n < 1 || n > QHX_MROPE_MAX_IMAGES || !paths || !out)
        return qhx_fail(err, QHX_E_ARG, "images: %d images (1 to %d)", n, QHX_MROPE_MAX_IMAGES);
    memset(out, 0, (size_t)n * sizeof *out);
    for (int k = 0; k < n; k++)
        if (!paths[k]) return qhx_fail(err, QHX_E_ARG, "images: image %d has no path", k + 1);
    qhx_status rc = need_images(m, paths[0], err);
    if (rc) return rc;
    qhx_image *img = qhx_calloc((size_t)n, sizeof *img);
    int64_t *cap = qhx_calloc((size_t)n, sizeof *cap);
    if (!img || !cap) rc = qhx_fail(err, QHX_E_NOMEM, "out of memory");
    /* every image decoded first: the split needs all their sizes before any is encoded */
    for (int k = 0; k < n && !rc; k++) rc = qhx_image_load(paths[k], NULL, &img[k], err);
    if (!rc && budget > 0 && (rc = image_caps(m, img, n, budget, cap, err))) qhx_fail_prefix(err, "%d image%s", n, n == 1 ? "" : "s");
    for (int k = 0; k < n && !rc; k++) {
        qhx_image_prep prep;
        if (!(rc = capped_prep(m, cap[k], &prep, err))) rc = encode_with(m, &img[k], &prep, cap[k], &out[k], err);
        if (rc && rc != QHX_E_NOMEM) qhx_fail_prefix(err, "%s", paths[k]);
    }
    for (int k = 0; img && k < n; k++) qhx_image_deinit(&img[k]);
    qhx_free(img);
    qhx_free(cap);
    if (rc)
        for (int k = 0; k < n; k++) qhx_image_embed_deinit(&out[k]);
    return rc;
}

void qhx_video_embed_deinit(qhx_video_embed *v) {
    if (!v) return;
    for (int i = 0; v->frames && i < v->n_frames; i++) qhx_image_embed_deinit(&v->frames[i]);
    qhx_free(v->frames);
    qhx_free(v->text);
    memset(v, 0, sizeof *v);
}

/* The family's video pad token (its chat style), or NULL. */
static const char *video_pad_text(const qhx_model *m) {
    const qhx_chat_style *f = qhx_model_chat_style(m);
    return f ? f->video_pad : NULL;
}

int32_t qhx_model_video_pad(const qhx_model *m) {
    const char *pad = m ? video_pad_text(m) : NULL;
    return pad && m->tok ? qhx_tok_token_to_id(m->tok, pad) : -1;
}

/* The processor's expansion: per temporal group "<t seconds>" + start + pads + end. */
static qhx_status video_text(const qhx_model *m, const qhx_video_patches *p, int64_t per_group, char **text,
                             qhx_error *err) {
    const qhx_chat_style *f = qhx_model_chat_style(m);
    const char *start = f && f->image_start ? f->image_start : "";
    const char *end = f && f->image_end ? f->image_end : "";
    const char *pad = f && f->video_pad ? f->video_pad : "";
    size_t each = strlen(start) + strlen(end) + 32 + (size_t)per_group * strlen(pad);
    size_t cap = each * (size_t)p->grid_t + 1, n = 0;
    char *out = qhx_malloc(cap);
    if (!out) return qhx_fail(err, QHX_E_NOMEM, "video: out of memory for the prompt text");
    out[0] = 0;
    for (int64_t g = 0; g < p->grid_t; g++) {
        n += (size_t)qhx_video_timestamp_text(p->timestamps[g], out + n, cap - n);
        n += (size_t)snprintf(out + n, cap - n, "%s", start);
        for (int64_t q = 0; q < per_group; q++) n += (size_t)snprintf(out + n, cap - n, "%s", pad);
        n += (size_t)snprintf(out + n, cap - n, "%s", end);
    }
    *text = out;
    return QHX_OK;
}

qhx_video_prep qhx_model_video_prep(const qhx_model *m, double fps, int64_t max_frames) {
    qhx_video_prep prep = m->vprep;
    if (fps > 0) prep.fps = fps;
    if (max_frames > 0) prep.max_frames = max_frames;
    return prep;
}

qhx_status qhx_model_video_text(const qhx_model *m, const qhx_video_patches *plan, const qhx_video_prep *prep,
                                char **text, int64_t *per_group, qhx_error *err) {
    const int64_t M = prep->img.merge_size;
    *per_group = (plan->grid_h / M) * (plan->grid_w / M);
    return video_text(m, plan, *per_group, text, err);
}

/* The checks every video load makes first: the model takes images and has a video pad. */
static qhx_status need_video(const qhx_model *m, const qhx_video_src *src, const char *path, int32_t *vpad,
                             qhx_error *err) {
    qhx_status rc = need_images(m, path, err);
    if (rc) return rc;
    if (!src || (!src->path && !src->buf)) return qhx_fail(err, QHX_E_ARG, "video: no file");
    *vpad = qhx_model_video_pad(m);
    if (*vpad < 0) return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: the model's vocabulary has no video pad token", path);
    return QHX_OK;
}

qhx_status qhx_model_video_check(const qhx_model *m, const qhx_video_src *src, qhx_error *err) {
    const char *path = src && src->label ? src->label : src && src->path ? src->path : "video";
    int32_t vpad;
    return need_video(m, src, path, &vpad, err);
}

/* The patches p through the tower group by group into out (frames, text, stats). */
static qhx_status encode_video(const qhx_model *m, const qhx_video_patches *p, const qhx_video_prep *prep,
                               int32_t vpad, const char *path, qhx_video_embed *out, qhx_error *err) {
    int64_t per_group;
    qhx_status rc = qhx_model_video_text(m, p, prep, &out->text, &per_group, err);
    if (rc) return rc;
    out->frames = qhx_calloc((size_t)p->grid_t, sizeof *out->frames);
    if (!out->frames) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
    out->n_frames = (int)p->grid_t;
    out->n_tokens = per_group * p->grid_t;
    out->n_sampled = p->n_sampled;
    out->grid_t = p->grid_t;
    out->grid_h = p->grid_h;
    out->grid_w = p->grid_w;
    out->decode_ms = p->decode_ms;
    out->preprocess_ms = p->preprocess_ms;
    const uint64_t t0 = qhx_time_ns();
    /* Qwen3-VL's tower attends within one temporal group (cu_seqlens per frame) and repeats the
     * position table and the rotary per group: a group is encoded as a still image. */
    for (int64_t g = 0; g < p->grid_t && !rc; g++) {
        qhx_image_embed *e = &out->frames[g];
        qhx_image_patches view = {.grid_t = 1, .grid_h = p->grid_h, .grid_w = p->grid_w,
                                  .n_patches = p->grid_h * p->grid_w, .patch_dim = p->patch_dim,
                                  .data = p->data + g * p->grid_h * p->grid_w * p->patch_dim};
        *e = (qhx_image_embed){.grid_h = p->grid_h, .grid_w = p->grid_w, .n_tokens = per_group,
                               .row_width = m->cfg.image_row_width, .pad_id = vpad};
        size_t bytes;
        if (!qhx_size_mul((size_t)per_group * (size_t)e->row_width, sizeof(float), &bytes) || !(e->embd = qhx_malloc(bytes)))
            return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory for %lld token embeddings", path, (long long)per_group);
        const qhx_graph_io io = {.pixels = &view, .image = e};
        rc = m->backend->run(m->graphs, NULL, QHX_GRAPH_VISION, &io, err);
    }
    out->vision_ms = (double)(qhx_time_ns() - t0) / 1e6;
    return rc;
}

qhx_status qhx_model_video_load(const qhx_model *m, const char *path, double fps, int64_t max_frames,
                                qhx_video_embed *out, qhx_error *err) {
    qhx_video_src src = {.path = path};
    return qhx_model_video_load_src(m, &src, fps, max_frames, out, err);
}

qhx_status qhx_model_video_load_src(const qhx_model *m, const qhx_video_src *src, double fps, int64_t max_frames,
                                    qhx_video_embed *out, qhx_error *err) {
    memset(out, 0, sizeof *out);
    const char *path = src && src->label ? src->label : src && src->path ? src->path : "video";
    int32_t vpad = -1;
    qhx_status rc = need_video(m, src, path, &vpad, err);
    if (rc) return rc;
    const qhx_video_prep prep = qhx_model_video_prep(m, fps, max_frames);
    qhx_video_patches p;
    if ((rc = qhx_video_preprocess(src, &prep, NULL, &p, err))) return rc;
    rc = encode_video(m, &p, &prep, vpad, path, out, err);
    qhx_video_patches_deinit(&p);
    if (rc) qhx_video_embed_deinit(out);
    return rc;
}

qhx_status qhx_model_video_load_probed(const qhx_model *m, const qhx_video_src *src, const qhx_video_meta *meta,
                                       double probe_ms, const qhx_video_prep *prep, qhx_video_embed *out,
                                       qhx_error *err) {
    memset(out, 0, sizeof *out);
    const char *path = src && src->label ? src->label : src && src->path ? src->path : "video";
    int32_t vpad = -1;
    qhx_status rc = need_video(m, src, path, &vpad, err);
    if (rc) return rc;
    qhx_video_patches p;
    if ((rc = qhx_video_preprocess_probed(src, meta, prep, NULL, &p, err))) return rc;
    p.decode_ms += probe_ms;
    rc = encode_video(m, &p, prep, vpad, path, out, err);
    qhx_video_patches_deinit(&p);
    if (rc) qhx_video_embed_deinit(out);
    return rc;
}

qhx_status qhx_model_image_encode(const qhx_model *m, const qhx_image *img, qhx_image_embed *out, qhx_error *err) {
    *out = (qhx_image_embed){0};
    qhx_status rc = need_images(m, "image", err);
    return rc ? rc : encode_with(m, img, &m->prep, 0, out, err);
}

/* ---- sequences ---------------------------------------------------------------------------- */

qhx_status qhx_model_state_create(const qhx_model *m, const qhx_seq_params *params, qhx_seq **out,
                                  qhx_error *err) {
    *out = NULL;
    if (!m || !params) return qhx_fail(err, QHX_E_ARG, "state: model and params are required");
    if ((unsigned)params->kv_cache > QHX_KV_Q8)
        return qhx_fail(err, QHX_E_ARG, "state: kv_cache %d is not one of default, f32, f16, q8", (int)params->kv_cache);
    const qhx_seq_params sp = {.n_ctx = params->n_ctx, .n_batch = params->n_batch,
                               .kv_cache = params->kv_cache ? params->kv_cache : m->kv_cache};
    qhx_seq *st = NULL;
    qhx_status rc = m->backend->seq_create(m->graphs, &sp, &st, err);
    if (rc) return rc;
    st->model = m;
    *out = st;
    return QHX_OK;
}

void qhx_model_state_free(qhx_seq *st) {
    if (!st) return;
    st->model->backend->seq_free(st);
}

void qhx_model_state_reset(qhx_seq *st) { st->model->backend->seq_reset(st); }

static qhx_seq_info info(const qhx_seq *st) {
    qhx_seq_info i;
    st->model->backend->seq_info(st, &i);
    return i;
}

int64_t qhx_model_state_n_past(const qhx_seq *st) { return info(st).n_past; }
int64_t qhx_model_state_n_ctx(const qhx_seq *st) { return info(st).n_ctx; }
qhx_kv_type qhx_model_state_kv_type(const qhx_seq *st) { return info(st).kv_type; }
void qhx_model_state_set_n_past(qhx_seq *st, int64_t n) { st->model->backend->seq_set_n_past(st, n); }

int qhx_model_state_regions(const qhx_seq *st, qhx_state_region *out, int cap) {
    return st->model->backend->seq_regions(st, out, cap);
}

qhx_status qhx_model_forward(const qhx_model *m, qhx_seq *st, const int32_t *ids, int64_t n,
                             const qhx_forward_opts *opts, qhx_error *err) {
    if (!m || !st || st->model != m) return qhx_fail(err, QHX_E_ARG, "forward: state does not belong to this model");
    static const qhx_forward_opts none = {0};
    if (!opts) opts = &none;
    const bool sequential = (opts->flags & QHX_FWD_SEQUENTIAL) != 0;
    const qhx_graph_io io = {.ids = ids, .n = n, .logits = opts->logits,
                             .logits_all = (opts->flags & QHX_FWD_LOGITS_ALL) != 0, .sequential = sequential,
                             .abort_cb = opts->abort_cb, .abort_user = opts->abort_cb_user,
                             .layer_cb = opts->layer_cb, .layer_cb_user = opts->layer_cb_user};
    return m->backend->run(m->graphs, st, n == 1 ? QHX_GRAPH_DECODE : QHX_GRAPH_PREFILL, &io, err);
}

qhx_status qhx_model_decode_multi(const qhx_model *m, qhx_seq *const *sts, const int32_t *ids, int64_t n,
                                  float *const *logits, qhx_error *err) {
    if (!m || n < 1 || n > QHX_MAX_BATCH || !sts || !ids || !logits)
        return qhx_fail(err, QHX_E_ARG, "decode: 1 to %d states, ids and logits are required", QHX_MAX_BATCH);
    for (int64_t i = 0; i < n; i++) {
        if (!sts[i] || sts[i]->model != m) return qhx_fail(err, QHX_E_ARG, "decode: state %lld does not belong to this model", (long long)i);
        for (int64_t k = 0; k < i; k++)
            if (sts[k] == sts[i]) return qhx_fail(err, QHX_E_ARG, "decode: state %lld appears twice", (long long)i);
        qhx_seq_info inf;
        m->backend->seq_info(sts[i], &inf);
        if (inf.n_past >= inf.n_ctx)
            return qhx_fail(err, QHX_E_LIMIT, "decode: state %lld is full (%lld tokens)", (long long)i, (long long)inf.n_ctx);
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return qhx_fail(err, QHX_E_ARG, "decode: id %d is outside the vocabulary [0, %lld)", ids[i],
                            (long long)m->cfg.vocab_size);
    }
    if (!m->backend->run_decode_multi)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "decode: the %s backend has no batched step", m->backend->name);
    return m->backend->run_decode_multi(m->graphs, sts, ids, n, logits, err);
}

qhx_status qhx_model_lm_head(const qhx_model *m, const float *hidden, int64_t n, float *logits, qhx_error *err) {
    const qhx_graph_io io = {.hidden = hidden, .n = n, .logits = logits};
    return m->backend->run(m->graphs, NULL, QHX_GRAPH_LM_HEAD, &io, err);
}

qhx_status qhx_model_final_norm(const qhx_model *m, const float *hidden, int64_t n, float *out, qhx_error *err) {
    const qhx_graph_io io = {.hidden = hidden, .n = n, .hidden_out = out};
    return m->backend->run(m->graphs, NULL, QHX_GRAPH_LM_HEAD, &io, err);
}

bool qhx_model_has_mtp(const qhx_model *m) { return m->backend->has_graph(m->graphs, QHX_GRAPH_MTP); }

qhx_status qhx_model_mtp(const qhx_model *m, qhx_seq *st, int64_t pos0, const float *hidden,
                         const int32_t *next_ids, int64_t n, float *logits, qhx_error *err) {
    if (!st) return qhx_fail(err, QHX_E_ARG, "mtp: state is NULL");
    const qhx_graph_io io = {.hidden = hidden, .ids = next_ids, .n = n, .pos0 = pos0, .logits = logits};
    return m->backend->run(m->graphs, st, QHX_GRAPH_MTP, &io, err);
}

qhx_status qhx_model_mtp_ex(const qhx_model *m, qhx_seq *st, int64_t pos0, const float *hidden, bool normed,
                            const int32_t *next_ids, int64_t n, float *logits, float *hidden_out, qhx_error *err) {
    if (!st) return qhx_fail(err, QHX_E_ARG, "mtp: state is NULL");
    const qhx_graph_io io = {.hidden = hidden, .ids = next_ids, .n = n, .pos0 = pos0, .logits = logits,
                             .hidden_normed = normed, .hidden_out = hidden_out};
    return m->backend->run(m->graphs, st, QHX_GRAPH_MTP, &io, err);
}

bool qhx_model_can_verify(const qhx_model *m) {
    return m->backend->seq_keep && m->backend->has_graph(m->graphs, QHX_GRAPH_VERIFY);
}

qhx_status qhx_model_verify(const qhx_model *m, qhx_seq *st, const int32_t *ids, int64_t n, float *logits,
                            float *hidden, qhx_error *err) {
    return qhx_model_verify_multi(m, &st, &ids, &n, 1, &logits, &hidden, err);
}

/* State i of a verify: m's, not an earlier one, room for its n tokens, every id in the vocabulary. */
static qhx_status verify_arg(const qhx_model *m, qhx_seq *const *sts, const int32_t *ids, int64_t n, int64_t i,
                             qhx_error *err) {
    if (!sts[i] || sts[i]->model != m) return qhx_fail(err, QHX_E_ARG, "verify: state %lld does not belong to this model", (long long)i);
    for (int64_t k = 0; k < i; k++)
        if (sts[k] == sts[i]) return qhx_fail(err, QHX_E_ARG, "verify: state %lld appears twice", (long long)i);
    if (n < 1 || n > QHX_VERIFY_MAX || !ids) /* the count first: ids holds n */
        return qhx_fail(err, QHX_E_ARG, "verify: state %lld: %lld tokens, 1 to %d", (long long)i, (long long)n,
                        QHX_VERIFY_MAX);
    qhx_seq_info inf;
    m->backend->seq_info(sts[i], &inf);
    if (n > inf.n_ctx - inf.n_past)
        return qhx_fail(err, QHX_E_LIMIT, "verify: state %lld: %lld tokens after %lld exceed the context of %lld",
                        (long long)i, (long long)n, (long long)inf.n_past, (long long)inf.n_ctx);
    for (int64_t j = 0; j < n; j++)
        if (ids[j] < 0 || ids[j] >= m->cfg.vocab_size)
            return qhx_fail(err, QHX_E_ARG, "verify: id %d is outside the vocabulary [0, %lld)", ids[j],
                            (long long)m->cfg.vocab_size);
    return QHX_OK;
}

qhx_status qhx_model_verify_multi(const qhx_model *m, qhx_seq *const *sts, const int32_t *const *ids, const int64_t *n,
                                  int64_t ns, float *const *logits, float *const *hidden, qhx_error *err) {
    if (!m || ns < 1 || ns > QHX_MAX_BATCH || !sts || !ids || !n || !logits)
        return qhx_fail(err, QHX_E_ARG, "verify: 1 to %d states, ids, counts and logits are required", QHX_MAX_BATCH);
    if (!qhx_model_can_verify(m)) return qhx_fail(err, QHX_E_UNSUPPORTED, "verify: this model has no verify graph");
    int64_t rows = 0;
    for (int64_t i = 0; i < ns; i++) {
        qhx_status rc = verify_arg(m, sts, ids[i], n[i], i, err);
        if (rc) return rc;
        if (!logits[i]) return qhx_fail(err, QHX_E_ARG, "verify: state %lld: no logits", (long long)i);
        if (n[i] > QHX_MAX_BATCH - rows)
            return qhx_fail(err, QHX_E_ARG, "verify: more than %d rows in all", QHX_MAX_BATCH);
        rows += n[i];
    }
    if (m->backend->run_verify_multi) return m->backend->run_verify_multi(m->graphs, sts, ids, n, ns, logits, hidden, err);
    if (ns > 1) return qhx_fail(err, QHX_E_UNSUPPORTED, "verify: the %s backend verifies one state at a time", m->backend->name);
    const qhx_graph_io io = {.ids = ids[0], .n = n[0], .logits = logits[0], .hidden_out = hidden ? hidden[0] : NULL};
    return m->backend->run(m->graphs, sts[0], QHX_GRAPH_VERIFY, &io, err);
}

qhx_status qhx_model_verify_keep(const qhx_model *m, qhx_seq *st, int64_t k, qhx_error *err) {
    if (!st) return qhx_fail(err, QHX_E_ARG, "verify: state is NULL");
    if (!qhx_model_can_verify(m)) return qhx_fail(err, QHX_E_UNSUPPORTED, "verify: this model has no verify graph");
    return m->backend->seq_keep(st, k, err);
}

qhx_status qhx_model_state_attach(qhx_seq *st, const qhx_image_embed *images, int n_images,
                                  const int32_t *ids, int64_t n, qhx_error *err) {
    if (!st) return qhx_fail(err, QHX_E_ARG, "attach: state is NULL");
    return st->model->backend->seq_attach(st, images, n_images, ids, n, err);
}

int64_t qhx_model_state_positions(const qhx_seq *st, const int64_t **pos) {
    *pos = NULL;
    return st ? st->model->backend->seq_positions(st, pos) : 0;
}
