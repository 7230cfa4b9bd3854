/* models/qwen3vl: Qwen3-VL open, image encoding, M-RoPE planning and the text decoder in float32
 * (contract in qwen3vl.h; spec/qwen3_vl.md §4-§5). The decoder is a dense Qwen3 stack: plain
 * RMSNorm x * rsqrt(mean(x^2) + eps) * w (not the zero-centred 1 + w of Qwen3.5), per-head q/k
 * RMSNorm before the rotary, GQA, SwiGLU, tied lm-head. */
#include "models/qwen3vl.h"

#include "core/alloc.h"
#include "core/file.h"
#include "io/json.h"
#include "kernels/vision.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- config ------------------------------------------------------------------------ */

static qhx_status parse_rope(const json_t *tc, const char *label, qhx_qwen3vl_config *c, qhx_error *err) {
    /* Released 2B style: rope_scaling {mrope_section, mrope_interleaved} + rope_theta; newer
     * transformers: rope_parameters {rope_theta, mrope_section, mrope_interleaved}. */
    const json_t *rs = json_object_get(tc, "rope_scaling");
    const json_t *rp = json_object_get(tc, "rope_parameters");
    const json_t *r = json_is_object(rp) ? rp : json_is_object(rs) ? rs : NULL;
    qhx_status rc;
    c->rope_theta = 5000000.0;
    if ((rc = qhx_json_get_num(tc, "rope_theta", label, "text_config", false, &c->rope_theta, err))) return rc;
    c->mrope_section[0] = 24;
    c->mrope_section[1] = c->mrope_section[2] = 20;
    c->mrope_interleaved = 1;
    if (!r) return QHX_OK;
    const char *rpath = r == rp ? "text_config.rope_parameters" : "text_config.rope_scaling";
    if ((rc = qhx_json_get_num(r, "rope_theta", label, rpath, false, &c->rope_theta, err))) return rc;
    const char *type = "default";
    if ((rc = qhx_json_get_str(r, "rope_type", label, rpath, false, &type, err))) return rc;
    if (strcmp(type, "default") && strcmp(type, "mrope"))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: %s.rope_type: '%s' is not supported", label, rpath, type);
    const json_t *sec = json_object_get(r, "mrope_section");
    if (sec) {
        if (!json_is_array(sec) || json_array_size(sec) != 3)
            return qhx_fail(err, QHX_E_FORMAT, "%s: %s.mrope_section: expected 3 integers", label, rpath);
        for (int i = 0; i < 3; i++) {
            const json_t *v = json_array_get(sec, (size_t)i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4096)
                return qhx_fail(err, QHX_E_FORMAT, "%s: %s.mrope_section[%d]: expected an integer in 0..4096", label, rpath, i);
            c->mrope_section[i] = json_integer_value(v);
        }
    }
    bool inter = true;
    if ((rc = qhx_json_get_bool(r, "mrope_interleaved", label, rpath, false, &inter, err))) return rc;
    c->mrope_interleaved = inter;
    return QHX_OK;
}

static qhx_status parse_config(const json_t *root, const char *label, qhx_qwen3vl_config *c,
                               qhx_error *err) {
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
    GETI(tc, p, "num_hidden_layers", 1, QHX_VL_MAX_LAYERS, &c->num_hidden_layers, true);
    GETI(tc, p, "num_attention_heads", 1, 1024, &c->num_attention_heads, true);
    c->num_key_value_heads = c->num_attention_heads;
    GETI(tc, p, "num_key_value_heads", 1, 1024, &c->num_key_value_heads, false);
    c->head_dim = c->hidden_size / c->num_attention_heads;
    GETI(tc, p, "head_dim", 2, 4096, &c->head_dim, false);
    c->bos_token_id = c->eos_token_id = -1;
    GETI(tc, p, "bos_token_id", 0, big, &c->bos_token_id, false);
    GETI(tc, p, "eos_token_id", 0, big, &c->eos_token_id, false);
    c->image_token_id = 151655;
    c->video_token_id = 151656;
    c->vision_start_token_id = 151652;
    c->vision_end_token_id = 151653;
    GETI(root, "", "image_token_id", 0, big, &c->image_token_id, false);
    GETI(root, "", "video_token_id", 0, big, &c->video_token_id, false);
    GETI(root, "", "vision_start_token_id", 0, big, &c->vision_start_token_id, false);
    GETI(root, "", "vision_end_token_id", 0, big, &c->vision_end_token_id, false);
#undef GETI
    c->rms_norm_eps = 1e-6;
    if ((rc = qhx_json_get_num(tc, "rms_norm_eps", label, p, false, &c->rms_norm_eps, err))) return rc;
    bool tie = true;
    if ((rc = qhx_json_get_bool(root, "tie_word_embeddings", label, "", false, &tie, err))) return rc;
    if ((rc = qhx_json_get_bool(tc, "tie_word_embeddings", label, p, false, &tie, err))) return rc;
    c->tie_word_embeddings = tie;
    const char *act = "silu";
    if ((rc = qhx_json_get_str(tc, "hidden_act", label, p, false, &act, err))) return rc;
    if (strcmp(act, "silu"))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: text_config.hidden_act: '%s' is not supported (silu)", label, act);
    bool bias = false;
    if ((rc = qhx_json_get_bool(tc, "attention_bias", label, p, false, &bias, err))) return rc;
    if (bias) return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: text_config.attention_bias: true is not supported", label);
    if (c->num_attention_heads % c->num_key_value_heads || c->head_dim % 2)
        return qhx_fail(err, QHX_E_FORMAT, "%s: text_config: num_attention_heads %lld must be a multiple of num_key_value_heads %lld, head_dim even",
                        label, (long long)c->num_attention_heads, (long long)c->num_key_value_heads);
    if ((rc = parse_rope(tc, label, c, err))) return rc;
    if (c->mrope_section[0] + c->mrope_section[1] + c->mrope_section[2] != c->head_dim / 2)
        return qhx_fail(err, QHX_E_FORMAT, "%s: mrope_section sums to %lld, expected head_dim / 2 = %lld", label,
                        (long long)(c->mrope_section[0] + c->mrope_section[1] + c->mrope_section[2]),
                        (long long)(c->head_dim / 2));
    return QHX_OK;
}

int qhx_qwen3vl_config_matches(const char *config_path) {
    json_t *root = qhx_json_load_file(config_path, NULL);
    if (!root) return 0;
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    int ok = mt && !strcmp(mt, "qwen3_vl");
    json_decref(root);
    return ok;
}

/* ---- open / free ------------------------------------------------------------------- */

void qhx_qwen3vl_free(qhx_qwen3vl *m) {
    if (!m) return;
    qhx_vit_free(m->vit);
    qhx_st_free(m->st);
    qhx_vl_bufs_free(&m->bufs);
    qhx_free(m->layers);
    qhx_free(m->inv_freq);
    qhx_free(m->axis);
    qhx_free(m->dir);
    qhx_free(m);
}

/* Which axis (0 T, 1 H, 2 W) frequency slot j of head_dim / 2 takes its position from. HF
 * apply_interleaved_mrope: slot j with j % 3 == 1 and j < 3 * section[1] is H, j % 3 == 2 and
 * j < 3 * section[2] is W, everything else (including the tail past 3 * section) is T. The
 * chunked (non-interleaved) layout gives the first section[0] slots to T, and so on. */
static void mrope_axes(const qhx_qwen3vl_config *c, unsigned char *axis) {
    int64_t half = c->head_dim / 2;
    for (int64_t j = 0; j < half; j++) {
        if (c->mrope_interleaved) {
            if (j % 3 == 1 && j < 3 * c->mrope_section[1]) axis[j] = 1;
            else if (j % 3 == 2 && j < 3 * c->mrope_section[2]) axis[j] = 2;
            else axis[j] = 0;
        } else {
            axis[j] = j < c->mrope_section[0] ? 0 : j < c->mrope_section[0] + c->mrope_section[1] ? 1 : 2;
        }
    }
}

qhx_status qhx_qwen3vl_open(const char *dir, qhx_qwen3vl **out, qhx_error *err) {
    *out = NULL;
    qhx_status rc = QHX_OK;
    json_t *root = NULL;
    char *cfg_path = NULL, *prep_path = NULL;
    qhx_qwen3vl *m = qhx_calloc(1, sizeof *m);
    if (!m) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", dir);
    m->dir = qhx_strdup(dir);
    cfg_path = qhx_path_join(dir, "config.json");
    prep_path = qhx_path_join(dir, "preprocessor_config.json");
    if (!m->dir || !cfg_path || !prep_path) { rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", dir); goto fail; }
    if (!(root = qhx_json_load_file(cfg_path, err))) { rc = err ? err->code : QHX_E_FORMAT; goto fail; }
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    if (!mt || strcmp(mt, "qwen3_vl")) {
        rc = qhx_fail(err, QHX_E_UNSUPPORTED, "%s: model_type: '%s' is not qwen3_vl", cfg_path, mt ? mt : "(missing)");
        goto fail;
    }
    if ((rc = parse_config(root, cfg_path, &m->cfg, err))) goto fail;
    const qhx_qwen3vl_config *c = &m->cfg;
    if ((rc = qhx_st_open(dir, &m->st, err))) goto fail;

    int64_t D = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int64_t I = c->intermediate_size, V = c->vocab_size;
    char name[512];
    const char *tp = "model.language_model.";
#define NAME(...) (snprintf(name, sizeof name, __VA_ARGS__), name)
    if ((rc = qhx_vl_get_weight(m->st, NAME("%sembed_tokens.weight", tp), V, D, &m->bufs, &m->embed, err))) goto fail;
    if ((rc = qhx_vl_get_f32(m->st, NAME("%snorm.weight", tp), D, &m->bufs, &m->norm, err))) goto fail;
    if (qhx_st_find(m->st, "lm_head.weight") && !c->tie_word_embeddings) {
        if ((rc = qhx_vl_get_weight(m->st, "lm_head.weight", V, D, &m->bufs, &m->lm_head, err))) goto fail;
    } else if (!c->tie_word_embeddings) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: tensor 'lm_head.weight' is missing and the embeddings are not tied", dir);
        goto fail;
    } else {
        m->lm_head = m->embed; /* tied; a stored lm_head.weight is identical */
    }
    m->layers = qhx_calloc((size_t)c->num_hidden_layers, sizeof *m->layers);
    if (!m->layers) { rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", dir); goto fail; }
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        qhx_vl_layer *L = &m->layers[l];
        long long li = (long long)l;
        if ((rc = qhx_vl_get_f32(m->st, NAME("%slayers.%lld.input_layernorm.weight", tp, li), D, &m->bufs, &L->input_layernorm, err))) goto fail;
        if ((rc = qhx_vl_get_f32(m->st, NAME("%slayers.%lld.post_attention_layernorm.weight", tp, li), D, &m->bufs, &L->post_attention_layernorm, err))) goto fail;
        if ((rc = qhx_vl_get_weight(m->st, NAME("%slayers.%lld.self_attn.q_proj.weight", tp, li), Hq * hd, D, &m->bufs, &L->q_proj, err))) goto fail;
        if ((rc = qhx_vl_get_weight(m->st, NAME("%slayers.%lld.self_attn.k_proj.weight", tp, li), Hkv * hd, D, &m->bufs, &L->k_proj, err))) goto fail;
        if ((rc = qhx_vl_get_weight(m->st, NAME("%slayers.%lld.self_attn.v_proj.weight", tp, li), Hkv * hd, D, &m->bufs, &L->v_proj, err))) goto fail;
        if ((rc = qhx_vl_get_weight(m->st, NAME("%slayers.%lld.self_attn.o_proj.weight", tp, li), D, Hq * hd, &m->bufs, &L->o_proj, err))) goto fail;
        if ((rc = qhx_vl_get_f32(m->st, NAME("%slayers.%lld.self_attn.q_norm.weight", tp, li), hd, &m->bufs, &L->q_norm, err))) goto fail;
        if ((rc = qhx_vl_get_f32(m->st, NAME("%slayers.%lld.self_attn.k_norm.weight", tp, li), hd, &m->bufs, &L->k_norm, err))) goto fail;
        if ((rc = qhx_vl_get_weight(m->st, NAME("%slayers.%lld.mlp.gate_proj.weight", tp, li), I, D, &m->bufs, &L->gate_proj, err))) goto fail;
        if ((rc = qhx_vl_get_weight(m->st, NAME("%slayers.%lld.mlp.up_proj.weight", tp, li), I, D, &m->bufs, &L->up_proj, err))) goto fail;
        if ((rc = qhx_vl_get_weight(m->st, NAME("%slayers.%lld.mlp.down_proj.weight", tp, li), D, I, &m->bufs, &L->down_proj, err))) goto fail;
    }
#undef NAME
    m->inv_freq = qhx_malloc((size_t)(hd / 2) * sizeof *m->inv_freq);
    m->axis = qhx_malloc((size_t)(hd / 2));
    if (!m->inv_freq || !m->axis) { rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", dir); goto fail; }
    /* HF default rope init: 1 / base^(arange(0, hd, 2) / hd) in float32. */
    for (int64_t j = 0; j < hd / 2; j++)
        m->inv_freq[j] = 1.0f / powf((float)c->rope_theta, (float)(2 * j) / (float)hd);
    mrope_axes(c, m->axis);

    json_t *vc = json_object_get(root, "vision_config");
    if (vc && qhx_st_find(m->st, "model.visual.patch_embed.proj.weight")) {
        qhx_vit_config vcfg;
        if ((rc = qhx_vit_config_parse(vc, cfg_path, &vcfg, err))) goto fail;
        if (vcfg.out_hidden_size != D) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: vision_config.out_hidden_size %lld != text hidden_size %lld", cfg_path,
                          (long long)vcfg.out_hidden_size, (long long)D);
            goto fail;
        }
        if (vcfg.n_deepstack > c->num_hidden_layers) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: %lld deepstack taps for %lld decoder layers", cfg_path,
                          (long long)vcfg.n_deepstack, (long long)c->num_hidden_layers);
            goto fail;
        }
        if ((rc = qhx_vit_load(m->st, &vcfg, "model.visual.", &m->vit, err))) goto fail;
        m->prep = qhx_image_prep_default();
        m->prep.patch_size = vcfg.patch_size;
        m->prep.temporal_patch_size = vcfg.temporal_patch_size;
        m->prep.merge_size = vcfg.spatial_merge_size;
        if (qhx_path_is_file(prep_path) && (rc = qhx_image_prep_load(prep_path, &m->prep, err))) goto fail;
        if (m->prep.patch_size != vcfg.patch_size || m->prep.temporal_patch_size != vcfg.temporal_patch_size ||
            m->prep.merge_size != vcfg.spatial_merge_size) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: patch_size / temporal_patch_size / merge_size disagree with config.json vision_config", prep_path);
            goto fail;
        }
    }
    json_decref(root);
    qhx_free(cfg_path);
    qhx_free(prep_path);
    *out = m;
    return QHX_OK;
fail:
    json_decref(root);
    qhx_free(cfg_path);
    qhx_free(prep_path);
    qhx_qwen3vl_free(m);
    return rc;
}

/* ---- images ---------------------------------------------------------------------------- */

void qhx_vl_image_deinit(qhx_vl_image *im) {
    if (!im) return;
    qhx_free(im->embd);
    memset(im, 0, sizeof *im);
}

qhx_status qhx_qwen3vl_image_load(const qhx_qwen3vl *m, const char *path, qhx_vl_image *out,
                                  qhx_error *err) {
    memset(out, 0, sizeof *out);
    if (!m->vit) return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: this checkpoint has no vision tower", m->dir);
    qhx_image img;
    qhx_image_patches p;
    qhx_status rc = qhx_image_load(path, NULL, &img, err);
    if (rc) return rc;
    rc = qhx_image_preprocess(&img, &m->prep, &p, err);
    qhx_image_deinit(&img);
    if (rc) return qhx_fail_prefix(err, "%s", path);
    int64_t M = m->vit->cfg.spatial_merge_size;
    out->grid_h = p.grid_h;
    out->grid_w = p.grid_w;
    out->n_tokens = (p.grid_h / M) * (p.grid_w / M);
    out->row_width = qhx_vit_row_width(m->vit);
    out->embd = qhx_malloc((size_t)(out->n_tokens * out->row_width) * sizeof(float));
    if (!out->embd) rc = qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
    else rc = qhx_vit_encode(m->vit, &p, out->embd, err);
    qhx_image_patches_deinit(&p);
    if (rc) qhx_vl_image_deinit(out);
    return rc;
}

/* ---- planning ---------------------------------------------------------------------------- */

void qhx_vl_plan_deinit(qhx_vl_plan *p) {
    if (!p) return;
    qhx_free(p->pos);
    qhx_free(p->img_row);
    memset(p, 0, sizeof *p);
}

qhx_status qhx_qwen3vl_plan(const qhx_qwen3vl *m, const int32_t *ids, int64_t n,
                            const qhx_vl_image *image, qhx_vl_plan *out, qhx_error *err) {
    memset(out, 0, sizeof *out);
    int64_t pad = m->cfg.image_token_id, n_pad = 0, first = -1, last = -1;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] == pad) {
            if (first < 0) first = i;
            last = i;
            n_pad++;
        }
    if (!image && n_pad)
        return qhx_fail(err, QHX_E_ARG, "the ids hold %lld image-pad tokens (id %lld) but no image was given",
                        (long long)n_pad, (long long)pad);
    if (image) {
        if (n_pad != image->n_tokens)
            return qhx_fail(err, QHX_E_ARG,
                            "the ids hold %lld image-pad tokens (id %lld) but the image (%lldx%lld patches) needs %lld",
                            (long long)n_pad, (long long)pad, (long long)image->grid_h, (long long)image->grid_w,
                            (long long)image->n_tokens);
        if (last - first + 1 != n_pad)
            return qhx_fail(err, QHX_E_ARG, "the %lld image-pad tokens must be one contiguous run (found between positions %lld and %lld)",
                            (long long)n_pad, (long long)first, (long long)last);
    }
    out->pos = qhx_malloc((size_t)(n ? n : 1) * 3 * sizeof *out->pos);
    out->img_row = qhx_malloc((size_t)(n ? n : 1) * sizeof *out->img_row);
    if (!out->pos || !out->img_row) {
        qhx_vl_plan_deinit(out);
        return qhx_fail(err, QHX_E_NOMEM, "plan: out of memory");
    }
    out->n = n;
    out->image = image;
    int64_t next = 0;
    for (int64_t i = 0; i < n;) {
        if (image && i == first) {
            int64_t M = m->vit ? m->vit->cfg.spatial_merge_size : 2;
            int64_t gh = image->grid_h / M, gw = image->grid_w / M;
            for (int64_t k = 0; k < n_pad; k++, i++) {
                out->pos[i * 3] = next;
                out->pos[i * 3 + 1] = next + k / gw;
                out->pos[i * 3 + 2] = next + k % gw;
                out->img_row[i] = k;
            }
            next += gh > gw ? gh : gw;
            continue;
        }
        out->pos[i * 3] = out->pos[i * 3 + 1] = out->pos[i * 3 + 2] = next++;
        out->img_row[i] = -1;
        i++;
    }
    return QHX_OK;
}

/* ---- state ---------------------------------------------------------------------------------- */

/* Scratch for a batch of tokens lives after the state (grown on demand, never per token). */
typedef struct vl_state_full {
    qhx_vl_state pub;
    int64_t cap_n;
    float *x, *h, *q, *k, *v, *att, *gate, *up, *scores, *cos, *sin;
} vl_state_full;

void qhx_vl_state_free(qhx_vl_state *s) {
    if (!s) return;
    vl_state_full *f = (vl_state_full *)s;
    qhx_aligned_free(s->k);
    qhx_aligned_free(s->v);
    float **bufs[] = {&f->x, &f->h, &f->q, &f->k, &f->v, &f->att, &f->gate, &f->up, &f->scores, &f->cos, &f->sin};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) qhx_aligned_free(*bufs[i]);
    qhx_free(f);
}

qhx_status qhx_vl_state_create(const qhx_qwen3vl *m, int64_t n_ctx, qhx_vl_state **out, qhx_error *err) {
    *out = NULL;
    const qhx_qwen3vl_config *c = &m->cfg;
    if (n_ctx < 1 || n_ctx > (1 << 20)) return qhx_fail(err, QHX_E_ARG, "state: n_ctx %lld outside 1..%d", (long long)n_ctx, 1 << 20);
    vl_state_full *f = qhx_calloc(1, sizeof *f);
    if (!f) return qhx_fail(err, QHX_E_NOMEM, "state: out of memory");
    size_t per, total;
    int64_t kvw = c->num_key_value_heads * c->head_dim;
    if (!qhx_size_mul((size_t)c->num_hidden_layers * (size_t)n_ctx, (size_t)kvw, &per) ||
        !qhx_size_mul(per, sizeof(float), &total)) {
        qhx_free(f);
        return qhx_fail(err, QHX_E_LIMIT, "state: KV cache for %lld tokens is too large", (long long)n_ctx);
    }
    f->pub.k = qhx_aligned_alloc(total);
    f->pub.v = qhx_aligned_alloc(total);
    f->pub.n_ctx = n_ctx;
    if (!f->pub.k || !f->pub.v) {
        qhx_vl_state_free(&f->pub);
        return qhx_fail(err, QHX_E_NOMEM, "state: out of memory for a KV cache of %lld tokens (%zu bytes)", (long long)n_ctx, 2 * total);
    }
    *out = &f->pub;
    return QHX_OK;
}

static qhx_status ensure_scratch(const qhx_qwen3vl *m, vl_state_full *f, int64_t n, qhx_error *err) {
    if (n <= f->cap_n) return QHX_OK;
    const qhx_qwen3vl_config *c = &m->cfg;
    int64_t D = c->hidden_size, qw = c->num_attention_heads * c->head_dim, kvw = c->num_key_value_heads * c->head_dim;
    int64_t I = c->intermediate_size;
    float **bufs[] = {&f->x, &f->h, &f->q, &f->k, &f->v, &f->att, &f->gate, &f->up, &f->scores, &f->cos, &f->sin};
    int64_t sizes[] = {n * D, n * (D > qw ? D : qw), n * qw, n * kvw, n * kvw, n * qw, n * I, n * I, f->pub.n_ctx,
                       n * c->head_dim / 2, n * c->head_dim / 2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        qhx_aligned_free(*bufs[i]);
        *bufs[i] = qhx_aligned_alloc((size_t)sizes[i] * sizeof(float));
        if (!*bufs[i]) {
            f->cap_n = 0;
            return qhx_fail(err, QHX_E_NOMEM, "state: out of memory for a batch of %lld tokens", (long long)n);
        }
    }
    f->cap_n = n;
    return QHX_OK;
}

/* ---- decoder ------------------------------------------------------------------------------- */

/* Qwen3 RMSNorm: w * (x * rsqrt(mean(x^2) + eps)); the sum of squares in double. y may alias x. */
static void rmsnorm(const float *x, const float *w, float *y, int64_t n, double eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (int64_t i = 0; i < n; i++) y[i] = w[i] * (x[i] * inv);
}

qhx_status qhx_qwen3vl_eval(const qhx_qwen3vl *m, qhx_vl_state *s, const int32_t *ids, int64_t n,
                            const qhx_vl_plan *plan, int64_t plan_off, float *logits, int which,
                            float *layers_out, qhx_error *err) {
    const qhx_qwen3vl_config *c = &m->cfg;
    vl_state_full *f = (vl_state_full *)s;
    if (n < 1) return QHX_OK;
    if (s->n_past + n > s->n_ctx)
        return qhx_fail(err, QHX_E_LIMIT, "context full: %lld + %lld tokens exceed n_ctx %lld", (long long)s->n_past,
                        (long long)n, (long long)s->n_ctx);
    if (plan && (plan_off < 0 || plan_off + n > plan->n))
        return qhx_fail(err, QHX_E_ARG, "eval: plan rows %lld..%lld outside the plan of %lld", (long long)plan_off,
                        (long long)(plan_off + n), (long long)plan->n);
    for (int64_t t = 0; t < n; t++)
        if (ids[t] < 0 || ids[t] >= c->vocab_size)
            return qhx_fail(err, QHX_E_ARG, "token id %d at %lld is outside the vocabulary (0..%lld)", ids[t],
                            (long long)t, (long long)(c->vocab_size - 1));
    qhx_status rc = ensure_scratch(m, f, n, err);
    if (rc) return rc;
    int64_t D = c->hidden_size, hd = c->head_dim, Hq = c->num_attention_heads, Hkv = c->num_key_value_heads;
    int64_t qw = Hq * hd, kvw = Hkv * hd, I = c->intermediate_size, half = hd / 2, grp = Hq / Hkv;
    const qhx_vl_image *img = plan ? plan->image : NULL;
    int64_t OH = img ? D : 0, RW = img ? img->row_width : 0;
    int64_t n_ds = img ? RW / D - 1 : 0;

    /* Embeddings; image-pad rows take the merger output. Rotary tables per token. */
    int64_t maxpos = s->next_pos - 1;
    for (int64_t t = 0; t < n; t++) {
        int64_t row = plan ? plan->img_row[plan_off + t] : -1;
        if (row >= 0 && img) memcpy(f->x + t * D, img->embd + row * RW, (size_t)OH * sizeof(float));
        else qhx_vl_weight_row(&m->embed, ids[t], f->x + t * D);
        int64_t p3[3];
        for (int a = 0; a < 3; a++) p3[a] = plan ? plan->pos[(plan_off + t) * 3 + a] : s->next_pos + t;
        for (int a = 0; a < 3; a++) if (p3[a] > maxpos) maxpos = p3[a];
        for (int64_t j = 0; j < half; j++) {
            float ang = (float)p3[m->axis[j]] * m->inv_freq[j];
            f->cos[t * half + j] = cosf(ang);
            f->sin[t * half + j] = sinf(ang);
        }
    }

    float scale = 1.0f / sqrtf((float)hd);
    for (int64_t l = 0; l < c->num_hidden_layers; l++) {
        const qhx_vl_layer *L = &m->layers[l];
        float *Kc = s->k + (size_t)l * (size_t)s->n_ctx * (size_t)kvw;
        float *Vc = s->v + (size_t)l * (size_t)s->n_ctx * (size_t)kvw;
        for (int64_t t = 0; t < n; t++) rmsnorm(f->x + t * D, L->input_layernorm, f->h + t * D, D, c->rms_norm_eps);
        qhx_vl_linear(&L->q_proj, NULL, f->h, D, f->q, qw, n);
        qhx_vl_linear(&L->k_proj, NULL, f->h, D, f->k, kvw, n);
        qhx_vl_linear(&L->v_proj, NULL, f->h, D, f->v, kvw, n);
        for (int64_t t = 0; t < n; t++) {
            for (int64_t h = 0; h < Hq; h++) {
                float *q = f->q + t * qw + h * hd;
                rmsnorm(q, L->q_norm, q, hd, c->rms_norm_eps);
                qhx_k_rope_neox_f32_ref(q, f->cos + t * half, f->sin + t * half, hd);
            }
            for (int64_t h = 0; h < Hkv; h++) {
                float *k = f->k + t * kvw + h * hd;
                rmsnorm(k, L->k_norm, k, hd, c->rms_norm_eps);
                qhx_k_rope_neox_f32_ref(k, f->cos + t * half, f->sin + t * half, hd);
            }
            memcpy(Kc + (s->n_past + t) * kvw, f->k + t * kvw, (size_t)kvw * sizeof(float));
            memcpy(Vc + (s->n_past + t) * kvw, f->v + t * kvw, (size_t)kvw * sizeof(float));
        }
        /* Causal attention with GQA: query head h reads key/value head h / (Hq / Hkv). */
        for (int64_t t = 0; t < n; t++) {
            int64_t nk = s->n_past + t + 1;
            for (int64_t h = 0; h < Hq; h++) {
                const float *q = f->q + t * qw + h * hd;
                int64_t g = h / grp;
                float mx = -INFINITY;
                for (int64_t j = 0; j < nk; j++) {
                    const float *k = Kc + j * kvw + g * hd;
                    float d = 0.0f;
                    for (int64_t e = 0; e < hd; e++) d += q[e] * k[e];
                    f->scores[j] = d * scale;
                    if (f->scores[j] > mx) mx = f->scores[j];
                }
                double sum = 0.0;
                for (int64_t j = 0; j < nk; j++) {
                    f->scores[j] = expf(f->scores[j] - mx);
                    sum += f->scores[j];
                }
                float inv = (float)(1.0 / sum);
                float *o = f->att + t * qw + h * hd;
                for (int64_t e = 0; e < hd; e++) o[e] = 0.0f;
                for (int64_t j = 0; j < nk; j++) {
                    const float *v = Vc + j * kvw + g * hd;
                    float p = f->scores[j] * inv;
                    for (int64_t e = 0; e < hd; e++) o[e] += p * v[e];
                }
            }
        }
        qhx_vl_linear(&L->o_proj, NULL, f->att, qw, f->h, D, n);
        for (int64_t i = 0; i < n * D; i++) f->x[i] += f->h[i];
        for (int64_t t = 0; t < n; t++) rmsnorm(f->x + t * D, L->post_attention_layernorm, f->h + t * D, D, c->rms_norm_eps);
        qhx_vl_linear(&L->gate_proj, NULL, f->h, D, f->gate, I, n);
        qhx_vl_linear(&L->up_proj, NULL, f->h, D, f->up, I, n);
        for (int64_t i = 0; i < n * I; i++) {
            float g = f->gate[i];
            f->gate[i] = g / (1.0f + expf(-g)) * f->up[i];
        }
        qhx_vl_linear(&L->down_proj, NULL, f->gate, I, f->h, D, n);
        for (int64_t i = 0; i < n * D; i++) f->x[i] += f->h[i];
        if (layers_out) memcpy(layers_out + (size_t)l * (size_t)(n * D), f->x, (size_t)(n * D) * sizeof(float));
        /* DeepStack: feature l goes onto the image-token rows after decoder layer l. */
        if (l < n_ds)
            for (int64_t t = 0; t < n; t++) {
                int64_t row = plan->img_row[plan_off + t];
                if (row < 0) continue;
                const float *dsr = img->embd + row * RW + (1 + l) * D;
                for (int64_t i = 0; i < D; i++) f->x[t * D + i] += dsr[i];
            }
    }
    s->n_past += n;
    s->next_pos = maxpos + 1;

    if (which == QHX_VL_LOGITS_NONE || !logits) return QHX_OK;
    int64_t t0 = which == QHX_VL_LOGITS_ALL ? 0 : n - 1;
    for (int64_t t = t0; t < n; t++) rmsnorm(f->x + t * D, m->norm, f->h + (t - t0) * D, D, c->rms_norm_eps);
    qhx_vl_linear(&m->lm_head, NULL, f->h, D, logits, c->vocab_size, n - t0);
    return QHX_OK;
}
