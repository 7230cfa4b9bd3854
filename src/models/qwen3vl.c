/* models/qwen3vl: the Qwen3-VL family in float32 (contracts in qwen3vl.h and model.h;
 * spec/qwen3_vl.md §4-§5). The text decoder is a dense Qwen3 stack: plain RMSNorm
 * x * rsqrt(mean(x^2) + eps) * w (not the zero-centred 1 + w of Qwen3.5), per-head q/k RMSNorm
 * before an interleaved M-RoPE over (t, h, w) positions, GQA, SwiGLU, a tied lm-head. Image-pad
 * rows take the vision tower's merger output and receive DeepStack feature l after layer l. */
#include "models/qwen3vl.h"

#include "core/alloc.h"
#include "core/file.h"
#include "kernels/attn.h"
#include "kernels/ref.h"
#include "kernels/vision.h"
#include "models/family.h"
#include "models/kv.h"
#include "models/par.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- model ------------------------------------------------------------------------------- */

typedef struct vl_layer {
    float *input_norm, *post_norm;             /* (hidden) */
    qhx_weight q_proj, k_proj, v_proj, o_proj; /* (Hq hd, hidden), (Hkv hd, hidden) x2, (hidden, Hq hd) */
    float *q_norm, *k_norm;                    /* (head_dim), shared by the heads */
    qhx_weight gate_proj, up_proj, down_proj;  /* (I, hidden) x2, (hidden, I) */
} vl_layer;

struct qhx_qwen3vl {
    int64_t H, I, V, L, nh, nkv, hd;  /* hidden, intermediate, vocab, layers, heads, kv heads, head dim */
    float eps;
    int64_t image_token_id;
    qhx_st_set *set;
    qhx_wowned owned;
    qhx_weight embed, lm_head;        /* (V, H); lm_head is embed when tied */
    float *final_norm;                /* (H) */
    vl_layer *layers;                 /* (L) */
    float *inv_freq;                  /* (hd / 2): 1 / theta^(2j / hd), float32 as HF */
    unsigned char *axis;              /* (hd / 2): M-RoPE axis of each frequency slot, 0 T 1 H 2 W */
    qhx_vit *vit;                     /* NULL when the checkpoint has no vision tower */
    qhx_image_prep prep;
    const qhx_kernels *kern;          /* the model's op table */
    struct qhx_pool *pool;            /* the model's threads (NULL: the calling thread only) */
};

static void vl_free_impl(void *impl) {
    qhx_qwen3vl *q = impl;
    if (!q) return;
    qhx_vit_free(q->vit);
    qhx_wowned_free(&q->owned);
    qhx_free(q->layers);
    qhx_free(q->inv_freq);
    qhx_free(q->axis);
    qhx_st_free(q->set);
    qhx_free(q);
}

const qhx_qwen3vl *qhx_qwen3vl_of(const qhx_model *m) {
    return m && m->family == QHX_FAMILY_QWEN3_VL ? m->impl : NULL;
}

/* ---- config ------------------------------------------------------------------------------ */

/* Rope settings: the released 2B files use rope_scaling {mrope_section, mrope_interleaved} beside
 * text_config.rope_theta; newer transformers write rope_parameters {rope_theta, ...}. */
static qhx_status parse_rope(const json_t *tc, const char *label, qhx_model_config *c, qhx_error *err) {
    const json_t *rp = json_object_get(tc, "rope_parameters"), *rs = json_object_get(tc, "rope_scaling");
    const json_t *r = json_is_object(rp) ? rp : json_is_object(rs) ? rs : NULL;
    qhx_status rc;
    c->rope_theta = 5000000.0;
    if ((rc = qhx_json_get_num(tc, "rope_theta", label, "text_config", false, &c->rope_theta, err))) return rc;
    c->mrope_section[0] = 24;
    c->mrope_section[1] = c->mrope_section[2] = 20;
    c->mrope_interleaved = true;
    if (!r) return QHX_OK;
    const char *rpath = r == rp ? "text_config.rope_parameters" : "text_config.rope_scaling";
    if ((rc = qhx_json_get_num(r, "rope_theta", label, rpath, false, &c->rope_theta, err))) return rc;
    const char *type = "default";
    if ((rc = qhx_json_get_str(r, "rope_type", label, rpath, false, &type, err))) return rc;
    if (strcmp(type, "default") && strcmp(type, "mrope"))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: %s.rope_type: '%s' is not supported (default)", label, rpath, type);
    const json_t *sec = json_object_get(r, "mrope_section");
    if (sec) {
        if (!json_is_array(sec) || json_array_size(sec) != 3)
            return qhx_fail(err, QHX_E_FORMAT, "%s: %s.mrope_section: expected 3 integers", label, rpath);
        for (size_t i = 0; i < 3; i++) {
            const json_t *v = json_array_get(sec, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4096)
                return qhx_fail(err, QHX_E_FORMAT, "%s: %s.mrope_section[%zu]: expected an integer in [0, 4096]", label, rpath, i);
            c->mrope_section[i] = json_integer_value(v);
        }
    }
    return qhx_json_get_bool(r, "mrope_interleaved", label, rpath, false, &c->mrope_interleaved, err);
}

static qhx_status parse_config(const json_t *root, const char *label, qhx_model_config *c,
                               int64_t *image_token_id, qhx_error *err) {
    memset(c, 0, sizeof *c);
    const json_t *tc = json_object_get(root, "text_config");
    if (!json_is_object(tc)) return qhx_fail(err, QHX_E_FORMAT, "%s: text_config: expected an object", label);
    const char *p = "text_config";
    const int64_t big = (int64_t)1 << 24;
    qhx_status rc;
#define GETI(obj, path, key, lo, hi, dst, req) \
    if ((rc = qhx_json_get_int(obj, key, label, path, req, lo, hi, dst, err))) return rc
    GETI(tc, p, "vocab_size", 1, big, &c->vocab_size, true);
    GETI(tc, p, "hidden_size", 1, 1 << 16, &c->hidden_size, true);
    GETI(tc, p, "intermediate_size", 1, 1 << 20, &c->intermediate_size, true);
    GETI(tc, p, "num_hidden_layers", 1, QHX_MODEL_MAX_LAYERS, &c->num_hidden_layers, true);
    GETI(tc, p, "num_attention_heads", 1, 1024, &c->num_attention_heads, true);
    c->num_key_value_heads = c->num_attention_heads;
    GETI(tc, p, "num_key_value_heads", 1, 1024, &c->num_key_value_heads, false);
    c->head_dim = c->hidden_size / c->num_attention_heads;
    GETI(tc, p, "head_dim", 2, 4096, &c->head_dim, false);
    c->max_position_embeddings = 262144;
    GETI(tc, p, "max_position_embeddings", 1, (int64_t)1 << 40, &c->max_position_embeddings, false);
    c->eos_token_id = -1;
    GETI(tc, p, "eos_token_id", 0, big, &c->eos_token_id, false);
    *image_token_id = 151655;
    GETI(root, "", "image_token_id", 0, big, image_token_id, false);
#undef GETI
    c->rms_norm_eps = 1e-6;
    if ((rc = qhx_json_get_num(tc, "rms_norm_eps", label, p, false, &c->rms_norm_eps, err))) return rc;
    c->tie_word_embeddings = true;
    if ((rc = qhx_json_get_bool(root, "tie_word_embeddings", label, "", false, &c->tie_word_embeddings, err))) return rc;
    if ((rc = qhx_json_get_bool(tc, "tie_word_embeddings", label, p, false, &c->tie_word_embeddings, err))) return rc;
    const char *act = "silu";
    if ((rc = qhx_json_get_str(tc, "hidden_act", label, p, false, &act, err))) return rc;
    if (strcmp(act, "silu"))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: text_config.hidden_act: '%s' is not supported (silu)", label, act);
    bool bias = false;
    if ((rc = qhx_json_get_bool(tc, "attention_bias", label, p, false, &bias, err))) return rc;
    if (bias) return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: text_config.attention_bias: true is not supported", label);
    if (c->num_attention_heads % c->num_key_value_heads || c->head_dim % 2)
        return qhx_fail(err, QHX_E_FORMAT, "%s: text_config: num_attention_heads %lld must be a multiple of num_key_value_heads %lld, and head_dim even",
                        label, (long long)c->num_attention_heads, (long long)c->num_key_value_heads);
    if ((rc = parse_rope(tc, label, c, err))) return rc;
    if (c->mrope_section[0] + c->mrope_section[1] + c->mrope_section[2] != c->head_dim / 2)
        return qhx_fail(err, QHX_E_FORMAT, "%s: mrope_section [%lld, %lld, %lld] must sum to head_dim / 2 = %lld", label,
                        (long long)c->mrope_section[0], (long long)c->mrope_section[1], (long long)c->mrope_section[2],
                        (long long)(c->head_dim / 2));
    c->partial_rotary_factor = 1.0;
    c->rotary_dim = c->head_dim;
    for (int64_t l = 0; l < c->num_hidden_layers; l++) c->layer_types[l] = QHX_LAYER_FULL_ATTENTION;
    return QHX_OK;
}

void qhx_qwen3vl_mrope_axes(const int64_t section[3], bool interleaved, int64_t half, unsigned char *axis) {
    for (int64_t j = 0; j < half; j++) {
        if (interleaved)
            axis[j] = j % 3 == 1 && j < 3 * section[1] ? 1 : j % 3 == 2 && j < 3 * section[2] ? 2 : 0;
        else
            axis[j] = j < section[0] ? 0 : j < section[0] + section[1] ? 1 : 2;
    }
}

/* ---- open -------------------------------------------------------------------------------- */

static const qhx_model_vt VL_VT;

static qhx_status vec(qhx_qwen3vl *q, const char *name, int64_t n, float **out, qhx_error *err) {
    return qhx_wload_f32(q->set, name, 1, &n, &q->owned, out, NULL, err);
}

static qhx_status lin(qhx_qwen3vl *q, const char *name, int64_t rows, int64_t cols, qhx_weight *out,
                      qhx_error *err) {
    return qhx_wbind_linear(q->set, name, rows, cols, q->kern, &q->owned, out, err);
}

static qhx_status open_vision(qhx_qwen3vl *q, const json_t *root, const char *cfg_path, const char *pp,
                              qhx_error *err) {
    const json_t *vc = json_object_get(root, "vision_config");
    if (!vc || !qhx_st_find(q->set, "model.visual.patch_embed.proj.weight")) return QHX_OK; /* text only */
    qhx_vit_config vcfg;
    qhx_status rc = qhx_vit_config_parse(vc, cfg_path, &vcfg, err);
    if (rc) return rc;
    if (vcfg.out_hidden_size != q->H)
        return qhx_fail(err, QHX_E_FORMAT, "%s: vision_config.out_hidden_size %lld != text_config.hidden_size %lld",
                        cfg_path, (long long)vcfg.out_hidden_size, (long long)q->H);
    if (vcfg.n_deepstack > q->L)
        return qhx_fail(err, QHX_E_FORMAT, "%s: vision_config: %lld deepstack taps for %lld decoder layers", cfg_path,
                        (long long)vcfg.n_deepstack, (long long)q->L);
    if ((rc = qhx_vit_load(q->set, &vcfg, "model.visual.", q->kern, &q->vit, err))) return rc;
    q->vit->pool = q->pool;
    q->prep = qhx_image_prep_default();
    q->prep.patch_size = vcfg.patch_size;
    q->prep.temporal_patch_size = vcfg.temporal_patch_size;
    q->prep.merge_size = vcfg.spatial_merge_size;
    if (pp && (rc = qhx_image_prep_load(pp, &q->prep, err))) return rc;
    if (q->prep.patch_size != vcfg.patch_size || q->prep.temporal_patch_size != vcfg.temporal_patch_size ||
        q->prep.merge_size != vcfg.spatial_merge_size)
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: patch_size / temporal_patch_size / merge_size disagree with config.json vision_config",
                      pp ? pp : cfg_path);
    return rc;
}

qhx_status qhx_qwen3vl_open(qhx_model *m, const json_t *root, const char *cfg_path, qhx_st_set *set,
                            const char *preprocessor_path, qhx_error *err) {
    qhx_qwen3vl *q = qhx_calloc(1, sizeof *q);
    if (!q) {
        qhx_st_free(set);
        return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    }
    q->set = set; /* owned from here on, also on failure */
    m->weights = set;
    m->impl = q;
    m->vt = &VL_VT;
    q->kern = &m->kern;
    q->pool = m->pool;
    qhx_status rc = parse_config(root, cfg_path, &m->cfg, &q->image_token_id, err);
    if (rc) return rc;
    const qhx_model_config *c = &m->cfg;
    q->H = c->hidden_size;
    q->I = c->intermediate_size;
    q->V = c->vocab_size;
    q->L = c->num_hidden_layers;
    q->nh = c->num_attention_heads;
    q->nkv = c->num_key_value_heads;
    q->hd = c->head_dim;
    q->eps = (float)c->rms_norm_eps;

    char nm[512];
    const char *pre = "model.language_model.";
#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
    if ((rc = vec(q, NAME("%snorm.weight", pre), q->H, &q->final_norm, err))) return rc;
    /* the table and the head, or one matrix for both in a tied bundle (models/weights.h) */
    if ((rc = qhx_wbind_embed_head(q->set, qhx_st_file_path(q->set, 0), NAME("%sembed_tokens.weight", pre),
                                   c->tie_word_embeddings, q->V, q->H, q->kern, &q->owned, &q->embed, &q->lm_head, err)))
        return rc;
    q->layers = qhx_calloc((size_t)q->L, sizeof *q->layers);
    if (!q->layers) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    for (int64_t l = 0; l < q->L; l++) {
        vl_layer *Ly = &q->layers[l];
        long long i = (long long)l;
        if ((rc = vec(q, NAME("%slayers.%lld.input_layernorm.weight", pre, i), q->H, &Ly->input_norm, err))) return rc;
        if ((rc = vec(q, NAME("%slayers.%lld.post_attention_layernorm.weight", pre, i), q->H, &Ly->post_norm, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.self_attn.q_proj.weight", pre, i), q->nh * q->hd, q->H, &Ly->q_proj, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.self_attn.k_proj.weight", pre, i), q->nkv * q->hd, q->H, &Ly->k_proj, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.self_attn.v_proj.weight", pre, i), q->nkv * q->hd, q->H, &Ly->v_proj, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.self_attn.o_proj.weight", pre, i), q->H, q->nh * q->hd, &Ly->o_proj, err))) return rc;
        if ((rc = vec(q, NAME("%slayers.%lld.self_attn.q_norm.weight", pre, i), q->hd, &Ly->q_norm, err))) return rc;
        if ((rc = vec(q, NAME("%slayers.%lld.self_attn.k_norm.weight", pre, i), q->hd, &Ly->k_norm, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.mlp.gate_proj.weight", pre, i), q->I, q->H, &Ly->gate_proj, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.mlp.up_proj.weight", pre, i), q->I, q->H, &Ly->up_proj, err))) return rc;
        if ((rc = lin(q, NAME("%slayers.%lld.mlp.down_proj.weight", pre, i), q->H, q->I, &Ly->down_proj, err))) return rc;
    }
#undef NAME
    q->inv_freq = qhx_malloc((size_t)(q->hd / 2) * sizeof *q->inv_freq);
    q->axis = qhx_malloc((size_t)(q->hd / 2));
    if (!q->inv_freq || !q->axis) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    /* HF default rope init: 1 / base^(arange(0, hd, 2) / hd), power and reciprocal in float32 */
    for (int64_t j = 0; j < q->hd / 2; j++)
        q->inv_freq[j] = 1.0f / powf((float)c->rope_theta, (float)(2 * j) / (float)q->hd);
    qhx_qwen3vl_mrope_axes(c->mrope_section, c->mrope_interleaved, q->hd / 2, q->axis);
    return open_vision(q, root, cfg_path, preprocessor_path, err);
}

/* ---- images ------------------------------------------------------------------------------ */

void qhx_vl_image_deinit(qhx_vl_image *im) {
    if (!im) return;
    qhx_free(im->embd);
    memset(im, 0, sizeof *im);
}

/* The preprocessing with at most max_tokens image tokens (0: no cap): smart_resize's pixel
 * ceiling lowered to max_tokens merged patches, so the image is scaled down before the tower. */
static qhx_status capped_prep(const qhx_qwen3vl *q, int64_t max_tokens, qhx_image_prep *prep, qhx_error *err) {
    *prep = q->prep;
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

static qhx_status encode_with(const qhx_qwen3vl *q, const qhx_image *img, const qhx_image_prep *prep,
                              int64_t max_tokens, qhx_vl_image *out, qhx_error *err) {
    qhx_image_patches p;
    qhx_status rc = qhx_image_preprocess(img, prep, &p, err);
    if (rc) return rc;
    int64_t M = q->vit->cfg.spatial_merge_size;
    int64_t n_tokens = (p.grid_h / M) * (p.grid_w / M);
    if (max_tokens > 0 && n_tokens > max_tokens) { /* not resized (do_resize false): cannot be capped */
        qhx_image_patches_deinit(&p);
        return qhx_fail(err, QHX_E_LIMIT, "the image takes %lld tokens, only %lld fit", (long long)n_tokens,
                        (long long)max_tokens);
    }
    out->grid_h = p.grid_h;
    out->grid_w = p.grid_w;
    out->n_tokens = (p.grid_h / M) * (p.grid_w / M);
    out->row_width = qhx_vit_row_width(q->vit);
    size_t bytes;
    if (!qhx_size_mul((size_t)out->n_tokens * (size_t)out->row_width, sizeof(float), &bytes) ||
        !(out->embd = qhx_malloc(bytes)))
        rc = qhx_fail(err, QHX_E_NOMEM, "image: out of memory for %lld token embeddings", (long long)out->n_tokens);
    else
        rc = qhx_vit_encode(q->vit, &p, out->embd, err);
    qhx_image_patches_deinit(&p);
    if (rc) qhx_vl_image_deinit(out);
    return rc;
}

qhx_status qhx_qwen3vl_image_encode(const qhx_qwen3vl *q, const qhx_image *img, qhx_vl_image *out,
                                    qhx_error *err) {
    memset(out, 0, sizeof *out);
    if (!q || !q->vit) return qhx_fail(err, QHX_E_UNSUPPORTED, "this checkpoint has no vision tower");
    return encode_with(q, img, &q->prep, 0, out, err);
}

qhx_status qhx_qwen3vl_image_load_capped(const qhx_qwen3vl *q, const char *path, int64_t max_tokens,
                                         qhx_vl_image *out, qhx_error *err) {
    memset(out, 0, sizeof *out);
    if (!q || !q->vit) return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: this checkpoint has no vision tower", path);
    qhx_image_prep prep;
    qhx_status rc = capped_prep(q, max_tokens, &prep, err);
    if (rc) {
        qhx_fail_prefix(err, "%s", path);
        return rc;
    }
    qhx_image img;
    if ((rc = qhx_image_load(path, NULL, &img, err))) return rc;
    rc = encode_with(q, &img, &prep, max_tokens, out, err);
    qhx_image_deinit(&img);
    if (rc && rc != QHX_E_NOMEM) qhx_fail_prefix(err, "%s", path);
    return rc;
}

qhx_status qhx_qwen3vl_image_load(const qhx_qwen3vl *q, const char *path, qhx_vl_image *out,
                                  qhx_error *err) {
    return qhx_qwen3vl_image_load_capped(q, path, 0, out, err);
}

/* ---- state ------------------------------------------------------------------------------- */

typedef struct vl_state {
    qhx_kv_cache kv;           /* (L, 2, n_ctx, Hkv hd): rotated keys, then values, per layer */
    void *kv_data;             /* its memory (owned) */
    int64_t next_pos;          /* position of the next text token: largest position so far + 1 */
    /* the announced prompt (qhx_qwen3vl_attach), rows plan_start .. plan_start + plan_n */
    int64_t plan_start, plan_n;
    int64_t *plan_pos;         /* (plan_n, 3) */
    int64_t *plan_row;         /* (plan_n): image token index, or -1 */
    int32_t *plan_ids;         /* (plan_n) */
    const qhx_vl_image *image; /* borrowed */
    /* scratch for n_batch tokens */
    float *x, *xn, *tmp, *q, *kk, *vv, *att, *mg, *mu, *cosb, *sinb;
    float *attw;               /* (n_threads, attention work for n_ctx keys) per-thread scratch */
    float *attp;               /* (nkv, key blocks of n_ctx, partial): decode attention */
    int64_t attw_floats, nb;   /* nb: key blocks of the current decode step */
    int64_t *pos;              /* (n_batch, 3) positions of the batch */
    int64_t *row;              /* (n_batch) image rows of the batch */
} vl_state;

static void plan_clear(vl_state *s) {
    qhx_free(s->plan_pos);
    qhx_free(s->plan_row);
    qhx_free(s->plan_ids);
    s->plan_pos = s->plan_row = NULL;
    s->plan_ids = NULL;
    s->plan_n = s->plan_start = 0;
    s->image = NULL;
}

static void vl_state_free(void *impl) {
    vl_state *s = impl;
    if (!s) return;
    plan_clear(s);
    qhx_aligned_free(s->kv_data);
    float **f[] = {&s->x, &s->xn, &s->tmp, &s->q, &s->kk, &s->vv, &s->att, &s->mg, &s->mu,
                   &s->attw, &s->attp, &s->cosb, &s->sinb};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) qhx_aligned_free(*f[i]);
    qhx_free(s->pos);
    qhx_free(s->row);
    qhx_free(s);
}

static qhx_status vl_state_create(qhx_model_state *st, qhx_error *err) {
    const qhx_qwen3vl *q = st->m->impl;
    qhx_status krc = qhx_kv_check(st->kv_type, q->hd, err);
    if (krc) return krc;
    vl_state *s = qhx_calloc(1, sizeof *s);
    if (!s) return qhx_fail(err, QHX_E_NOMEM, "state: out of memory");
    size_t nb = (size_t)st->n_batch;
    size_t kvw = (size_t)(q->nkv * q->hd), qw = (size_t)(q->nh * q->hd), H = (size_t)q->H, I = (size_t)q->I;
    size_t kv;
    if (!qhx_kv_bytes(st->kv_type, q->L, st->n_ctx, (int64_t)kvw, &kv)) {
        qhx_free(s);
        return qhx_fail(err, QHX_E_LIMIT, "state: a KV cache of %lld tokens is too large", (long long)st->n_ctx);
    }
    s->kv_data = qhx_aligned_alloc(kv);
    s->kv = (qhx_kv_cache){st->kv_type, s->kv_data, q->L, st->n_ctx, (int64_t)kvw};
    const int64_t rep = q->nh / q->nkv;
    s->attw_floats = qhx_attn_group_kv_work(st->n_ctx, rep, q->hd, st->kv_type);
    size_t attw = (size_t)qhx_pool_n_threads(q->pool) * (size_t)s->attw_floats;
    size_t attp = (size_t)(q->nkv * qhx_attn_n_blocks(st->n_ctx) * qhx_attn_part_floats(rep, q->hd));
    float **f[] = {&s->x, &s->xn, &s->tmp, &s->q, &s->kk, &s->vv, &s->att, &s->mg, &s->mu, &s->attw, &s->attp,
                   &s->cosb, &s->sinb};
    size_t n[] = {nb * H, nb * H, nb * H, nb * qw, nb * kvw, nb * kvw, nb * qw, nb * I, nb * I, attw, attp,
                  nb * (size_t)(q->hd / 2), nb * (size_t)(q->hd / 2)};
    int ok = s->kv_data != NULL;
    for (size_t i = 0; ok && i < sizeof f / sizeof f[0]; i++) ok = (*f[i] = qhx_aligned_alloc(n[i] * sizeof(float))) != NULL;
    s->pos = qhx_malloc(nb * 3 * sizeof *s->pos);
    s->row = qhx_malloc(nb * sizeof *s->row);
    if (!ok || !s->pos || !s->row) {
        vl_state_free(s);
        return qhx_fail(err, QHX_E_NOMEM, "state: out of memory (n_ctx %lld, n_batch %lld, %zu bytes of KV cache)",
                        (long long)st->n_ctx, (long long)st->n_batch, kv);
    }
    st->impl = s;
    return QHX_OK;
}

static void vl_state_reset(qhx_model_state *st) {
    vl_state *s = st->impl;
    plan_clear(s);
    s->next_pos = 0;
}

qhx_status qhx_qwen3vl_attach(qhx_model_state *st, const qhx_vl_image *image, const int32_t *ids,
                              int64_t n, qhx_error *err) {
    if (!st || !qhx_qwen3vl_of(st->m)) return qhx_fail(err, QHX_E_ARG, "attach: not a Qwen3-VL state");
    const qhx_qwen3vl *q = st->m->impl;
    vl_state *s = st->impl;
    plan_clear(s);
    if (n < 1 || !ids) return qhx_fail(err, QHX_E_ARG, "attach: no tokens");
    int64_t n_pad = 0, first = -1, last = -1;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] == q->image_token_id) {
            if (first < 0) first = i;
            last = i;
            n_pad++;
        }
    if (!image && n_pad)
        return qhx_fail(err, QHX_E_ARG, "the ids hold %lld image-pad tokens (id %lld) but no image was given",
                        (long long)n_pad, (long long)q->image_token_id);
    if (image && n_pad != image->n_tokens)
        return qhx_fail(err, QHX_E_ARG, "the ids hold %lld image-pad tokens (id %lld) but the image (%lldx%lld patches) needs %lld",
                        (long long)n_pad, (long long)q->image_token_id, (long long)image->grid_h,
                        (long long)image->grid_w, (long long)image->n_tokens);
    if (image && last - first + 1 != n_pad)
        return qhx_fail(err, QHX_E_ARG, "the %lld image-pad tokens must be one contiguous run (found between positions %lld and %lld)",
                        (long long)n_pad, (long long)first, (long long)last);
    if (image && (!q->vit || image->row_width != qhx_vit_row_width(q->vit)))
        return qhx_fail(err, QHX_E_ARG, "attach: the image was not encoded by this model");
    s->plan_pos = qhx_malloc((size_t)n * 3 * sizeof *s->plan_pos);
    s->plan_row = qhx_malloc((size_t)n * sizeof *s->plan_row);
    s->plan_ids = qhx_malloc((size_t)n * sizeof *s->plan_ids);
    if (!s->plan_pos || !s->plan_row || !s->plan_ids) {
        plan_clear(s);
        return qhx_fail(err, QHX_E_NOMEM, "attach: out of memory");
    }
    memcpy(s->plan_ids, ids, (size_t)n * sizeof *ids);
    int64_t next = s->next_pos;
    for (int64_t i = 0; i < n;) {
        if (image && i == first) { /* HF get_rope_index for one image of grid (1, gh, gw) */
            int64_t M = q->vit->cfg.spatial_merge_size, gh = image->grid_h / M, gw = image->grid_w / M;
            for (int64_t k = 0; k < n_pad; k++, i++) {
                s->plan_pos[i * 3] = next;
                s->plan_pos[i * 3 + 1] = next + k / gw;
                s->plan_pos[i * 3 + 2] = next + k % gw;
                s->plan_row[i] = k;
            }
            next += gh > gw ? gh : gw;
            continue;
        }
        s->plan_pos[i * 3] = s->plan_pos[i * 3 + 1] = s->plan_pos[i * 3 + 2] = next++;
        s->plan_row[i] = -1;
        i++;
    }
    s->plan_start = st->n_past;
    s->plan_n = n;
    s->image = image;
    return QHX_OK;
}

int64_t qhx_qwen3vl_attached_positions(const qhx_model_state *st, const int64_t **pos) {
    const vl_state *s = st && qhx_qwen3vl_of(st->m) ? st->impl : NULL;
    *pos = s ? s->plan_pos : NULL;
    return s ? s->plan_n : 0;
}

/* ---- forward ----------------------------------------------------------------------------- */

/* Work is spread over the model's pool in pieces fixed by the problem size (models/par.h):
 * output rows of the linear layers, token ranges, (token, KV head) pairs and fixed key blocks
 * of attention; results do not depend on the thread count. */

#define TOK_CHUNK 16     /* tokens per piece of the per-token ops */
#define ELEM_CHUNK 3072  /* elements per piece of the element-wise ops */

typedef struct vl_fw {
    const qhx_qwen3vl *q;
    const qhx_model_state *st;
    vl_state *s;
    const vl_layer *Ly;
    int64_t n, l;
} vl_fw;

/* Y (n, rows) stride ldy = X (n, cols) stride ldx @ W^T, rows split over the pool. */
static void linear(const qhx_qwen3vl *q, const qhx_weight *w, const float *X, int64_t ldx, float *Y, int64_t ldy,
                   int64_t n) {
    qhx_par_linear(q->pool, q->kern, w, X, ldx, Y, ldy, n);
}

static void vl_norm_in_task(void *ctx, int64_t t0, int64_t t1, int ti) {
    (void)ti;
    const vl_fw *f = ctx;
    const int64_t H = f->q->H;
    for (int64_t t = t0; t < t1; t++)
        qhx_k_rmsnorm_f32_ref(f->s->x + t * H, f->Ly->input_norm, f->s->xn + t * H, H, f->q->eps);
}

/* q/k RMSNorm per head, M-RoPE, then the token's K and V into the cache */
static void vl_qk_task(void *ctx, int64_t t0, int64_t t1, int ti) {
    (void)ti;
    const vl_fw *f = ctx;
    const qhx_qwen3vl *q = f->q;
    vl_state *s = f->s;
    const int64_t hd = q->hd, half = hd / 2, qw = q->nh * hd, kvw = q->nkv * hd;
    for (int64_t t = t0; t < t1; t++) {
        float *qt = s->q + t * qw, *kt = s->kk + t * kvw;
        for (int64_t h = 0; h < q->nh; h++) qhx_k_rmsnorm_f32_ref(qt + h * hd, f->Ly->q_norm, qt + h * hd, hd, q->eps);
        for (int64_t h = 0; h < q->nkv; h++) qhx_k_rmsnorm_f32_ref(kt + h * hd, f->Ly->k_norm, kt + h * hd, hd, q->eps);
        qhx_k_rope_neox_f32_ref(qt, q->nh, hd, hd, s->cosb + t * half, s->sinb + t * half);
        qhx_k_rope_neox_f32_ref(kt, q->nkv, hd, hd, s->cosb + t * half, s->sinb + t * half);
    }
    /* the finished f32 rows into the cache (f16: rounded to nearest even) */
    qhx_kv_store(q->kern, &s->kv, f->l, 0, f->st->n_past + t0, s->kk + t0 * kvw, t1 - t0);
    qhx_kv_store(q->kern, &s->kv, f->l, 1, f->st->n_past + t0, s->vv + t0 * kvw, t1 - t0);
}

/* prompt: (token, KV head) pairs; causal: token t sees the cache up to and including itself,
 * image tokens too */
static void vl_attn_tok_task(void *ctx, int64_t i0, int64_t i1, int ti) {
    const vl_fw *f = ctx;
    const qhx_qwen3vl *q = f->q;
    vl_state *s = f->s;
    const int64_t hd = q->hd, rep = q->nh / q->nkv, qw = q->nh * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int64_t i = i0; i < i1; i++) {
        int64_t t = i / q->nkv, g = i % q->nkv;
        qhx_kv_view kv = qhx_kv_head(&s->kv, f->l, g, hd);
        qhx_attn_group_kv(q->kern, s->q + t * qw + g * rep * hd, &kv, f->st->n_past + t + 1, rep, hd, scale,
                          s->attw + ti * s->attw_floats, s->att + t * qw + g * rep * hd);
    }
}

/* decode: (KV head, key block) pairs into the partials */
static void vl_attn_blk_task(void *ctx, int64_t i0, int64_t i1, int ti) {
    const vl_fw *f = ctx;
    const qhx_qwen3vl *q = f->q;
    vl_state *s = f->s;
    const int64_t hd = q->hd, rep = q->nh / q->nkv, pf = qhx_attn_part_floats(rep, hd);
    const float scale = 1.0f / sqrtf((float)hd);
    for (int64_t i = i0; i < i1; i++) {
        int64_t g = i / s->nb, b = i % s->nb;
        qhx_kv_view kv = qhx_kv_head(&s->kv, f->l, g, hd);
        qhx_attn_block_kv(q->kern, s->q + g * rep * hd, &kv, f->st->n_past + 1, b, rep, hd, scale,
                          s->attw + ti * s->attw_floats, s->attp + i * pf);
    }
}

static void vl_add_norm_task(void *ctx, int64_t t0, int64_t t1, int ti) {
    (void)ti;
    const vl_fw *f = ctx;
    const int64_t H = f->q->H;
    for (int64_t t = t0; t < t1; t++) {
        qhx_k_add_f32_ref(f->s->x + t * H, f->s->tmp + t * H, H);
        qhx_k_rmsnorm_f32_ref(f->s->x + t * H, f->Ly->post_norm, f->s->xn + t * H, H, f->q->eps);
    }
}

static void vl_add_task(void *ctx, int64_t i0, int64_t i1, int ti) {
    (void)ti;
    const vl_fw *f = ctx;
    qhx_k_add_f32_ref(f->s->x + i0, f->s->tmp + i0, i1 - i0);
}

/* n <= n_batch tokens through every layer; positions and image rows already in s->pos, s->row. */
static qhx_status run_batch(const qhx_model *m, qhx_model_state *st, const int32_t *ids, int64_t n,
                            float *logits, bool all, const qhx_forward_opts *opts, qhx_error *err) {
    const qhx_qwen3vl *q = m->impl;
    vl_state *s = st->impl;
    const int64_t H = q->H, hd = q->hd, half = hd / 2, qw = q->nh * hd, kvw = q->nkv * hd;
    const int64_t rep = q->nh / q->nkv;
    const qhx_vl_image *img = s->image;
    const int64_t RW = img ? img->row_width : 0, n_ds = img ? RW / H - 1 : 0;
    vl_fw f = {.q = q, .st = st, .s = s, .n = n};

    for (int64_t t = 0; t < n; t++) {
        if (s->row[t] >= 0) memcpy(s->x + t * H, img->embd + s->row[t] * RW, (size_t)H * sizeof(float));
        else q->kern->row[q->embed.fmt](&q->embed, ids[t], s->x + t * H);
        /* angle_j = p_axis(j) * inv_freq_j in float32, cos/sin in float32 (HF float32 path) */
        for (int64_t j = 0; j < half; j++) {
            float a = (float)s->pos[t * 3 + q->axis[j]] * q->inv_freq[j];
            s->cosb[t * half + j] = cosf(a);
            s->sinb[t * half + j] = sinf(a);
        }
    }
    if (opts->layer_cb) opts->layer_cb(opts->layer_cb_user, -1, st->n_past, s->x, n);
    for (int64_t l = 0; l < q->L; l++) {
        const vl_layer *Ly = &q->layers[l];
        if (opts->abort_cb && opts->abort_cb(opts->abort_cb_user))
            return qhx_fail(err, QHX_E_ABORTED, "forward: aborted at layer %lld", (long long)l);
        f.Ly = Ly;
        f.l = l;
        qhx_par_range(q->pool, n, TOK_CHUNK, vl_norm_in_task, &f);
        const qhx_par_lin in[3] = {{&Ly->q_proj, s->q, qw}, {&Ly->k_proj, s->kk, kvw}, {&Ly->v_proj, s->vv, kvw}};
        qhx_par_linears(q->pool, q->kern, in, 3, s->xn, H, n);
        qhx_par_range(q->pool, n, TOK_CHUNK, vl_qk_task, &f);
        if (n > 1) {
            qhx_par_range(q->pool, n * q->nkv, 1, vl_attn_tok_task, &f);
        } else {
            s->nb = qhx_attn_n_blocks(st->n_past + 1);
            qhx_par_range(q->pool, q->nkv * s->nb, 1, vl_attn_blk_task, &f);
            const int64_t pf = qhx_attn_part_floats(rep, hd);
            for (int64_t g = 0; g < q->nkv; g++)
                qhx_attn_combine(s->attp + g * s->nb * pf, s->nb, rep, hd, s->att + g * rep * hd);
        }
        linear(q, &Ly->o_proj, s->att, qw, s->tmp, H, n);
        qhx_par_range(q->pool, n, TOK_CHUNK, vl_add_norm_task, &f);
        qhx_par_swiglu(q->pool, q->kern, &Ly->gate_proj, &Ly->up_proj, s->xn, H, s->mg, s->mu, q->I, n);
        linear(q, &Ly->down_proj, s->mg, q->I, s->tmp, H, n);
        qhx_par_range(q->pool, n * H, 8 * ELEM_CHUNK, vl_add_task, &f);
        /* the layer's output as HF hooks see it: before the DeepStack add */
        if (opts->layer_cb) opts->layer_cb(opts->layer_cb_user, l, st->n_past, s->x, n);
        if (l < n_ds)
            for (int64_t t = 0; t < n; t++)
                if (s->row[t] >= 0) qhx_k_add_f32_ref(s->x + t * H, img->embd + s->row[t] * RW + (1 + l) * H, H);
    }
    if (logits) {
        int64_t t0 = all ? 0 : n - 1, nr = all ? n : 1;
        for (int64_t t = t0; t < n; t++) qhx_k_rmsnorm_f32_ref(s->x + t * H, q->final_norm, s->xn + t * H, H, q->eps);
        linear(q, &q->lm_head, s->xn + t0 * H, H, logits, q->V, nr);
    }
    st->n_past += n;
    return QHX_OK;
}

static qhx_status vl_forward(const qhx_model *m, qhx_model_state *st, const int32_t *ids, int64_t n,
                             const qhx_forward_opts *opts, qhx_error *err) {
    vl_state *s = st->impl;
    const int64_t V = m->cfg.vocab_size;
    /* Tokens inside the announced prompt must be the announced ones. Elsewhere every id is text,
     * the image-pad id too (as in HF decoding, which passes no pixels after the prompt). */
    for (int64_t t = 0; t < n; t++) {
        int64_t i = st->n_past + t - s->plan_start;
        if (s->plan_n && i >= 0 && i < s->plan_n && ids[t] != s->plan_ids[i])
            return qhx_fail(err, QHX_E_ARG, "forward: token %lld is %d, but the prompt announced with the image has %d there",
                            (long long)(st->n_past + t), ids[t], s->plan_ids[i]);
    }
    const bool all = (opts->flags & QHX_FWD_LOGITS_ALL) != 0;
    const int64_t step = (opts->flags & QHX_FWD_SEQUENTIAL) ? 1 : st->n_batch;
    for (int64_t t0 = 0; t0 < n; t0 += step) {
        int64_t nt = n - t0 < step ? n - t0 : step;
        int64_t next = s->next_pos;
        for (int64_t t = 0; t < nt; t++) {
            int64_t i = st->n_past + t - s->plan_start;
            int in_plan = s->plan_n && i >= 0 && i < s->plan_n;
            for (int a = 0; a < 3; a++) s->pos[t * 3 + a] = in_plan ? s->plan_pos[i * 3 + a] : next;
            s->row[t] = in_plan ? s->plan_row[i] : -1;
            for (int a = 0; a < 3; a++)
                if (s->pos[t * 3 + a] + 1 > next) next = s->pos[t * 3 + a] + 1;
        }
        float *lg = NULL;
        if (opts->logits && all) lg = opts->logits + t0 * V;
        else if (opts->logits && t0 + nt == n) lg = opts->logits;
        qhx_status rc = run_batch(m, st, ids + t0, nt, lg, all, opts, err);
        if (rc) return rc;
        s->next_pos = next;
    }
    return QHX_OK;
}

/* Save/restore: the K and V caches (per layer, one row per position) and the next text
 * position (which runs ahead of n_past after an image). An announced image is not part of it. */
static int vl_state_regions(const qhx_model_state *st, qhx_state_region *out, int cap) {
    vl_state *s = st->impl;
    int n = qhx_kv_regions(&s->kv, out, cap); /* K then V of each layer */
    if (n < cap) out[n++] = (qhx_state_region){&s->next_pos, sizeof s->next_pos, 1, false};
    return n;
}

static const qhx_model_vt VL_VT = {
    .state_regions = vl_state_regions,
    .free_impl = vl_free_impl,
    .state_create = vl_state_create,
    .state_free = vl_state_free,
    .state_reset = vl_state_reset,
    .forward = vl_forward,
};
