/* The serving calls of qhx.h on the tiny fixtures: one decode step over several sessions gives
 * each the logits it gets alone (bit for bit, through the batched forward and through the
 * one-by-one fallback), a checkpoint rolls a session back to where it was (logits and what it
 * generates after), chat prompts in memory tokenize as the chat format renders them, and a
 * range feed through an image refuses to cut it. */
// ctest-labels: unit;golden
#include "qhx.h"
#include "t.h"

/* the former chat calls (deprecated wrappers over the prompt object) are what this test exercises */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <stdlib.h>
#include <unistd.h>
#include <string.h>

static char dir[1024];

static qhx_model *open_model(const char *name, int threads) {
    char path[1200];
    if (name[0] == '/') snprintf(path, sizeof path, "%s", name);
    else snprintf(path, sizeof path, "%s/fixtures/parity/%s", QHX_DATA_DIR, name);
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = threads;
    qhx_model *m = NULL;
    qhx_error err = {0};
    if (qhx_model_open(path, &mp, &m, &err)) fprintf(stderr, "%s: %s\n", path, err.msg);
    return m;
}

static qhx_session *session(qhx_model *m) {
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 512;
    qhx_session *s = NULL;
    qhx_session_create(m, &sp, &s, NULL);
    return s;
}

static void feed_text(qhx_session *s, const char *t) { CHECK_EQ(qhx_session_feed_text(s, t, strlen(t), NULL), QHX_OK); }

/* nb sessions with different prompts, decoded 12 steps together (greedy), against the same
 * prompts decoded alone: every logit equal. */
static void test_decode_multi(const char *model, int threads) {
    qhx_model *m = open_model(model, threads);
    CHECK(m != NULL);
    if (!m) return;
    const char *prompts[4] = {"Hello there", "The capital of France is", "1 2 3 4", "Once upon a time, in a land far away"};
    enum { NB = 4, STEPS = 12 };
    qhx_session *together[NB], *alone[NB];
    int64_t V = qhx_model_n_vocab(m);
    for (int b = 0; b < NB; b++) {
        together[b] = session(m);
        alone[b] = session(m);
        feed_text(together[b], prompts[b]);
        feed_text(alone[b], prompts[b]);
    }
    int same = 1;
    for (int k = 0; k < STEPS; k++) {
        qhx_token t[NB];
        for (int b = 0; b < NB; b++) {
            const float *lt = qhx_session_logits(together[b]), *la = qhx_session_logits(alone[b]);
            same &= memcmp(lt, la, (size_t)V * sizeof(float)) == 0;
            t[b] = qhx_session_sample(alone[b]);
            CHECK_EQ(qhx_session_feed(alone[b], &t[b], 1, NULL), QHX_OK);
        }
        /* 4 together, then (every third step) 2 + 1 + 1, the fallback size included */
        size_t done = 0;
        if (k % 3 == 2) {
            CHECK_EQ(qhx_sessions_decode(together, t, 2, &done, NULL), QHX_OK);
            CHECK_EQ(qhx_sessions_decode(together + 2, t + 2, 1, NULL, NULL), QHX_OK);
            CHECK_EQ(qhx_sessions_decode(together + 3, t + 3, 1, NULL, NULL), QHX_OK);
        } else {
            CHECK_EQ(qhx_sessions_decode(together, t, NB, &done, NULL), QHX_OK);
            CHECK_EQ(done, NB);
        }
    }
    for (int b = 0; b < NB; b++) {
        same &= memcmp(qhx_session_logits(together[b]), qhx_session_logits(alone[b]), (size_t)V * sizeof(float)) == 0;
        CHECK_EQ(qhx_session_n_past(together[b]), qhx_session_n_past(alone[b]));
    }
    if (!same) fprintf(stderr, "%s (%d threads): batched logits differ from alone\n", model, threads);
    CHECK(same);
    /* a repeated session is refused before anything is fed */
    qhx_session *twice[2] = {together[0], together[0]};
    qhx_token tt[2] = {1, 1};
    int64_t before = qhx_session_n_past(together[0]);
    CHECK(qhx_sessions_decode(twice, tt, 2, NULL, NULL) != QHX_OK);
    CHECK_EQ(qhx_session_n_past(together[0]), before);
    for (int b = 0; b < NB; b++) {
        qhx_session_free(together[b]);
        qhx_session_free(alone[b]);
    }
    qhx_model_free(m);
}

/* Qwen3-VL: a session after an image prompt (its M-RoPE positions run ahead of its token count)
 * decoded together with a text one, against both alone */
static void test_decode_multi_image(void) {
    qhx_model *m = open_model("qwen3vl-tiny-f32", 2);
    CHECK(m != NULL);
    if (!m) return;
    char path[1200];
    snprintf(path, sizeof path, "%s/fixtures/parity/qwen3vl-tiny-f32/image-64x96.png", QHX_DATA_DIR);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f) return;
    static unsigned char png[1 << 16];
    size_t n_png = fread(png, 1, sizeof png, f);
    fclose(f);
    qhx_chat_content parts[2] = {{.image = png, .image_size = n_png}, {.text = "What is it?", .text_len = 11}};
    qhx_chat_turn turn = {.role = "user", .parts = parts, .n_parts = 2};
    qhx_chat_spec spec = {.turns = &turn, .n_turns = 1};
    qhx_prompt *p = NULL;
    CHECK_EQ(qhx_prompt_from_chat(m, &spec, &p, NULL), QHX_OK);
    if (!p) return;
    size_t n = 0;
    qhx_prompt_ids(p, &n);
    CHECK(qhx_prompt_reusable(p) < n);
    qhx_session *cut = session(m); /* a range starting inside the image is refused */
    CHECK_EQ(qhx_session_feed_prompt(cut, p, qhx_prompt_reusable(p) + 1, n, NULL), QHX_E_ARG);
    CHECK_EQ(qhx_session_n_past(cut), 0);
    qhx_session_free(cut);
    qhx_session *together[2] = {session(m), session(m)}, *alone[2] = {session(m), session(m)};
    CHECK_EQ(qhx_session_feed_prompt(together[0], p, 0, n, NULL), QHX_OK);
    CHECK_EQ(qhx_session_feed_prompt(alone[0], p, 0, n, NULL), QHX_OK);
    feed_text(together[1], "Plain text here");
    feed_text(alone[1], "Plain text here");
    int64_t V = qhx_model_n_vocab(m);
    int same = 1;
    for (int k = 0; k < 10; k++) {
        qhx_token t[2];
        for (int b = 0; b < 2; b++) {
            same &= memcmp(qhx_session_logits(together[b]), qhx_session_logits(alone[b]), (size_t)V * sizeof(float)) == 0;
            t[b] = qhx_session_sample(alone[b]);
            qhx_session_feed(alone[b], &t[b], 1, NULL);
        }
        CHECK_EQ(qhx_sessions_decode(together, t, 2, NULL, NULL), QHX_OK);
    }
    for (int b = 0; b < 2; b++)
        same &= memcmp(qhx_session_logits(together[b]), qhx_session_logits(alone[b]), (size_t)V * sizeof(float)) == 0;
    CHECK(same);
    for (int b = 0; b < 2; b++) {
        qhx_session_free(together[b]);
        qhx_session_free(alone[b]);
    }
    qhx_prompt_free(p);
    qhx_model_free(m);
}

/* checkpoint, go on, roll back: the logits and the following greedy tokens as before */
static void test_checkpoint(const char *model) {
    qhx_model *m = open_model(model, 1);
    CHECK(m != NULL);
    if (!m) return;
    int64_t V = qhx_model_n_vocab(m);
    qhx_session *s = session(m), *other = session(m);
    feed_text(s, "A checkpoint here");
    qhx_checkpoint *cp = NULL;
    CHECK_EQ(qhx_session_checkpoint(s, &cp, NULL), QHX_OK);
    CHECK_EQ(qhx_checkpoint_n_past(cp), qhx_session_n_past(s));
    CHECK(qhx_checkpoint_bytes(cp) > (size_t)V * sizeof(float));
    float *at = malloc((size_t)V * sizeof(float));
    memcpy(at, qhx_session_logits(s), (size_t)V * sizeof(float));
    qhx_token first[8], again[8];
    for (int k = 0; k < 8; k++) {
        first[k] = qhx_session_sample(s);
        qhx_session_feed(s, &first[k], 1, NULL);
    }
    feed_text(s, " and then something else entirely");
    CHECK_EQ(qhx_session_rollback(s, cp, NULL), QHX_OK);
    CHECK_EQ(qhx_session_n_past(s), qhx_checkpoint_n_past(cp));
    CHECK(memcmp(at, qhx_session_logits(s), (size_t)V * sizeof(float)) == 0);
    for (int k = 0; k < 8; k++) {
        again[k] = qhx_session_sample(s);
        qhx_session_feed(s, &again[k], 1, NULL);
    }
    CHECK(memcmp(first, again, sizeof first) == 0);
    CHECK(qhx_session_rollback(other, cp, NULL) == QHX_E_ARG); /* another session's */
    qhx_checkpoint_free(cp);
    free(at);
    qhx_session_free(s);
    qhx_session_free(other);
    qhx_model_free(m);
}

/* a chat spec renders as qhx_chat_format does, and feeds in two ranges as in one */
static void test_prompt(void) {
    qhx_model *m = open_model("qwen35-tiny-f32", 1);
    CHECK(m != NULL);
    if (!m) return;
    qhx_chat_turn turns[2] = {{.role = "system", .content = "Be brief."}, {.role = "user", .content = "Hello"}};
    qhx_chat_spec spec = {.turns = turns, .n_turns = 2};
    qhx_prompt *p = NULL;
    CHECK_EQ(qhx_prompt_from_chat(m, &spec, &p, NULL), QHX_OK);
    size_t n = 0;
    const qhx_token *ids = qhx_prompt_ids(p, &n);
    qhx_chat_msg msgs[2] = {{"system", "Be brief."}, {"user", "Hello"}};
    char text[4096];
    size_t len = 0, nref = 0;
    CHECK_EQ(qhx_chat_format(m, msgs, 2, 1, 0, text, sizeof text, &len, NULL), QHX_OK);
    qhx_token ref[512];
    CHECK_EQ(qhx_tokenize(m, text, len, ref, 512, &nref, NULL), QHX_OK);
    CHECK_EQ(n, nref);
    CHECK(n == nref && memcmp(ids, ref, n * sizeof *ids) == 0);
    CHECK_EQ(qhx_prompt_reusable(p), n);
    qhx_session *a = session(m), *b = session(m);
    CHECK_EQ(qhx_session_feed_prompt(a, p, 0, n, NULL), QHX_OK);
    CHECK_EQ(qhx_session_feed_prompt(b, p, 0, 5, NULL), QHX_OK);
    CHECK_EQ(qhx_session_feed_prompt(b, p, 5, n, NULL), QHX_OK);
    CHECK_EQ(qhx_session_n_past(a), qhx_session_n_past(b));
    CHECK(qhx_session_feed_prompt(b, p, 3, 2, NULL) == QHX_E_ARG);
    CHECK(qhx_session_feed_prompt(b, p, 0, n + 1, NULL) == QHX_E_ARG);
    /* images and tools where the family takes none */
    qhx_chat_content img = {.image = "\x89PNG", .image_size = 4};
    qhx_chat_turn it = {.role = "user", .parts = &img, .n_parts = 1};
    qhx_chat_spec is = {.turns = &it, .n_turns = 1};
    qhx_prompt *q = NULL;
    CHECK(qhx_prompt_from_chat(m, &is, &q, NULL) == QHX_E_ARG && q == NULL);
    qhx_session_free(a);
    qhx_session_free(b);
    qhx_prompt_free(p);
    qhx_model_free(m);
}

/* w8 and q4 bundles of the f32 fixture (qhx forge), for the quantized kernels' batched step */
static int forge(const char *precision, char *out, size_t cap) {
    snprintf(out, cap, "%s/bundle-%s", dir, precision);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/qhx' forge '%s/fixtures/parity/qwen35-tiny-f32' '%s' --precision %s >/dev/null 2>&1",
             QHX_BIN_DIR, QHX_DATA_DIR, out, precision);
    return system(cmd) == 0;
}

/* Qwen3-VL tools through qhx_prompt_from_chat: the ids are those of the text its template renders
 * (written out here: the system turn with the tools block, a call as a JSON object, the tool
 * response folded into a user turn; add_vision_id without an image adds nothing); reasoning is
 * not read. */
static void test_prompt_vl_tools(void) {
    qhx_model *m = open_model("qwen3vl-tiny-f32", 1);
    CHECK(m != NULL);
    if (!m) return;
    const char *tools[] = {"{\"type\": \"function\", \"function\": {\"name\": \"f\"}}"};
    qhx_chat_call call = {.name = "f", .arguments = "{\"x\": 1}"};
    qhx_chat_turn turns[] = {{.role = "system", .content = "Be brief."},
                             {.role = "user", .content = "Q"},
                             {.role = "assistant", .content = "", .reasoning = "not rendered", .calls = &call, .n_calls = 1},
                             {.role = "tool", .content = "R"}};
    qhx_chat_spec spec = {.turns = turns, .n_turns = 4, .tools = tools, .n_tools = 1, .add_vision_id = 1};
    static const char want[] =
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
        "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
        "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n</tools>\n\nFor each function call, return a "
        "json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
        "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
        "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": "
        "{\"x\": 1}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nR\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n";
    qhx_prompt *p = NULL;
    qhx_error err = {0};
    CHECK_EQ(qhx_prompt_from_chat(m, &spec, &p, &err), QHX_OK);
    static qhx_token ref[4096];
    size_t n_ref = 0, n = 0;
    CHECK_EQ(qhx_tokenize(m, want, strlen(want), ref, 4096, &n_ref, NULL), QHX_OK);
    const qhx_token *ids = p ? qhx_prompt_ids(p, &n) : NULL;
    CHECK(ids && n == n_ref && n > 100 && !memcmp(ids, ref, n * sizeof *ids));
    qhx_prompt_free(p);
    qhx_model_free(m);
}

int main(void) {
    char tmpl[] = "/tmp/qhx-serve-api-XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    snprintf(dir, sizeof dir, "%s", tmpl);
    char b[1400];
    for (int k = 0; k < 2; k++) {
        const char *prec = k ? "q4" : "w8";
        if (forge(prec, b, sizeof b)) {
            test_decode_multi(b, 2);
            test_checkpoint(b);
        } else {
            fprintf(stderr, "qhx forge --precision %s failed (is %s/qhx built?)\n", prec, QHX_BIN_DIR);
            CHECK(0);
        }
    }
    char rm[1200];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm)) fprintf(stderr, "could not remove %s\n", dir);
    test_decode_multi("qwen35-tiny-f32", 1);
    test_decode_multi("qwen35-tiny-f32", 2);
    test_decode_multi("qwen35-tiny-bf16", 2);
    test_decode_multi("qwen3vl-tiny-f32", 2);
    test_decode_multi_image();
    test_checkpoint("qwen35-tiny-f32");
    test_checkpoint("qwen3vl-tiny-f32");
    test_prompt();
    test_prompt_vl_tools();
    return t_done("test_serve_api");
}
