/* families/qwen3vl/gguf.c: Qwen3-VL's text decoder in GGUF files written by llama.cpp's
 * converter (architecture "qwen3vl"): its keys as the Hugging Face config, its tensor names as
 * the checkpoint's. The converter stores this family's values unchanged. */
#include "families/qwen3vl/qwen3vl.h"

#include "families/gguf_keys.h"

#include <stdio.h>

static const char *const ARCHS[] = {"qwen3vl", NULL};
static const char *const PROJECTORS[] = {"qwen3vl_merger", NULL};

#define LM "model.language_model."

static const qhx_gguf_name GLOBALS[] = {
    {"token_embd.weight", LM "embed_tokens.weight", 0},
    {"output_norm.weight", LM "norm.weight", 0},
    {"output.weight", "lm_head.weight", 0},
    {NULL, NULL, 0},
};

static const qhx_gguf_name BLOCK[] = {
    {"attn_norm.weight", "input_layernorm.weight", 0},
    {"ffn_norm.weight", "post_attention_layernorm.weight", 0},
    {"attn_q.weight", "self_attn.q_proj.weight", 0},
    {"attn_k.weight", "self_attn.k_proj.weight", 0},
    {"attn_v.weight", "self_attn.v_proj.weight", 0},
    {"attn_output.weight", "self_attn.o_proj.weight", 0},
    {"attn_q_norm.weight", "self_attn.q_norm.weight", 0},
    {"attn_k_norm.weight", "self_attn.k_norm.weight", 0},
    {"ffn_gate.weight", "mlp.gate_proj.weight", 0},
    {"ffn_up.weight", "mlp.up_proj.weight", 0},
    {"ffn_down.weight", "mlp.down_proj.weight", 0},
    {NULL, NULL, 0},
};

static const qhx_gguf_int_key INT_KEYS[] = {
    {"embedding_length", "hidden_size", true},
    {"feed_forward_length", "intermediate_size", true},
    {"block_count", "num_hidden_layers", true},
    {"attention.head_count", "num_attention_heads", true},
    {"attention.head_count_kv", "num_key_value_heads", false},
    {"attention.key_length", "head_dim", false},
    {"context_length", "max_position_embeddings", false},
    {NULL, NULL, false},
};

static qhx_status text_config(const qhx_gguf *g, const char *arch, json_t *tc, qhx_error *err) {
    qhx_status rc;
    if ((rc = qhx_gguf_copy_ints(g, arch, INT_KEYS, tc, NULL, err))) return rc;
    int64_t rows, cols;
    if ((rc = qhx_gguf_embedding_shape(g, &rows, &cols, err))) return rc;
    double eps = 1e-6, theta = 5000000.0;
    if ((rc = qhx_gguf_arch_float(g, arch, "attention.layer_norm_rms_epsilon", true, &eps, err)) ||
        (rc = qhx_gguf_arch_float(g, arch, "rope.freq_base", false, &theta, err)))
        return rc;
    json_t *rp = json_object(), *sections = NULL;
    if (!rp || json_object_set_new(tc, "rope_scaling", rp)) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    if ((rc = qhx_gguf_arch_sections(g, arch, &sections, err))) return rc;
    if (sections) json_object_set_new(rp, "mrope_section", sections);
    json_object_set_new(rp, "rope_type", json_string("default"));
    json_object_set_new(rp, "mrope_interleaved", json_true());
    json_object_set_new(tc, "rope_theta", json_real(theta));
    json_object_set_new(tc, "model_type", json_string("qwen3_vl_text"));
    json_object_set_new(tc, "rms_norm_eps", json_real(eps));
    json_object_set_new(tc, "vocab_size", json_integer(rows));
    return QHX_OK;
}

const qhx_family_gguf QHX_QWEN3VL_GGUF = {
    .archs = ARCHS,
    .projectors = PROJECTORS,
    .globals = GLOBALS,
    .block = BLOCK,
    .layer_prefix = LM "layers.",
    .model_type = "qwen3_vl",
    .text_config = text_config,
};
