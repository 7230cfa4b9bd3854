/* families/qwen3vl/config.c: the Qwen3-VL family descriptor and the only parser of its
 * config.json (text_config and vision_config; spec/qwen3_vl.md). */
#include "families/qwen3vl/qwen3vl.h"

#include <string.h>

/* ---- text ------------------------------------------------------------------------------ */

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

static qhx_status parse_text(const json_t *root, const char *label, qhx_model_config *c, qhx_error *err) {
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
    c->image_token_id = 151655;
    GETI(root, "", "image_token_id", 0, big, &c->image_token_id, false);
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

/* ---- the whole file ---------------------------------------------------------------------- */

static qhx_status parse_vision(const json_t *root, const char *label, qhx_model_config *c, qhx_error *err) {
    const json_t *vc = json_object_get(root, "vision_config");
    if (!vc || json_is_null(vc)) return QHX_OK;
    if (!json_is_object(vc)) return qhx_fail(err, QHX_E_FORMAT, "%s: vision_config: expected an object", label);
    qhx_status rc = qhx_vit_config_parse(vc, label, &c->vision, err);
    if (rc) return rc;
    if (c->vision.out_hidden_size != c->hidden_size)
        return qhx_fail(err, QHX_E_FORMAT, "%s: vision_config.out_hidden_size %lld != text_config.hidden_size %lld",
                        label, (long long)c->vision.out_hidden_size, (long long)c->hidden_size);
    if (c->vision.n_deepstack > c->num_hidden_layers)
        return qhx_fail(err, QHX_E_FORMAT, "%s: vision_config: %lld deepstack taps for %lld decoder layers", label,
                        (long long)c->vision.n_deepstack, (long long)c->num_hidden_layers);
    c->has_vision = true;
    c->image_row_width = c->vision.out_hidden_size * (1 + c->vision.n_deepstack);
    return QHX_OK;
}

static qhx_status parse_config(const json_t *root, const char *label, qhx_model_config *c, qhx_error *err) {
    if (!json_is_object(root)) return qhx_fail(err, QHX_E_FORMAT, "%s: expected a JSON object", label);
    qhx_status rc = parse_text(root, label, c, err);
    return rc ? rc : parse_vision(root, label, c, err);
}

static const char *const MODEL_TYPES[] = {"qwen3_vl", "qwen3_vl_text", NULL};

static const qhx_family_host_op HOST_OPS[] = {
    {"qwen3_vl_generate", &qhx_hostop_image_text},
    {"qwen3_vl_text_generate", &qhx_hostop_text},
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
    {"<think>", false}, {"</think>", false},
    {NULL, false},
};

static const qhx_plan_token_name SPECIAL_NAMES[] = {
    {"<|im_start|>", "im_start"},     {"<|im_end|>", "im_end"},       {"<|vision_start|>", "vision_start"},
    {"<|vision_end|>", "vision_end"}, {"<|image_pad|>", "image_pad"}, {"<|video_pad|>", "video_pad"},
    {"<think>", "think_start"},       {"</think>", "think_end"},      {NULL, NULL},
};

/* The Split pattern of the released tokenizer.json's pre-tokenizer (the Qwen2 one). */
static const char SPLIT_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const qhx_family_desc QHX_FAMILY_QWEN3_VL = {
    .name = "qwen3_vl",
    .title = "Qwen3-VL",
    .model_types = MODEL_TYPES,
    .chat = &qhx_chat_style_qwen3vl,
    .host_ops = HOST_OPS,
    .vision_prefix = QHX_QWEN3VL_VISION_PREFIX,
    .folder_images = true,
    .added_tokens = ADDED_TOKENS,
    .special_names = SPECIAL_NAMES,
    .split_pattern = SPLIT_PATTERN,
    .bundle_context = 512,
    .parse_config = parse_config,
    .bind = qhx_qwen3vl_bind,
    .gguf = &QHX_QWEN3VL_GGUF,
};
