// ctest-labels: unit
/* Manifest / run plan: a valid manifest parses into the expected plan; every kind of error is
 * refused with the file and JSON path in the message; plans come out of each parity fixture
 * folder; written manifests parse back to the same plan; allocation failures are clean. */
#include "core/alloc.h"
#include "core/sha256.h"
#include "io/manifest.h"
#include "runtime/model.h"
#include "t.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURES QHX_DATA_DIR "/fixtures/parity"
#define LABEL "qwen3.5-2b-1024.json"

/* A complete qwen3_5 manifest with an inline model config. */
static const char *VALID =
    "{\n"
    "  \"format\": \"qhexrt/1\",\n"
    "  \"name\": \"qwen3.5-2b-1024\",\n"
    "  \"description\": \"Qwen3.5-2B, 1024-token context\",\n"
    "  \"family\": \"qwen3_5\",\n"
    "  \"host_op\": \"qwen3_5_generate\",\n"
    "  \"precision\": \"bf16\",\n"
    "  \"max_context\": 1024,\n"
    "  \"_comment\": \"keys starting with an underscore are ignored\",\n"
    "  \"artifacts\": {\n"
    "    \"weights\": {\"file\": \"weights/decoder.safetensors\", \"format\": \"safetensors\",\n"
    "                \"dtype\": \"BF16\", \"tensor_count\": 123, \"bytes\": 1065704,\n"
    "                \"sha256\": \"4F0301EFB37C56AC84EEA0BFC0BF9E314DF7786F331B801AF376725D32D9A5E5\"},\n"
    "    \"embedding\": {\"file\": \"embed_f16.bin\", \"format\": \"raw\", \"dtype\": \"F16\",\n"
    "                  \"shape\": [1024, 64]}\n"
    "  },\n"
    "  \"tokenizer\": {\"file\": \"tokenizer.json\"},\n"
    "  \"special_tokens\": {\"stop_ids\": [962, 960], \"eos\": 960, \"im_start\": 961, \"im_end\": 962,\n"
    "                     \"vision_start\": 969, \"vision_end\": 970, \"image_pad\": 972},\n"
    "  \"generation\": {\"temperature\": 0.7, \"top_k\": 20, \"top_p\": 0.8, \"min_p\": 0.05,\n"
    "                 \"repetition_penalty\": 1.05, \"max_new_tokens\": 64, \"thinking\": true},\n"
    "  \"model\": {\"model_type\": \"qwen3_5\", \"tie_word_embeddings\": true,\n"
    "    \"text_config\": {\"model_type\": \"qwen3_5_text\", \"vocab_size\": 1024, \"hidden_size\": 64,\n"
    "      \"intermediate_size\": 128, \"num_hidden_layers\": 8, \"num_attention_heads\": 4,\n"
    "      \"num_key_value_heads\": 2, \"head_dim\": 32, \"max_position_embeddings\": 262144,\n"
    "      \"rms_norm_eps\": 1e-06, \"rope_parameters\": {\"rope_theta\": 10000000.0},\n"
    "      \"full_attention_interval\": 4, \"linear_conv_kernel_dim\": 4, \"linear_key_head_dim\": 16,\n"
    "      \"linear_value_head_dim\": 16, \"linear_num_key_heads\": 4, \"linear_num_value_heads\": 8}}\n"
    "}\n";

static qhx_plan *parse_ok(const char *text, const char *base_dir) {
    qhx_plan *p = NULL;
    qhx_error err = {0};
    qhx_status rc = qhx_plan_parse(text, strlen(text), base_dir, LABEL, &p, &err);
    CHECK_EQ(rc, QHX_OK);
    if (rc) fprintf(stderr, "  unexpected error: %s\n", err.msg);
    return p;
}

/* The plan resolved against the family registry (runtime/model.h): family, host-op, config. */
static qhx_plan_resolved *resolve(const qhx_plan *p) {
    qhx_plan_resolved *r = malloc(sizeof *r);
    qhx_error err = {0};
    if (!r) return NULL;
    qhx_status rc = qhx_plan_resolve(p, r, &err);
    CHECK_EQ(rc, QHX_OK);
    if (rc == QHX_OK) return r;
    fprintf(stderr, "  resolve: %s\n", err.msg);
    free(r);
    return NULL;
}

static int64_t n_full(const qhx_model_config *c) {
    int64_t n = 0;
    for (int64_t l = 0; l < c->num_hidden_layers; l++) n += c->layer_types[l] == QHX_LAYER_FULL_ATTENTION;
    return n;
}

static void test_valid(void) {
    qhx_plan *p = parse_ok(VALID, NULL);
    if (!p) return;
    CHECK_STR(p->name, "qwen3.5-2b-1024");
    CHECK_STR(p->description, "Qwen3.5-2B, 1024-token context");
    CHECK_STR(p->family, "qwen3_5");
    CHECK_STR(p->host_op, "qwen3_5_generate");
    CHECK_EQ(p->precision, QHX_PREC_BF16);
    CHECK_EQ(p->max_context, 1024);
    CHECK_EQ(p->kv_cache, QHX_KV_DEFAULT); /* absent: the runtime's default */
    const qhx_plan_file *w = &p->artifacts[QHX_ART_WEIGHTS];
    CHECK(w->present);
    CHECK_STR(w->file, "weights/decoder.safetensors");
    CHECK(w->path == NULL); /* no base_dir */
    CHECK_EQ(w->format, QHX_ART_SAFETENSORS);
    CHECK(w->has_dtype && w->dtype == QHX_DTYPE_BF16);
    CHECK_EQ(w->tensor_count, 123);
    CHECK_EQ(w->bytes, 1065704);
    CHECK_STR(w->sha256, "4f0301efb37c56ac84eea0bfc0bf9e314df7786f331b801af376725d32d9a5e5");
    const qhx_plan_file *e = &p->artifacts[QHX_ART_EMBEDDING];
    CHECK(e->present && e->format == QHX_ART_RAW && e->dtype == QHX_DTYPE_F16);
    CHECK(e->n_dims == 2 && e->shape[0] == 1024 && e->shape[1] == 64);
    CHECK_EQ(e->bytes, 1024 * 64 * 2);
    CHECK(!p->artifacts[QHX_ART_LM_HEAD].present && !p->artifacts[QHX_ART_VISION].present);
    CHECK_STR(p->tokenizer.file, "tokenizer.json");
    CHECK(!p->preprocessor.present);
    CHECK_EQ(p->special.n_stop_ids, 2);
    CHECK(p->special.stop_ids[0] == 962 && p->special.stop_ids[1] == 960);
    CHECK(p->special.eos == 960 && p->special.im_start == 961 && p->special.im_end == 962);
    CHECK(p->special.image_pad == 972 && p->special.video_pad == -1 && p->special.bos == -1);
    CHECK_NEAR(p->generation.temperature, 0.7, 0);
    CHECK_EQ(p->generation.top_k, 20);
    CHECK_NEAR(p->generation.top_p, 0.8, 0);
    CHECK_NEAR(p->generation.min_p, 0.05, 0);
    CHECK_NEAR(p->generation.repetition_penalty, 1.05, 0);
    CHECK_EQ(p->generation.max_new_tokens, 64);
    CHECK(p->generation.thinking);
    CHECK(p->config != NULL && !p->model_config.present);
    CHECK(p->text_config == json_object_get(p->config, "text_config"));
    CHECK_STR(p->model_type, "qwen3_5");
    CHECK(!p->has_vision_config);
    /* the dimensions, as the family that runs the plan reads them */
    qhx_plan_resolved *r = resolve(p);
    if (r) {
        const qhx_model_config *d = &r->cfg;
        CHECK_STR(r->family->name, "qwen3_5");
        CHECK_STR(r->host_op->name, "qwen3_5_generate");
        CHECK(d->vocab_size == 1024 && d->hidden_size == 64 && d->intermediate_size == 128);
        CHECK(d->num_hidden_layers == 8 && d->num_attention_heads == 4 && d->num_key_value_heads == 2);
        CHECK(d->head_dim == 32 && d->max_position_embeddings == 262144);
        CHECK_NEAR(d->rms_norm_eps, 1e-6, 0);
        CHECK_NEAR(d->rope_theta, 1e7, 0);
        CHECK(d->tie_word_embeddings);
        CHECK(n_full(d) == 2 && d->num_hidden_layers - n_full(d) == 6);
        CHECK(d->linear_num_value_heads == 8 && d->linear_conv_kernel_dim == 4);
        CHECK(!d->has_vision);
    }
    free(r);
    qhx_plan_free(p);

    /* defaults when generation is absent */
    json_t *root = json_loads(VALID, 0, NULL);
    json_object_del(root, "generation");
    char *text = json_dumps(root, 0);
    p = parse_ok(text, NULL);
    if (p) {
        CHECK_NEAR(p->generation.temperature, 0, 0);
        CHECK_NEAR(p->generation.top_p, 1, 0);
        CHECK_EQ(p->generation.max_new_tokens, 256);
        CHECK(!p->generation.thinking);
    }
    qhx_plan_free(p);
    free(text);
    json_decref(root);
}

/* ---- error cases: set (or delete, v == NULL) the value at a dotted path of VALID ---- */

static void set_path(json_t *root, const char *dotted, json_t *v) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", dotted);
    json_t *obj = root;
    char *key = buf, *dot;
    while ((dot = strchr(key, '.'))) {
        *dot = '\0';
        obj = json_object_get(obj, key);
        key = dot + 1;
    }
    if (v) json_object_set_new(obj, key, v);
    else json_object_del(obj, key);
}

/* Parse VALID with one change; expect `code` and a message equal to LABEL ": " + want. */
static void expect(const char *dotted, json_t *v, qhx_status code, const char *want) {
    json_t *root = json_loads(VALID, 0, NULL);
    set_path(root, dotted, v);
    char *text = json_dumps(root, 0);
    json_decref(root);
    qhx_plan *p = (qhx_plan *)1;
    qhx_error err = {0};
    qhx_status rc = qhx_plan_parse(text, strlen(text), NULL, LABEL, &p, &err);
    free(text);
    if (rc == QHX_OK) { /* what the plan says that only its family can check */
        qhx_plan_resolved *r = malloc(sizeof *r);
        rc = r ? qhx_plan_resolve(p, r, &err) : QHX_E_NOMEM;
        free(r);
        qhx_plan_free(p);
        p = NULL;
    }
    CHECK_EQ(rc, code);
    CHECK(p == NULL);
    char full[600];
    snprintf(full, sizeof full, "%s: %s", LABEL, want);
    if (strcmp(err.msg, full)) fprintf(stderr, "  (change at %s)\n", dotted);
    CHECK_STR(err.msg, full);
}

static void test_errors(void) {
    /* missing */
    expect("artifacts.weights.file", NULL, QHX_E_FORMAT, "artifacts.weights.file: missing");
    expect("artifacts.weights", NULL, QHX_E_FORMAT, "artifacts.weights: missing");
    expect("name", NULL, QHX_E_FORMAT, "name: missing");
    expect("family", NULL, QHX_E_FORMAT, "family: missing");
    expect("host_op", NULL, QHX_E_FORMAT, "host_op: missing");
    expect("precision", NULL, QHX_E_FORMAT, "precision: missing");
    expect("max_context", NULL, QHX_E_FORMAT, "max_context: missing");
    expect("tokenizer", NULL, QHX_E_FORMAT, "tokenizer: missing");
    expect("special_tokens.stop_ids", NULL, QHX_E_FORMAT, "special_tokens.stop_ids: missing");
    expect("model", NULL, QHX_E_FORMAT, "model: missing");
    expect("model.text_config.hidden_size", NULL, QHX_E_FORMAT, "text_config.hidden_size: missing");
    expect("model.text_config.linear_num_key_heads", NULL, QHX_E_FORMAT, "text_config.linear_num_key_heads: missing");
    expect("format", NULL, QHX_E_FORMAT, "format: missing");
    expect("artifacts.embedding.shape", NULL, QHX_E_FORMAT, "artifacts.embedding.shape: missing (raw artifacts need one)");
    /* mistyped */
    expect("max_context", json_string("1024"), QHX_E_FORMAT, "max_context: expected an integer");
    expect("name", json_integer(3), QHX_E_FORMAT, "name: expected a string");
    expect("artifacts", json_array(), QHX_E_FORMAT, "artifacts: expected an object");
    expect("special_tokens.stop_ids", json_integer(960), QHX_E_FORMAT,
           "special_tokens.stop_ids: expected an array of token ids");
    expect("generation.thinking", json_string("yes"), QHX_E_FORMAT, "generation.thinking: expected true or false");
    expect("generation.top_p", json_real(1.5), QHX_E_FORMAT, "generation.top_p: 1.5 is out of range (0, 1]");
    expect("max_context", json_integer(0), QHX_E_FORMAT, "max_context: 0 is out of range [1, 1048576]");
    expect("artifacts.weights.sha256", json_string("abc"), QHX_E_FORMAT, "artifacts.weights.sha256: expected 64 hex digits");
    expect("model.text_config.vocab_size", json_real(1024.0), QHX_E_FORMAT, "text_config.vocab_size: expected an integer");
    /* versions and enumerations */
    expect("format", json_string("qhexrt/2"), QHX_E_UNSUPPORTED,
           "format: unsupported version 'qhexrt/2' (this build reads qhexrt/1)");
    expect("format", json_string("onnx/1"), QHX_E_FORMAT,
           "format: 'onnx/1' is not a qhexrt manifest format (expected \"qhexrt/1\")");
    expect("family", json_string("llama"), QHX_E_UNSUPPORTED,
           "family: 'llama' is not supported by this build (known: qwen3_5, qwen3_vl)");
    expect("family", json_string("Qwen3.5"), QHX_E_FORMAT, "family: 'Qwen3.5' is not a name (lower-case letters, digits, '_')");
    expect("host_op", json_string("qwen3_vl_generate"), QHX_E_FORMAT,
           "host_op: 'qwen3_vl_generate' is not a host-op of family qwen3_5 (it offers: qwen3_5_generate, qwen3_5_vl_generate)");
    expect("kv_cache", json_string("q4"), QHX_E_UNSUPPORTED, "kv_cache: unknown KV cache type 'q4' (expected f32, f16 or q8)");
    expect("kv_cache", json_integer(16), QHX_E_FORMAT, "kv_cache: expected a string");
    expect("precision", json_string("int4"), QHX_E_UNSUPPORTED,
           "precision: unknown precision 'int4' (expected f32, bf16, f16, w8 or q4)");
    expect("artifacts.weights.format", json_string("onnx"), QHX_E_UNSUPPORTED,
           "artifacts.weights.format: unknown artifact format 'onnx' (expected safetensors, raw or gguf)");
    /* gguf artifacts: the file says its types; the weights hold the whole decoder */
    expect("artifacts.weights.format", json_string("gguf"), QHX_E_FORMAT,
           "artifacts.weights: a gguf artifact has no shape, tensor_count or dtype (the file says)");
    expect("artifacts.weights", json_pack("{s:s,s:s}", "file", "m.gguf", "format", "gguf"), QHX_E_FORMAT,
           "artifacts: gguf weights hold the whole decoder: no 'embedding' artifact beside them");
    expect("artifacts.embedding", json_pack("{s:s,s:s}", "file", "e.gguf", "format", "gguf"), QHX_E_FORMAT,
           "artifacts: 'embedding' and 'weights' are gguf together or not at all");
    expect("model.model_type", json_string("llama"), QHX_E_FORMAT,
           "family: 'qwen3_5' does not match the model config's model_type 'llama'");
    /* unknown keys (typos) */
    expect("max_contxt", json_integer(5), QHX_E_FORMAT,
           "max_contxt: unknown key (expected one of: format, name, description, family, host_op, precision, "
           "max_context, kv_cache, artifacts, tokenizer, preprocessor, special_tokens, generation, model)");
    expect("artifacts.lmhead", json_object(), QHX_E_FORMAT,
           "artifacts.lmhead: unknown key (expected one of: weights, embedding, lm_head, vision, mtp)");
    expect("artifacts.weights.sha", json_string("x"), QHX_E_FORMAT,
           "artifacts.weights.sha: unknown key (expected one of: file, format, dtype, shape, tensor_count, bytes, sha256)");
    expect("generation.temp", json_real(1), QHX_E_FORMAT,
           "generation.temp: unknown key (expected one of: temperature, top_k, top_p, min_p, repetition_penalty, "
           "max_new_tokens, thinking)");
    /* paths must stay in the bundle folder */
    expect("artifacts.weights.file", json_string("../other/model.safetensors"), QHX_E_FORMAT,
           "artifacts.weights.file: '../other/model.safetensors' leaves the bundle folder ('..' is not allowed)");
    expect("artifacts.weights.file", json_string("a/../../b"), QHX_E_FORMAT,
           "artifacts.weights.file: 'a/../../b' leaves the bundle folder ('..' is not allowed)");
    expect("tokenizer.file", json_string("/etc/passwd"), QHX_E_FORMAT,
           "tokenizer.file: '/etc/passwd' is an absolute path; files must be relative to the bundle folder");
    expect("tokenizer.file", json_string("a//b"), QHX_E_FORMAT, "tokenizer.file: 'a//b' has an empty path component");
    expect("tokenizer.file", json_string(""), QHX_E_FORMAT, "tokenizer.file: empty file name");
    expect("tokenizer.file", json_string("a\\b"), QHX_E_FORMAT, "tokenizer.file: 'a\\b' contains a backslash; use '/'");
    expect("tokenizer.file", json_stringn("a\0b", 3), QHX_E_FORMAT, "tokenizer.file: contains a NUL byte");
    /* values checked against the model */
    expect("special_tokens.stop_ids", json_pack("[i]", 5000), QHX_E_FORMAT,
           "special_tokens.stop_ids: [0]: 5000 is not below vocab_size 1024");
    expect("special_tokens.im_end", json_integer(1024), QHX_E_FORMAT, "special_tokens.im_end: 1024 is not below vocab_size 1024");
    expect("special_tokens.stop_ids", json_array(), QHX_E_FORMAT, "special_tokens.stop_ids: empty (at least one stop id is needed)");
    expect("special_tokens.stop_ids", json_pack("[i,i]", 7, 7), QHX_E_FORMAT, "special_tokens.stop_ids: [1]: 7 is listed twice");
    expect("max_context", json_integer(300000), QHX_E_FORMAT,
           "max_context: 300000 exceeds the model's max_position_embeddings 262144");
    expect("model.text_config.num_key_value_heads", json_integer(3), QHX_E_FORMAT,
           "text_config.num_attention_heads: 4 is not a multiple of num_key_value_heads 3");
    expect("model.model_type", json_string("qwen3_vl"), QHX_E_FORMAT,
           "family: 'qwen3_5' does not match the model config's model_type 'qwen3_vl'");
    expect("artifacts.embedding.bytes", json_integer(7), QHX_E_FORMAT,
           "artifacts.embedding.bytes: 7, but a F16 tensor of this shape has 131072 bytes");
    expect("artifacts.weights.shape", json_pack("[i]", 3), QHX_E_FORMAT, "artifacts.weights.shape: only raw artifacts have a shape");

    /* whole-document problems */
    qhx_plan *p;
    qhx_error err;
    const char *bad_json = "{\"format\": \"qhexrt/1\",";
    CHECK_EQ(qhx_plan_parse(bad_json, strlen(bad_json), NULL, LABEL, &p, &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, LABEL ": invalid JSON at line 1");
    CHECK_EQ(qhx_plan_parse("[1]", 3, NULL, LABEL, &p, &err), QHX_E_FORMAT);
    CHECK_STR(err.msg, LABEL ": a manifest must be a JSON object");
    const char *hf = "{\"model_type\": \"qwen3_5\"}";
    CHECK_EQ(qhx_plan_parse(hf, strlen(hf), NULL, LABEL, &p, &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "this looks like a Hugging Face config.json");
}

/* ---- bundles on disk ---- */

static char tmpdir[256];

static void write_text(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* A copy of a fixture file in the bundle folder (a link would lead outside it: refused). */
static void link_fixture(const char *dir, const char *fixture, const char *file, const char *as) {
    char src[512], dst[512];
    snprintf(src, sizeof src, "%s/%s/%s", FIXTURES, fixture, file);
    snprintf(dst, sizeof dst, "%s/%s", dir, as);
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    CHECK(in && out);
    char buf[65536];
    size_t n;
    while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0) CHECK_EQ(fwrite(buf, 1, n, out), n);
    if (in) fclose(in);
    if (out) fclose(out);
}

/* Two manifests over one bundle folder, as the seed ships (VLM + text over the same files). */
static const char *VL_MANIFEST =
    "{\"format\": \"qhexrt/1\", \"name\": \"%s\", \"family\": \"qwen3_vl\", \"host_op\": \"%s\",\n"
    " \"precision\": \"f32\", \"max_context\": 512,\n"
    " \"artifacts\": {\"weights\": {\"file\": \"model.safetensors\", \"format\": \"safetensors\", \"tensor_count\": 115,\n"
    "                             \"dtype\": \"F32\", \"bytes\": 3001520}},\n"
    " \"tokenizer\": {\"file\": \"tokenizer.json\"},\n"
    " \"preprocessor\": {\"file\": \"preprocessor_config.json\"},\n"
    " \"special_tokens\": {\"stop_ids\": [992, 990], \"image_pad\": 1002, \"vision_start\": 999, \"vision_end\": 1000},\n"
    " \"model\": {\"config\": \"config.json\"}}\n";

static void test_bundle(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/qhx_test_manifest_XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL);
    const char *fx = "qwen3vl-tiny-f32";
    link_fixture(tmpdir, fx, "model.safetensors", "model.safetensors");
    link_fixture(tmpdir, fx, "config.json", "config.json");
    link_fixture(tmpdir, fx, "tokenizer.json", "tokenizer.json");
    link_fixture(tmpdir, fx, "preprocessor_config.json", "preprocessor_config.json");
    char text[4096];
    snprintf(text, sizeof text, VL_MANIFEST, "qwen3vl-2b-vlm-512", "qwen3_vl_generate");
    write_text(tmpdir, "qwen3vl-2b-vlm-512.json", text);

    /* a folder with exactly one manifest opens it */
    qhx_plan *p = NULL;
    qhx_error err = {0};
    qhx_status rc = qhx_plan_open(tmpdir, &p, &err);
    CHECK_EQ(rc, QHX_OK);
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    if (p) {
        CHECK_EQ(p->source, QHX_PLAN_FROM_MANIFEST);
        CHECK_STR(p->name, "qwen3vl-2b-vlm-512");
        CHECK_STR(p->host_op, "qwen3_vl_generate");
        CHECK(p->model_config.present && p->config != NULL && p->has_vision_config);
        qhx_plan_resolved *r = resolve(p);
        if (r) CHECK(r->cfg.has_vision && r->cfg.vision.depth == 4 && r->cfg.num_hidden_layers == 4);
        free(r);
        CHECK_EQ(qhx_plan_verify(p, QHX_PLAN_VERIFY_HEADERS, &err), QHX_OK);
    }
    qhx_plan_free(p);

    /* a second manifest over the same files: the folder is ambiguous, each file opens */
    snprintf(text, sizeof text, VL_MANIFEST, "qwen3vl-2b-text-512", "qwen3_vl_text_generate");
    write_text(tmpdir, "qwen3vl-2b-text-512.json", text);
    CHECK_EQ(qhx_plan_open(tmpdir, &p, &err), QHX_E_ARG);
    CHECK(p == NULL);
    CHECK_CONTAINS(err.msg, "2 manifests in this folder (qwen3vl-2b-text-512.json, qwen3vl-2b-vlm-512.json): name one");
    char path[512];
    snprintf(path, sizeof path, "%s/qwen3vl-2b-text-512.json", tmpdir);
    CHECK_EQ(qhx_plan_open(path, &p, &err), QHX_OK);
    if (p) CHECK_STR(p->host_op, "qwen3_vl_text_generate");
    qhx_plan_free(p);

    /* a missing artifact file, a wrong size, a wrong count */
    snprintf(text, sizeof text, VL_MANIFEST, "x", "qwen3_vl_generate");
    char *t2 = strdup(text);
    char *at = strstr(t2, "\"model.safetensors\"");
    memcpy(at, "\"model.safetensorz\"", 19);
    write_text(tmpdir, "broken.json", t2);
    snprintf(path, sizeof path, "%s/broken.json", tmpdir);
    CHECK_EQ(qhx_plan_open(path, &p, &err), QHX_E_IO);
    CHECK_CONTAINS(err.msg, "broken.json: artifacts.weights.file: cannot open '");
    CHECK_CONTAINS(err.msg, "model.safetensorz': No such file or directory");
    strcpy(t2, text);
    at = strstr(t2, "3001520");
    memcpy(at, "3001521", 7);
    write_text(tmpdir, "broken.json", t2);
    CHECK_EQ(qhx_plan_open(path, &p, &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "broken.json: artifacts.weights.bytes: 3001521, but '");
    strcpy(t2, text);
    at = strstr(t2, "115");
    memcpy(at, "116", 3);
    write_text(tmpdir, "broken.json", t2);
    CHECK_EQ(qhx_plan_open(path, &p, &err), QHX_OK);
    if (p) {
        CHECK_EQ(qhx_plan_verify(p, QHX_PLAN_VERIFY_HEADERS, &err), QHX_E_FORMAT);
        CHECK_CONTAINS(err.msg, "artifacts.weights.tensor_count: 116, but 'model.safetensors' has 115 tensors");
    }
    qhx_plan_free(p);
    /* the model config pointer: missing, and a config with the wrong family */
    strcpy(t2, text);
    at = strstr(t2, "\"config.json\"");
    memcpy(at, "\"confog.json\"", 13);
    write_text(tmpdir, "broken.json", t2);
    CHECK_EQ(qhx_plan_open(path, &p, &err), QHX_E_IO);
    CHECK_CONTAINS(err.msg, "broken.json: model.config.file: cannot open");
    free(t2);
    unlink(path);

    /* missing manifest file, empty folder */
    snprintf(path, sizeof path, "%s/nope.json", tmpdir);
    CHECK_EQ(qhx_plan_open(path, &p, &err), QHX_E_IO);
    CHECK_CONTAINS(err.msg, "nope.json: cannot open");
    snprintf(path, sizeof path, "%s/empty", tmpdir);
    mkdir(path, 0755);
    CHECK_EQ(qhx_plan_open(path, &p, &err), QHX_E_IO);
    CHECK_CONTAINS(err.msg, "no qhexrt manifest and no config.json");
    rmdir(path);
}

/* ---- writing: save a plan into the bundle, open it again, same text ---- */

static char *write_text_of(const qhx_plan *p) {
    char *text = NULL;
    size_t len = 0;
    qhx_error err;
    CHECK_EQ(qhx_plan_write_json(p, &text, &len, &err), QHX_OK);
    CHECK(text && strlen(text) == len && text[len - 1] == '\n');
    return text;
}

static void test_roundtrip(void) {
    /* inline model, parsed without a folder */
    qhx_plan *p = parse_ok(VALID, NULL);
    if (!p) return;
    char *a = write_text_of(p);
    qhx_plan *q = parse_ok(a, NULL);
    char *b = q ? write_text_of(q) : NULL;
    CHECK_STR(a, b);
    CHECK(strstr(a, "\"temperature\": 0.7,") != NULL); /* short reals when they round-trip */
    CHECK(strstr(a, "\"rms_norm_eps\": 1e-6,") != NULL);
    qhx_free(a);
    qhx_free(b);
    qhx_plan_free(p);
    qhx_plan_free(q);

    /* the KV cache element type, written only when set */
    json_t *root = json_loads(VALID, 0, NULL);
    json_object_set_new(root, "kv_cache", json_string("f32"));
    char *text = json_dumps(root, 0);
    json_decref(root);
    p = parse_ok(text, NULL);
    free(text);
    if (p) {
        CHECK_EQ(p->kv_cache, QHX_KV_F32);
        a = write_text_of(p);
        CHECK(strstr(a, "\"kv_cache\": \"f32\"") != NULL);
        q = parse_ok(a, NULL);
        CHECK(q && q->kv_cache == QHX_KV_F32);
        qhx_free(a);
        qhx_plan_free(q);
        p->kv_cache = QHX_KV_F16;
        a = write_text_of(p);
        CHECK(strstr(a, "\"kv_cache\": \"f16\"") != NULL);
        qhx_free(a);
        p->kv_cache = QHX_KV_Q8;
        a = write_text_of(p);
        CHECK(strstr(a, "\"kv_cache\": \"q8\"") != NULL);
        qhx_free(a);
    }
    qhx_plan_free(p);

    /* a checkpoint plan saved as a manifest next to the files, then opened by path */
    char src[512], path[512];
    snprintf(src, sizeof src, "%s/qwen35-tiny-bf16", FIXTURES);
    qhx_error err;
    CHECK_EQ(qhx_plan_from_checkpoint(src, &p, &err), QHX_OK);
    if (!p) return;
    CHECK(qhx_plan_to_json(p, &err) == NULL); /* it names no family yet */
    CHECK_CONTAINS(err.msg, "family");
    qhx_plan_resolved *r = resolve(p);
    if (r) { /* what the runtime would run */
        snprintf(p->family, sizeof p->family, "%s", r->family->name);
        snprintf(p->host_op, sizeof p->host_op, "%s", r->host_op->name);
    }
    free(r);
    a = write_text_of(p);
    CHECK(strstr(a, "\"config\": \"config.json\"") != NULL);
    /* parse with the fixture folder as base: same text again */
    CHECK_EQ(qhx_plan_parse(a, strlen(a), src, "written.json", &q, &err), QHX_OK);
    b = q ? write_text_of(q) : NULL;
    CHECK_STR(a, b);
    qhx_free(b);
    qhx_plan_free(q);

    /* forge-style: point the weights elsewhere, add a hash, save, reopen */
    char dir[300];
    snprintf(dir, sizeof dir, "%s/saved", tmpdir);
    CHECK_EQ(mkdir(dir, 0755), 0);
    link_fixture(dir, "qwen35-tiny-bf16", "model.safetensors", "decoder.safetensors");
    link_fixture(dir, "qwen35-tiny-bf16", "config.json", "config.json");
    link_fixture(dir, "qwen35-tiny-bf16", "tokenizer.json", "tokenizer.json");
    qhx_free(p->base_dir);
    p->base_dir = strcpy(qhx_malloc(strlen(dir) + 1), dir);
    CHECK_EQ(qhx_plan_set_artifact(p, QHX_ART_WEIGHTS, "decoder.safetensors", QHX_ART_SAFETENSORS, true,
                                   QHX_DTYPE_BF16, &err), QHX_OK);
    CHECK_EQ(qhx_plan_set_artifact(p, QHX_ART_VISION, "../x", QHX_ART_SAFETENSORS, false, QHX_DTYPE_F32, &err),
             QHX_E_FORMAT);
    snprintf(p->artifacts[QHX_ART_WEIGHTS].sha256, 65, "%s",
             "4f0301efb37c56ac84eea0bfc0bf9e314df7786f331b801af376725d32d9a5e5"); /* the f32 file's */
    p->generation.temperature = 0.1 + 0.2; /* needs 17 digits to round-trip */
    snprintf(path, sizeof path, "%s/plan.json", dir);
    CHECK_EQ(qhx_plan_save(p, path, &err), QHX_OK);
    CHECK(access(path, F_OK) == 0);
    qhx_plan_free(p);
    CHECK_EQ(qhx_plan_open(dir, &q, &err), QHX_OK);
    if (q) {
        CHECK_STR(q->artifacts[QHX_ART_WEIGHTS].file, "decoder.safetensors");
        CHECK(q->generation.temperature == 0.1 + 0.2);
        CHECK_EQ(q->precision, QHX_PREC_BF16);
        CHECK_EQ(qhx_plan_verify(q, QHX_PLAN_VERIFY_HEADERS, &err), QHX_OK);
        CHECK_EQ(qhx_plan_verify(q, QHX_PLAN_VERIFY_SHA256, &err), QHX_E_FORMAT); /* bf16 file, f32 hash */
        CHECK_CONTAINS(err.msg, "artifacts.weights.sha256: 'decoder.safetensors' hashes to ");
    }
    qhx_plan_free(q);
    qhx_free(a);
}

/* ---- plans from the parity fixture folders ---- */

struct fixture_expect {
    const char *dir;
    const char *family;
    const char *host_op;
    qhx_precision precision;
    int n_stop;
    int32_t stop0, stop1;
    int32_t im_start, image_pad, vision_start;
    int64_t tensors, layers, linear_v_heads;
    bool vision;
    int64_t hidden, head_dim;
    bool tied;
};

static void test_fixture(const struct fixture_expect *x) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", FIXTURES, x->dir);
    qhx_plan *p = NULL;
    qhx_error err = {0};
    qhx_status rc = qhx_plan_open(path, &p, &err);
    CHECK_EQ(rc, QHX_OK);
    if (rc) {
        fprintf(stderr, "  %s: %s\n", x->dir, err.msg);
        return;
    }
    CHECK_EQ(p->source, QHX_PLAN_FROM_CHECKPOINT);
    CHECK_EQ(p->special.im_start, -1); /* io knows no token text: the family names the ids */
    CHECK_EQ(qhx_family_name_plan_tokens(p, &err), QHX_OK);
    CHECK_STR(p->name, x->dir);
    CHECK_STR(p->family, ""); /* a checkpoint folder: the runtime resolves both */
    CHECK_STR(p->host_op, "");
    CHECK_EQ(p->precision, x->precision);
    CHECK_EQ(p->max_context, QHX_PLAN_DEFAULT_CONTEXT);
    CHECK_STR(p->artifacts[QHX_ART_WEIGHTS].file, "model.safetensors");
    CHECK_EQ(p->artifacts[QHX_ART_WEIGHTS].tensor_count, x->tensors);
    CHECK_STR(p->tokenizer.file, "tokenizer.json");
    CHECK_EQ(p->special.n_stop_ids, x->n_stop);
    CHECK_EQ(p->special.stop_ids[0], x->stop0);
    CHECK_EQ(p->special.stop_ids[1], x->stop1);
    CHECK_EQ(p->special.im_start, x->im_start);
    CHECK_EQ(p->special.im_end, x->im_start + 1);
    CHECK_EQ(p->special.image_pad, x->image_pad);
    CHECK_EQ(p->special.vision_start, x->vision_start);
    CHECK_EQ(p->has_vision_config, x->vision);
    qhx_plan_resolved *r = resolve(p);
    if (r) {
        CHECK_STR(r->family->name, x->family);
        CHECK_STR(r->host_op->name, x->host_op);
        CHECK_EQ(r->cfg.vocab_size, 1024);
        CHECK_EQ(r->cfg.hidden_size, x->hidden);
        CHECK_EQ(r->cfg.num_hidden_layers, x->layers);
        CHECK_EQ(r->cfg.head_dim, x->head_dim);
        CHECK_EQ(r->cfg.tie_word_embeddings, x->tied);
        CHECK_EQ(r->cfg.linear_num_value_heads, x->linear_v_heads);
    }
    free(r);
    CHECK_NEAR(p->generation.temperature, 0, 0); /* do_sample false */
    CHECK_EQ(qhx_plan_verify(p, QHX_PLAN_VERIFY_HEADERS, &err), QHX_OK);
    qhx_plan_free(p);
}

static void test_fixtures(void) {
    const struct fixture_expect xs[] = {
        {"qwen35-tiny-f32", "qwen3_5", "qwen3_5_generate", QHX_PREC_F32, 2, 962, 960, 961, 972, 969, 123, 8, 4, true,
         64, 32, true},
        {"qwen35-tiny-bf16", "qwen3_5", "qwen3_5_generate", QHX_PREC_BF16, 2, 962, 960, 961, 972, 969, 123, 8, 4, true,
         64, 32, true},
        {"qwen35-tiny-vrep-f32", "qwen3_5", "qwen3_5_generate", QHX_PREC_F32, 2, 962, 960, 961, 972, 969, 123, 8, 8, true,
         64, 32, true},
        /* an untied head: lm_head.weight is the 124th tensor */
        {"qwen35-tiny-untied-f32", "qwen3_5", "qwen3_5_generate", QHX_PREC_F32, 2, 962, 960, 961, 972, 969, 124, 8, 6,
         true, 96, 48, false},
        {"qwen3vl-tiny-f32", "qwen3_vl", "qwen3_vl_generate", QHX_PREC_F32, 2, 992, 990, 991, 1002, 999, 115, 4, 0, true,
         64, 32, true},
    };
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) test_fixture(&xs[i]);
}

/* ---- sha256 against the fixtures' recorded hashes (computed elsewhere) ---- */

static void test_sha256(void) {
    char hex[65], path[512];
    qhx_error err;
    snprintf(path, sizeof path, "%s/qwen35-tiny-f32/model.safetensors", FIXTURES);
    CHECK_EQ(qhx_sha256_file(path, hex, &err), QHX_OK);
    CHECK_STR(hex, "4f0301efb37c56ac84eea0bfc0bf9e314df7786f331b801af376725d32d9a5e5");
    snprintf(path, sizeof path, "%s/qwen35-tiny-f32/config.json", FIXTURES);
    CHECK_EQ(qhx_sha256_file(path, hex, &err), QHX_OK);
    CHECK_STR(hex, "cefacb19e4db7a54af13ec8026dadaa20fa7dbdaa009356247e91920f66d81de");
    /* FIPS 180-4 examples, fed in odd pieces */
    qhx_sha256 s;
    uint8_t d[32];
    qhx_sha256_init(&s);
    qhx_sha256_final(&s, d);
    qhx_sha256_hex(d, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    qhx_sha256_init(&s);
    for (size_t i = 0; i < strlen(m); i += 5) qhx_sha256_update(&s, m + i, strlen(m) - i < 5 ? strlen(m) - i : 5);
    qhx_sha256_final(&s, d);
    qhx_sha256_hex(d, hex);
    CHECK_STR(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* many blocks at once and across pieces (the SHA-extension path takes runs of blocks;
     * ctest runs this test again with QHX_SHA256_PLAIN=1 for the portable one) */
    static uint8_t big[100003];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)((i * 7 + 3) % 251);
    for (size_t piece = 1; piece <= 100003; piece = piece * 3 + 61) {
        qhx_sha256_init(&s);
        for (size_t i = 0; i < sizeof big; i += piece) qhx_sha256_update(&s, big + i, sizeof big - i < piece ? sizeof big - i : piece);
        qhx_sha256_final(&s, d);
        qhx_sha256_hex(d, hex);
        CHECK_STR(hex, "3b1d6731138fc44f6de1267ee21c50c8320d23d75fa6515f63e9588cb262ba7a");
    }
    CHECK_EQ(qhx_sha256_file("/nonexistent/x", hex, &err), QHX_E_IO);
}

/* ---- allocation failure at every step: clean error, nothing leaked (ASan checks) ---- */

static void sweep(const char *what, qhx_status (*fn)(qhx_plan **, qhx_error *)) {
    int n_fail = 0;
    for (int64_t n = 0; n < 100000; n++) {
        qhx_alloc_fail_after(n);
        qhx_plan *p = NULL;
        qhx_error err = {0};
        qhx_status rc = fn(&p, &err);
        int fired = qhx_alloc_failed();
        qhx_alloc_fail_after(-1);
        if (rc == QHX_OK) {
            qhx_plan_free(p);
            if (!fired) break;
            continue;
        }
        n_fail++;
        CHECK(p == NULL);
        if (!fired) {
            fprintf(stderr, "  %s: failed without an injected failure: %s\n", what, err.msg);
            CHECK(0);
            break;
        }
    }
    CHECK(n_fail > 10);
}

static qhx_status open_fixture(qhx_plan **p, qhx_error *err) {
    return qhx_plan_open(FIXTURES "/qwen3vl-tiny-f32", p, err);
}
static qhx_status parse_valid(qhx_plan **p, qhx_error *err) {
    qhx_status rc = qhx_plan_parse(VALID, strlen(VALID), NULL, LABEL, p, err);
    if (rc == QHX_OK) { /* the writer too */
        char *text;
        size_t len;
        rc = qhx_plan_write_json(*p, &text, &len, err);
        if (rc == QHX_OK) qhx_free(text);
        else {
            qhx_plan_free(*p);
            *p = NULL;
        }
    }
    return rc;
}

static void test_alloc_failures(void) {
    sweep("open fixture", open_fixture);
    sweep("parse + write", parse_valid);
}

static void cleanup(void) {
    char cmd[600];
    if (!tmpdir[0]) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

int main(void) {
    test_valid();
    test_errors();
    test_bundle();
    test_roundtrip();
    test_fixtures();
    test_sha256();
    test_alloc_failures();
    cleanup();
    return t_done("test_manifest");
}
