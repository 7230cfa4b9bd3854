/* families/gguf.c: GGUF files as models. A family that reads llama.cpp's files gives a table
 * (family.h qhx_family_gguf): the architectures it reads, its config from their keys, and
 * which of llama.cpp's tensor names are which of its own. This file turns a file into a run
 * plan and its tensors into a set under the family's names; the blocks stay where they are. */
#include "families/family.h"
#include "families/gguf_keys.h"

#include "core/alloc.h"
#include "io/gguf.h"
#include "io/gguf_tok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const qhx_family_desc QHX_FAMILY_QWEN3_5;
extern const qhx_family_desc QHX_FAMILY_QWEN3_VL;

static const qhx_family_desc *const GGUF_FAMILIES[] = {&QHX_FAMILY_QWEN3_5, &QHX_FAMILY_QWEN3_VL};
#define N_GGUF_FAMILIES (sizeof GGUF_FAMILIES / sizeof GGUF_FAMILIES[0])

const qhx_family_desc *qhx_family_for_gguf_arch(const char *arch) {
    for (size_t i = 0; arch && i < N_GGUF_FAMILIES; i++) {
        const qhx_family_gguf *t = GGUF_FAMILIES[i]->gguf;
        for (const char *const *a = t ? t->archs : NULL; a && *a; a++)
            if (!strcmp(*a, arch)) return GGUF_FAMILIES[i];
    }
    return NULL;
}

/* "qwen35, qwen3vl": the architectures this build reads, into buf. */
static const char *arch_names(char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_GGUF_FAMILIES; i++) {
        const qhx_family_gguf *t = GGUF_FAMILIES[i]->gguf;
        for (const char *const *a = t ? t->archs : NULL; a && *a; a++) {
            int n = snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", *a);
            if (n < 0 || (size_t)n >= cap - at) return buf;
            at += (size_t)n;
        }
    }
    return buf;
}

/* ---- keys ---------------------------------------------------------------------------------- */

qhx_status qhx_gguf_arch_int(const qhx_gguf *g, const char *arch, const char *key, bool required, int64_t *out,
                             qhx_error *err) {
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (!qhx_gguf_find_kv(g, full) && !required) return QHX_OK;
    return qhx_gguf_get_int(g, full, out, err);
}

qhx_status qhx_gguf_arch_float(const qhx_gguf *g, const char *arch, const char *key, bool required, double *out,
                               qhx_error *err) {
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (!qhx_gguf_find_kv(g, full) && !required) return QHX_OK;
    return qhx_gguf_get_float(g, full, out, err);
}

qhx_status qhx_gguf_arch_sections(const qhx_gguf *g, const char *arch, json_t **out, qhx_error *err) {
    char full[160];
    snprintf(full, sizeof full, "%s.rope.dimension_sections", arch);
    const qhx_gguf_kv *kv = qhx_gguf_find_kv(g, full);
    *out = NULL;
    if (!kv) return QHX_OK;
    if (kv->type != QHX_GGUF_ARRAY || kv->elem == QHX_GGUF_STRING || kv->elem == QHX_GGUF_ARRAY || kv->n < 3 || kv->n > 4)
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: %s: expected 3 or 4 integers", qhx_gguf_label(g), full);
    if (!(*out = json_array())) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    for (uint64_t i = 0; i < 3; i++) {
        int64_t v = qhx_gguf_arr_int(kv, i);
        if (v < 0 || v > 4096) {
            json_decref(*out);
            *out = NULL;
            return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: %s[%llu]: %lld is out of range", qhx_gguf_label(g), full,
                            (unsigned long long)i, (long long)v);
        }
        json_array_append_new(*out, json_integer(v));
    }
    if (kv->n == 4 && qhx_gguf_arr_int(kv, 3) != 0) {
        json_decref(*out);
        *out = NULL;
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: GGUF: %s: a fourth rotary section is not supported",
                        qhx_gguf_label(g), full);
    }
    return QHX_OK;
}

qhx_status qhx_gguf_copy_ints(const qhx_gguf *g, const char *arch, const qhx_gguf_int_key *keys, json_t *tc,
                              int64_t *values, qhx_error *err) {
    for (int i = 0; keys[i].gguf; i++) {
        int64_t v = -1;
        qhx_status rc = qhx_gguf_arch_int(g, arch, keys[i].gguf, keys[i].required, &v, err);
        if (rc) return rc;
        if (values) values[i] = v;
        if (v >= 0 && json_object_set_new(tc, keys[i].hf, json_integer(v))) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    }
    return QHX_OK;
}

qhx_status qhx_gguf_embedding_shape(const qhx_gguf *g, int64_t *rows, int64_t *cols, qhx_error *err) {
    const qhx_gguf_tensor *t = qhx_gguf_find_tensor(g, "token_embd.weight");
    if (!t || t->n_dims != 2)
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: no token_embd.weight matrix", qhx_gguf_label(g));
    *cols = t->ne[0];
    *rows = t->ne[1];
    return QHX_OK;
}

/* ---- the tokenizer ------------------------------------------------------------------------- */

qhx_status qhx_family_gguf_tokenizer(const char *path, qhx_tok **out, qhx_error *err) {
    qhx_gguf *g = NULL;
    char *json = NULL;
    size_t len = 0;
    qhx_status rc = qhx_gguf_open(path, QHX_FILE_MAP, &g, err);
    if (rc == QHX_OK) rc = qhx_gguf_tokenizer_json(g, &json, &len, err);
    if (rc == QHX_OK) rc = qhx_tok_load_buffer(json, len, path, out, err);
    qhx_free(json);
    qhx_gguf_free(g);
    return rc;
}

/* ---- plans --------------------------------------------------------------------------------- */

qhx_status qhx_family_gguf_config(const qhx_family_desc *f, const qhx_gguf *g, const char *arch, json_t **out,
                                  qhx_error *err) {
    *out = NULL;
    json_t *root = json_object(), *tc = json_object();
    if (!root || !tc || json_object_set_new(root, "text_config", tc)) {
        json_decref(root);
        return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    }
    const bool tied = !qhx_gguf_find_tensor(g, "output.weight"); /* no output head: the table is */
    json_object_set_new(root, "model_type", json_string(f->gguf->model_type));
    json_object_set_new(root, "tie_word_embeddings", json_boolean(tied));
    json_object_set_new(tc, "tie_word_embeddings", json_boolean(tied));
    qhx_status rc = f->gguf->text_config(g, arch, tc, err);
    if (rc) {
        json_decref(root);
        return rc;
    }
    *out = root;
    return QHX_OK;
}

static qhx_status arch_of(const qhx_gguf *g, char *arch, size_t cap, qhx_error *err) {
    qhx_gguf_str s;
    if (!qhx_gguf_find_kv(g, "general.architecture"))
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: no general.architecture: not a model file", qhx_gguf_label(g));
    qhx_status rc = qhx_gguf_get_str(g, "general.architecture", &s, err);
    if (rc) return rc;
    if (s.len == 0 || s.len >= cap || memchr(s.p, 0, s.len))
        return qhx_fail(err, QHX_E_FORMAT, "%s: GGUF: general.architecture is not a name", qhx_gguf_label(g));
    memcpy(arch, s.p, s.len);
    arch[s.len] = '\0';
    return QHX_OK;
}

/* ---- vision towers (mmproj files) ---------------------------------------------------------- */

/* The tower's vision_config from an mmproj file's clip.* keys (and the shapes of its tensors). */
static qhx_status vision_config(const qhx_gguf *mm, const qhx_family_desc *f, json_t **out, qhx_error *err) {
    const char *label = qhx_gguf_label(mm);
    char arch[64], proj[64];
    qhx_gguf_str s;
    qhx_status rc = arch_of(mm, arch, sizeof arch, err);
    if (rc) return rc;
    if (strcmp(arch, "clip"))
        return qhx_fail(err, QHX_E_FORMAT, "%s: --mmproj: architecture '%s' is not a vision tower (clip)", label, arch);
    if ((rc = qhx_gguf_get_str(mm, "clip.projector_type", &s, err))) return rc;
    snprintf(proj, sizeof proj, "%.*s", (int)(s.len < 63 ? s.len : 63), s.p);
    bool known = false;
    for (const char *const *p = f->gguf->projectors; p && *p; p++) known |= !strcmp(*p, proj);
    if (!known)
        return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: the projector '%s' is not the %s tower's", label, proj, f->title);
    static const struct { const char *gguf, *hf; } KEYS[] = {
        {"clip.vision.block_count", "depth"},
        {"clip.vision.embedding_length", "hidden_size"},
        {"clip.vision.attention.head_count", "num_heads"},
        {"clip.vision.feed_forward_length", "intermediate_size"},
        {"clip.vision.patch_size", "patch_size"},
        {"clip.vision.spatial_merge_size", "spatial_merge_size"},
        {"clip.vision.projection_dim", "out_hidden_size"},
    };
    json_t *vc = json_object();
    if (!vc) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    for (size_t i = 0; i < sizeof KEYS / sizeof KEYS[0] && rc == QHX_OK; i++) {
        int64_t v;
        if ((rc = qhx_gguf_get_int(mm, KEYS[i].gguf, &v, err)) == QHX_OK) json_object_set_new(vc, KEYS[i].hf, json_integer(v));
    }
    const qhx_gguf_tensor *pos = qhx_gguf_find_tensor(mm, "v.position_embd.weight");
    if (rc == QHX_OK && (!pos || pos->n_dims != 2))
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: no v.position_embd.weight matrix", label);
    if (rc) {
        json_decref(vc);
        return rc;
    }
    json_object_set_new(vc, "num_position_embeddings", json_integer(pos->ne[1]));
    /* llama.cpp splits the Conv3d kernel into one Conv2d per frame: a second one is a temporal patch of 2 */
    json_object_set_new(vc, "temporal_patch_size", json_integer(qhx_gguf_find_tensor(mm, "v.patch_embd.weight.1") ? 2 : 1));
    json_object_set_new(vc, "hidden_act", json_string("gelu_pytorch_tanh"));
    json_t *ds = json_array();
    json_object_set_new(vc, "deepstack_visual_indexes", ds);
    const qhx_gguf_kv *taps = qhx_gguf_find_kv(mm, "clip.vision.is_deepstack_layers");
    for (uint64_t i = 0; taps && taps->type == QHX_GGUF_ARRAY && taps->elem == QHX_GGUF_BOOL && i < taps->n; i++)
        if (taps->data[i]) json_array_append_new(ds, json_integer((json_int_t)i));
    *out = vc;
    return QHX_OK;
}

/* The id of an added token by its text in the file's vocabulary, or -1. */
static int64_t token_id(const qhx_gguf *g, const char *text) {
    const qhx_gguf_kv *tok = qhx_gguf_find_kv(g, "tokenizer.ggml.tokens");
    size_t n = strlen(text);
    for (uint64_t i = 0; tok && tok->str && i < tok->n; i++)
        if (tok->str[i].len == n && !memcmp(tok->str[i].p, text, n)) return (int64_t)i;
    return -1;
}

/* The tower joins the plan: vision_config and the image token ids in the config, the file as
 * the vision artifact. */
static qhx_status add_tower(const qhx_gguf *g, const char *mmproj, const qhx_family_desc *f, json_t *config,
                            qhx_error *err) {
    qhx_gguf *mm = NULL;
    qhx_status rc = qhx_gguf_open(mmproj, QHX_FILE_MAP, &mm, err);
    json_t *vc = NULL;
    if (rc == QHX_OK) rc = vision_config(mm, f, &vc, err);
    qhx_gguf_free(mm);
    if (rc) return rc;
    json_object_set_new(config, "vision_config", vc);
    static const struct { const char *key, *text; } IDS[] = {
        {"image_token_id", "<|image_pad|>"}, {"video_token_id", "<|video_pad|>"},
        {"vision_start_token_id", "<|vision_start|>"}, {"vision_end_token_id", "<|vision_end|>"},
    };
    for (size_t i = 0; i < sizeof IDS / sizeof IDS[0]; i++) {
        int64_t id = token_id(g, IDS[i].text);
        if (id < 0) return qhx_fail(err, QHX_E_FORMAT, "%s: the vocabulary has no %s for images", qhx_gguf_label(g), IDS[i].text);
        json_object_set_new(config, IDS[i].key, json_integer(id));
    }
    return QHX_OK;
}

qhx_status qhx_family_gguf_plan(const char *path, const char *mmproj, qhx_plan **out, qhx_error *err) {
    *out = NULL;
    qhx_gguf *g = NULL;
    qhx_status rc = qhx_gguf_open(path, QHX_FILE_MAP, &g, err);
    if (rc) return rc;
    char arch[64], names[256];
    const qhx_family_desc *f = NULL;
    json_t *config = NULL;
    if ((rc = arch_of(g, arch, sizeof arch, err))) goto done;
    if (!strcmp(arch, "clip")) {
        rc = qhx_fail(err, QHX_E_ARG, "%s: a vision tower (mmproj) file: pass the model's GGUF with -m and this one with --mmproj", path);
        goto done;
    }
    if (!(f = qhx_family_for_gguf_arch(arch))) {
        rc = qhx_fail(err, QHX_E_UNSUPPORTED, "%s: GGUF architecture '%s' is not one qhexrt runs (it runs %s)", path,
                      arch, arch_names(names, sizeof names));
        goto done;
    }
    if ((rc = qhx_family_gguf_config(f, g, arch, &config, err))) goto done;
    if (mmproj && (rc = add_tower(g, mmproj, f, config, err))) {
        json_decref(config);
        goto done;
    }
    rc = qhx_plan_from_gguf(path, mmproj, g, config, out, err); /* takes config */
done:
    qhx_gguf_free(g);
    return rc;
}

/* ---- tensors ------------------------------------------------------------------------------- */

static const qhx_gguf_name *find_name(const qhx_gguf_name *tab, const char *gguf) {
    for (const qhx_gguf_name *e = tab; e && e->gguf; e++)
        if (!strcmp(e->gguf, gguf)) return e;
    return NULL;
}

/* The family's name of GGUF tensor `name` into out (cap bytes); 0, or -1 when it has none. */
static int map_name(const qhx_family_gguf *t, const qhx_model_config *cfg, const char *name, char *out, size_t cap,
                    unsigned *flags) {
    const qhx_gguf_name *e = find_name(t->globals, name);
    *flags = 0;
    if (e) {
        *flags = e->flags;
        return snprintf(out, cap, "%s", e->name) < (int)cap ? 0 : -1;
    }
    if (strncmp(name, "blk.", 4)) return -1;
    char *end;
    long long blk = strtoll(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || blk < 0 || blk >= 2 * QHX_MODEL_MAX_LAYERS) return -1;
    const char *rest = end + 1;
    const int64_t L = cfg->num_hidden_layers;
    if (blk >= L) { /* the multi-token-prediction block */
        if (!t->mtp_prefix || blk - L >= cfg->mtp_num_hidden_layers) return -1;
        if ((e = find_name(t->mtp_names, rest))) {
            *flags = e->flags;
            return snprintf(out, cap, "%s", e->name) < (int)cap ? 0 : -1;
        }
        if (!(e = find_name(t->block, rest))) return -1;
        *flags = e->flags;
        return snprintf(out, cap, "%s%lld.%s", t->mtp_prefix, blk - L, e->name) < (int)cap ? 0 : -1;
    }
    if (!(e = find_name(t->block, rest))) return -1;
    *flags = e->flags;
    return snprintf(out, cap, "%s%lld.%s", t->layer_prefix, blk, e->name) < (int)cap ? 0 : -1;
}

static bool skipped(const char *const *skip, const char *name) {
    for (const char *const *p = skip; p && *p; p++)
        if (!strncmp(name, *p, strlen(*p))) return true;
    return false;
}

/* The set's description of GGUF tensor gt under the family's name: row-major shape (ggml's
 * dimensions reversed), F32/F16/BF16 as those dtypes, every other type as ggml blocks. */
static qhx_st_tensor describe(const qhx_gguf_tensor *gt, const char *name, unsigned flags) {
    qhx_st_tensor t = {.name = name, .data = gt->data, .size = (size_t)gt->size, .offset = gt->offset,
                       .n_elements = gt->n_elements};
    t.n_dims = gt->n_dims;
    for (int d = 0; d < gt->n_dims; d++) t.shape[d] = gt->ne[gt->n_dims - 1 - d];
    if ((flags & QHX_GGUF_MAP_UNSQUEEZE1) && t.n_dims == 2) {
        t.shape[2] = t.shape[1];
        t.shape[1] = 1;
        t.n_dims = 3;
    }
    switch (gt->type) {
    case QHX_GGML_F32: t.dtype = QHX_DTYPE_F32; break;
    case QHX_GGML_F16: t.dtype = QHX_DTYPE_F16; break;
    case QHX_GGML_BF16: t.dtype = QHX_DTYPE_BF16; break;
    default: t.dtype = QHX_DTYPE_GGML, t.ggml_type = gt->type; break;
    }
    return t;
}

/* ---- the tower's tensors ------------------------------------------------------------------- */

#define TOWER "model.visual."

/* llama.cpp's clip names of the Qwen3-VL tower (projector qwen3vl_merger) -> the checkpoint's */
static const qhx_gguf_name TOWER_GLOBALS[] = {
    {"v.patch_embd.bias", TOWER "patch_embed.proj.bias", 0},
    {"v.position_embd.weight", TOWER "pos_embed.weight", 0},
    {"v.post_ln.weight", TOWER "merger.norm.weight", 0},
    {"v.post_ln.bias", TOWER "merger.norm.bias", 0},
    {"mm.0.weight", TOWER "merger.linear_fc1.weight", 0},
    {"mm.0.bias", TOWER "merger.linear_fc1.bias", 0},
    {"mm.2.weight", TOWER "merger.linear_fc2.weight", 0},
    {"mm.2.bias", TOWER "merger.linear_fc2.bias", 0},
    {NULL, NULL, 0},
};

static const qhx_gguf_name TOWER_BLOCK[] = {
    {"ln1.weight", "norm1.weight", 0},           {"ln1.bias", "norm1.bias", 0},
    {"ln2.weight", "norm2.weight", 0},           {"ln2.bias", "norm2.bias", 0},
    {"attn_qkv.weight", "attn.qkv.weight", 0},   {"attn_qkv.bias", "attn.qkv.bias", 0},
    {"attn_out.weight", "attn.proj.weight", 0},  {"attn_out.bias", "attn.proj.bias", 0},
    {"ffn_up.weight", "mlp.linear_fc1.weight", 0}, {"ffn_up.bias", "mlp.linear_fc1.bias", 0},
    {"ffn_down.weight", "mlp.linear_fc2.weight", 0}, {"ffn_down.bias", "mlp.linear_fc2.bias", 0},
    {NULL, NULL, 0},
};

static const qhx_gguf_name TOWER_DEEPSTACK[] = {
    {"norm.weight", "norm.weight", 0}, {"norm.bias", "norm.bias", 0},
    {"fc1.weight", "linear_fc1.weight", 0}, {"fc1.bias", "linear_fc1.bias", 0},
    {"fc2.weight", "linear_fc2.weight", 0}, {"fc2.bias", "linear_fc2.bias", 0},
    {NULL, NULL, 0},
};

/* "<prefix>N.<rest>": N into *n, rest into *rest; 0, or -1 when name is not of that form. */
static int split_indexed(const char *name, const char *prefix, long long *n, const char **rest) {
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl)) return -1;
    char *end;
    *n = strtoll(name + pl, &end, 10);
    if (end == name + pl || *end != '.' || *n < 0 || *n >= QHX_VIT_MAX_DEPTH) return -1;
    *rest = end + 1;
    return 0;
}

/* The checkpoint's name of tower tensor `name`; 0, or -1 when it has none. A DeepStack merger
 * is numbered by its tap's place in the list (llama.cpp numbers it by the block it taps). */
static int map_tower_name(const qhx_model_config *cfg, const char *name, char *out, size_t cap) {
    const qhx_gguf_name *e = find_name(TOWER_GLOBALS, name);
    if (e) return snprintf(out, cap, "%s", e->name) < (int)cap ? 0 : -1;
    long long n;
    const char *rest;
    if (!split_indexed(name, "v.blk.", &n, &rest) && (e = find_name(TOWER_BLOCK, rest)))
        return snprintf(out, cap, TOWER "blocks.%lld.%s", n, e->name) < (int)cap ? 0 : -1;
    if (!split_indexed(name, "v.deepstack.", &n, &rest) && (e = find_name(TOWER_DEEPSTACK, rest)))
        for (int64_t j = 0; j < cfg->vision.n_deepstack; j++)
            if (cfg->vision.deepstack_visual_indexes[j] == n)
                return snprintf(out, cap, TOWER "deepstack_merger_list.%lld.%s", (long long)j, e->name) < (int)cap ? 0 : -1;
    return -1;
}

/* What a set over GGUF files keeps alive: the files and the tensors made of two of them. */
typedef struct gguf_owner {
    qhx_gguf *model, *tower;
    void *patch; /* the patch kernel, both frames in the checkpoint's layout */
} gguf_owner;

static void free_owner(void *p) {
    gguf_owner *o = p;
    if (!o) return;
    qhx_gguf_free(o->model);
    qhx_gguf_free(o->tower);
    qhx_aligned_free(o->patch);
    qhx_free(o);
}

/* llama.cpp stores the Conv3d patch kernel [D, C, T, P, P] as one [D, C, P, P] kernel per frame
 * t (v.patch_embd.weight, .weight.1): interleaved back into the checkpoint's layout, which the
 * tower views as one (D, C T P P) matrix. Float types only (the files keep this kernel so). */
static qhx_status join_patch(gguf_owner *o, const qhx_model_config *cfg, qhx_st_set *set, qhx_error *err) {
    const qhx_gguf_tensor *k0 = qhx_gguf_find_tensor(o->tower, "v.patch_embd.weight");
    const qhx_gguf_tensor *k1 = qhx_gguf_find_tensor(o->tower, "v.patch_embd.weight.1");
    const qhx_vit_config *v = &cfg->vision;
    const int64_t T = v->temporal_patch_size, P = v->patch_size, C = v->in_channels, D = v->hidden_size;
    const char *label = qhx_gguf_label(o->tower);
    if (!k0 || (T == 2) != (k1 != NULL) || T > 2)
        return qhx_fail(err, QHX_E_FORMAT, "%s: the patch kernel is not one Conv2d per frame", label);
    const qhx_gguf_tensor *k[2] = {k0, k1};
    for (int t = 0; t < T; t++)
        if (k[t]->n_dims != 4 || k[t]->ne[0] != P || k[t]->ne[1] != P || k[t]->ne[2] != C || k[t]->ne[3] != D ||
            k[t]->type != k0->type || (k0->type != QHX_GGML_F32 && k0->type != QHX_GGML_F16 && k0->type != QHX_GGML_BF16))
            return qhx_fail(err, QHX_E_FORMAT, "%s: %s: expected a float [%lld, %lld, %lld, %lld] kernel", label,
                            k[t]->name, (long long)P, (long long)P, (long long)C, (long long)D);
    const size_t es = k0->type == QHX_GGML_F32 ? 4 : 2, chunk = (size_t)(P * P) * es;
    if (!(o->patch = qhx_aligned_alloc((size_t)T * k0->size))) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    uint8_t *dst = o->patch;
    for (int64_t dc = 0; dc < D * C; dc++)
        for (int t = 0; t < T; t++, dst += chunk) memcpy(dst, k[t]->data + (size_t)dc * chunk, chunk);
    qhx_st_tensor pt = {.name = TOWER "patch_embed.proj.weight", .n_dims = 5, .shape = {D, C, T, P, P},
                        .n_elements = D * C * T * P * P, .data = o->patch, .size = (size_t)T * k0->size,
                        .dtype = k0->type == QHX_GGML_F32 ? QHX_DTYPE_F32 : k0->type == QHX_GGML_F16 ? QHX_DTYPE_F16 : QHX_DTYPE_BF16};
    return qhx_st_external_add(set, &pt, err);
}

static qhx_status add_tower_tensors(gguf_owner *o, const qhx_model_config *cfg, qhx_st_set *set, qhx_error *err) {
    qhx_status rc = join_patch(o, cfg, set, err);
    for (int64_t i = 0; i < qhx_gguf_n_tensors(o->tower) && rc == QHX_OK; i++) {
        const qhx_gguf_tensor *gt = qhx_gguf_tensor_at(o->tower, i);
        char name[QHX_ST_MAX_NAME];
        if (map_tower_name(cfg, gt->name, name, sizeof name)) continue;
        qhx_st_tensor t = describe(gt, name, 0);
        rc = qhx_st_external_add(set, &t, err);
    }
    return rc;
}

static qhx_status add_model_tensors(const qhx_family_desc *f, const qhx_model_config *cfg, const qhx_gguf *g,
                                    const char *const *skip, qhx_st_set *set, qhx_error *err) {
    qhx_status rc = QHX_OK;
    for (int64_t i = 0; i < qhx_gguf_n_tensors(g) && rc == QHX_OK; i++) {
        const qhx_gguf_tensor *gt = qhx_gguf_tensor_at(g, i);
        char name[QHX_ST_MAX_NAME];
        unsigned flags;
        if (map_name(f->gguf, cfg, gt->name, name, sizeof name, &flags) || skipped(skip, name)) continue;
        qhx_st_tensor t = describe(gt, name, flags);
        rc = qhx_st_external_add(set, &t, err);
    }
    return rc;
}

qhx_status qhx_family_gguf_weights(const qhx_family_desc *f, const qhx_model_config *cfg, const char *path,
                                   const char *mmproj, qhx_file_mode mode, const char *const *skip, qhx_st_set **out,
                                   qhx_error *err) {
    *out = NULL;
    if (!f->gguf) return qhx_fail(err, QHX_E_UNSUPPORTED, "%s: the %s family reads no GGUF file", path, f->title);
    gguf_owner *o = qhx_calloc(1, sizeof *o);
    if (!o) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    qhx_status rc = qhx_gguf_open(path, mode, &o->model, err);
    if (rc == QHX_OK && mmproj) rc = qhx_gguf_open(mmproj, mode, &o->tower, err);
    if (rc) {
        free_owner(o);
        return rc;
    }
    qhx_st_set *set = qhx_st_external_new(path, o, free_owner); /* owns o from here on */
    if (!set) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
    rc = add_model_tensors(f, cfg, o->model, skip, set, err);
    if (rc == QHX_OK && o->tower) rc = add_tower_tensors(o, cfg, set, err);
    if (rc == QHX_OK) rc = qhx_st_external_finish(set, err);
    if (rc) {
        qhx_st_free(set);
        return rc;
    }
    *out = set;
    return QHX_OK;
}
