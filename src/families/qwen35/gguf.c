/* families/qwen35/gguf.c: Qwen3.5 in GGUF files written by llama.cpp's converter (architecture
 * "qwen35"): its keys as the Hugging Face config, its tensor names as the checkpoint's. What
 * the converter changed in the values (norm weights stored as 1 + w, -exp(A_log), the value
 * heads' tiled order) the net reads through qhx_model_config.llama_cpp_layout. */
#include "families/qwen35/qwen35.h"

#include "families/gguf_keys.h"

#include <math.h>
#include <stdio.h>

static const char *const ARCHS[] = {"qwen35", NULL};
static const char *const PROJECTORS[] = {"qwen3vl_merger", NULL}; /* Qwen3.5's tower is Qwen3-VL's */

#define LM "model.language_model."

static const qhx_gguf_name GLOBALS[] = {
    {"token_embd.weight", LM "embed_tokens.weight", 0},
    {"output_norm.weight", LM "norm.weight", 0},
    {"output.weight", "lm_head.weight", 0},
    {NULL, NULL, 0},
};

static const qhx_gguf_name BLOCK[] = {
    {"attn_norm.weight", "input_layernorm.weight", 0},
    {"post_attention_norm.weight", "post_attention_layernorm.weight", 0},
    {"ffn_gate.weight", "mlp.gate_proj.weight", 0},
    {"ffn_up.weight", "mlp.up_proj.weight", 0},
    {"ffn_down.weight", "mlp.down_proj.weight", 0},
    /* Gated DeltaNet */
    {"attn_qkv.weight", "linear_attn.in_proj_qkv.weight", 0},
    {"attn_gate.weight", "linear_attn.in_proj_z.weight", 0},
    {"ssm_beta.weight", "linear_attn.in_proj_b.weight", 0},
    {"ssm_alpha.weight", "linear_attn.in_proj_a.weight", 0},
    {"ssm_out.weight", "linear_attn.out_proj.weight", 0},
    {"ssm_conv1d.weight", "linear_attn.conv1d.weight", QHX_GGUF_MAP_UNSQUEEZE1},
    {"ssm_a", "linear_attn.A", 0}, /* -exp(A_log) */
    {"ssm_dt.bias", "linear_attn.dt_bias", 0},
    {"ssm_norm.weight", "linear_attn.norm.weight", 0},
    /* gated attention */
    {"attn_q.weight", "self_attn.q_proj.weight", 0},
    {"attn_k.weight", "self_attn.k_proj.weight", 0},
    {"attn_v.weight", "self_attn.v_proj.weight", 0},
    {"attn_output.weight", "self_attn.o_proj.weight", 0},
    {"attn_q_norm.weight", "self_attn.q_norm.weight", 0},
    {"attn_k_norm.weight", "self_attn.k_norm.weight", 0},
    {NULL, NULL, 0},
};

/* the MTP block's own tensors (llama.cpp's nextn names) */
static const qhx_gguf_name MTP_NAMES[] = {
    {"nextn.eh_proj.weight", "mtp.fc.weight", 0},
    {"nextn.enorm.weight", "mtp.pre_fc_norm_embedding.weight", 0},
    {"nextn.hnorm.weight", "mtp.pre_fc_norm_hidden.weight", 0},
    {"nextn.shared_head_norm.weight", "mtp.norm.weight", 0},
    {NULL, NULL, 0},
};

static qhx_status set_int(json_t *o, const char *key, int64_t v, qhx_error *err) {
    return json_object_set_new(o, key, json_integer(v)) ? qhx_fail(err, QHX_E_NOMEM, "out of memory") : QHX_OK;
}

/* The integer keys of the text config: <arch>.<key> -> config name (the order text_config reads
 * their values in). */
static const qhx_gguf_int_key INT_KEYS[] = {
    {"embedding_length", "hidden_size", true},
    {"feed_forward_length", "intermediate_size", true},
    {"attention.head_count", "num_attention_heads", true},
    {"attention.head_count_kv", "num_key_value_heads", true},
    {"ssm.conv_kernel", "linear_conv_kernel_dim", true},
    {"ssm.state_size", "linear_key_head_dim", true},
    {"ssm.group_count", "linear_num_key_heads", true},
    {"ssm.time_step_rank", "linear_num_value_heads", true},
    {"context_length", "max_position_embeddings", false},
    {"full_attention_interval", "full_attention_interval", false},
    {NULL, NULL, false},
};

static qhx_status text_config(const qhx_gguf *g, const char *arch, json_t *tc, qhx_error *err) {
    const char *label = qhx_gguf_label(g);
    qhx_status rc;
    int64_t v[sizeof INT_KEYS / sizeof INT_KEYS[0]];
    if ((rc = qhx_gguf_copy_ints(g, arch, INT_KEYS, tc, v, err))) return rc;
    int64_t blocks, nextn = 0, inner, nv = v[7], nh = v[2], H = v[0], hd, rot, rows, cols;
    if ((rc = qhx_gguf_arch_int(g, arch, "block_count", true, &blocks, err)) ||
        (rc = qhx_gguf_arch_int(g, arch, "nextn_predict_layers", false, &nextn, err)) ||
        (rc = qhx_gguf_arch_int(g, arch, "ssm.inner_size", true, &inner, err)))
        return rc;
    hd = nh > 0 ? H / nh : 0;
    if ((rc = qhx_gguf_arch_int(g, arch, "attention.key_length", false, &hd, err))) return rc;
    rot = hd;
    if ((rc = qhx_gguf_arch_int(g, arch, "rope.dimension_count", false, &rot, err))) return rc;
    if (nextn < 0 || blocks <= nextn)
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: %s.block_count %lld leaves no decoder layer beside %lld MTP layers",
                        label, arch, (long long)blocks, (long long)nextn);
    if (nv <= 0 || inner % nv)
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: %s.ssm.inner_size %lld is not a multiple of %lld value heads",
                        label, arch, (long long)inner, (long long)nv);
    if (hd <= 0 || rot <= 0 || rot > hd || (int64_t)(hd * ((double)rot / (double)hd)) != rot)
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: %s.rope.dimension_count %lld does not fit heads of %lld",
                        label, arch, (long long)rot, (long long)hd);
    if ((rc = qhx_gguf_embedding_shape(g, &rows, &cols, err))) return rc;
    if (cols != H)
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: token_embd.weight has %lld columns, %s.embedding_length is %lld",
                        label, (long long)cols, arch, (long long)H);
    double eps = 1e-6, theta = 10000.0;
    if ((rc = qhx_gguf_arch_float(g, arch, "attention.layer_norm_rms_epsilon", true, &eps, err)) ||
        (rc = qhx_gguf_arch_float(g, arch, "rope.freq_base", false, &theta, err)))
        return rc;
    json_t *rp = json_object(), *sections = NULL;
    if (!rp || json_object_set_new(tc, "rope_parameters", rp)) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    if ((rc = qhx_gguf_arch_sections(g, arch, &sections, err))) return rc;
    if (sections) json_object_set_new(rp, "mrope_section", sections);
    json_object_set_new(rp, "rope_type", json_string("default"));
    json_object_set_new(rp, "rope_theta", json_real(theta));
    json_object_set_new(rp, "partial_rotary_factor", json_real((double)rot / (double)hd));
    json_object_set_new(rp, "mrope_interleaved", json_true()); /* Qwen3.5 always interleaves */
    json_object_set_new(tc, "model_type", json_string("qwen3_5_text"));
    json_object_set_new(tc, "rms_norm_eps", json_real(eps));
    json_object_set_new(tc, "attn_output_gate", json_true());
    if ((rc = set_int(tc, "vocab_size", rows, err)) || (rc = set_int(tc, "num_hidden_layers", blocks - nextn, err)) ||
        (rc = set_int(tc, "mtp_num_hidden_layers", nextn, err)) || (rc = set_int(tc, "head_dim", hd, err)) ||
        (rc = set_int(tc, "linear_value_head_dim", inner / nv, err)))
        return rc;
    return QHX_OK;
}

const qhx_family_gguf QHX_QWEN35_GGUF = {
    .archs = ARCHS,
    .projectors = PROJECTORS,
    .globals = GLOBALS,
    .block = BLOCK,
    .mtp_names = MTP_NAMES,
    .layer_prefix = LM "layers.",
    .mtp_prefix = "mtp.layers.",
    .model_type = "qwen3_5",
    .text_config = text_config,
};
