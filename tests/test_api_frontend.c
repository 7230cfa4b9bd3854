// ctest-labels: unit
/* The front-end calls of qhx.h ("For front ends"), through the public header only: model facts
 * of the fixtures; chat text with an image and after an answer; an encoded
 * image fed with ids made by the caller gives the logits qhx_session_feed_chat gives for the
 * same conversation and image; the chat template check on a folder with a released, another
 * and no template; NULL and wrong-family arguments refused. */
#include "qhx.h"
#include "t.h"

/* the former chat calls (deprecated wrappers over the prompt object) are what this test exercises */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char q35[1024], vl[1024], image[1100];

static qhx_model *open_model(const char *path) {
    qhx_error err;
    qhx_model *m = NULL;
    if (qhx_model_open(path, NULL, &m, &err)) fprintf(stderr, "test_api_frontend: %s\n", err.msg);
    CHECK(m != NULL);
    return m;
}

static void test_model_facts(const qhx_model *m, const qhx_model *v) {
    CHECK_EQ(qhx_model_has_tokenizer(NULL), 0);
    CHECK_EQ(qhx_model_thinking_default(NULL), 0);
    CHECK_EQ(qhx_model_context_from_plan(NULL), 0);
    CHECK_EQ(qhx_model_has_tokenizer(m), 1);
    CHECK_EQ(qhx_model_has_tokenizer(v), 1);
    CHECK_EQ(qhx_model_context_from_plan(m), 0); /* checkpoint folders */
    CHECK_EQ(qhx_model_context_from_plan(v), 0);
    CHECK_EQ(qhx_model_thinking_default(v), 0);
}

/* qhx_chat_format_image into a new string (owned: free), or NULL. */
static char *format_image(const qhx_model *m, const qhx_chat_msg *msgs, size_t n, int64_t image_tokens) {
    size_t len = 0;
    qhx_error err;
    if (qhx_chat_format_image(m, msgs, n, 1, 0, image_tokens, NULL, 0, &len, &err) != QHX_E_LIMIT || !len) return NULL;
    char *buf = malloc(len + 1);
    if (buf && qhx_chat_format_image(m, msgs, n, 1, 0, image_tokens, buf, len + 1, &len, &err)) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void test_chat_format_image(const qhx_model *v) {
    qhx_error err;
    qhx_chat_msg msgs[2] = {{"system", "Be brief."}, {"user", "What is it?"}};
    char plain[512], *with0 = format_image(v, msgs, 2, 0), *with3 = format_image(v, msgs, 2, 3);
    size_t len;
    CHECK_EQ(qhx_chat_format(v, msgs, 2, 1, 0, plain, sizeof plain, &len, &err), QHX_OK);
    CHECK(with0 && !strcmp(with0, plain));
    CHECK_CONTAINS(with3, "<|im_start|>user\n<|vision_start|><|image_pad|><|image_pad|><|image_pad|><|vision_end|>What is it?");
    CHECK_CONTAINS(with3, "<|im_start|>system\nBe brief.");
    free(with0);
    free(with3);
    CHECK_EQ(qhx_chat_format_image(v, msgs, 1, 1, 0, 2, plain, sizeof plain, &len, &err), QHX_E_ARG); /* no user */
    CHECK_CONTAINS(err.msg, "needs a user message");
    CHECK_EQ(qhx_chat_format_image(v, msgs, 2, 1, 0, -1, plain, sizeof plain, &len, &err), QHX_E_ARG);
    CHECK_EQ(qhx_chat_format_image(v, msgs, 2, 1, 0, (int64_t)1 << 21, plain, sizeof plain, &len, &err), QHX_E_ARG);
    CHECK_EQ(qhx_chat_format_image(NULL, msgs, 2, 1, 0, 0, plain, sizeof plain, &len, &err), QHX_E_ARG);
    CHECK_EQ(qhx_chat_format_image(v, msgs, 2, 1, 0, 0, plain, sizeof plain, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_chat_format_image(v, msgs, 2, 1, 0, 0, NULL, 4, &len, &err), QHX_E_ARG);
    CHECK_EQ(qhx_chat_format_image(v, NULL, 2, 1, 0, 0, plain, sizeof plain, &len, &err), QHX_E_ARG);
}

static qhx_session *new_session(const qhx_model *m) {
    qhx_error err;
    qhx_session_params sp = qhx_session_default_params(m);
    sp.sampling = (qhx_sample_params){0}; /* greedy */
    sp.n_ctx = 256;
    qhx_session *s = NULL;
    if (qhx_session_create(m, &sp, &s, &err)) fprintf(stderr, "test_api_frontend: %s\n", err.msg);
    CHECK(s != NULL);
    return s;
}

/* text tokenized and fed through qhx_session_feed_image. */
static qhx_status feed_text_image(qhx_session *s, const qhx_model *m, const char *text, const qhx_encoded_image *im) {
    qhx_token ids[512];
    size_t n = 0;
    qhx_error err;
    qhx_status rc = qhx_tokenize(m, text, strlen(text), ids, 512, &n, &err);
    if (rc) return rc;
    rc = qhx_session_feed_image(s, ids, n, im, &err);
    if (rc) fprintf(stderr, "test_api_frontend: %s\n", err.msg);
    return rc;
}

static int same_logits(const qhx_model *m, const qhx_session *a, const qhx_session *b) {
    const float *x = qhx_session_logits(a), *y = qhx_session_logits(b);
    return x && y && !memcmp(x, y, (size_t)qhx_model_n_vocab(m) * sizeof *x);
}

/* Two turns fed by the library (feed_chat) and by the front-end calls: the same state. */
static void test_session_chat_format(const qhx_model *m) {
    qhx_error err;
    qhx_session *a = new_session(m), *b = new_session(m);
    if (!a || !b) goto done;
    qhx_chat_msg first[2] = {{"system", "Be brief."}, {"user", "Hello"}}, second = {"user", "And then?"};
    char text[2048];
    size_t len;
    CHECK_EQ(qhx_session_chat_format(b, first, 2, 0, 0, text, sizeof text, &len, &err), QHX_OK);
    char plain[2048];
    CHECK_EQ(qhx_chat_format(m, first, 2, 1, 0, plain, sizeof plain, &len, &err), QHX_OK);
    CHECK_STR(text, plain); /* nothing held yet: nothing to close */
    CHECK_EQ(qhx_session_feed_chat(a, first, 2, NULL, 0, &err), QHX_OK);
    CHECK_EQ(feed_text_image(b, m, text, NULL), QHX_OK);
    CHECK_EQ(qhx_session_n_past(a), qhx_session_n_past(b));
    CHECK(same_logits(m, a, b));
    qhx_generate_params gp = {.max_tokens = 2, .ignore_stop = 1}; /* a length stop: the marker is added */
    CHECK_EQ(qhx_session_generate(a, &gp, NULL, &err), QHX_OK);
    CHECK_EQ(qhx_session_generate(b, &gp, NULL, &err), QHX_OK);
    CHECK_EQ(qhx_session_last_stop(b), QHX_STOP_LENGTH);
    CHECK_EQ(qhx_session_chat_format(b, &second, 1, 0, 0, text, sizeof text, &len, &err), QHX_OK);
    static const char closed[] = "<|im_end|>\n<|im_start|>user\nAnd then?";
    CHECK(!strncmp(text, closed, sizeof closed - 1));
    CHECK_EQ(qhx_session_feed_chat(a, &second, 1, NULL, 0, &err), QHX_OK);
    CHECK_EQ(feed_text_image(b, m, text, NULL), QHX_OK);
    CHECK_EQ(qhx_session_n_past(a), qhx_session_n_past(b));
    CHECK(same_logits(m, a, b));
    CHECK_EQ(qhx_session_chat_format(NULL, &second, 1, 0, 0, text, sizeof text, &len, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_chat_format(b, &second, 1, 0, 0, text, sizeof text, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_chat_format(b, &second, 1, 0, 0, text, 4, &len, &err), QHX_E_LIMIT);
    CHECK(len > 4 && strlen(text) == 3);
done:
    qhx_session_free(a);
    qhx_session_free(b);
}

/* An image encoded once and fed with the caller's ids: the logits of feed_chat with its path. */
static void test_image(const qhx_model *m, const qhx_model *v) {
    qhx_error err;
    qhx_encoded_image *im = (qhx_encoded_image *)1;
    CHECK_EQ(qhx_encoded_image_load(m, image, 0, &im, &err), QHX_E_UNSUPPORTED); /* Qwen3.5 */
    CHECK(im == NULL);
    CHECK_EQ(qhx_encoded_image_load(NULL, image, 0, &im, &err), QHX_E_ARG);
    CHECK_EQ(qhx_encoded_image_load(v, NULL, 0, &im, &err), QHX_E_ARG);
    CHECK_EQ(qhx_encoded_image_load(v, image, -1, &im, &err), QHX_E_ARG);
    CHECK_EQ(qhx_encoded_image_load(v, image, 0, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_encoded_image_n_tokens(NULL), 0);
    qhx_encoded_image_free(NULL);
    CHECK_EQ(qhx_encoded_image_load(v, image, 0, &im, &err), QHX_OK);
    int64_t n_img = qhx_encoded_image_n_tokens(im);
    CHECK(n_img > 1);
    qhx_encoded_image *small = NULL;
    CHECK_EQ(qhx_encoded_image_load(v, image, n_img - 1, &small, &err), QHX_OK);
    CHECK(qhx_encoded_image_n_tokens(small) >= 1 && qhx_encoded_image_n_tokens(small) < n_img);
    qhx_encoded_image_free(small);

    qhx_session *a = new_session(v), *b = new_session(v), *c = new_session(m);
    qhx_chat_msg msg = {"user", "What is this?"};
    char *text = format_image(v, &msg, 1, n_img);
    CHECK(text != NULL);
    if (a && b && c && text) {
        CHECK_EQ(qhx_session_feed_chat(a, &msg, 1, image, 0, &err), QHX_OK);
        CHECK_EQ(feed_text_image(b, v, text, im), QHX_OK);
        CHECK_EQ(qhx_session_n_past(a), qhx_session_n_past(b));
        CHECK(same_logits(v, a, b));
        qhx_generate_params gp = {.max_tokens = 3, .ignore_stop = 1};
        CHECK_EQ(qhx_session_generate(a, &gp, NULL, &err), QHX_OK);
        CHECK_EQ(qhx_session_generate(b, &gp, NULL, &err), QHX_OK);
        CHECK(same_logits(v, a, b)); /* positions after the image agree too */
        qhx_session_reset(b);
        CHECK(feed_text_image(b, v, text, NULL) != QHX_OK); /* pad ids without an image */
        qhx_token ids[2] = {1, 2};
        CHECK_EQ(qhx_session_feed_image(c, ids, 2, im, &err), QHX_E_UNSUPPORTED);
        CHECK_EQ(qhx_session_feed_image(c, ids, 2, NULL, &err), QHX_OK);
        CHECK_EQ(qhx_session_n_past(c), 2);
        CHECK_EQ(qhx_session_feed_image(NULL, ids, 2, NULL, &err), QHX_E_ARG);
        CHECK_EQ(qhx_session_feed_image(c, NULL, 2, NULL, &err), QHX_E_ARG);
    }
    free(text);
    qhx_session_free(a);
    qhx_session_free(b);
    qhx_session_free(c);
    qhx_encoded_image_free(im);
}

static int link_into(const char *src_dir, const char *dir, const char *name) {
    char from[2048], to[2048];
    snprintf(from, sizeof from, "%s/%s", src_dir, name);
    snprintf(to, sizeof to, "%s/%s", dir, name);
    return symlink(from, to);
}

static int write_file(const char *dir, const char *name, const char *text) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* The kind of the chat template in dir, opened as a checkpoint folder; hex gets its hash. */
static qhx_chat_template_kind template_of(const char *dir, char hex[65]) {
    qhx_model *m = open_model(dir);
    qhx_chat_template_kind k = qhx_model_chat_template(m, hex);
    qhx_model_free(m);
    return k;
}

static void test_chat_template(const qhx_model *m) {
    char hex[65] = "x";
    CHECK_EQ(qhx_model_chat_template(NULL, hex), QHX_CHAT_TEMPLATE_NONE);
    CHECK_EQ(qhx_model_chat_template(m, hex), QHX_CHAT_TEMPLATE_NONE); /* the fixture ships none */
    CHECK_STR(hex, "");
    char dir[] = "/tmp/qhx_api_frontend.XXXXXX", path[2048];
    if (!mkdtemp(dir)) {
        CHECK(0);
        return;
    }
    static const char *const files[] = {"config.json", "generation_config.json", "model.safetensors",
                                        "tokenizer.json"};
    for (size_t k = 0; k < 4; k++) CHECK_EQ(link_into(q35, dir, files[k]), 0);
    char released[1024];
    snprintf(released, sizeof released, "%s/chat_templates/qwen3_5-4b.jinja", QHX_TEST_DATA);
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    CHECK_EQ(symlink(released, path), 0);
    CHECK_EQ(template_of(dir, hex), QHX_CHAT_TEMPLATE_KNOWN);
    CHECK_STR(hex, "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715");
    unlink(path);
    /* a template without the family's turn marks writes another format */
    CHECK_EQ(write_file(dir, "tokenizer_config.json", "{\"chat_template\": \"x\"}"), 0);
    CHECK_EQ(template_of(dir, hex), QHX_CHAT_TEMPLATE_FOREIGN);
    CHECK_STR(hex, "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"); /* sha256("x") */
    CHECK_EQ(template_of(dir, NULL), QHX_CHAT_TEMPLATE_FOREIGN);
    /* another one in them (a fine-tune's edit): close to the built-in format */
    CHECK_EQ(write_file(dir, "tokenizer_config.json", "{\"chat_template\": \"<|im_start|>x<|im_end|>\"}"), 0);
    CHECK_EQ(template_of(dir, NULL), QHX_CHAT_TEMPLATE_OTHER);
    /* only one of the marks: not the family's turns */
    CHECK_EQ(write_file(dir, "tokenizer_config.json", "{\"chat_template\": \"<|im_start|>x\"}"), 0);
    CHECK_EQ(template_of(dir, NULL), QHX_CHAT_TEMPLATE_FOREIGN);
    static const char *const all[] = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                                      "tokenizer_config.json"};
    for (size_t k = 0; k < 5; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, all[k]);
        unlink(path);
    }
    rmdir(dir);
}

int main(void) {
    snprintf(q35, sizeof q35, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    snprintf(vl, sizeof vl, "%s/fixtures/parity/qwen3vl-tiny-f32", QHX_DATA_DIR);
    snprintf(image, sizeof image, "%s/image-64x96.png", vl);
    qhx_model *m = open_model(q35), *v = open_model(vl);
    if (m && v) {
        test_model_facts(m, v);
        test_chat_format_image(v);
        test_session_chat_format(m);
        test_image(m, v);
        test_chat_template(m);
    }
    qhx_model_free(m);
    qhx_model_free(v);
    return t_done("test_api_frontend");
}
