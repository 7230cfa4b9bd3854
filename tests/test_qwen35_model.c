// ctest-labels: unit
/* Qwen3.5 loading and the model interface, on the tiny f32 / bf16 fixtures:
 *   - config.json variants HF accepts (bare text config, full_attention_interval, partial rotary
 *     factor outside rope_parameters) and refusals by field name;
 *   - checkpoint layouts: misaligned tensor data (aligned copies), the text-only `model.` prefix,
 *     an explicit lm_head.weight; each must give the same logits as the fixture;
 *   - forward errors leave the state untouched; reset restarts the sequence;
 *   - every allocation failure during open / state creation / forward fails cleanly. */
#include "core/alloc.h"
#include "core/file.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "families/qwen35/qwen35.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "t.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fx_f32[512], fx_bf16[512];
static const int32_t PROMPT[] = {961, 204, 30, 198, 500, 962, 198, 17, 4, 999};
#define N_PROMPT ((int64_t)(sizeof PROMPT / sizeof PROMPT[0]))

/* logits (N_PROMPT, V) of PROMPT through the prompt path; NULL on failure */
static float *prompt_logits(const char *dir, qhx_error *err) {
    qhx_model *m = NULL;
    qhx_session *s = NULL;
    float *rows = NULL;
    if (qhx_model_open(dir, NULL, &m, err)) return NULL;
    if (qhx_session_create(m, &(qhx_session_params){.n_ctx = N_PROMPT}, &s, err) == QHX_OK) {
        rows = qhx_malloc((size_t)(N_PROMPT * qhx_model_n_vocab(m)) * sizeof(float));
        if (qhx_session_prefill(s, PROMPT, N_PROMPT, rows, err)) {
            qhx_free(rows);
            rows = NULL;
        }
    }
    qhx_session_free(s);
    qhx_model_free(m);
    return rows;
}

/* ---- config ------------------------------------------------------------------------------ */

static json_t *load_cfg(void) {
    char *p = qhx_path_join(fx_f32, "config.json");
    qhx_error err = {0};
    json_t *j = qhx_json_load_file(p, &err);
    qhx_free(p);
    CHECK(j != NULL);
    return j;
}

/* Parse root; expect `want` and, on failure, a message naming `field`. */
static void expect_cfg(json_t *root, qhx_status want, const char *field, qhx_model_config *cfg) {
    qhx_error err = {0};
    qhx_status rc = qhx_qwen35_parse_config(root, "config.json", cfg, &err);
    CHECK_EQ(rc, want);
    if (want != QHX_OK) CHECK_CONTAINS(err.msg, field);
    else if (rc) fprintf(stderr, "unexpected: %s\n", err.msg);
}

static void test_config(void) {
    qhx_model_config cfg;
    json_t *root = load_cfg();
    if (!root) return;
    expect_cfg(root, QHX_OK, NULL, &cfg);
    CHECK_EQ(cfg.hidden_size, 64);
    CHECK_EQ(cfg.rotary_dim, 8);
    CHECK_EQ(cfg.layer_types[3], QHX_LAYER_FULL_ATTENTION);
    CHECK_EQ(cfg.layer_types[4], QHX_LAYER_LINEAR_ATTENTION);
    CHECK_EQ(cfg.mrope_section[0], 2);
    CHECK(cfg.tie_word_embeddings);
    CHECK_NEAR(cfg.rope_theta, 1e7, 0);
    CHECK_EQ(cfg.eos_token_id, 960);
    json_t *tc = json_object_get(root, "text_config");

    /* layer_types absent: built from full_attention_interval */
    json_t *lt = json_incref(json_object_get(tc, "layer_types"));
    json_object_del(tc, "layer_types");
    json_object_set_new(tc, "full_attention_interval", json_integer(2));
    expect_cfg(root, QHX_OK, NULL, &cfg);
    CHECK_EQ(cfg.layer_types[1], QHX_LAYER_FULL_ATTENTION);
    CHECK_EQ(cfg.layer_types[2], QHX_LAYER_LINEAR_ATTENTION);
    json_object_set_new(tc, "layer_types", lt);

    /* partial_rotary_factor and rope_theta directly in text_config */
    json_t *rp = json_incref(json_object_get(tc, "rope_parameters"));
    json_object_del(tc, "rope_parameters");
    json_object_set_new(tc, "partial_rotary_factor", json_real(0.5));
    json_object_set_new(tc, "rope_theta", json_real(5e6));
    expect_cfg(root, QHX_OK, NULL, &cfg);
    CHECK_EQ(cfg.rotary_dim, 16);
    CHECK_NEAR(cfg.rope_theta, 5e6, 0);
    json_object_del(tc, "partial_rotary_factor");
    json_object_del(tc, "rope_theta");
    json_object_set_new(tc, "rope_parameters", rp);

    /* a bare text config (Qwen3_5ForCausalLM export) */
    json_t *bare = json_deep_copy(tc);
    json_object_set_new(bare, "model_type", json_string("qwen3_5_text"));
    expect_cfg(bare, QHX_OK, NULL, &cfg);
    CHECK_EQ(cfg.num_hidden_layers, 8);
    json_decref(bare);

    /* refusals, each naming its field */
    struct { const char *key; json_t *val; qhx_status rc; const char *field; } bad[] = {
        {"hidden_act", json_string("gelu"), QHX_E_UNSUPPORTED, "hidden_act"},
        {"attention_bias", json_true(), QHX_E_UNSUPPORTED, "attention_bias"},
        {"attn_output_gate", json_false(), QHX_E_UNSUPPORTED, "attn_output_gate"},
        {"linear_num_value_heads", json_integer(6), QHX_E_FORMAT, "linear_num_value_heads"},
        {"num_key_value_heads", json_integer(3), QHX_E_FORMAT, "num_key_value_heads"},
        {"hidden_size", json_string("64"), QHX_E_FORMAT, "text_config.hidden_size"},
        {"num_hidden_layers", json_integer(100000), QHX_E_FORMAT, "num_hidden_layers"},
        {"head_dim", json_integer(6), QHX_E_UNSUPPORTED, "partial_rotary_factor"},
        {"layer_types", json_pack("[ssssssss]", "linear_attention", "linear_attention", "linear_attention",
                                  "full_attention", "linear_attention", "mamba", "linear_attention",
                                  "full_attention"), QHX_E_UNSUPPORTED, "layer_types[5]"},
        {"layer_types", json_pack("[s]", "full_attention"), QHX_E_FORMAT, "layer_types"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *c = json_deep_copy(root);
        json_object_set_new(json_object_get(c, "text_config"), bad[i].key, bad[i].val);
        expect_cfg(c, bad[i].rc, bad[i].field, &cfg);
        json_decref(c);
    }
    /* rope scaling types other than default */
    json_t *c = json_deep_copy(root);
    json_object_set_new(json_object_get(json_object_get(c, "text_config"), "rope_parameters"), "rope_type",
                        json_string("yarn"));
    expect_cfg(c, QHX_E_UNSUPPORTED, "rope_type", &cfg);
    json_decref(c);
    /* a required field missing */
    c = json_deep_copy(root);
    json_object_del(json_object_get(c, "text_config"), "linear_key_head_dim");
    expect_cfg(c, QHX_E_FORMAT, "text_config.linear_key_head_dim", &cfg);
    json_decref(c);
    json_decref(root);
}

/* ---- checkpoint layouts ------------------------------------------------------------------ */

/* Copy src_dir/name to dst_dir/name; 0 on success. */
static int copy_file(const char *src_dir, const char *dst_dir, const char *name) {
    qhx_error err = {0};
    char *src = qhx_path_join(src_dir, name), *dst = qhx_path_join(dst_dir, name);
    char *buf = NULL;
    size_t len = 0;
    int ok = src && dst && qhx_file_read_all(src, 64 << 20, &buf, &len, &err) == QHX_OK;
    FILE *f = ok ? fopen(dst, "wb") : NULL;
    ok = f && fwrite(buf, 1, len, f) == len;
    if (f) ok = !fclose(f) && ok;
    qhx_free(buf);
    qhx_free(src);
    qhx_free(dst);
    return ok ? 0 : -1;
}

/* Write DIR/config.json and DIR/tokenizer.json (copies of the fixture's) and DIR/model.safetensors from the fixture's
 * tensors: names with prefix `from` renamed to `to`, spaces after the header JSON so that the
 * data section starts at a file offset = `mis` mod 8 (1, 2: misaligned f32 / bf16 data), and
 * lm_head.weight = a copy of the embedding if asked. */
static int write_variant(const char *src, const char *dir, const char *from, const char *to, int mis,
                         int add_lm_head) {
    qhx_error err = {0};
    qhx_st_set *set = NULL;
    if (qhx_st_open(src, &set, &err)) return -1;
    int ok = copy_file(src, dir, "config.json") == 0 && copy_file(src, dir, "tokenizer.json") == 0;

    json_t *hdr = json_object();
    uint64_t off = 0;
    const qhx_st_tensor *embed = NULL;
    for (int64_t i = 0; ok && i < qhx_st_n_tensors(set); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        char name[512];
        size_t fl = strlen(from);
        if (!strncmp(t->name, from, fl)) snprintf(name, sizeof name, "%s%s", to, t->name + fl);
        else snprintf(name, sizeof name, "%s", t->name);
        if (strstr(t->name, "embed_tokens.weight")) embed = t;
        json_t *shape = json_array();
        for (int d = 0; d < t->n_dims; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        json_object_set_new(hdr, name, json_pack("{s:s,s:o,s:[I,I]}", "dtype", qhx_dtype_name(t->dtype), "shape",
                                                 shape, "data_offsets", (json_int_t)off,
                                                 (json_int_t)(off + t->size)));
        off += t->size;
    }
    if (ok && add_lm_head && embed) {
        json_object_set_new(hdr, "lm_head.weight",
                            json_pack("{s:s,s:[I,I],s:[I,I]}", "dtype", qhx_dtype_name(embed->dtype), "shape",
                                      (json_int_t)embed->shape[0], (json_int_t)embed->shape[1], "data_offsets",
                                      (json_int_t)off, (json_int_t)(off + embed->size)));
    }
    char *js = ok ? json_dumps(hdr, JSON_COMPACT) : NULL;
    char *st_path = qhx_path_join(dir, "model.safetensors");
    FILE *f = js ? fopen(st_path, "wb") : NULL;
    ok = f != NULL;
    if (ok) {
        int pad = (int)((8 + (uint64_t)mis - (8 + strlen(js)) % 8) % 8);
        uint64_t hlen = strlen(js) + (uint64_t)pad;
        CHECK_EQ((8 + hlen) % 8, mis);
        ok = fwrite(&hlen, 8, 1, f) == 1 && fwrite(js, 1, strlen(js), f) == strlen(js);
        for (int i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
        for (int64_t i = 0; ok && i < qhx_st_n_tensors(set); i++) {
            const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
            ok = fwrite(t->data, 1, t->size, f) == t->size;
        }
        if (ok && add_lm_head && embed) ok = fwrite(embed->data, 1, embed->size, f) == embed->size;
        ok = !fclose(f) && ok;
    }
    qhx_free(st_path);
    if (js) qhx_free(js);
    json_decref(hdr);
    qhx_st_free(set);
    return ok ? 0 : -1;
}

static void remove_variant(const char *dir) {
    const char *names[] = {"config.json", "tokenizer.json", "model.safetensors"};
    for (int i = 0; i < 3; i++) {
        char *p = qhx_path_join(dir, names[i]);
        if (p) unlink(p);
        qhx_free(p);
    }
    rmdir(dir);
}

static void test_layouts(const char *fx) {
    qhx_error err = {0};
    float *want = prompt_logits(fx, &err);
    CHECK(want != NULL);
    if (!want) return;
    const int64_t n = N_PROMPT * 1024;
    struct { const char *from, *to; int mis, lm_head; const char *what; } v[] = {
        {"", "", 1, 0, "data misaligned by 1 byte"},
        {"", "", 2, 0, "data misaligned by 2 bytes"},
        {"model.language_model.", "model.", 0, 0, "text-only prefix model."},
        {"", "", 0, 1, "explicit lm_head.weight"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char dir[] = "/tmp/qhx_q35_XXXXXX";
        CHECK(mkdtemp(dir) != NULL);
        CHECK_EQ(write_variant(fx, dir, v[i].from, v[i].to, v[i].mis, v[i].lm_head), 0);
        float *got = prompt_logits(dir, &err);
        if (!got) fprintf(stderr, "%s: %s\n", v[i].what, err.msg);
        CHECK(got != NULL);
        if (got) {
            int same = 1;
            for (int64_t k = 0; k < n; k++) same &= got[k] == want[k];
            if (!same) fprintf(stderr, "%s: logits differ from the fixture's\n", v[i].what);
            CHECK(same);
        }
        qhx_free(got);
        remove_variant(dir);
    }
    qhx_free(want);
}

/* ---- interface errors and reset ---------------------------------------------------------- */

static void test_interface(void) {
    qhx_error err = {0};
    qhx_model *m = NULL;
    CHECK_EQ(qhx_model_open("/nonexistent/model", NULL, &m, &err), QHX_E_IO);
    CHECK(m == NULL);
    CHECK_EQ(qhx_model_open(fx_f32, NULL, &m, &err), QHX_OK);
    if (!m) return;
    CHECK_STR(qhx_model_family_name(m), "qwen3_5");
    CHECK(qhx_model_find_tensor(m, "mtp.fc.weight") == NULL); /* no plan reads MTP: never loaded */
    CHECK(qhx_model_find_tensor(m, "no.such.tensor") == NULL);
    qhx_seq *st = NULL;
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 0}, &st, &err), QHX_E_ARG);
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 4, .n_batch = 5}, &st, &err), QHX_E_ARG);
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 8}, &st, &err), QHX_OK);
    if (!st) {
        qhx_model_free(m);
        return;
    }
    float a[1024], b[1024];
    qhx_forward_opts o = {.logits = a};
    int32_t bad[2] = {5, 1024};
    CHECK_EQ(qhx_model_forward(m, st, bad, 2, &o, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "1024");
    CHECK_EQ(qhx_model_state_n_past(st), 0);
    CHECK_EQ(qhx_model_forward(m, st, PROMPT, 9, &o, &err), QHX_E_LIMIT);
    CHECK_EQ(qhx_model_state_n_past(st), 0);
    CHECK_EQ(qhx_model_forward(m, st, PROMPT, 8, &o, &err), QHX_OK);
    CHECK_EQ(qhx_model_state_n_past(st), 8);
    CHECK_EQ(qhx_model_forward(m, st, PROMPT, 1, &o, &err), QHX_E_LIMIT);
    /* reset: the same prompt gives the same bits */
    qhx_model_state_reset(st);
    o.logits = b;
    CHECK_EQ(qhx_model_forward(m, st, PROMPT, 8, &o, &err), QHX_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* argmax: lowest index on ties, NaN never wins */
    float t[5] = {NAN, 1.0f, 3.0f, 3.0f, -1.0f};
    CHECK_EQ(qhx_argmax_f32(t, 5), 2);
    qhx_model_state_free(st);
    qhx_model_free(m);
}

/* ---- allocation failures ----------------------------------------------------------------- */

static void test_alloc_failures(const char *fx) {
    int64_t n;
    int done = 0;
    for (n = 0; n < 100000 && !done; n++) {
        qhx_error err = {0};
        qhx_model *m = NULL;
        qhx_seq *st = NULL;
        float logits[1024];
        qhx_alloc_fail_after(n);
        qhx_status rc = qhx_model_open(fx, NULL, &m, &err);
        if (rc == QHX_OK) rc = qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 4}, &st, &err);
        if (rc == QHX_OK) rc = qhx_model_forward(m, st, PROMPT, 4, &(qhx_forward_opts){.logits = logits}, &err);
        bool fired = qhx_alloc_failed();
        qhx_alloc_fail_after(-1);
        if (fired) {
            CHECK(rc != QHX_OK);
            CHECK(err.msg[0] != '\0');
            CHECK(m == NULL || rc != QHX_OK);
        } else {
            CHECK_EQ(rc, QHX_OK);
            done = 1;
        }
        qhx_model_state_free(st);
        qhx_model_free(m);
    }
    CHECK(done);
    printf("allocation failure sweep: %lld points (%s)\n", (long long)n, fx);
}

int main(void) {
    snprintf(fx_f32, sizeof fx_f32, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    snprintf(fx_bf16, sizeof fx_bf16, "%s/fixtures/parity/qwen35-tiny-bf16", QHX_DATA_DIR);
    if (!qhx_path_is_dir(fx_f32) || !qhx_path_is_dir(fx_bf16)) {
        fprintf(stderr, "FAIL: fixtures missing under %s\n", QHX_DATA_DIR);
        return 1;
    }
    test_config();
    test_layouts(fx_f32);
    test_layouts(fx_bf16);
    test_interface();
    test_alloc_failures(fx_bf16);
    return t_done("test_qwen35_model");
}
