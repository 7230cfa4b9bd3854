/* backends/cpu.c: the CPU backend. Loading opens the plan's safetensors artifacts as one tensor
 * set (leaving out what no graph of the plan reads), creates the CPU device (devices/cpu: the
 * kernel table for this CPU and the thread pool), then lets the family bind its weights into a
 * qhx_net whose ops and state run on that device. "prefill" and
 * "decode" run the family's forward pass (batched projections + chunked delta rule, or the
 * recurrent decode step) with the lm-head fused into both; "lm_head" runs the final norm and
 * head alone; "vision" runs the family's vision tower. A sequence is the family's qhx_seq. */
#include "backends/cpu.h"

#include "core/alloc.h"
#include "core/file.h"
#include "devices/cpu/cpu.h"
#include "devices/profile.h"

#include <string.h>
#include <sys/stat.h>

struct qhx_graphs {
    qhx_net net;
    qhx_device *dev;
    qhx_device *prof; /* the timing wrapper the net runs on (QHX_PROFILE), or NULL */
    qhx_device *wrap; /* the loader's wrapper (qhx_backend_load_args.wrap) around dev or prof, or NULL */
};

/* A CPU sequence is the net's (families/family.h qhx_seq), handed out as it is. */

/* ---- loading ---------------------------------------------------------------------------- */

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

/* The weight formats whose matmuls quantize activations to int8 (kernels.h bit mask). */
static unsigned int8_prefill_formats(qhx_prefill_math math) {
    switch (math) {
    case QHX_PREFILL_MATH_INT8: return 1u << QHX_W_Q8 | 1u << QHX_W_Q4 | 1u << QHX_W_Q6;
    case QHX_PREFILL_MATH_F32: return 0;
    default: return 1u << QHX_W_Q4 | 1u << QHX_W_Q6; /* QHX_PREFILL_MATH_DEFAULT: include/qhx.h says why */
    }
}

/* Open every safetensors artifact of the plan (decoder, embedding, lm-head, vision) as one set.
 * Tensors no graph of the plan reads are left out by name prefix: the multi-token-prediction
 * block (never used) and the vision tower unless the host-op feeds images. They are never read
 * or paged in (qhx_st_open_select), which is what keeps a released Qwen3.5 folder opened for
 * text at the decoder + head (BENCHMARKS.md, "Memory"). */
/* A GGUF file's tensors under the family's names (families/gguf.c); the MTP block and the
 * vision tower left out as for safetensors. */
static qhx_status open_gguf_weights(const qhx_backend_load_args *a, const char *path, qhx_st_set **out,
                                    qhx_error *err) {
    const char *skip[3] = {a->mtp ? NULL : "mtp.", NULL, NULL};
    if (!a->vision) skip[a->mtp ? 0 : 1] = a->family->vision_prefix;
    const qhx_plan_file *tower = &a->plan->artifacts[QHX_ART_VISION];
    const char *mmproj = a->vision && tower->present && tower->format == QHX_ART_GGUF ? tower->path : NULL;
    return qhx_family_gguf_weights(a->family, a->cfg, path, mmproj, file_mode(a->params->weights), skip, out, err);
}

static qhx_status open_weights(const qhx_backend_load_args *a, qhx_st_set **out, qhx_error *err) {
    const qhx_plan *plan = a->plan;
    const char *paths[QHX_ART_ROLE_COUNT];
    int n = 0;
    for (int r = 0; r < QHX_ART_ROLE_COUNT; r++) {
        const qhx_plan_file *f = &plan->artifacts[r];
        if (!f->present || (r == QHX_ART_MTP && !a->mtp)) continue; /* the block's file only when asked for */
        if (f->format == QHX_ART_GGUF) return open_gguf_weights(a, f->path, out, err);
        if (f->format != QHX_ART_SAFETENSORS)
            return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: artifacts.%s: format '%s' is not supported by the CPU backend",
                            plan->label, qhx_art_role_name((qhx_art_role)r), qhx_art_format_name(f->format));
        if (!f->path) return qhx_fail(err, QHX_E_ARG, "%s: artifacts.%s: no path", plan->label, qhx_art_role_name((qhx_art_role)r));
        paths[n++] = f->path;
    }
    const qhx_model_params *p = a->params;
    qhx_load_progress pr = {.fn = p->load_progress, .user = p->load_progress_user};
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(paths[i], &st) == 0 && S_ISREG(st.st_mode)) pr.total += (uint64_t)st.st_size;
    }
    const char *skip[3] = {a->mtp ? NULL : "mtp.", NULL, NULL};
    if (!a->vision) skip[a->mtp ? 0 : 1] = a->family->vision_prefix;
    /* total counts whole files; the left-out tensors' bytes are never loaded, so done may end short of it */
    return qhx_st_open_select(paths, n, file_mode(p->weights), skip, p->load_progress ? &pr : NULL, out, err);
}

static void cpu_unload(qhx_graphs *g) {
    if (!g) return;
    if (g->net.vt && g->net.impl) g->net.vt->free_impl(g->net.impl);
    if (g->wrap) g->wrap->op->destroy(g->wrap);
    if (g->prof) g->prof->op->destroy(g->prof);
    if (g->dev) g->dev->op->destroy(g->dev);
    qhx_free(g);
}

static qhx_status cpu_load(const qhx_backend_load_args *a, qhx_graphs **out, qhx_error *err) {
    *out = NULL;
    const qhx_model_params *p = a->params;
    qhx_graphs *g = qhx_calloc(1, sizeof *g);
    if (!g) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    const qhx_device_params dp = {
        .max_isa = p->max_isa,
        .int8_prefill_formats = int8_prefill_formats(p->prefill_math),
        .int8_decode_formats = p->decode_math == QHX_PREFILL_MATH_F32 ? 0 : 1u << QHX_W_Q4 | 1u << QHX_W_Q6,
        .n_threads = p->n_threads,
        .spec = p->backend,
    };
    g->net.family = a->family;
    g->net.cfg = *a->cfg;
    qhx_st_set *set = NULL;
    const qhx_device_desc *dd = a->device ? a->device : qhx_device_find("cpu");
    qhx_status rc = dd->create(&dp, &g->dev, err); /* first: families keep a pointer to it */
    if (rc == QHX_OK && qhx_profile_wanted()) rc = qhx_profile_wrap(g->dev, &g->prof, err);
    if (rc == QHX_OK && a->wrap) rc = a->wrap->fn(a->wrap->user, g->prof ? g->prof : g->dev, &g->wrap, err);
    if (rc == QHX_OK) {
        g->net.dev = g->wrap ? g->wrap : g->prof ? g->prof : g->dev;
        rc = open_weights(a, &set, err);
    }
    if (rc == QHX_OK) {
        const qhx_net_bind_args ba = {.label = a->plan->label, .vision = a->vision, .mtp = a->mtp};
        g->net.weights = set;
        rc = a->family->bind(&g->net, set, &ba, err); /* owns set from here on, also on failure */
    }
    if (rc) {
        cpu_unload(g);
        return rc;
    }
    *out = g;
    return QHX_OK;
}

static bool cpu_has_graph(const qhx_graphs *g, qhx_graph which) {
    switch (which) {
    case QHX_GRAPH_PREFILL:
    case QHX_GRAPH_DECODE: return true;
    case QHX_GRAPH_LM_HEAD: return g->net.vt->lm_head != NULL;
    case QHX_GRAPH_VISION: return g->net.vt->encode_image != NULL && g->net.cfg.has_vision; /* bound */
    case QHX_GRAPH_MTP: return g->net.vt->has_mtp != NULL && g->net.vt->has_mtp(&g->net);
    case QHX_GRAPH_VERIFY: return g->net.vt->verify_multi != NULL && g->net.vt->verify_keep != NULL;
    case QHX_GRAPH_COUNT: break;
    }
    return false;
}

static void cpu_info(const qhx_graphs *g, qhx_backend_info *out) {
    qhx_device_info di;
    g->dev->op->info(g->dev, &di);
    *out = (qhx_backend_info){.n_threads = di.n_threads, .isa = di.isa};
}

const qhx_kernels *qhx_backend_cpu_kernels(const qhx_graphs *g) {
    return strcmp(g->dev->name, "cpu") ? NULL : qhx_cpu_device_kernels(g->dev);
}

static bool cpu_profile(const qhx_graphs *g, qhx_op_profile *out, bool clear) {
    return qhx_profile_read(g->prof, out, clear);
}

static qhx_status cpu_seq_keep(qhx_seq *s, int64_t k, qhx_error *err) {
    if (!s->m->vt->verify_keep) return qhx_fail(err, QHX_E_UNSUPPORTED, "verify: this family cannot cut back");
    return qhx_net_sync(s->m, s->m->vt->verify_keep(s, k, err), err);
}

static const qhx_st_set *cpu_tensors(const qhx_graphs *g) { return g->net.weights; }

/* ---- sequences -------------------------------------------------------------------------- */

static qhx_status cpu_seq_create(const qhx_graphs *g, const qhx_seq_params *p, qhx_seq **out, qhx_error *err) {
    return qhx_net_state_create(&g->net, p, out, err);
}

static void cpu_seq_free(qhx_seq *s) { qhx_net_state_free(s); }
static void cpu_seq_reset(qhx_seq *s) { qhx_net_state_reset(s); }

static void cpu_seq_info(const qhx_seq *s, qhx_seq_info *out) {
    *out = (qhx_seq_info){.n_past = s->n_past, .n_ctx = s->n_ctx, .kv_type = s->kv_type};
}

static void cpu_seq_set_n_past(qhx_seq *s, int64_t n) {
    if (n >= 0 && n <= s->n_ctx) s->n_past = n;
}

static int cpu_seq_regions(const qhx_seq *s, qhx_state_region *out, int cap) {
    return qhx_net_state_regions(s, out, cap);
}

static qhx_status cpu_seq_attach(qhx_seq *s, const qhx_image_embed *images, int n_images, const int32_t *ids,
                                 int64_t n, qhx_error *err) {
    return qhx_net_attach(s, images, n_images, ids, n, err);
}

static int64_t cpu_seq_positions(const qhx_seq *s, const int64_t **pos) {
    *pos = NULL;
    return s->m->vt->attached_positions ? s->m->vt->attached_positions(s, pos) : 0;
}

/* ---- graphs ----------------------------------------------------------------------------- */

static qhx_status run_tokens(const qhx_graphs *g, qhx_seq *s, qhx_graph which, const qhx_graph_io *io,
                             qhx_error *err) {
    if (which == QHX_GRAPH_DECODE && io->n != 1)
        return qhx_fail(err, QHX_E_ARG, "decode graph: one token per call, got %lld", (long long)io->n);
    const qhx_forward_opts o = {
        .flags = (io->logits_all ? QHX_FWD_LOGITS_ALL : 0u) | (io->sequential ? QHX_FWD_SEQUENTIAL : 0u),
        .logits = io->logits, .layer_cb = io->layer_cb, .layer_cb_user = io->layer_cb_user,
        .abort_cb = io->abort_cb, .abort_cb_user = io->abort_user};
    return qhx_net_forward(&g->net, s, io->ids, io->n, &o, err);
}

static qhx_status run_graph(const qhx_graphs *g, qhx_seq *s, qhx_graph which, const qhx_graph_io *io,
                            qhx_error *err) {
    if (!cpu_has_graph(g, which))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "cpu backend: this model has no %s graph",
                        which == QHX_GRAPH_VISION ? "vision" : which == QHX_GRAPH_LM_HEAD ? "lm_head"
                        : which == QHX_GRAPH_MTP ? "multi-token-prediction (mtp)"
                        : which == QHX_GRAPH_VERIFY ? "verify" : "such");
    switch (which) {
    case QHX_GRAPH_PREFILL:
    case QHX_GRAPH_DECODE:
        if (!s) return qhx_fail(err, QHX_E_ARG, "%s graph: no sequence", which == QHX_GRAPH_DECODE ? "decode" : "prefill");
        return run_tokens(g, s, which, io, err);
    case QHX_GRAPH_LM_HEAD:
        if (io->n >= 1 && io->hidden && !io->logits && io->hidden_out) {
            if (!g->net.vt->final_norm) return qhx_fail(err, QHX_E_UNSUPPORTED, "lm_head graph: no final norm alone");
            return g->net.vt->final_norm(&g->net, io->hidden, io->n, io->hidden_out, err);
        }
        if (io->n < 1 || !io->hidden || !io->logits) return qhx_fail(err, QHX_E_ARG, "lm_head graph: no rows");
        return g->net.vt->lm_head(&g->net, io->hidden, io->n, io->logits, err);
    case QHX_GRAPH_VISION:
        if (!io->pixels || !io->image) return qhx_fail(err, QHX_E_ARG, "vision graph: no image");
        return g->net.vt->encode_image(&g->net, io->pixels, io->image, err);
    case QHX_GRAPH_MTP:
        if (!s || io->n < 1 || !io->hidden || !io->ids || (!io->logits && !g->net.vt->mtp_ex))
            return qhx_fail(err, QHX_E_ARG, "mtp graph: no sequence or no rows");
        if (io->hidden_normed || io->hidden_out || !io->logits) {
            if (!g->net.vt->mtp_ex) return qhx_fail(err, QHX_E_UNSUPPORTED, "mtp graph: no chained form");
            return g->net.vt->mtp_ex(&g->net, s, io->pos0, io->hidden, io->hidden_normed, io->ids, io->n, io->logits,
                                     io->hidden_out, err);
        }
        return g->net.vt->mtp(&g->net, s, io->pos0, io->hidden, io->ids, io->n, io->logits, err);
    case QHX_GRAPH_VERIFY:
        if (!s || s->m != &g->net || io->n < 1 || !io->ids || !io->logits)
            return qhx_fail(err, QHX_E_ARG, "verify graph: no sequence or no tokens");
        return g->net.vt->verify_multi(&g->net, &s, &io->ids, &io->n, 1, &io->logits, &io->hidden_out, err);
    case QHX_GRAPH_COUNT: break;
    }
    return qhx_fail(err, QHX_E_ARG, "cpu backend: graph %d does not exist", (int)which);
}

/* A graph, then the device's failure if one of its ops failed (devices/device.h, "Errors"). */
static qhx_status cpu_run(const qhx_graphs *g, qhx_seq *s, qhx_graph which, const qhx_graph_io *io, qhx_error *err) {
    return qhx_net_sync(&g->net, run_graph(g, s, which, io, err), err);
}

/* One decode step of several sequences: the family's batched form when it has one. */
static qhx_status cpu_run_decode_multi(const qhx_graphs *g, qhx_seq *const *seqs, const int32_t *ids, int64_t n,
                                       float *const *logits, qhx_error *err) {
    if (!g->net.vt->decode_multi) return qhx_fail(err, QHX_E_UNSUPPORTED, "decode: this family has no batched step");
    return qhx_net_sync(&g->net, g->net.vt->decode_multi(&g->net, seqs, ids, n, logits, err), err);
}

/* The verify of several sequences: one pass of the family's verify graph over all their rows. */
static qhx_status cpu_run_verify_multi(const qhx_graphs *g, qhx_seq *const *seqs, const int32_t *const *ids,
                                       const int64_t *n_ids, int64_t n, float *const *logits, float *const *hidden,
                                       qhx_error *err) {
    if (!cpu_has_graph(g, QHX_GRAPH_VERIFY)) return qhx_fail(err, QHX_E_UNSUPPORTED, "cpu backend: this model has no verify graph");
    for (int64_t i = 0; i < n; i++)
        if (!seqs[i] || seqs[i]->m != &g->net || !ids[i] || !logits[i])
            return qhx_fail(err, QHX_E_ARG, "verify graph: sequence %lld: no sequence, tokens or logits", (long long)i);
    return qhx_net_sync(&g->net, g->net.vt->verify_multi(&g->net, seqs, ids, n_ids, n, logits, hidden, err), err);
}

const qhx_backend QHX_BACKEND_CPU = {
    .name = "cpu",
    .info = cpu_info,
    .load = cpu_load,
    .unload = cpu_unload,
    .has_graph = cpu_has_graph,
    .tensors = cpu_tensors,
    .seq_create = cpu_seq_create,
    .seq_free = cpu_seq_free,
    .seq_reset = cpu_seq_reset,
    .seq_info = cpu_seq_info,
    .seq_set_n_past = cpu_seq_set_n_past,
    .seq_regions = cpu_seq_regions,
    .seq_attach = cpu_seq_attach,
    .seq_positions = cpu_seq_positions,
    .run = cpu_run,
    .run_decode_multi = cpu_run_decode_multi,
    .run_verify_multi = cpu_run_verify_multi,
    .seq_keep = cpu_seq_keep,
    .profile = cpu_profile,
};
