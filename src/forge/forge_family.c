/* forge_family: the two families' shapes (presets), the tensor list of their Hugging Face
 * checkpoints, and the JSON side files (config, generation config, tokenizer) of a random one.
 * Tensor names, shapes and draw order follow the parity fixtures' generator
 * (tests/data/oracle/make_tiny.py) so the tiny preset has exactly the fixtures' layout; the 2b
 * preset uses spec/qwen3_5.md §1.2 and spec/qwen3_vl.md §1, §7. */
#include "forge/forge_internal.h"

#include "core/alloc.h"
#include "families/family.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

// ---- presets -------------------------------------------------------------------------------------

int forge_family_from_name(const char *name) {
    if (!strcmp(name, "qwen3_5")) return FORGE_QWEN3_5;
    if (!strcmp(name, "qwen3_vl")) return FORGE_QWEN3_VL;
    return -1;
}

const char *forge_family_name(forge_family f) { return f == FORGE_QWEN3_5 ? "qwen3_5" : "qwen3_vl"; }

/* demo: a small Qwen3.5-shaped model (hidden 256, 8 layers) whose vocabulary fits the real
 * Qwen3 tokenizer (151,643 BPE ids, then the added tokens from the end-of-text one = 151643 on, the
 * same first ids as Qwen3.5's), for `make demo`: fast to make and to run, output meaningless. */
static qhx_status demo_preset(forge_family family, forge_dims *o, qhx_error *err) {
    if (family != FORGE_QWEN3_5) return qhx_fail(err, QHX_E_ARG, "the demo preset exists for qwen3_5 only");
    o->preset = "demo";
    o->w_std = 0.04;
    o->emb_std = 0.04;
    o->hidden = 256;
    o->layers = 8;
    o->inter = 768;
    o->nh = 4;
    o->nkv = 2;
    o->hd = 64;
    o->nk = o->nv = 4;
    o->dk = o->dv = 64;
    o->conv_k = 4;
    o->attn_interval = 4;
    o->partial_rotary = 0.25;
    o->rope_theta = 1e7;
    o->mrope[0] = 3, o->mrope[1] = 3, o->mrope[2] = 2;
    o->vocab = 151936;
    o->n_bpe = 151643;
    o->mtp_layers = 1;
    o->qkv_std = 0.1;
    o->conv_std = 0.5;
    o->qk_corr = 0.8;
    o->v_depth = 24; /* the vision config the demo's config.json describes (no tower is written) */
    o->v_hidden = 1024;
    o->v_heads = 16;
    o->v_inter = 4096;
    o->v_patch = 16;
    o->v_tp = 2;
    o->v_merge = 2;
    o->v_num_pos = 2304;
    o->pos_std = 0.3;
    return QHX_OK;
}

/* The released Qwen3.5 dense sizes: the text_config and vision_config values of each model's
 * config.json. Shared by every size (and by the 2B): vocab 248320 (BPE ids up to 248044, the
 * added tokens from there on), head_dim 256, linear_key_head_dim = linear_value_head_dim 128,
 * linear_num_key_heads 16, linear_conv_kernel_dim 4, full_attention_interval 4, rope_theta 1e7,
 * partial_rotary_factor 0.25, mrope_section [11, 11, 10] interleaved, rms_norm_eps 1e-6,
 * mtp_num_hidden_layers 1; vision patch 16, temporal patch 2, merge 2, 2304 position rows, no
 * DeepStack. Where each row comes from (public copies of the released config.json files, read in
 * the code index; spec/qwen3_5.md §1.2 for the 2B):
 *   0.8b: Megatron arguments of THUDM/slime scripts/models/qwen3.5-0.8B.sh (hidden 1024, 24 layers,
 *         FFN 3584, 8 heads, 2 query groups, kv-channels 256, vocab 248320, tied: no
 *         --untie-embeddings-and-output-weights); the linear-attention heads, layer_types and
 *         vision_config from third-party tests that quote the released Qwen/Qwen3.5-0.8B
 *         config.json (linear heads 16 k / 16 v of 128 -- the 2B's, not smaller; vision depth 12,
 *         hidden 768, 12 heads, FFN 3072, out 1024);
 *   2b:   spec/qwen3_5.md §1.2 (the released Qwen/Qwen3.5-2B config.json);
 *   4b:   third-party tests quoting the released Qwen/Qwen3.5-4B(-Base) config.json: hidden 2560,
 *         32 layers, FFN 9216, 16 heads, 4 kv heads, linear 16 k / 32 v heads of 128, tied; vision
 *         depth 24, hidden 1024, 16 heads, FFN 4096, out 2560;
 *   9b:   a third-party test quoting the released Qwen/Qwen3.5-9B config.json (its NVFP4 export,
 *         same geometry): hidden 4096, 32 layers, FFN 12288, 16 heads, 4 kv heads, linear 16 k /
 *         32 v heads of 128, untied (tie_word_embeddings false: an lm_head.weight of its own),
 *         mtp 1; vision depth 27, hidden 1152, 16 heads, FFN 4304, out 4096;
 *   27b:  THUDM/slime scripts/models/qwen3.5-27B.sh (hidden 5120, 64 layers, FFN 17408, 24 heads,
 *         4 query groups, kv-channels 256, --untie-embeddings-and-output-weights) and third-party
 *         tests quoting the released Qwen/Qwen3.5-27B config.json: linear 16 k / 48 v heads of 128,
 *         mtp 1, vision depth 27, hidden 1152, 16 heads, FFN 4304, out 5120.
 * The rope settings of the 9b row are not in its quoted file; they are the family's (the same
 * in every other released size's file), not read from the 9B's own. */
typedef struct q35_size {
    const char *name;
    int64_t hidden, layers, inter, nh, nkv, nv;
    int tied;
    int64_t v_depth, v_hidden, v_heads, v_inter;
} q35_size;

static const q35_size Q35_SIZES[] = {
    {"0.8b", 1024, 24, 3584, 8, 2, 16, 1, 12, 768, 12, 3072},
    {"2b", 2048, 24, 6144, 8, 2, 16, 1, 24, 1024, 16, 4096},
    {"4b", 2560, 32, 9216, 16, 4, 32, 1, 24, 1024, 16, 4096},
    {"9b", 4096, 32, 12288, 16, 4, 32, 0, 27, 1152, 16, 4304},
    {"27b", 5120, 64, 17408, 24, 4, 48, 0, 27, 1152, 16, 4304},
};
#define N_Q35_SIZES ((int)(sizeof Q35_SIZES / sizeof Q35_SIZES[0]))

#define PRESET_CHOICES "tiny, demo, 0.8b, 2b, 4b, 9b or 27b"

/* A released Qwen3.5 size: its config's shapes, initializer-like 0.02 weights so activations stay
 * O(1) at widths of 1024 to 5120. */
static void released_qwen35(const q35_size *z, forge_dims *o) {
    o->preset = z->name;
    o->w_std = o->emb_std = 0.02;
    o->hidden = z->hidden;
    o->layers = z->layers;
    o->inter = z->inter;
    o->nh = z->nh;
    o->nkv = z->nkv;
    o->hd = 256;
    o->nk = 16;
    o->nv = z->nv;
    o->dk = o->dv = 128;
    o->conv_k = 4;
    o->attn_interval = 4;
    o->partial_rotary = 0.25;
    o->rope_theta = 1e7;
    o->mrope[0] = 11, o->mrope[1] = 11, o->mrope[2] = 10;
    o->vocab = 248320;
    o->n_bpe = 248044;
    o->mtp_layers = 1;
    o->tied = z->tied;
    o->qkv_std = 0.02;
    o->conv_std = 0.3;
    o->qk_corr = 0.8;
    o->v_depth = z->v_depth; /* the released tower's config (weights written only with --vision) */
    o->v_hidden = z->v_hidden;
    o->v_heads = z->v_heads;
    o->v_inter = z->v_inter;
    o->v_patch = 16;
    o->v_tp = 2;
    o->v_merge = 2;
    o->v_num_pos = 2304;
    o->n_deepstack = 0;
    o->pos_std = 0.3;
}

qhx_status forge_preset(forge_family family, const char *preset, forge_dims *o, qhx_error *err) {
    memset(o, 0, sizeof *o);
    o->family = family;
    o->eps = 1e-6;
    o->tied = 1;
    if (!strcmp(preset, "demo")) return demo_preset(family, o, err);
    if (family == FORGE_QWEN3_5)
        for (int k = 0; k < N_Q35_SIZES; k++)
            if (!strcmp(preset, Q35_SIZES[k].name)) {
                released_qwen35(&Q35_SIZES[k], o);
                return QHX_OK;
            }
    int tiny = !strcmp(preset, "tiny"), b2 = !strcmp(preset, "2b");
    if (!tiny && !b2) {
        if (family == FORGE_QWEN3_VL)
            return qhx_fail(err, QHX_E_ARG, "unknown qwen3_vl preset '%s' (expected tiny, demo or 2b)", preset);
        return qhx_fail(err, QHX_E_ARG, "unknown preset '%s' (expected " PRESET_CHOICES ")", preset);
    }
    o->preset = tiny ? "tiny" : "2b";
    /* tiny: the fixtures' scales; 2b: initializer-like 0.02 so activations stay O(1) at width 2048 */
    o->w_std = tiny ? 0.05 : 0.02;
    o->emb_std = tiny ? 0.05 : 0.02;
    if (family == FORGE_QWEN3_5) {
        o->hidden = 64;
        o->layers = 8;
        o->inter = 128;
        o->nh = 4;
        o->nkv = 2;
        o->hd = 32;
        o->nk = 4;
        o->nv = 4;
        o->dk = o->dv = 16;
        o->conv_k = 4;
        o->attn_interval = 4;
        o->partial_rotary = 0.25;
        o->rope_theta = 1e7;
        o->mrope[0] = 2;
        o->mrope[1] = 1;
        o->mrope[2] = 1;
        o->vocab = 1024;
        o->n_bpe = 960;
        o->mtp_layers = 1;
        o->qkv_std = 0.1;
        o->conv_std = 0.5;
        o->qk_corr = 0.8;
        /* the tower the config describes (written only with --vision); no DeepStack
         * (Qwen3_5VisionModel has none) */
        o->v_depth = 2;
        o->v_hidden = 32;
        o->v_heads = 2;
        o->v_inter = 64;
        o->v_patch = 16;
        o->v_tp = 2;
        o->v_merge = 2;
        o->v_num_pos = 64;
        o->n_deepstack = 0;
        o->pos_std = 0.3;
    } else {
        o->hidden = tiny ? 64 : 2048;
        o->layers = tiny ? 4 : 28;
        o->inter = tiny ? 128 : 6144;
        o->nh = tiny ? 4 : 16;
        o->nkv = tiny ? 2 : 8;
        o->hd = tiny ? 32 : 128;
        o->rope_theta = 5e6;
        o->mrope[0] = tiny ? 6 : 24;
        o->mrope[1] = tiny ? 5 : 20;
        o->mrope[2] = tiny ? 5 : 20;
        o->vocab = tiny ? 1024 : 151936;
        o->n_bpe = tiny ? 990 : 151643;
        o->v_depth = tiny ? 4 : 24;
        o->v_hidden = tiny ? 64 : 1024;
        o->v_heads = tiny ? 4 : 16;
        o->v_inter = tiny ? 128 : 4096;
        o->v_patch = 16;
        o->v_tp = 2;
        o->v_merge = 2;
        o->v_num_pos = tiny ? 64 : 2304;
        o->n_deepstack = tiny ? 2 : 3;
        o->deepstack[0] = tiny ? 1 : 5;
        o->deepstack[1] = tiny ? 2 : 11;
        o->deepstack[2] = 17;
        o->pos_std = 0.3;
    }
    return QHX_OK;
}

// ---- tensor list ---------------------------------------------------------------------------------

typedef struct tlist {
    forge_tdesc *t;
    int64_t n, cap;
    int oom;
} tlist;

static forge_tdesc *add(tlist *l, double mean, double std, int n_dims, const int64_t *shape, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static forge_tdesc *add(tlist *l, double mean, double std, int n_dims, const int64_t *shape, const char *fmt, ...) {
    if (l->oom) return NULL;
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 256;
        forge_tdesc *t = qhx_realloc(l->t, (size_t)cap * sizeof *t);
        if (!t) {
            l->oom = 1;
            return NULL;
        }
        l->t = t;
        l->cap = cap;
    }
    forge_tdesc *d = &l->t[l->n++];
    memset(d, 0, sizeof *d);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->name, sizeof d->name, fmt, ap);
    va_end(ap);
    d->n_dims = n_dims;
    for (int i = 0; i < n_dims; i++) d->shape[i] = shape[i];
    d->mean = mean;
    d->std = std;
    return d;
}

#define SH(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* matrix / vector helpers: name built from a prefix and a suffix */
#define MAT(l, std, r, c, ...) add(l, 0.0, std, 2, SH(r, c), __VA_ARGS__)
#define VEC(l, mean, std, n, ...) add(l, mean, std, 1, SH(n), __VA_ARGS__)

static int is_full_attention(const forge_dims *d, int64_t i) { return (i + 1) % d->attn_interval == 0; }

static void q35_attn(tlist *l, const forge_dims *d, const char *p) {
    const int64_t H = d->hidden;
    MAT(l, d->w_std, d->nh * d->hd * 2, H, "%sself_attn.q_proj.weight", p);
    MAT(l, d->w_std, d->nkv * d->hd, H, "%sself_attn.k_proj.weight", p);
    MAT(l, d->w_std, d->nkv * d->hd, H, "%sself_attn.v_proj.weight", p);
    MAT(l, d->w_std, H, d->nh * d->hd, "%sself_attn.o_proj.weight", p);
    VEC(l, 0.0, 0.1, d->hd, "%sself_attn.q_norm.weight", p); /* zero-centred norms: 1 + w */
    VEC(l, 0.0, 0.1, d->hd, "%sself_attn.k_norm.weight", p);
}

static void q35_mlp_norms(tlist *l, const forge_dims *d, const char *p) {
    const int64_t H = d->hidden, I = d->inter;
    VEC(l, 0.0, 0.1, H, "%sinput_layernorm.weight", p);
    VEC(l, 0.0, 0.1, H, "%spost_attention_layernorm.weight", p);
    MAT(l, d->w_std, I, H, "%smlp.gate_proj.weight", p);
    MAT(l, d->w_std, I, H, "%smlp.up_proj.weight", p);
    MAT(l, d->w_std, H, I, "%smlp.down_proj.weight", p);
}

static void qwen35_list(tlist *l, const forge_dims *d) {
    const int64_t H = d->hidden, key_dim = d->nk * d->dk, value_dim = d->nv * d->dv;
    const int64_t conv_dim = 2 * key_dim + value_dim;
    const char *P = "model.language_model.";
    MAT(l, d->emb_std, d->vocab, H, "%sembed_tokens.weight", P);
    char p[96];
    for (int64_t i = 0; i < d->layers; i++) {
        snprintf(p, sizeof p, "%slayers.%lld.", P, (long long)i);
        q35_mlp_norms(l, d, p);
        if (is_full_attention(d, i)) {
            q35_attn(l, d, p);
            continue;
        }
        forge_tdesc *t = MAT(l, d->qkv_std, conv_dim, H, "%slinear_attn.in_proj_qkv.weight", p);
        if (t) t->corr_rows = key_dim, t->corr = d->qk_corr;
        MAT(l, d->w_std, value_dim, H, "%slinear_attn.in_proj_z.weight", p);
        MAT(l, d->w_std, d->nv, H, "%slinear_attn.in_proj_b.weight", p);
        MAT(l, d->w_std, d->nv, H, "%slinear_attn.in_proj_a.weight", p);
        t = add(l, 0.0, d->conv_std, 3, SH(conv_dim, 1, d->conv_k), "%slinear_attn.conv1d.weight", p);
        if (t) t->corr_rows = key_dim, t->corr = d->qk_corr;
        t = VEC(l, 0.0, 0.0, d->nv, "%slinear_attn.A_log", p);
        if (t) {
            t->draw = DRAW_LOG_UNIFORM_1_16;
            t->keep_f32 = 1;
        }
        VEC(l, 0.0, 0.5, d->nv, "%slinear_attn.dt_bias", p);
        t = VEC(l, 1.0, 0.1, d->dv, "%slinear_attn.norm.weight", p); /* plain norm: w */
        if (t) t->keep_f32 = 1;
        MAT(l, d->w_std, H, value_dim, "%slinear_attn.out_proj.weight", p);
    }
    VEC(l, 0.0, 0.1, H, "%snorm.weight", P);
    /* an untied head: its own matrix, drawn after the final norm (make_tiny.py's order) */
    if (!d->tied) MAT(l, d->emb_std, d->vocab, H, "lm_head.weight");
    for (int64_t m = 0; m < d->mtp_layers; m++) {
        snprintf(p, sizeof p, "mtp.layers.%lld.", (long long)m);
        q35_mlp_norms(l, d, p);
        q35_attn(l, d, p);
    }
    if (d->mtp_layers) {
        MAT(l, d->w_std, H, 2 * H, "mtp.fc.weight");
        VEC(l, 0.0, 0.1, H, "mtp.pre_fc_norm_embedding.weight");
        VEC(l, 0.0, 0.1, H, "mtp.pre_fc_norm_hidden.weight");
        VEC(l, 0.0, 0.1, H, "mtp.norm.weight");
    }
}

static void merger(tlist *l, const forge_dims *d, const char *p, int64_t norm_dim) {
    const int64_t MH = d->v_hidden * d->v_merge * d->v_merge;
    VEC(l, 1.0, 0.1, norm_dim, "%snorm.weight", p);
    VEC(l, 0.0, 0.02, norm_dim, "%snorm.bias", p);
    MAT(l, d->w_std, MH, MH, "%slinear_fc1.weight", p);
    VEC(l, 0.0, 0.02, MH, "%slinear_fc1.bias", p);
    MAT(l, d->w_std, d->hidden, MH, "%slinear_fc2.weight", p);
    VEC(l, 0.0, 0.02, d->hidden, "%slinear_fc2.bias", p);
}

/* model.visual.*: patch embedding, position table, blocks, merger, DeepStack mergers */
static void vision_tower(tlist *l, const forge_dims *d) {
    const int64_t VH = d->v_hidden, VI = d->v_inter;
    const int64_t MH = VH * d->v_merge * d->v_merge;
    const char *V = "model.visual.";
    add(l, 0.0, d->w_std, 5, SH(VH, 3, d->v_tp, d->v_patch, d->v_patch), "%spatch_embed.proj.weight", V);
    VEC(l, 0.0, 0.02, VH, "%spatch_embed.proj.bias", V);
    MAT(l, d->pos_std, d->v_num_pos, VH, "%spos_embed.weight", V);
    char p[96];
    for (int64_t i = 0; i < d->v_depth; i++) {
        snprintf(p, sizeof p, "%sblocks.%lld.", V, (long long)i);
        VEC(l, 1.0, 0.1, VH, "%snorm1.weight", p);
        VEC(l, 0.0, 0.02, VH, "%snorm1.bias", p);
        VEC(l, 1.0, 0.1, VH, "%snorm2.weight", p);
        VEC(l, 0.0, 0.02, VH, "%snorm2.bias", p);
        MAT(l, 2 * d->w_std, 3 * VH, VH, "%sattn.qkv.weight", p);
        VEC(l, 0.0, 0.02, 3 * VH, "%sattn.qkv.bias", p);
        MAT(l, d->w_std, VH, VH, "%sattn.proj.weight", p);
        VEC(l, 0.0, 0.02, VH, "%sattn.proj.bias", p);
        MAT(l, 2 * d->w_std, VI, VH, "%smlp.linear_fc1.weight", p);
        VEC(l, 0.0, 0.02, VI, "%smlp.linear_fc1.bias", p);
        MAT(l, d->w_std, VH, VI, "%smlp.linear_fc2.weight", p);
        VEC(l, 0.0, 0.02, VH, "%smlp.linear_fc2.bias", p);
    }
    snprintf(p, sizeof p, "%smerger.", V);
    merger(l, d, p, VH);
    for (int64_t j = 0; j < d->n_deepstack; j++) {
        snprintf(p, sizeof p, "%sdeepstack_merger_list.%lld.", V, (long long)j);
        merger(l, d, p, MH);
    }
}

static void qwen3vl_list(tlist *l, const forge_dims *d) {
    const int64_t H = d->hidden, I = d->inter;
    char p[96];
    vision_tower(l, d);
    const char *P = "model.language_model.";
    MAT(l, d->emb_std, d->vocab, H, "%sembed_tokens.weight", P);
    for (int64_t i = 0; i < d->layers; i++) {
        snprintf(p, sizeof p, "%slayers.%lld.", P, (long long)i);
        VEC(l, 1.0, 0.1, H, "%sinput_layernorm.weight", p);
        VEC(l, 1.0, 0.1, H, "%spost_attention_layernorm.weight", p);
        MAT(l, d->w_std, d->nh * d->hd, H, "%sself_attn.q_proj.weight", p);
        MAT(l, d->w_std, d->nkv * d->hd, H, "%sself_attn.k_proj.weight", p);
        MAT(l, d->w_std, d->nkv * d->hd, H, "%sself_attn.v_proj.weight", p);
        MAT(l, d->w_std, H, d->nh * d->hd, "%sself_attn.o_proj.weight", p);
        VEC(l, 1.0, 0.1, d->hd, "%sself_attn.q_norm.weight", p);
        VEC(l, 1.0, 0.1, d->hd, "%sself_attn.k_norm.weight", p);
        MAT(l, d->w_std, I, H, "%smlp.gate_proj.weight", p);
        MAT(l, d->w_std, I, H, "%smlp.up_proj.weight", p);
        MAT(l, d->w_std, H, I, "%smlp.down_proj.weight", p);
    }
    VEC(l, 1.0, 0.1, H, "%snorm.weight", P);
}

qhx_status forge_tensor_list(const forge_dims *d, forge_tdesc **out, int64_t *n, qhx_error *err) {
    tlist l = {0};
    if (d->family == FORGE_QWEN3_5) {
        qwen35_list(&l, d);
        if (d->with_vision) vision_tower(&l, d); /* last, as the released files and make_tiny.py order it */
    } else {
        qwen3vl_list(&l, d);
    }
    if (l.oom) {
        qhx_free(l.t);
        *out = NULL;
        *n = 0;
        return qhx_fail(err, QHX_E_NOMEM, "out of memory for the tensor list");
    }
    *out = l.t;
    *n = l.n;
    return QHX_OK;
}

// ---- tokens --------------------------------------------------------------------------------------

/* The added tokens are the family's (its descriptor's added_tokens, in id order after the BPE
 * ids); the ids the configs name are looked up by the manifest key the family gives each. */
static const qhx_family_desc *desc_of(const forge_dims *d) { return qhx_family_find(forge_family_name(d->family)); }

static const qhx_family_token *added_of(const forge_dims *d) {
    static const qhx_family_token none[] = {{NULL, false}};
    const qhx_family_desc *f = desc_of(d);
    return f && f->added_tokens ? f->added_tokens : none;
}

static int64_t n_added(const forge_dims *d) {
    int64_t n = 0;
    for (const qhx_family_token *t = added_of(d); t->text; t++) n++;
    return n;
}

static int64_t tok_id(const forge_dims *d, int64_t k) { return d->n_bpe + k; }

/* The first added token ends a text (the pad and end-of-text id). */
#define ID_ENDOFTEXT 0

/* The index among the added tokens of the one the family names by key ("im_end", "image_pad"...),
 * or -1. */
static int64_t added_index(const forge_dims *d, const char *key) {
    const qhx_family_desc *f = desc_of(d);
    const char *text = NULL;
    for (const qhx_plan_token_name *n = f ? f->special_names : NULL; n && n->text && !text; n++)
        if (!strcmp(n->key, key)) text = n->text;
    int64_t k = 0;
    for (const qhx_family_token *t = added_of(d); text && t->text; t++, k++)
        if (!strcmp(t->text, text)) return k;
    return -1;
}

/* The id of the added token the family names by key. */
static json_int_t key_id(const forge_dims *d, const char *key) {
    int64_t k = added_index(d, key);
    return k < 0 ? -1 : (json_int_t)tok_id(d, k);
}

/* GPT-2 bytes_to_unicode: byte-level token id i (0..255) is the code point cp[i]. */
static void byte_alphabet(uint32_t cp[256]) {
    int n = 0, extra = 0;
    uint8_t in_first[256] = {0};
    for (int b = 0; b < 256; b++)
        if ((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) {
            cp[n++] = (uint32_t)b;
            in_first[b] = 1;
        }
    for (int b = 0; b < 256; b++)
        if (!in_first[b]) cp[n++] = 256u + (uint32_t)extra++;
}

static size_t put_utf8(char *o, uint32_t c) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    o[0] = (char)(0xc0 | (c >> 6));
    o[1] = (char)(0x80 | (c & 0x3f));
    return 2; /* every code point of the alphabet is < 0x800 */
}

static json_t *bytelevel(void) {
    return json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0,
                     "use_regex", 0);
}

/* Filler merges: all pairs of the 256 byte tokens in id order, then (pair, byte) triples, until
 * n_bpe ids exist. Every merge joins two existing tokens into a new string, so the vocabulary is
 * a valid BPE one; the tokenizer just splits text into 2-3 byte pieces. */
json_t *forge_tokenizer_json(const forge_dims *d) {
    uint32_t cp[256];
    byte_alphabet(cp);
    char s[256][3];
    for (int i = 0; i < 256; i++) s[i][put_utf8(s[i], cp[i])] = '\0';
    json_t *vocab = json_object(), *merges = json_array(), *added = json_array();
    int ok = vocab && merges && added;
    int64_t id = 0;
    char buf[16];
    for (int i = 0; ok && i < 256 && id < d->n_bpe; i++) ok = !json_object_set_new(vocab, s[i], json_integer(id++));
    for (int64_t k = 0; ok && id < d->n_bpe; k++) {
        char a[8], b[8];
        if (k < 65536) {
            snprintf(a, sizeof a, "%s", s[k / 256]);
            snprintf(b, sizeof b, "%s", s[k % 256]);
        } else if (k < 65536 + 65536 * 256) {
            int64_t m = k - 65536;
            snprintf(a, sizeof a, "%s%s", s[(m / 256) / 256], s[(m / 256) % 256]);
            snprintf(b, sizeof b, "%s", s[m % 256]);
        } else {
            ok = 0;
            break;
        }
        snprintf(buf, sizeof buf, "%s%s", a, b);
        ok = !json_object_set_new(vocab, buf, json_integer(id++)) &&
             !json_array_append_new(merges, json_pack("[s,s]", a, b));
    }
    const qhx_family_token *at = added_of(d);
    for (int64_t k = 0; ok && k < n_added(d); k++)
        ok = !json_array_append_new(added, json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id",
                                                     (json_int_t)tok_id(d, k), "content", at[k].text, "single_word", 0,
                                                     "lstrip", 0, "rstrip", 0, "normalized", 0, "special",
                                                     at[k].special));
    if (!ok) {
        json_decref(vocab);
        json_decref(merges);
        json_decref(added);
        return NULL;
    }
    const qhx_family_desc *f = desc_of(d);
    const char *regex = f ? f->split_pattern : NULL;
    if (!regex) {
        json_decref(vocab);
        json_decref(merges);
        json_decref(added);
        return NULL;
    }
    return json_pack("{s:s, s:n, s:n, s:o, s:{s:s}, s:{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, o]}, s:o, s:o, "
                     "s:{s:s, s:n, s:n, s:s, s:s, s:b, s:b, s:b, s:o, s:o}}",
                     "version", "1.0", "truncation", "padding", "added_tokens", added, "normalizer", "type", "NFC",
                     "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex",
                     regex, "behavior", "Isolated", "invert", 0, bytelevel(), "post_processor", bytelevel(),
                     "decoder", bytelevel(), "model", "type", "BPE", "dropout", "unk_token",
                     "continuing_subword_prefix", "", "end_of_word_suffix", "", "fuse_unk", 0, "byte_fallback", 0,
                     "ignore_merges", 0, "vocab", vocab, "merges", merges);
}

json_t *forge_tokenizer_config(const forge_dims *d) {
    json_t *dec = json_object();
    const qhx_family_token *at = added_of(d);
    const int64_t n = n_added(d), eot = added_index(d, "im_end");
    for (int64_t k = 0; dec && k < n; k++) {
        char key[24];
        snprintf(key, sizeof key, "%lld", (long long)tok_id(d, k));
        json_object_set_new(dec, key, json_pack("{s:s, s:b, s:b, s:b, s:b, s:b}", "content", at[k].text, "lstrip", 0,
                                                "normalized", 0, "rstrip", 0, "single_word", 0, "special",
                                                at[k].special));
    }
    if (n < 1 || eot < 0) {
        json_decref(dec);
        return NULL;
    }
    return json_pack("{s:b, s:b, s:o, s:n, s:b, s:s, s:s, s:I, s:s, s:b, s:s, s:n}", "add_bos_token", 0,
                     "add_prefix_space", 0, "added_tokens_decoder", dec, "bos_token", "clean_up_tokenization_spaces",
                     0, "eos_token", at[eot].text, "errors", "replace", "model_max_length", (json_int_t)262144,
                     "pad_token", at[ID_ENDOFTEXT].text, "split_special_tokens", 0, "tokenizer_class", "Qwen2Tokenizer",
                     "unk_token");
}

json_t *forge_generation_config(const forge_dims *d) {
    json_int_t eot = tok_id(d, ID_ENDOFTEXT), im_end = key_id(d, "im_end");
    json_t *bos = d->family == FORGE_QWEN3_5 ? json_null() : json_integer(eot);
    return json_pack("{s:o, s:[I,I], s:I, s:b}", "bos_token_id", bos, "eos_token_id", im_end, eot, "pad_token_id",
                     eot, "do_sample", 0);
}

json_t *forge_preprocessor_config(const forge_dims *d) {
    int tiny = !strcmp(d->preset, "tiny");
    json_int_t pm = d->v_patch * d->v_merge;
    return json_pack("{s:s, s:s, s:b, s:b, s:b, s:b, s:i, s:f, s:[f,f,f], s:[f,f,f], s:{s:I, s:I}, s:I, s:I, s:I}",
                     "image_processor_type", "Qwen2VLImageProcessorFast", "processor_class", "Qwen3VLProcessor",
                     "do_convert_rgb", 1, "do_resize", 1, "do_rescale", 1, "do_normalize", 1, "resample", 3,
                     "rescale_factor", 1.0 / 255.0, "image_mean", 0.5, 0.5, 0.5, "image_std", 0.5, 0.5, 0.5, "size",
                     "shortest_edge", tiny ? pm * pm : (json_int_t)65536, "longest_edge",
                     tiny ? (json_int_t)1048576 : (json_int_t)16777216, "patch_size", (json_int_t)d->v_patch,
                     "temporal_patch_size", (json_int_t)d->v_tp, "merge_size", (json_int_t)d->v_merge);
}

// ---- config.json ---------------------------------------------------------------------------------

static json_t *mrope_section(const forge_dims *d) {
    return json_pack("[I,I,I]", (json_int_t)d->mrope[0], (json_int_t)d->mrope[1], (json_int_t)d->mrope[2]);
}

static json_t *qwen35_config(const forge_dims *d, const char *dtype) {
    json_t *types = json_array();
    for (int64_t i = 0; types && i < d->layers; i++)
        json_array_append_new(types, json_string(is_full_attention(d, i) ? "full_attention" : "linear_attention"));
    json_t *text = json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:f, s:f, s:b, s:b, "
        "s:{s:s, s:f, s:f, s:o, s:b}, s:b, s:f, s:b, s:I, s:o, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:b, "
        "s:n, s:I, s:n, s:s}",
        "model_type", "qwen3_5_text", "vocab_size", (json_int_t)d->vocab, "hidden_size", (json_int_t)d->hidden,
        "intermediate_size", (json_int_t)d->inter, "num_hidden_layers", (json_int_t)d->layers,
        "num_attention_heads", (json_int_t)d->nh, "num_key_value_heads", (json_int_t)d->nkv, "head_dim",
        (json_int_t)d->hd, "hidden_act", "silu", "max_position_embeddings", (json_int_t)262144,
        "initializer_range", 0.02, "rms_norm_eps", d->eps, "use_cache", 1, "tie_word_embeddings", d->tied,
        "rope_parameters", "rope_type", "default", "rope_theta", d->rope_theta, "partial_rotary_factor",
        d->partial_rotary, "mrope_section", mrope_section(d), "mrope_interleaved", 1, "attention_bias", 0,
        "attention_dropout", 0.0, "attn_output_gate", 1, "full_attention_interval", (json_int_t)d->attn_interval,
        "layer_types", types, "linear_conv_kernel_dim", (json_int_t)d->conv_k, "linear_key_head_dim",
        (json_int_t)d->dk, "linear_value_head_dim", (json_int_t)d->dv, "linear_num_key_heads", (json_int_t)d->nk,
        "linear_num_value_heads", (json_int_t)d->nv, "mamba_ssm_dtype", "float32", "mtp_num_hidden_layers",
        (json_int_t)d->mtp_layers, "mtp_use_dedicated_embeddings", 0, "bos_token_id", "eos_token_id",
        (json_int_t)tok_id(d, ID_ENDOFTEXT), "pad_token_id", "dtype", dtype);
    /* The vision config of the tower (the released model's for its size); its model.visual.*
     * weights are written only with --vision. (The released files also carry
     * "deepstack_visual_indexes": [], which Qwen3_5VisionConfig does not read.) */
    json_t *vision = json_pack("{s:s, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "model_type",
                               "qwen3_5_vision", "depth", (json_int_t)d->v_depth, "hidden_size",
                               (json_int_t)d->v_hidden, "hidden_act", "gelu_pytorch_tanh",
                               "intermediate_size", (json_int_t)d->v_inter, "num_heads",
                               (json_int_t)d->v_heads, "in_channels", (json_int_t)3, "patch_size", (json_int_t)d->v_patch,
                               "spatial_merge_size", (json_int_t)d->v_merge, "temporal_patch_size", (json_int_t)d->v_tp,
                               "out_hidden_size", (json_int_t)d->hidden, "num_position_embeddings",
                               (json_int_t)d->v_num_pos, "initializer_range", 0.02);
    return json_pack("{s:[s], s:s, s:I, s:I, s:I, s:I, s:b, s:o, s:o, s:s}", "architectures",
                     "Qwen3_5ForConditionalGeneration", "model_type", "qwen3_5", "image_token_id",
                     key_id(d, "image_pad"), "video_token_id", key_id(d, "video_pad"),
                     "vision_start_token_id", key_id(d, "vision_start"), "vision_end_token_id",
                     key_id(d, "vision_end"), "tie_word_embeddings", d->tied, "text_config", text,
                     "vision_config", vision, "_qhexrt_note",
                     d->with_vision ? "random-weight checkpoint written by qhx forge --random --vision"
                                    : "random-weight checkpoint written by qhx forge --random; no model.visual.* weights (text only)");
}

static json_t *qwen3vl_config(const forge_dims *d, const char *dtype) {
    json_t *text = json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:I, s:f, s:f, s:b, s:b, s:{s:s, s:o, s:b}, s:f, s:b, "
        "s:f, s:I, s:I, s:s}",
        "model_type", "qwen3_vl_text", "vocab_size", (json_int_t)d->vocab, "hidden_size", (json_int_t)d->hidden,
        "intermediate_size", (json_int_t)d->inter, "num_hidden_layers", (json_int_t)d->layers,
        "num_attention_heads", (json_int_t)d->nh, "num_key_value_heads", (json_int_t)d->nkv, "head_dim",
        (json_int_t)d->hd, "hidden_act", "silu", "max_position_embeddings", (json_int_t)262144,
        "initializer_range", 0.02, "rms_norm_eps", d->eps, "use_cache", 1, "tie_word_embeddings", 1,
        "rope_scaling", "rope_type", "default", "mrope_section", mrope_section(d), "mrope_interleaved", 1,
        "rope_theta", d->rope_theta, "attention_bias", 0, "attention_dropout", 0.0, "bos_token_id",
        (json_int_t)tok_id(d, ID_ENDOFTEXT), "eos_token_id", (json_int_t)key_id(d, "im_end"), "dtype", dtype);
    json_t *ds = json_array();
    for (int64_t j = 0; ds && j < d->n_deepstack; j++) json_array_append_new(ds, json_integer(d->deepstack[j]));
    json_t *vision = json_pack(
        "{s:s, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:f}", "model_type", "qwen3_vl", "depth",
        (json_int_t)d->v_depth, "hidden_size", (json_int_t)d->v_hidden, "hidden_act", "gelu_pytorch_tanh",
        "intermediate_size", (json_int_t)d->v_inter, "num_heads", (json_int_t)d->v_heads, "in_channels",
        (json_int_t)3, "patch_size", (json_int_t)d->v_patch, "spatial_merge_size", (json_int_t)d->v_merge,
        "temporal_patch_size", (json_int_t)d->v_tp, "out_hidden_size", (json_int_t)d->hidden,
        "num_position_embeddings", (json_int_t)d->v_num_pos, "deepstack_visual_indexes", ds, "initializer_range",
        0.02);
    return json_pack("{s:[s], s:s, s:I, s:I, s:I, s:I, s:b, s:o, s:o, s:s}", "architectures",
                     "Qwen3VLForConditionalGeneration", "model_type", "qwen3_vl", "image_token_id",
                     key_id(d, "image_pad"), "video_token_id", key_id(d, "video_pad"),
                     "vision_start_token_id", key_id(d, "vision_start"), "vision_end_token_id",
                     key_id(d, "vision_end"), "tie_word_embeddings", 1, "text_config", text,
                     "vision_config", vision, "_qhexrt_note", "random-weight checkpoint written by qhx forge --random");
}

json_t *forge_hf_config(const forge_dims *d, const char *torch_dtype) {
    return d->family == FORGE_QWEN3_5 ? qwen35_config(d, torch_dtype) : qwen3vl_config(d, torch_dtype);
}
