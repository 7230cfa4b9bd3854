/* test_qwen3vl_model: loading and interface of the Qwen3-VL family on the qwen3vl-tiny-f32
 * checkpoint: config errors name their field, a failed allocation at any point of open / image
 * encode / state / attach / forward fails cleanly (ASan checks the leaks), an image that needs
 * resampling encodes to the token count smart_resize implies, image positions follow
 * get_rope_index, and BF16 / F16 checkpoints (stored misaligned, so every tensor is realigned)
 * give the logits of an F32 checkpoint holding the same rounded values. Skips (77) when the
 * fixture is absent. */
#include "t.h"

#include "core/alloc.h"
#include "core/file.h"
#include "core/fp16.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "runtime/model.h"
#include "runtime/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fx[4096];

/* A scratch checkpoint folder: fx's safetensors (linked) and the given config.json text. */
static char *scratch_ckpt(const char *config_text, const char *prep_text) {
    static char dir[] = "/tmp/qhx_vl_XXXXXX";
    strcpy(dir, "/tmp/qhx_vl_XXXXXX");
    if (!mkdtemp(dir)) return NULL;
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/model.safetensors", fx);
    snprintf(b, sizeof b, "%s/model.safetensors", dir);
    if (symlink(a, b)) return NULL;
    snprintf(b, sizeof b, "%s/config.json", dir);
    FILE *f = fopen(b, "w");
    if (!f) return NULL;
    fputs(config_text, f);
    fclose(f);
    if (prep_text) {
        snprintf(b, sizeof b, "%s/preprocessor_config.json", dir);
        f = fopen(b, "w");
        if (!f) return NULL;
        fputs(prep_text, f);
        fclose(f);
    }
    return dir;
}

static void rm_scratch(const char *dir) {
    char p[4200];
    const char *names[] = {"model.safetensors", "config.json", "preprocessor_config.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* The fixture's config.json with `path` (a.b) set to the JSON value `value`, as text. */
static char *config_with(const char *obj, const char *key, const char *value) {
    qhx_error err;
    char *cp = qhx_path_join(fx, "config.json");
    json_t *root = qhx_json_load_file(cp, &err);
    qhx_free(cp);
    if (!root) return NULL;
    json_t *o = obj ? json_object_get(root, obj) : root;
    json_t *v = value ? json_loads(value, JSON_DECODE_ANY, NULL) : NULL;
    if (v) json_object_set_new(o, key, v);
    else json_object_del(o, key);
    char *s = json_dumps(root, 0);
    json_decref(root);
    return s;
}

static void expect_open_error(const char *obj, const char *key, const char *value, const char *prep,
                              qhx_status code, const char *needle) {
    char *cfg = config_with(obj, key, value);
    char *dir = cfg ? scratch_ckpt(cfg, prep) : NULL;
    free(cfg);
    CHECK(dir != NULL);
    if (!dir) return;
    qhx_model *m = NULL;
    qhx_error err = {0};
    CHECK_EQ(qhx_model_open(dir, NULL, &m, &err), code);
    CHECK(m == NULL);
    CHECK_CONTAINS(err.msg, needle);
    qhx_model_free(m);
    rm_scratch(dir);
}

static void test_config_errors(void) {
    expect_open_error("text_config", "rope_scaling", "{\"mrope_section\": [6, 5, 4], \"mrope_interleaved\": true}", NULL,
                      QHX_E_FORMAT, "mrope_section");
    expect_open_error("text_config", "hidden_act", "\"gelu\"", NULL, QHX_E_UNSUPPORTED, "text_config.hidden_act");
    expect_open_error("vision_config", "hidden_act", "\"relu\"", NULL, QHX_E_UNSUPPORTED, "vision_config.hidden_act");
    expect_open_error("vision_config", "deepstack_visual_indexes", "[1, 9]", NULL, QHX_E_FORMAT, "deepstack_visual_indexes");
    expect_open_error("vision_config", "num_position_embeddings", "60", NULL, QHX_E_FORMAT, "num_position_embeddings");
    expect_open_error("vision_config", "out_hidden_size", "32", NULL, QHX_E_FORMAT, "out_hidden_size");
    /* without text_config the folder has no eos_token_id left (and the family needs text_config) */
    expect_open_error(NULL, "text_config", NULL, NULL, QHX_E_FORMAT, "no stop tokens");
    expect_open_error("text_config", "num_hidden_layers", "5", NULL, QHX_E_FORMAT, "layers.4");
    expect_open_error("text_config", "tie_word_embeddings", "false", NULL, QHX_E_FORMAT, "lm_head.weight");
    expect_open_error("text_config", "unused", "0", "{\"patch_size\": 14}", QHX_E_FORMAT, "patch_size");
    expect_open_error("text_config", "unused", "0", "{\"resample\": 1}", QHX_E_UNSUPPORTED, "resample");
    expect_open_error("text_config", "unused", "0", "{\"size\": {\"shortest_edge\": 10, \"longest_edge\": 5}}", QHX_E_FORMAT,
                      "shortest_edge");
}

static int32_t *image_prompt(int64_t n_tokens, int64_t *n) {
    *n = n_tokens + 5;
    int32_t *ids = malloc((size_t)*n * sizeof *ids); /* outside the funnel: not part of the sweep */
    ids[0] = 991;
    ids[1] = 999;
    for (int64_t i = 0; i < n_tokens; i++) ids[2 + i] = 1002;
    ids[2 + n_tokens] = 1000;
    ids[3 + n_tokens] = 100;
    ids[4 + n_tokens] = 198;
    return ids;
}

/* Fail the Nth allocation for N = 0, 1, ... until the whole path succeeds. */
static void test_alloc_failures(void) {
    char *png = qhx_path_join(fx, "image-64x96.png");
    int64_t n = 0;
    int done = 0;
    for (; !done && n < 100000; n++) {
        qhx_error err = {0};
        qhx_model *m = NULL;
        qhx_seq *st = NULL;
        qhx_image_embed im = {0};
        int32_t *ids = NULL;
        int64_t n_ids = 0;
        float logits[1024];
        qhx_alloc_fail_after(n);
        qhx_status rc = qhx_model_open(fx, NULL, &m, &err);
        if (!rc) rc = qhx_model_image_load(m, png, 0, &im, &err);
        if (!rc) rc = qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 16}, &st, &err);
        if (!rc) ids = image_prompt(im.n_tokens, &n_ids);
        if (!rc) rc = qhx_model_state_attach(st, &im, 1, ids, n_ids, &err);
        if (!rc) rc = qhx_model_forward(m, st, ids, n_ids, &(qhx_forward_opts){.logits = logits}, &err);
        bool fired = qhx_alloc_failed();
        qhx_alloc_fail_after(-1);
        if (fired) {
            CHECK(rc != QHX_OK);
            CHECK(err.msg[0] != '\0');
        } else {
            CHECK_EQ(rc, QHX_OK);
            done = 1;
        }
        free(ids);
        qhx_image_embed_deinit(&im);
        qhx_model_state_free(st);
        qhx_model_free(m);
    }
    CHECK(done);
    printf("allocation failure sweep: %lld points\n", (long long)n);
    qhx_free(png);
}

/* A 50 x 70 image is resampled to a multiple of 32 (smart_resize with the fixture's
 * min_pixels 1024): 64 x 64 -> 2 x 2 tokens. */
static void test_resized_image(const qhx_model *m) {
    qhx_image img = {70, 50, qhx_malloc(70 * 50 * 3)};
    for (int i = 0; i < 70 * 50 * 3; i++) img.rgb[i] = (uint8_t)(i * 31 % 251);
    int64_t h, w;
    qhx_error err;
    CHECK_EQ(qhx_smart_resize(50, 70, 32, 1024, 1048576, &h, &w, &err), QHX_OK);
    qhx_image_embed im = {0};
    CHECK_EQ(qhx_model_image_encode(m, &img, &im, &err), QHX_OK);
    CHECK_EQ(im.grid_h, h / 16);
    CHECK_EQ(im.grid_w, w / 16);
    CHECK_EQ(im.n_tokens, (h / 32) * (w / 32));
    int finite = 1;
    for (int64_t i = 0; im.embd && i < im.n_tokens * im.row_width; i++) finite &= isfinite(im.embd[i]) != 0;
    CHECK(finite);
    qhx_image_embed_deinit(&im);
    qhx_image_deinit(&img);
}

/* Text after the image continues at s + max(rows, cols); decode continues at max + 1. */
static void test_positions(const qhx_model *m) {
    qhx_image img = {96, 64, qhx_calloc(96 * 64, 3)}; /* 64 high, 96 wide: 2 x 3 tokens */
    qhx_image_embed im = {0};
    qhx_error err;
    CHECK_EQ(qhx_model_image_encode(m, &img, &im, &err), QHX_OK);
    int64_t n;
    int32_t *ids = image_prompt(im.n_tokens, &n);
    qhx_seq *st = NULL;
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 32}, &st, &err), QHX_OK);
    CHECK_EQ(qhx_model_state_attach(st, &im, 1, ids, n, &err), QHX_OK);
    const int64_t *pos;
    CHECK_EQ(qhx_model_state_positions(st, &pos), n);
    static const int64_t want[][3] = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {2, 2, 3}, {2, 2, 4}, {2, 3, 2},
                                      {2, 3, 3}, {2, 3, 4}, {5, 5, 5}, {6, 6, 6}, {7, 7, 7}};
    CHECK_EQ(n, 11);
    for (int64_t i = 0; i < n && i < 11; i++)
        for (int a = 0; a < 3; a++) CHECK_EQ(pos[i * 3 + a], want[i][a]);
    qhx_model_state_reset(st);
    CHECK_EQ(qhx_model_state_positions(st, &pos), 0);
    qhx_model_state_free(st);
    free(ids);
    qhx_image_embed_deinit(&im);
    qhx_image_deinit(&img);
}

/* Rewrite the fixture's safetensors with every tensor rounded to `dt` (BF16 or F16), stored as
 * dt (misaligned: the data section starts at an odd offset) or, when as_f32, as F32 of the
 * rounded values (aligned). Returns the checkpoint folder (config and preprocessor config are
 * the fixture's) or NULL. */
static char *rounded_ckpt(qhx_dtype dt, int as_f32, char *dir, size_t dir_size) {
    qhx_st_set *set = NULL;
    qhx_error err;
    if (qhx_st_open(fx, &set, &err)) return NULL;
    snprintf(dir, dir_size, "/tmp/qhx_vl_XXXXXX");
    if (!mkdtemp(dir)) { qhx_st_free(set); return NULL; }
    json_t *hdr = json_object();
    size_t off = 0, esz = as_f32 ? 4 : 2;
    for (int64_t i = 0; i < qhx_st_n_tensors(set); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        json_t *shape = json_array();
        for (int d = 0; d < t->n_dims; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        size_t n = (size_t)t->n_elements * esz;
        json_object_set_new(hdr, t->name, json_pack("{s:s, s:o, s:[I, I]}", "dtype", as_f32 ? "F32" : qhx_dtype_name(dt),
                                                    "shape", shape, "data_offsets", (json_int_t)off, (json_int_t)(off + n)));
        off += n;
    }
    char *text = json_dumps(hdr, JSON_COMPACT);
    json_decref(hdr);
    size_t hl = strlen(text);
    size_t pad = as_f32 ? (8 - (hl % 8)) % 8 : (hl % 2 ? 0 : 1); /* F32 aligned, 16-bit data odd */
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    uint64_t total = hl + pad;
    fwrite(&total, 8, 1, f);
    fwrite(text, 1, hl, f);
    for (size_t k = 0; k < pad; k++) fputc(' ', f);
    free(text);
    for (int64_t i = 0; i < qhx_st_n_tensors(set); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        for (int64_t e = 0; e < t->n_elements; e++) {
            float v;
            memcpy(&v, t->data + 4 * e, 4);
            uint16_t h = dt == QHX_DTYPE_BF16 ? qhx_f32_to_bf16(v) : qhx_f32_to_f16(v);
            float r = dt == QHX_DTYPE_BF16 ? qhx_bf16_to_f32(h) : qhx_f16_to_f32(h);
            if (as_f32) fwrite(&r, 4, 1, f);
            else fwrite(&h, 2, 1, f);
        }
    }
    fclose(f);
    qhx_st_free(set);
    const char *copy[] = {"config.json", "preprocessor_config.json"};
    for (int k = 0; k < 2; k++) {
        char src[4200], *buf = NULL;
        size_t len;
        snprintf(src, sizeof src, "%s/%s", fx, copy[k]);
        snprintf(path, sizeof path, "%s/%s", dir, copy[k]);
        if (qhx_file_read_all(src, 1 << 20, &buf, &len, &err)) return NULL;
        f = fopen(path, "wb");
        fwrite(buf, 1, len, f);
        fclose(f);
        qhx_free(buf);
    }
    return dir;
}

/* Logits of every position of the image prompt of image-64x96.png. */
static float *image_logits(const char *dir, int64_t *n_out) {
    qhx_model *m = NULL;
    qhx_seq *st = NULL;
    qhx_image_embed im = {0};
    qhx_error err;
    float *lg = NULL;
    int32_t *ids = NULL;
    char *png = qhx_path_join(fx, "image-64x96.png");
    if (qhx_model_open(dir, NULL, &m, &err) || qhx_model_image_load(m, png, 0, &im, &err)) {
        fprintf(stderr, "%s: %s\n", dir, err.msg);
        goto done;
    }
    int64_t n;
    ids = image_prompt(im.n_tokens, &n);
    lg = malloc((size_t)(n * 1024) * sizeof *lg);
    if (qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = n}, &st, &err) ||
        qhx_model_state_attach(st, &im, 1, ids, n, &err) ||
        qhx_model_forward(m, st, ids, n, &(qhx_forward_opts){.flags = QHX_FWD_LOGITS_ALL, .logits = lg}, &err)) {
        fprintf(stderr, "%s: %s\n", dir, err.msg);
        free(lg);
        lg = NULL;
    }
    *n_out = n;
done:
    free(ids);
    qhx_free(png);
    qhx_image_embed_deinit(&im);
    qhx_model_state_free(st);
    qhx_model_free(m);
    return lg;
}

static void test_half_checkpoints(void) {
    const qhx_dtype dts[2] = {QHX_DTYPE_BF16, QHX_DTYPE_F16};
    for (int k = 0; k < 2; k++) {
        char d16[64], d32[64];
        CHECK(rounded_ckpt(dts[k], 0, d16, sizeof d16) != NULL);
        CHECK(rounded_ckpt(dts[k], 1, d32, sizeof d32) != NULL);
        int64_t n16 = 0, n32 = 0;
        float *a = image_logits(d16, &n16), *b = image_logits(d32, &n32);
        CHECK(a && b && n16 == n32);
        double mx = 0;
        for (int64_t i = 0; a && b && i < n16 * 1024; i++) mx = fmax(mx, fabs((double)a[i] - b[i]));
        printf("%s checkpoint vs F32 of the same values: max|d logit| %.3g\n", qhx_dtype_name(dts[k]), mx);
        CHECK(mx <= 1e-5);
        free(a);
        free(b);
        rm_scratch(d16);
        rm_scratch(d32);
    }
}

int main(void) {
    snprintf(fx, sizeof fx, "%s/fixtures/parity/qwen3vl-tiny-f32", QHX_DATA_DIR);
    if (!qhx_path_is_dir(fx)) {
        fprintf(stderr, "FAIL: fixture missing under %s\n", QHX_DATA_DIR);
        return 1;
    }
    qhx_model *m = NULL;
    qhx_error err;
    CHECK_EQ(qhx_model_open(fx, NULL, &m, &err), QHX_OK);
    if (m) {
        test_resized_image(m);
        test_positions(m);
        qhx_model_free(m);
    }
    test_config_errors();
    test_half_checkpoints();
    test_alloc_failures();
    return t_done("test_qwen3vl_model");
}
