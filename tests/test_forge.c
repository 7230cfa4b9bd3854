// ctest-labels: unit
/* forge: random checkpoints have the fixtures' exact layout and are deterministic; converting the
 * parity fixtures gives bundles whose every tensor has the documented dtype/shape and whose values
 * are the source's within the format's error bound; failures and cancels leave nothing behind. */
#include "core/alloc.h"
#include "core/file.h"
#include "core/fp16.h"
#include "devices/cpu/cpu.h"
#include "forge/forge.h"
#include "forge/forge_internal.h"
#include "io/json.h"
#include "io/manifest.h"
#include "io/safetensors.h"
#include "ops/st_weight.h"
#include "kernels/quant.h"
#include "runtime/model.h"
#include "ops/weights.h"
#include "t.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* max_position_embeddings of the tiny fixtures and of forge's tiny preset: what a bundle keeps
 * when --max-context does not lower it */
#define TRAINED_CTX 262144

static char base[256];
static const char *FIX = QHX_DATA_DIR "/fixtures/parity";

static void rm_flat(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

static int n_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static float elem_f32(const qhx_st_tensor *t, int64_t i) {
    uint16_t h;
    float f;
    switch (t->dtype) {
    case QHX_DTYPE_F32: memcpy(&f, t->data + 4 * i, 4); return f;
    case QHX_DTYPE_F16: memcpy(&h, t->data + 2 * i, 2); return qhx_f16_to_f32(h);
    case QHX_DTYPE_BF16: memcpy(&h, t->data + 2 * i, 2); return qhx_bf16_to_f32(h);
    default: return NAN;
    }
}

// ---- random checkpoints ----------------------------------------------------------------------------

/* Same tensor names, dtypes and shapes as the fixture. */
static void same_layout(const char *dir, const char *fixture) {
    char fx[512];
    snprintf(fx, sizeof fx, "%s/%s", FIX, fixture);
    qhx_st_set *a = NULL, *b = NULL;
    qhx_error err;
    if (qhx_st_open(fx, &a, &err) != QHX_OK || qhx_st_open(dir, &b, &err) != QHX_OK) {
        fprintf(stderr, "%s\n", err.msg);
        CHECK(0);
        qhx_st_free(a);
        return;
    }
    CHECK_EQ(qhx_st_n_tensors(a), qhx_st_n_tensors(b));
    int same = 1;
    for (int64_t i = 0; i < qhx_st_n_tensors(a); i++) {
        const qhx_st_tensor *x = qhx_st_tensor_at(a, i), *y = qhx_st_find(b, x->name);
        int ok = y && y->dtype == x->dtype && y->n_dims == x->n_dims;
        for (int d = 0; ok && d < x->n_dims; d++) ok = x->shape[d] == y->shape[d];
        if (!ok) {
            fprintf(stderr, "%s: tensor %s differs from the fixture\n", dir, x->name);
            same = 0;
        }
    }
    CHECK(same);
    qhx_st_free(a);
    qhx_st_free(b);
}

static int files_equal(const char *p, const char *q) {
    qhx_file_map a, b;
    if (qhx_file_map_open(p, &a, NULL) || qhx_file_map_open(q, &b, NULL)) return 0;
    int eq = a.size == b.size && !memcmp(a.data, b.data, a.size);
    qhx_file_map_close(&a);
    qhx_file_map_close(&b);
    return eq;
}

static void test_random(void) {
    char d1[300], d2[300], d3[300], p1[400], p2[400];
    qhx_error err;
    qhx_forge_params p = {.preset = "tiny", .seed = 7};
    snprintf(d1, sizeof d1, "%s/r35", base);
    CHECK_EQ(qhx_forge_random("qwen3_5", d1, &p, &err), QHX_OK);
    same_layout(d1, "qwen35-tiny-f32");
    snprintf(d2, sizeof d2, "%s/r35b", base);
    CHECK_EQ(qhx_forge_random("qwen3_5", d2, &p, &err), QHX_OK);
    snprintf(p1, sizeof p1, "%s/model.safetensors", d1);
    snprintf(p2, sizeof p2, "%s/model.safetensors", d2);
    CHECK(files_equal(p1, p2)); /* deterministic */
    rm_flat(d2);
    p.seed = 8;
    CHECK_EQ(qhx_forge_random("qwen3_5", d2, &p, &err), QHX_OK);
    CHECK(!files_equal(p1, p2));
    rm_flat(d2);
    /* bf16: same layout as the bf16 fixture (A_log and linear_attn.norm stay F32) */
    p.dtype = "bf16";
    CHECK_EQ(qhx_forge_random("qwen3_5", d2, &p, &err), QHX_OK);
    same_layout(d2, "qwen35-tiny-bf16");
    rm_flat(d2);
    p.dtype = NULL;
    snprintf(d3, sizeof d3, "%s/rvl", base);
    CHECK_EQ(qhx_forge_random("qwen3_vl", d3, &p, &err), QHX_OK);
    same_layout(d3, "qwen3vl-tiny-f32");
    /* the side files parse and carry the fixture's ids */
    const char *files[] = {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                           "preprocessor_config.json"};
    for (int i = 0; i < 5; i++) {
        snprintf(p1, sizeof p1, "%s/%s", d3, files[i]);
        json_t *j = qhx_json_load_file(p1, &err);
        CHECK(j != NULL);
        if (i == 2 && j) {
            json_t *vocab = json_object_get(json_object_get(j, "model"), "vocab");
            CHECK_EQ(json_object_size(vocab), 990);
            CHECK_EQ(json_integer_value(json_object_get(vocab, "\xc4\x8a")), 198); /* "\n" */
            json_t *added = json_object_get(j, "added_tokens");
            CHECK_EQ(json_array_size(added), 26);
            CHECK_STR(json_string_value(json_object_get(json_array_get(added, 2), "content")), "<|im_end|>");
            CHECK_EQ(json_integer_value(json_object_get(json_array_get(added, 2), "id")), 992);
        }
        json_decref(j);
    }
    rm_flat(d3);
    /* the random checkpoint converts like any other */
    qhx_forge_params c = {.precision = "q4", .name = "rnd"};
    snprintf(d2, sizeof d2, "%s/rb", base);
    CHECK_EQ(qhx_forge_convert(d1, d2, &c, &err), QHX_OK);
    snprintf(p1, sizeof p1, "%s/rnd-%d.json", d2, TRAINED_CTX);
    CHECK(qhx_path_is_file(p1));
    rm_flat(d2);
    rm_flat(d1);
    /* refusals */
    CHECK(qhx_forge_random("llama", d1, &p, &err) == QHX_E_ARG);
    p.preset = "7b";
    CHECK(qhx_forge_random("qwen3_5", d1, &p, &err) == QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "expected tiny, demo, 0.8b, 2b, 4b, 9b or 27b");
    p.preset = "9b"; /* a qwen3_5 size only */
    CHECK(qhx_forge_random("qwen3_vl", d1, &p, &err) == QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "'9b'");
    p.preset = "tiny";
    p.layers = 1025;
    CHECK(qhx_forge_random("qwen3_5", d1, &p, &err) == QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "layers");
    CHECK_EQ(n_entries(base), 0);
}

/* The tensor named `name` of a list, or NULL. */
static const forge_tdesc *find_desc(const forge_tdesc *t, int64_t n, const char *name) {
    for (int64_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    return NULL;
}

/* The released sizes' presets: a head of its own exactly where the release unties it, every
 * matrix consistent with the config written beside it, and a parameter count near the size the
 * name gives (text + the vision tower the config describes), so a swapped or mistyped row of the
 * table shows. Only lists and configs are made: the checkpoints themselves are gigabytes. */
static void test_released_presets(void) {
    static const struct {
        const char *name;
        double billions;
        int tied;
    } sizes[] = {{"0.8b", 0.8, 1}, {"2b", 2.0, 1}, {"4b", 4.0, 1}, {"9b", 9.0, 0}, {"27b", 27.0, 0}};
    qhx_error err;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        forge_dims d;
        CHECK_EQ(forge_preset(FORGE_QWEN3_5, sizes[k].name, &d, &err), QHX_OK);
        CHECK_EQ(d.tied, sizes[k].tied);
        d.with_vision = 1;
        forge_tdesc *t = NULL;
        int64_t n = 0;
        CHECK_EQ(forge_tensor_list(&d, &t, &n, &err), QHX_OK);
        const forge_tdesc *head = find_desc(t, n, "lm_head.weight");
        CHECK_EQ(head != NULL, !sizes[k].tied);
        if (head) CHECK(head->shape[0] == d.vocab && head->shape[1] == d.hidden);
        double params = 0;
        for (int64_t i = 0; i < n; i++) {
            if (!strncmp(t[i].name, "mtp.", 4)) continue;
            double e = 1;
            for (int j = 0; j < t[i].n_dims; j++) e *= (double)t[i].shape[j];
            params += e;
        }
        CHECK(params > 0.95 * sizes[k].billions * 1e9 && params < 1.2 * sizes[k].billions * 1e9);
        /* the DeltaNet projections agree with the config's head counts */
        const forge_tdesc *z = find_desc(t, n, "model.language_model.layers.0.linear_attn.in_proj_z.weight");
        CHECK(z && z->shape[0] == d.nv * d.dv && z->shape[1] == d.hidden);
        json_t *cfg = forge_hf_config(&d, "bfloat16");
        CHECK(cfg != NULL);
        json_t *tc = json_object_get(cfg, "text_config"), *vc = json_object_get(cfg, "vision_config");
        CHECK_EQ(json_is_true(json_object_get(cfg, "tie_word_embeddings")), sizes[k].tied);
        CHECK_EQ(json_is_true(json_object_get(tc, "tie_word_embeddings")), sizes[k].tied);
        CHECK_EQ(json_integer_value(json_object_get(vc, "out_hidden_size")), d.hidden);
        CHECK_EQ(json_integer_value(json_object_get(tc, "linear_num_value_heads")), d.nv);
        CHECK_EQ((int64_t)json_array_size(json_object_get(tc, "layer_types")), d.layers);
        json_decref(cfg);
        qhx_free(t);
    }
}

/* --layers: a shallower (or deeper) checkpoint keeps the layer-type pattern, and its first layers
 * are the full depth's, tensor for tensor. */
static void test_random_layers(void) {
    char d1[300], d2[300], p1[400];
    qhx_error err;
    qhx_forge_params p = {.preset = "tiny", .seed = 11, .layers = 6};
    snprintf(d1, sizeof d1, "%s/rl6", base);
    CHECK_EQ(qhx_forge_random("qwen3_5", d1, &p, &err), QHX_OK);
    snprintf(p1, sizeof p1, "%s/config.json", d1);
    json_t *cfg = qhx_json_load_file(p1, &err);
    CHECK(cfg != NULL);
    json_t *tc = json_object_get(cfg, "text_config"), *types = json_object_get(tc, "layer_types");
    CHECK_EQ(json_integer_value(json_object_get(tc, "num_hidden_layers")), 6);
    CHECK_EQ((int64_t)json_array_size(types), 6);
    static const char *const want[] = {"linear_attention", "linear_attention", "linear_attention",
                                       "full_attention",   "linear_attention", "linear_attention"};
    for (size_t i = 0; i < 6 && i < json_array_size(types); i++)
        CHECK_STR(json_string_value(json_array_get(types, i)), want[i]);
    json_decref(cfg);
    p.layers = 0; /* the preset's 8 */
    snprintf(d2, sizeof d2, "%s/rl8", base);
    CHECK_EQ(qhx_forge_random("qwen3_5", d2, &p, &err), QHX_OK);
    qhx_st_set *a = NULL, *b = NULL;
    snprintf(p1, sizeof p1, "%s/model.safetensors", d1);
    CHECK_EQ(qhx_st_open(p1, &a, &err), QHX_OK);
    snprintf(p1, sizeof p1, "%s/model.safetensors", d2);
    CHECK_EQ(qhx_st_open(p1, &b, &err), QHX_OK);
    if (a && b) {
        CHECK(qhx_st_n_tensors(a) < qhx_st_n_tensors(b));
        CHECK(qhx_st_find(a, "model.language_model.layers.6.mlp.up_proj.weight") == NULL);
        const char *same[] = {"model.language_model.layers.5.linear_attn.in_proj_qkv.weight",
                              "model.language_model.layers.3.self_attn.q_proj.weight",
                              "model.language_model.embed_tokens.weight", "mtp.fc.weight"};
        for (int i = 0; i < 4; i++) {
            const qhx_st_tensor *ta = qhx_st_find(a, same[i]), *tb = qhx_st_find(b, same[i]);
            CHECK(ta && tb);
            if (ta && tb) {
                CHECK_EQ(ta->size, tb->size);
                CHECK(ta->size == tb->size && !memcmp(ta->data, tb->data, ta->size));
            }
        }
    }
    qhx_st_free(a);
    qhx_st_free(b);
    rm_flat(d1);
    rm_flat(d2);
}

// ---- conversion --------------------------------------------------------------------------------------

typedef struct expect {
    const char *precision, *lmhead, *embed;
    qhx_dtype lin, vis_lin, emb, lm;
    int lm_q6; /* the lm-head is Q6 (U8 codes, F16 scales, U8 high bits) */
} expect;

/* |w' - w| within the format's bound for every element of a converted matrix. */
/* The error bound of one Q4 (levels 8) or Q6 (levels 32) element: the scale search never does
 * worse than the plain choice d = m / -levels (m the group's signed extreme), whose error is at
 * most |d| per element, so the group's error norm, and each element's error, is at most
 * sqrt(group) * |m| / levels. */
static float group_limit(const qhx_st_tensor *src, int64_t r, int64_t c, int64_t cols, int64_t group, float levels) {
    float amax = 0;
    for (int64_t i = c - c % group; i < c - c % group + group; i++) amax = fmaxf(amax, fabsf(elem_f32(src, r * cols + i)));
    return sqrtf((float)group) * amax / levels * 1.001f;
}

static int matrix_close(const qhx_st_set *out, const char *name, const qhx_st_tensor *src) {
    qhx_weight w;
    qhx_error err;
    if (qhx_st_get_weight(out, name, src->shape[0], src->n_elements / src->shape[0], &w, &err) != QHX_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 0;
    }
    float *row = qhx_malloc((size_t)w.cols * 4);
    int ok = 1;
    for (int64_t r = 0; r < w.rows && ok; r++) {
        const qhx_st_tensor *o = qhx_st_find(out, name);
        switch (w.fmt) {
        case QHX_W_Q8: qhx_dequant_q8_row((const int8_t *)w.data + r * w.cols, w.scales[r], w.cols, row); break;
        case QHX_W_Q4:
            qhx_dequant_q4_row((const uint8_t *)w.data + r * w.cols / 2, w.gscales + r * (w.cols / w.group), w.cols,
                               w.group, row);
            break;
        case QHX_W_Q6:
            qhx_dequant_q6_row((const uint8_t *)w.data + r * w.cols / 2, w.high + r * w.cols / 4,
                               w.gscales + r * (w.cols / w.group), w.cols, w.group, row);
            break;
        case QHX_W_Q4A:
            qhx_dequant_q4a_row((const uint8_t *)w.data + r * w.cols / 2, w.gscales + r * qhx_q4a_row_supers(w.cols),
                                w.sub + r * qhx_q4a_row_sub_bytes(w.cols), w.cols, row);
            break;
        default:
            for (int64_t c = 0; c < w.cols; c++) row[c] = elem_f32(o, r * w.cols + c);
        }
        for (int64_t c = 0; c < w.cols && ok; c++) {
            float s = elem_f32(src, r * w.cols + c), e = fabsf(row[c] - s), lim;
            if (w.fmt == QHX_W_Q8) lim = w.scales[r] * 0.5f * 1.0001f;
            else if (w.fmt == QHX_W_Q4) lim = group_limit(src, r, c, w.cols, w.group, 8.0f);
            else if (w.fmt == QHX_W_Q6) lim = group_limit(src, r, c, w.cols, w.group, 32.0f);
            else if (w.fmt == QHX_W_Q4A) lim = group_limit(src, r, c, w.cols, w.group, 8.0f); /* Q4's, looser here */
            else if (w.fmt == QHX_W_F16) lim = fabsf(s) * 0x1p-11f + 0x1p-25f;
            else if (w.fmt == QHX_W_BF16) lim = fabsf(s) * 0x1p-8f;
            else lim = 0;
            if (!(e <= lim)) {
                fprintf(stderr, "%s [%lld, %lld]: %g vs %g (fmt %d)\n", name, (long long)r, (long long)c, row[c], s,
                        (int)w.fmt);
                ok = 0;
            }
        }
    }
    qhx_free(row);
    return ok;
}

static int is_linear(const qhx_st_tensor *t) {
    size_t n = strlen(t->name);
    return t->n_dims == 2 && n > 7 && !strcmp(t->name + n - 7, ".weight") && !strstr(t->name, "pos_embed") &&
           !strstr(t->name, "embed_tokens");
}

static void check_bundle(const char *fixture, const char *dir, const expect *x) {
    char fx[512];
    snprintf(fx, sizeof fx, "%s/%s", FIX, fixture);
    qhx_st_set *src = NULL, *out = NULL;
    qhx_error err;
    CHECK_EQ(qhx_st_open(fx, &src, &err), QHX_OK);
    CHECK_EQ(qhx_st_open(dir, &out, &err), QHX_OK); /* through model.safetensors.index.json */
    if (!src || !out) {
        fprintf(stderr, "%s\n", err.msg);
        qhx_st_free(src);
        return;
    }
    int64_t expected = 0;
    int ok = 1;
    const qhx_st_tensor *emb = NULL;
    /* an untied checkpoint's own head; the embedding table is then always stored beside it */
    const qhx_st_tensor *src_head = qhx_st_find(src, "lm_head.weight");
    for (int64_t i = 0; i < qhx_st_n_tensors(src); i++) {
        const qhx_st_tensor *s = qhx_st_tensor_at(src, i);
        if (!strncmp(s->name, "mtp.", 4)) {
            CHECK(qhx_st_find(out, s->name) == NULL);
            continue;
        }
        if (s == src_head) continue; /* checked below, in the head's precision */
        const qhx_st_tensor *o = qhx_st_find(out, s->name);
        if (strstr(s->name, "embed_tokens") && !x->embed && !src_head) { /* tied: stored once, as the head */
            emb = s;
            if (o) fprintf(stderr, "%s: %s stored beside the tied lm-head\n", dir, s->name);
            ok &= o == NULL;
            continue;
        }
        if (!o) {
            fprintf(stderr, "%s: %s missing\n", dir, s->name);
            ok = 0;
            continue;
        }
        expected++;
        int vision = !strncmp(s->name, "model.visual.", 13);
        qhx_dtype want = QHX_DTYPE_F32;
        if (strstr(s->name, "embed_tokens")) want = x->emb, emb = s;
        else if (is_linear(s)) want = vision ? x->vis_lin : x->lin;
        if (o->dtype != want) {
            fprintf(stderr, "%s: %s is %s, expected %s\n", dir, s->name, qhx_dtype_name(o->dtype), qhx_dtype_name(want));
            ok = 0;
        }
        if (want == QHX_DTYPE_I8 || want == QHX_DTYPE_U8) expected++; /* .qscale */
        if (want == QHX_DTYPE_F32) { /* kept tensors: same shape, values exact (bf16 widens exactly) */
            int same = o->n_dims == s->n_dims && o->n_elements == s->n_elements;
            for (int d = 0; same && d < s->n_dims; d++) same = o->shape[d] == s->shape[d];
            for (int64_t k = 0; same && k < s->n_elements; k++) same = elem_f32(o, k) == elem_f32(s, k);
            if (!same) fprintf(stderr, "%s: %s not an exact copy\n", dir, s->name);
            ok &= same;
        } else if (s->n_dims == 2) {
            ok &= matrix_close(out, s->name, s);
        }
    }
    CHECK(ok);
    /* the lm-head: the tied embedding in its own precision (and, without --embed, the only copy),
     * or the untied checkpoint's own head (never the embedding: the two differ) */
    const qhx_st_tensor *lm = qhx_st_find(out, "lm_head.weight");
    CHECK(lm != NULL && lm->dtype == x->lm);
    if (lm && (src_head || emb)) CHECK(matrix_close(out, "lm_head.weight", src_head ? src_head : emb));
    expected += 1 + (x->lm == QHX_DTYPE_I8 || x->lm == QHX_DTYPE_U8) + x->lm_q6;
    CHECK_EQ(qhx_st_find(out, "lm_head.weight.qhigh") != NULL, x->lm_q6);
    CHECK_EQ(qhx_st_n_tensors(out), expected);
    /* each file says what it is */
    for (int f = 0; f < qhx_st_n_files(out); f++) {
        qhx_st_set *one;
        if (qhx_st_open(qhx_st_file_path(out, f), &one, &err) != QHX_OK) continue;
        int has_fmt = 0;
        for (int m = 0; m < qhx_st_n_metadata(one); m++) {
            const char *k, *v;
            qhx_st_metadata_at(one, m, &k, &v);
            if (!strcmp(k, "qhexrt.format")) has_fmt = !strcmp(v, "qhexrt/2");
        }
        CHECK(has_fmt);
        qhx_st_free(one);
    }
    qhx_st_free(src);
    qhx_st_free(out);
}

static void check_manifest(const char *dir, const char *file, const char *op, qhx_precision precision,
                           qhx_dtype lm_dtype, bool embed_table, int64_t ctx) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    qhx_error err;
    qhx_plan *m = NULL;
    CHECK_EQ(qhx_plan_open(p, &m, &err), QHX_OK); /* also checks that every named file exists */
    if (!m) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    CHECK_EQ(qhx_plan_verify(m, QHX_PLAN_VERIFY_HEADERS, &err), QHX_OK);
    CHECK(!strcmp(m->host_op, op));
    CHECK_EQ(m->precision, precision);
    CHECK_EQ(m->max_context, ctx);
    CHECK(m->artifacts[QHX_ART_LM_HEAD].present);
    CHECK_EQ(m->artifacts[QHX_ART_EMBEDDING].present, embed_table); /* tied: only with --embed */
    CHECK_EQ(m->artifacts[QHX_ART_LM_HEAD].dtype, lm_dtype);
    CHECK_EQ(m->artifacts[QHX_ART_VISION].present, !strcmp(op, "qwen3_vl_generate"));
    CHECK_EQ(m->special.n_stop_ids, 2);
    qhx_plan_free(m);
}

static void test_convert(void) {
    const expect X[] = {
        {"f16", NULL, NULL, QHX_DTYPE_F16, QHX_DTYPE_F16, QHX_DTYPE_F16, QHX_DTYPE_F16, 0},
        {"bf16", NULL, NULL, QHX_DTYPE_BF16, QHX_DTYPE_BF16, QHX_DTYPE_BF16, QHX_DTYPE_BF16, 0},
        {"w8", NULL, NULL, QHX_DTYPE_I8, QHX_DTYPE_I8, QHX_DTYPE_F16, QHX_DTYPE_I8, 0},
        {"q4", NULL, NULL, QHX_DTYPE_U8, QHX_DTYPE_I8, QHX_DTYPE_F16, QHX_DTYPE_U8, 1}, /* q6 head */
        {"w8", "f16", "bf16", QHX_DTYPE_I8, QHX_DTYPE_I8, QHX_DTYPE_BF16, QHX_DTYPE_F16, 0},
        {"q4", "q4", NULL, QHX_DTYPE_U8, QHX_DTYPE_I8, QHX_DTYPE_F16, QHX_DTYPE_U8, 0},
        {"q4", "w8", NULL, QHX_DTYPE_U8, QHX_DTYPE_I8, QHX_DTYPE_F16, QHX_DTYPE_I8, 0},
    };
    const qhx_precision prec[] = {QHX_PREC_F16, QHX_PREC_BF16, QHX_PREC_W8, QHX_PREC_Q4, QHX_PREC_W8, QHX_PREC_Q4, QHX_PREC_Q4};
    /* qwen35-tiny-untied-f32: an untied head; f16 and w8 (its 144-column rows take no q4 groups) */
    const char *fixtures[] = {"qwen35-tiny-f32", "qwen35-tiny-bf16", "qwen3vl-tiny-f32", "qwen35-tiny-untied-f32"};
    qhx_error err;
    for (int f = 0; f < 4; f++)
        for (int i = 0; i < 7; i++) {
            if (f == 1 && i > 3) continue;
            if (f == 3 && i != 0 && i != 2 && i != 4) continue;
            const bool untied = f == 3;
            char dir[300];
            snprintf(dir, sizeof dir, "%s/b-%s-%d", base, fixtures[f], i);
            char src[512];
            snprintf(src, sizeof src, "%s/%s", FIX, fixtures[f]);
            qhx_forge_params p = {.precision = X[i].precision, .lmhead = X[i].lmhead, .embed = X[i].embed,
                                  .max_context = i == 1 ? 300 : 0};
            qhx_status rc = qhx_forge_convert(src, dir, &p, &err);
            CHECK_EQ(rc, QHX_OK);
            if (rc != QHX_OK) {
                fprintf(stderr, "%s\n", err.msg);
                continue;
            }
            check_bundle(fixtures[f], dir, &X[i]);
            int64_t ctx = i == 1 ? 300 : TRAINED_CTX; /* the trained context, unless --max-context */
            char file[128];
            if (f != 2) {
                snprintf(file, sizeof file, "%s-%lld.json", fixtures[f], (long long)ctx);
                check_manifest(dir, file, "qwen3_5_generate", prec[i], X[i].lm, X[i].embed != NULL || untied, ctx);
            } else {
                snprintf(file, sizeof file, "%s-vlm-%lld.json", fixtures[f], (long long)ctx);
                check_manifest(dir, file, "qwen3_vl_generate", prec[i], X[i].lm, X[i].embed != NULL, ctx);
                snprintf(file, sizeof file, "%s-text-%lld.json", fixtures[f], (long long)ctx);
                check_manifest(dir, file, "qwen3_vl_text_generate", prec[i], X[i].lm, X[i].embed != NULL, ctx);
            }
            rm_flat(dir);
        }
    CHECK_EQ(n_entries(base), 0);
}

/* q4a: every decoder matrix is Q4A, or Q6 where the default policy or a --tensor-precision rule
 * says so (the fixture's rows are all narrower than a super-block: the narrow-row policy); each
 * within its bound of the source; the head W8 (narrow rows); the bundle runs. */
static int layer_more_bits(int64_t l, int64_t n) { /* the policy's rule, written out for n = 8 */
    (void)n;
    return l == 0 || l == 3 || l == 6 || l == 7;
}

static void check_q4a_bundle(const char *dir, const char *rule_pat, qhx_wfmt rule_fmt) {
    char fx[512];
    snprintf(fx, sizeof fx, "%s/qwen35-tiny-f32", FIX);
    qhx_st_set *src = NULL, *out = NULL;
    qhx_error err;
    CHECK_EQ(qhx_st_open(fx, &src, &err), QHX_OK);
    CHECK_EQ(qhx_st_open(dir, &out, &err), QHX_OK);
    if (!src || !out) {
        qhx_st_free(src);
        return;
    }
    int n_q4a = 0, n_q6 = 0, n_rule = 0, want_q6 = 0;
    for (int64_t i = 0; i < qhx_st_n_tensors(src); i++) {
        const qhx_st_tensor *s = qhx_st_tensor_at(src, i);
        if (!is_linear(s) || !strncmp(s->name, "mtp.", 4)) continue;
        qhx_weight w;
        CHECK_EQ(qhx_st_get_weight(out, s->name, s->shape[0], s->shape[1], &w, &err), QHX_OK);
        long long l = -1;
        const char *at = strstr(s->name, ".layers.");
        if (at) l = strtoll(at + 8, NULL, 10);
        qhx_wfmt want = QHX_W_Q4A;
        if (strstr(s->name, "mlp.down_proj") && layer_more_bits(l, 8)) want = QHX_W_Q6;
        if (strstr(s->name, "linear_attn.in_proj_qkv") || strstr(s->name, "linear_attn.in_proj_z") ||
            strstr(s->name, "linear_attn.out_proj") || strstr(s->name, "mlp.up_proj"))
            want = QHX_W_Q6;
        if (rule_pat && strstr(s->name, rule_pat)) want = rule_fmt, n_rule++;
        if (w.fmt != want) fprintf(stderr, "%s: %s is format %d, expected %d\n", dir, s->name, (int)w.fmt, (int)want);
        CHECK_EQ(w.fmt, want);
        n_q4a += w.fmt == QHX_W_Q4A, n_q6 += w.fmt == QHX_W_Q6;
        CHECK(matrix_close(out, s->name, s));
        if (w.fmt == QHX_W_Q4A) { /* no ".qscale": a reader without Q4A refuses the matrix */
            char side[300];
            snprintf(side, sizeof side, "%s.qscale", s->name);
            CHECK(qhx_st_find(out, side) == NULL);
        }
        want_q6 += want == QHX_W_Q6;
    }
    CHECK(n_q4a >= 16);
    CHECK_EQ(n_q6, want_q6);
    if (!rule_pat) CHECK_EQ(n_q6, 4 + 3 * 6 + 8);
    if (rule_pat) CHECK(n_rule > 0);
    qhx_weight head;
    CHECK_EQ(qhx_st_get_weight(out, "lm_head.weight", -1, -1, &head, &err), QHX_OK);
    CHECK_EQ(head.fmt, QHX_W_Q8);
    qhx_st_free(src);
    qhx_st_free(out);
}

static void test_convert_q4a(void) {
    char src[512], dir[300];
    snprintf(src, sizeof src, "%s/qwen35-tiny-f32", FIX);
    snprintf(dir, sizeof dir, "%s/q4a", base);
    qhx_error err;
    qhx_forge_params p = {.precision = "q4a"};
    CHECK_EQ(qhx_forge_convert(src, dir, &p, &err), QHX_OK);
    check_q4a_bundle(dir, NULL, QHX_W_Q4A);
    check_manifest(dir, "qwen35-tiny-f32-262144.json", "qwen3_5_generate", QHX_PREC_Q4, QHX_DTYPE_I8, false, TRAINED_CTX);
    rm_flat(dir);
    /* rules: the last match wins, over the default policy too */
    p.tensor_precision = "*.mlp.gate_proj.weight=q6,*.layers.*.mlp.gate_proj.weight=w8";
    CHECK_EQ(qhx_forge_convert(src, dir, &p, &err), QHX_OK);
    check_q4a_bundle(dir, "mlp.gate_proj", QHX_W_Q8);
    rm_flat(dir);
    p.tensor_precision = "*.mlp.down_proj.weight=q4a";
    CHECK_EQ(qhx_forge_convert(src, dir, &p, &err), QHX_OK);
    check_q4a_bundle(dir, "mlp.down_proj", QHX_W_Q4A);
    rm_flat(dir);
    /* bad rules: refused before anything is written */
    static const char *const bad[] = {"*.weight", "*.weight=q3", "=q6", "*.weight=q6,", "a=q6,,b=q4"};
    for (int i = 0; i < 5; i++) {
        p.tensor_precision = bad[i];
        qhx_status rc = qhx_forge_convert(src, dir, &p, &err);
        if (i == 3) { /* a trailing comma ends the list */
            CHECK_EQ(rc, QHX_OK);
            rm_flat(dir);
            continue;
        }
        CHECK_EQ(rc, QHX_E_ARG);
        CHECK_EQ(n_entries(base), 0);
    }
}

/* A bundle is itself a sharded checkpoint (index + several files, lm_head.weight present): it
 * converts again, and the untied lm-head is taken as it is. */
static void test_sharded_input(void) {
    char src[512], b1[300], b2[300];
    snprintf(src, sizeof src, "%s/qwen35-tiny-f32", FIX);
    snprintf(b1, sizeof b1, "%s/s1", base);
    snprintf(b2, sizeof b2, "%s/s2", base);
    qhx_error err;
    qhx_forge_params p = {.precision = "f16"};
    CHECK_EQ(qhx_forge_convert(src, b1, &p, &err), QHX_OK);
    p.precision = "w8";
    p.name = "again";
    CHECK_EQ(qhx_forge_convert(b1, b2, &p, &err), QHX_OK);
    qhx_st_set *a = NULL, *b = NULL;
    CHECK_EQ(qhx_st_open(b1, &a, &err), QHX_OK);
    CHECK_EQ(qhx_st_open(b2, &b, &err), QHX_OK);
    if (a && b) {
        int all = 1;
        for (int64_t i = 0; i < qhx_st_n_tensors(a); i++)
            all &= qhx_st_find(b, qhx_st_tensor_at(a, i)->name) != NULL;
        CHECK(all);
        const qhx_st_tensor *lm = qhx_st_find(a, "lm_head.weight");
        CHECK(lm && matrix_close(b, "lm_head.weight", lm));
        char m[600];
        snprintf(m, sizeof m, "%s/again-%d.json", b2, TRAINED_CTX);
        CHECK(qhx_path_is_file(m));
    }
    qhx_st_free(a);
    qhx_st_free(b);
    rm_flat(b1);
    rm_flat(b2);
}

// ---- failures leave nothing ------------------------------------------------------------------------

static int cancel_after;
static int cancel_cb(void *user) {
    (void)user;
    return --cancel_after < 0;
}

static void test_failures(void) {
    char src[512], dir[300];
    snprintf(src, sizeof src, "%s/qwen35-tiny-f32", FIX);
    snprintf(dir, sizeof dir, "%s/out", base);
    qhx_error err;
    qhx_forge_params p = {.precision = "w8"};
    p.precision = "int3";
    CHECK(qhx_forge_convert(src, dir, &p, &err) == QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "int3");
    p.precision = "w8";
    p.lmhead = "f32";
    CHECK(qhx_forge_convert(src, dir, &p, &err) == QHX_E_ARG);
    p.lmhead = NULL;
    CHECK(qhx_forge_convert("/nonexistent", dir, &p, &err) == QHX_E_IO);
    p.max_context = 300000;
    CHECK(qhx_forge_convert(src, dir, &p, &err) == QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "max_position_embeddings");
    p.max_context = 0;
    p.name = "a/b";
    CHECK(qhx_forge_convert(src, dir, &p, &err) == QHX_E_ARG);
    p.name = NULL;
    /* an existing output folder is refused, untouched */
    CHECK_EQ(mkdir(dir, 0755), 0);
    CHECK(qhx_forge_convert(src, dir, &p, &err) == QHX_E_IO);
    CHECK_CONTAINS(err.msg, "already exists");
    rmdir(dir);
    /* cancel at several points: QHX_E_ABORTED, no output, no staging folder */
    for (int k = 0; k < 40; k += 7) {
        cancel_after = k;
        p.cancel = cancel_cb;
        CHECK(qhx_forge_convert(src, dir, &p, &err) == QHX_E_ABORTED);
        CHECK_EQ(n_entries(base), 0);
        cancel_after = k;
        qhx_forge_params r = {.preset = "tiny", .cancel = cancel_cb};
        CHECK(qhx_forge_random("qwen3_5", dir, &r, &err) == QHX_E_ABORTED);
        CHECK_EQ(n_entries(base), 0);
    }
    /* a non-checkpoint folder: no staging folder left either */
    char empty[300];
    snprintf(empty, sizeof empty, "%s/empty", base);
    mkdir(empty, 0755);
    p.cancel = NULL;
    CHECK(qhx_forge_convert(empty, dir, &p, &err) != QHX_OK);
    rmdir(empty);
    CHECK_EQ(n_entries(base), 0);
}

/* A tied bundle stores the matrix once, as lm_head.weight; the model's embedding lookup must read
 * exactly that matrix's rows: the input rows the layer hook reports (layer -1) are bit for bit
 * the head's dequantized rows of the fed ids. Both families, w8, q6 and q4 heads. */
typedef struct rows_cap {
    float *x;
    int64_t H, n;
} rows_cap;

static void on_input_rows(void *user, int64_t layer, int64_t pos0, const float *x, int64_t n) {
    rows_cap *c = user;
    if (layer == -1 && pos0 == 0 && n == c->n) memcpy(c->x, x, (size_t)(n * c->H) * sizeof(float));
}

/* The quantizer runs on a pool: the bundle's bytes do not depend on the thread count (q4a too,
 * whose codes passes take the scales its scale pass kept). */
static void threads_same_bytes(const char *precision, const char *const files[2]) {
    char src[512], d1[300], d3[300];
    snprintf(src, sizeof src, "%s/qwen35-tiny-f32", FIX);
    snprintf(d1, sizeof d1, "%s/threads-1", base);
    snprintf(d3, sizeof d3, "%s/threads-3", base);
    qhx_error err;
    qhx_forge_params p1 = {.precision = precision, .threads = 1}, p3 = {.precision = precision, .threads = 3};
    CHECK_EQ(qhx_forge_convert(src, d1, &p1, &err), QHX_OK);
    CHECK_EQ(qhx_forge_convert(src, d3, &p3, &err), QHX_OK);
    for (int f = 0; f < 2; f++) {
        char a[400], b[400];
        snprintf(a, sizeof a, "%s/%s", d1, files[f]);
        snprintf(b, sizeof b, "%s/%s", d3, files[f]);
        size_t na = 0, nb = 0;
        char *x = NULL, *y = NULL;
        CHECK_EQ(qhx_file_read_all(a, 1 << 26, &x, &na, &err), QHX_OK);
        CHECK_EQ(qhx_file_read_all(b, 1 << 26, &y, &nb, &err), QHX_OK);
        CHECK(x && y && na == nb && na > 0 && !memcmp(x, y, na));
        qhx_free(x);
        qhx_free(y);
    }
    rm_flat(d1);
    rm_flat(d3);
}

static void test_threads_same_bytes(void) {
    threads_same_bytes("q4", (const char *const[]){"decoder-q4.safetensors", "lmhead-q6.safetensors"});
    threads_same_bytes("q4a", (const char *const[]){"decoder-q4a.safetensors", "lmhead-w8.safetensors"});
}

static void check_tied_lookup(const char *fixture, const char *precision, const char *lmhead) {
    char src[512], dir[300];
    snprintf(src, sizeof src, "%s/%s", FIX, fixture);
    snprintf(dir, sizeof dir, "%s/tied-%s-%s-%s", base, fixture, precision, lmhead);
    qhx_error err;
    qhx_forge_params p = {.precision = precision, .lmhead = lmhead};
    CHECK_EQ(qhx_forge_convert(src, dir, &p, &err), QHX_OK);
    qhx_st_set *set = NULL;
    qhx_model *m = NULL;
    qhx_seq *st = NULL;
    CHECK_EQ(qhx_st_open(dir, &set, &err), QHX_OK);
    char plan[600]; /* a Qwen3-VL bundle holds two manifests: take the text one */
    if (!strncmp(fixture, "qwen3vl", 7)) snprintf(plan, sizeof plan, "%s/%s-text-%d.json", dir, fixture, TRAINED_CTX);
    else snprintf(plan, sizeof plan, "%s", dir);
    CHECK_EQ(qhx_model_open(plan, NULL, &m, &err), QHX_OK);
    if (!set || !m) {
        fprintf(stderr, "%s: %s\n", dir, err.msg);
        goto done;
    }
    for (int64_t i = 0; i < qhx_st_n_tensors(set); i++) CHECK(!strstr(qhx_st_tensor_at(set, i)->name, "embed_tokens"));
    const qhx_model_config *c = qhx_model_get_config(m);
    const int32_t ids[4] = {0, 17, 198, (int32_t)c->vocab_size - 1};
    rows_cap cap = {.H = c->hidden_size, .n = 4};
    float *want = qhx_calloc((size_t)(4 * c->hidden_size), sizeof(float));
    cap.x = qhx_calloc((size_t)(4 * c->hidden_size), sizeof(float));
    qhx_device *dev = NULL;
    const qhx_device_params dp = {.max_isa = QHX_ISA_REF, .n_threads = 1};
    CHECK_EQ(qhx_cpu_device_create(&dp, &dev, &err), QHX_OK);
    const qhx_kernels *k = qhx_cpu_device_kernels(dev);
    qhx_wowned owned = {0};
    qhx_weight head;
    CHECK_EQ(qhx_wbind_linear(set, "lm_head.weight", c->vocab_size, c->hidden_size, dev, &owned, &head, &err), QHX_OK);
    for (int t = 0; t < 4; t++) k->row[head.fmt](&head, ids[t], want + t * c->hidden_size);
    qhx_seq_params sp = {.n_ctx = 16};
    CHECK_EQ(qhx_model_state_create(m, &sp, &st, &err), QHX_OK);
    qhx_forward_opts o = {.layer_cb = on_input_rows, .layer_cb_user = &cap};
    if (st) CHECK_EQ(qhx_model_forward(m, st, ids, 4, &o, &err), QHX_OK);
    CHECK(memcmp(want, cap.x, (size_t)(4 * c->hidden_size) * sizeof(float)) == 0);
    qhx_wowned_free(&owned);
    qhx_cpu_device_free(dev);
    qhx_free(want);
    qhx_free(cap.x);
done:
    qhx_model_state_free(st);
    qhx_model_free(m);
    qhx_st_free(set);
    rm_flat(dir);
}

int main(void) {
    snprintf(base, sizeof base, "/tmp/qhx-test-forge-XXXXXX");
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 1;
    }
    char probe[512];
    snprintf(probe, sizeof probe, "%s/qwen35-tiny-f32/model.safetensors", FIX);
    if (!qhx_path_is_file(probe)) {
        fprintf(stderr, "FAIL: fixtures not found under %s\n", FIX);
        rmdir(base);
        return 1;
    }
    test_random();
    test_released_presets();
    test_random_layers();
    test_convert();
    test_sharded_input();
    test_threads_same_bytes();
    check_tied_lookup("qwen35-tiny-f32", "q4", "w8");
    check_tied_lookup("qwen35-tiny-f32", "q4", "q4");
    check_tied_lookup("qwen35-tiny-f32", "q4", "q6");
    check_tied_lookup("qwen3vl-tiny-f32", "q4", "w8");
    check_tied_lookup("qwen3vl-tiny-f32", "q4", "q6");
    check_tied_lookup("qwen35-tiny-f32", "q4a", "q4a");
    test_convert_q4a();
    test_failures();
    rm_flat(base);
    return t_done("test_forge");
}
