/* families/qwen35/config.c: the Qwen3.5 family descriptor and the only parser of its
 * config.json (composite with text_config, or a bare text config; spec/qwen3_5.md). */
#include "families/qwen35/qwen35.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
/* ---- config.json ------------------------------------------------------------------------- */

#define CAP_DIM ((int64_t)1 << 20) /* any single dimension */
#define CAP_VOCAB ((int64_t)1 << 23)
#define CAP_HEAD_DIM 4096
#define CAP_CONV 64

/* Where a field lives, for messages: "config.json: text_config." (or "config.json: " for a bare
 * text config); a field name follows directly. */
typedef struct cfg_at {
    const char *label; /* the file */
    const char *path;  /* JSON path of the text config object, "" for the root */
    char pre[600];
} cfg_at;

static qhx_status parse_rope(const json_t *tc, const cfg_at *at, qhx_model_config *cfg, qhx_error *err) {
    qhx_status rc;
    /* rope_parameters (current HF) or rope_scaling (older configs); theta and the partial
     * rotary factor may also sit directly in text_config */
    const char *rkey = "rope_parameters";
    const json_t *rp = json_object_get(tc, rkey);
    if (!rp || json_is_null(rp)) {
        rkey = "rope_scaling";
        rp = json_object_get(tc, rkey);
    }
    if ((rc = qhx_json_get_num(tc, "rope_theta", at->label, at->path, false, &cfg->rope_theta, err))) return rc;
    if ((rc = qhx_json_get_num(tc, "partial_rotary_factor", at->label, at->path, false, &cfg->partial_rotary_factor,
                               err)))
        return rc;
    if (rp && !json_is_null(rp)) {
        char rpath[64];
        snprintf(rpath, sizeof rpath, "%s%s%s", at->path, at->path[0] ? "." : "", rkey);
        if (!json_is_object(rp)) return qhx_fail(err, QHX_E_FORMAT, "%s%s: expected an object", at->pre, rkey);
        const char *type = NULL;
        if ((rc = qhx_json_get_str(rp, "rope_type", at->label, rpath, false, &type, err))) return rc;
        if (!type && (rc = qhx_json_get_str(rp, "type", at->label, rpath, false, &type, err))) return rc;
        /* "mrope" (older Qwen-VL spelling) is default RoPE with sections */
        if (type && strcmp(type, "default") && strcmp(type, "mrope"))
            return qhx_fail(err, QHX_E_UNSUPPORTED, "%s%s.rope_type: '%s' is not supported (only 'default')", at->pre,
                            rkey, type);
        if ((rc = qhx_json_get_num(rp, "rope_theta", at->label, rpath, false, &cfg->rope_theta, err))) return rc;
        if ((rc = qhx_json_get_num(rp, "partial_rotary_factor", at->label, rpath, false, &cfg->partial_rotary_factor,
                                   err)))
            return rc;
        if ((rc = qhx_json_get_bool(rp, "mrope_interleaved", at->label, rpath, false, &cfg->mrope_interleaved, err)))
            return rc;
        const json_t *ms = json_object_get(rp, "mrope_section");
        if (ms && !json_is_null(ms)) {
            if (!json_is_array(ms) || json_array_size(ms) != 3)
                return qhx_fail(err, QHX_E_FORMAT, "%s%s.mrope_section: expected an array of 3 integers", at->pre, rkey);
            for (size_t i = 0; i < 3; i++) {
                const json_t *v = json_array_get(ms, i);
                if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > CAP_HEAD_DIM)
                    return qhx_fail(err, QHX_E_FORMAT, "%s%s.mrope_section[%zu]: expected an integer in [0, %d]",
                                    at->pre, rkey, i, CAP_HEAD_DIM);
                cfg->mrope_section[i] = json_integer_value(v);
            }
        }
    }
    if (!(cfg->rope_theta > 0.0) || !isfinite(cfg->rope_theta))
        return qhx_fail(err, QHX_E_FORMAT, "%srope_theta: %g is not positive", at->pre, cfg->rope_theta);
    if (!(cfg->partial_rotary_factor > 0.0 && cfg->partial_rotary_factor <= 1.0))
        return qhx_fail(err, QHX_E_FORMAT, "%spartial_rotary_factor: %g is outside (0, 1]", at->pre,
                        cfg->partial_rotary_factor);
    /* HF: rotary dim = int(head_dim * partial_rotary_factor), truncated */
    cfg->rotary_dim = (int64_t)((double)cfg->head_dim * cfg->partial_rotary_factor);
    if (cfg->rotary_dim < 2 || cfg->rotary_dim % 2)
        return qhx_fail(err, QHX_E_UNSUPPORTED,
                        "%spartial_rotary_factor: head_dim %lld x %g gives %lld rotary dims (must be even and >= 2)",
                        at->pre, (long long)cfg->head_dim, cfg->partial_rotary_factor, (long long)cfg->rotary_dim);
    int64_t msum = cfg->mrope_section[0] + cfg->mrope_section[1] + cfg->mrope_section[2];
    if (msum > cfg->rotary_dim / 2)
        return qhx_fail(err, QHX_E_FORMAT, "%s%s.mrope_section: sums to %lld, more than the %lld rotary frequencies",
                        at->pre, rkey, (long long)msum, (long long)(cfg->rotary_dim / 2));
    return QHX_OK;
}

/* vision_config of a composite config (Qwen3_5VisionConfig): the Qwen3-VL tower's fields, but
 * no DeepStack: the class has no deepstack_visual_indexes (the released files' "[]" is an unused
 * key) and Qwen3_5VisionModel builds no DeepStack merger, so whatever the key says is ignored.
 * image_token_id defaults to Qwen3_5Config's 248056. */
static qhx_status parse_vision(const json_t *root, const char *label, qhx_model_config *c, qhx_error *err) {
    const json_t *vc = json_object_get(root, "vision_config");
    if (!vc || json_is_null(vc)) return QHX_OK;
    if (!json_is_object(vc)) return qhx_fail(err, QHX_E_FORMAT, "%s: vision_config: expected an object", label);
    qhx_status rc = qhx_vit_config_parse(vc, label, &c->vision, err);
    if (rc) return rc;
    c->vision.n_deepstack = 0;
    if (c->vision.out_hidden_size != c->hidden_size)
        return qhx_fail(err, QHX_E_FORMAT, "%s: vision_config.out_hidden_size %lld != text_config.hidden_size %lld",
                        label, (long long)c->vision.out_hidden_size, (long long)c->hidden_size);
    c->image_token_id = 248056;
    if ((rc = qhx_json_get_int(root, "image_token_id", label, "", false, 0, CAP_VOCAB, &c->image_token_id, err)))
        return rc;
    c->has_vision = true;
    c->image_row_width = c->vision.out_hidden_size;
    return QHX_OK;
}

static qhx_status parse_text(const json_t *root, const char *label, qhx_model_config *cfg, qhx_error *err);

qhx_status qhx_qwen35_parse_config(const json_t *root, const char *label, qhx_model_config *cfg,
                                   qhx_error *err) {
    qhx_status rc = parse_text(root, label, cfg, err);
    if (rc) return rc;
    cfg->image_token_id = -1;
    /* only a composite config (text_config + vision_config) has a tower */
    return json_object_get(root, "text_config") ? parse_vision(root, label, cfg, err) : QHX_OK;
}

static qhx_status parse_text(const json_t *root, const char *label, qhx_model_config *cfg, qhx_error *err) {
    qhx_status rc;
    memset(cfg, 0, sizeof *cfg);
    if (!json_is_object(root)) return qhx_fail(err, QHX_E_FORMAT, "%s: expected a JSON object", label);
    const json_t *tc = root;
    cfg_at at = {.label = label, .path = ""};
    const json_t *t = json_object_get(root, "text_config");
    if (t && !json_is_null(t)) {
        if (!json_is_object(t)) return qhx_fail(err, QHX_E_FORMAT, "%s: text_config: expected an object", label);
        tc = t;
        at.path = "text_config";
    } else {
        const char *mt = NULL;
        if ((rc = qhx_json_get_str(root, "model_type", label, "", false, &mt, err))) return rc;
        if (mt && strcmp(mt, "qwen3_5_text"))
            return qhx_fail(err, QHX_E_FORMAT, "%s: text_config: missing (model_type '%s' is a composite config)",
                            label, mt);
    }
    snprintf(at.pre, sizeof at.pre, "%s: %s%s", label, at.path, at.path[0] ? "." : "");
    const char *lb = at.label, *pa = at.path;

    struct { const char *key; int64_t *dst; int64_t lo, hi; } dims[] = {
        {"vocab_size", &cfg->vocab_size, 1, CAP_VOCAB},
        {"hidden_size", &cfg->hidden_size, 1, CAP_DIM},
        {"intermediate_size", &cfg->intermediate_size, 1, CAP_DIM},
        {"num_hidden_layers", &cfg->num_hidden_layers, 1, QHX_MODEL_MAX_LAYERS},
        {"num_attention_heads", &cfg->num_attention_heads, 1, CAP_HEAD_DIM},
        {"num_key_value_heads", &cfg->num_key_value_heads, 1, CAP_HEAD_DIM},
        {"head_dim", &cfg->head_dim, 1, CAP_HEAD_DIM},
        {"linear_num_key_heads", &cfg->linear_num_key_heads, 1, CAP_HEAD_DIM},
        {"linear_num_value_heads", &cfg->linear_num_value_heads, 1, CAP_HEAD_DIM},
        {"linear_key_head_dim", &cfg->linear_key_head_dim, 1, CAP_HEAD_DIM},
        {"linear_value_head_dim", &cfg->linear_value_head_dim, 1, CAP_HEAD_DIM},
        {"linear_conv_kernel_dim", &cfg->linear_conv_kernel_dim, 1, CAP_CONV},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if ((rc = qhx_json_get_int(tc, dims[i].key, lb, pa, true, dims[i].lo, dims[i].hi, dims[i].dst, err)))
            return rc;

    /* HF defaults where a field is absent */
    cfg->max_position_embeddings = 262144;
    cfg->eos_token_id = -1;
    cfg->rms_norm_eps = 1e-6;
    cfg->rope_theta = 10000.0;
    cfg->partial_rotary_factor = 0.25;
    cfg->attn_output_gate = true;
    if ((rc = qhx_json_get_int(tc, "max_position_embeddings", lb, pa, false, 1, INT64_MAX,
                               &cfg->max_position_embeddings, err)))
        return rc;
    if ((rc = qhx_json_get_int(tc, "mtp_num_hidden_layers", lb, pa, false, 0, 64, &cfg->mtp_num_hidden_layers, err)))
        return rc;
    if ((rc = qhx_json_get_num(tc, "rms_norm_eps", lb, pa, false, &cfg->rms_norm_eps, err))) return rc;
    if (!(cfg->rms_norm_eps > 0.0 && cfg->rms_norm_eps < 1.0))
        return qhx_fail(err, QHX_E_FORMAT, "%srms_norm_eps: %g is outside (0, 1)", at.pre, cfg->rms_norm_eps);
    const json_t *eos = json_object_get(tc, "eos_token_id");
    if (json_is_array(eos)) eos = json_array_get(eos, 0);
    if (json_is_integer(eos)) cfg->eos_token_id = json_integer_value(eos);

    const char *act = "silu";
    if ((rc = qhx_json_get_str(tc, "hidden_act", lb, pa, false, &act, err))) return rc;
    if (strcmp(act, "silu"))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%shidden_act: '%s' is not supported (only 'silu')", at.pre, act);
    bool bias = false;
    if ((rc = qhx_json_get_bool(tc, "attention_bias", lb, pa, false, &bias, err))) return rc;
    if (bias) return qhx_fail(err, QHX_E_UNSUPPORTED, "%sattention_bias: true is not supported", at.pre);
    if ((rc = qhx_json_get_bool(tc, "attn_output_gate", lb, pa, false, &cfg->attn_output_gate, err))) return rc;
    if (!cfg->attn_output_gate)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%sattn_output_gate: false is not supported", at.pre);
    /* with no lm_head.weight the head is the embedding unless this says the two are untied
     * (qhx_wbind_embed_head); absent = tied, as the manifest reads it; the composite config's
     * top level wins, as in HF */
    cfg->tie_word_embeddings = true;
    if ((rc = qhx_json_get_bool(tc, "tie_word_embeddings", lb, pa, false, &cfg->tie_word_embeddings, err))) return rc;
    if (tc != root &&
        (rc = qhx_json_get_bool(root, "tie_word_embeddings", lb, "", false, &cfg->tie_word_embeddings, err)))
        return rc;

    if (cfg->num_attention_heads % cfg->num_key_value_heads)
        return qhx_fail(err, QHX_E_FORMAT, "%snum_attention_heads: %lld is not a multiple of num_key_value_heads %lld",
                        at.pre, (long long)cfg->num_attention_heads, (long long)cfg->num_key_value_heads);
    if (cfg->linear_num_value_heads % cfg->linear_num_key_heads)
        return qhx_fail(err, QHX_E_FORMAT,
                        "%slinear_num_value_heads: %lld is not a multiple of linear_num_key_heads %lld", at.pre,
                        (long long)cfg->linear_num_value_heads, (long long)cfg->linear_num_key_heads);

    /* layer_types, else every full_attention_interval-th layer is full attention */
    const json_t *lt = json_object_get(tc, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || (int64_t)json_array_size(lt) != cfg->num_hidden_layers)
            return qhx_fail(err, QHX_E_FORMAT, "%slayer_types: expected an array of num_hidden_layers = %lld strings",
                            at.pre, (long long)cfg->num_hidden_layers);
        for (int64_t i = 0; i < cfg->num_hidden_layers; i++) {
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (s && !strcmp(s, "linear_attention")) cfg->layer_types[i] = QHX_LAYER_LINEAR_ATTENTION;
            else if (s && !strcmp(s, "full_attention")) cfg->layer_types[i] = QHX_LAYER_FULL_ATTENTION;
            else
                return qhx_fail(err, QHX_E_UNSUPPORTED,
                                "%slayer_types[%lld]: '%s' is not supported (linear_attention, full_attention)",
                                at.pre, (long long)i, s ? s : "(not a string)");
        }
    } else {
        cfg->full_attention_interval = 4;
        if ((rc = qhx_json_get_int(tc, "full_attention_interval", lb, pa, false, 1, QHX_MODEL_MAX_LAYERS,
                                   &cfg->full_attention_interval, err)))
            return rc;
        for (int64_t i = 0; i < cfg->num_hidden_layers; i++)
            cfg->layer_types[i] = (i + 1) % cfg->full_attention_interval == 0 ? QHX_LAYER_FULL_ATTENTION
                                                                               : QHX_LAYER_LINEAR_ATTENTION;
    }
    return parse_rope(tc, &at, cfg, err);
}

static const char *const MODEL_TYPES[] = {"qwen3_5", "qwen3_5_text", NULL};

/* text first: a bundle's text manifest keeps the seed's name (NAME-CTX.json), and a checkpoint
 * folder runs it unless the caller asks for images (folder_images below) */
static const qhx_family_host_op HOST_OPS[] = {
    {"qwen3_5_generate", &qhx_hostop_text},
    {"qwen3_5_vl_generate", &qhx_hostop_image_text},
    {NULL, NULL},
};

/* The added tokens of the released tokenizers (Qwen3.5: 33, Qwen3-VL: the first 26 of them), in id
 * order from the end-of-text token on, and the special ids a checkpoint folder takes from them
 * (both as the released tokenizer_config.json files have them). */
static const qhx_family_token ADDED_TOKENS[] = {
    {"<|endoftext|>", true}, {"<|im_start|>", true}, {"<|im_end|>", true},
    {"<|object_ref_start|>", true}, {"<|object_ref_end|>", true}, {"<|box_start|>", true},
    {"<|box_end|>", true}, {"<|quad_start|>", true}, {"<|quad_end|>", true},
    {"<|vision_start|>", true}, {"<|vision_end|>", true}, {"<|vision_pad|>", true},
    {"<|image_pad|>", true}, {"<|video_pad|>", true}, {"<tool_call>", false},
    {"</tool_call>", false}, {"<|fim_prefix|>", false}, {"<|fim_middle|>", false},
    {"<|fim_suffix|>", false}, {"<|fim_pad|>", false}, {"<|repo_name|>", false},
    {"<|file_sep|>", false}, {"<tool_response>", false}, {"</tool_response>", false},
    {"<think>", false}, {"</think>", false}, {"<|audio_start|>", true}, {"<|audio_end|>", true},
    {"<tts_pad>", true}, {"<tts_text_bos>", true}, {"<tts_text_eod>", true},
    {"<tts_text_bos_single>", true}, {"<|audio_pad|>", true},
    {NULL, false},
};

static const qhx_plan_token_name SPECIAL_NAMES[] = {
    {"<|im_start|>", "im_start"},     {"<|im_end|>", "im_end"},       {"<|vision_start|>", "vision_start"},
    {"<|vision_end|>", "vision_end"}, {"<|image_pad|>", "image_pad"}, {"<|video_pad|>", "video_pad"},
    {"<think>", "think_start"},       {"</think>", "think_end"},      {NULL, NULL},
};

/* The Split pattern of the released tokenizer.json's pre-tokenizer (Qwen3.5's: a word's letters
 * take their marks, \p{M}, with them). */
static const char SPLIT_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const qhx_family_desc QHX_FAMILY_QWEN3_5 = {
    .name = "qwen3_5",
    .title = "Qwen3.5",
    .model_types = MODEL_TYPES,
    .chat = &qhx_chat_style_qwen35,
    .host_ops = HOST_OPS,
    .vision_prefix = QHX_QWEN35_VISION_PREFIX,
    .folder_images = false, /* a released folder opened for text leaves its 24-block tower unread */
    .added_tokens = ADDED_TOKENS,
    .special_names = SPECIAL_NAMES,
    .split_pattern = SPLIT_PATTERN,
    .bundle_context = 1024,
    .parse_config = qhx_qwen35_parse_config,
    .bind = qhx_qwen35_bind,
    .gguf = &QHX_QWEN35_GGUF,
};
