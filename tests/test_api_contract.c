// ctest-labels: unit
/* The NULL and re-entrancy contract of qhx.h, through the public header only: NULL where the
 * header does not allow it is QHX_E_ARG (or the accessor's documented value), never a crash;
 * out-of-range enums and ids are refused; a session called from its own callback refuses;
 * the tokenizer polls the abort callback, and text that cannot fit is refused before it is
 * tokenized. */
#include "qhx.h"
#include "t.h"

/* the former chat calls (deprecated wrappers over the prompt object) are what this test exercises */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fx[1024];

static void test_null_model_calls(qhx_model *m) {
    qhx_error err;
    qhx_model *out = (qhx_model *)1;
    CHECK_EQ(qhx_model_open(fx, NULL, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_model_open(NULL, NULL, &out, &err), QHX_E_ARG);
    CHECK(out == NULL);
    qhx_model_params badp = qhx_model_default_params();
    badp.vision = 2; /* -1, 0 or 1 */
    CHECK_EQ(qhx_model_open(fx, &badp, &out, &err), QHX_E_ARG);
    CHECK(out == NULL);
    CHECK_EQ(qhx_model_n_vocab(NULL), 0);
    CHECK_EQ(qhx_model_max_context(NULL), 0);
    CHECK_STR(qhx_model_family_name(NULL), "?");
    CHECK_EQ(qhx_model_is_stop(NULL, 0), 0);
    CHECK_EQ(qhx_model_token_id(NULL, "a"), -1);
    CHECK_EQ(qhx_model_token_id(m, NULL), -1);
    qhx_model_free(NULL);
    qhx_token ids[8];
    size_t n;
    CHECK_EQ(qhx_tokenize(m, "hi", 2, ids, 8, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_tokenize(NULL, "hi", 2, ids, 8, &n, &err), QHX_E_ARG);
    CHECK_EQ(qhx_tokenize(m, NULL, 2, ids, 8, &n, &err), QHX_E_ARG);
    CHECK_EQ(qhx_tokenize(m, "hi", 2, NULL, 8, &n, &err), QHX_E_ARG);
    CHECK_EQ(qhx_tokenize(m, "hi", 2, NULL, 0, &n, NULL), QHX_E_LIMIT); /* the size query */
    char buf[64];
    qhx_token bad[2] = {-1, 1 << 30};
    CHECK_EQ(qhx_detokenize(m, bad, 1, buf, sizeof buf, &n, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "outside the vocabulary");
    CHECK_EQ(qhx_detokenize(m, bad + 1, 1, buf, sizeof buf, &n, &err), QHX_E_ARG);
    CHECK_EQ(qhx_detokenize(m, ids, 0, buf, sizeof buf, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_detokenize(NULL, ids, 0, buf, sizeof buf, &n, &err), QHX_E_ARG);
    CHECK_EQ(qhx_detokenize(m, NULL, 3, buf, sizeof buf, &n, &err), QHX_E_ARG);
    CHECK_EQ(qhx_detokenize(m, ids, 0, NULL, 4, &n, &err), QHX_E_ARG);
    qhx_chat_msg msg = {"user", "hi"};
    CHECK_EQ(qhx_chat_format(NULL, &msg, 1, 1, 0, buf, sizeof buf, &n, &err), QHX_E_ARG);
    CHECK_EQ(qhx_chat_format(m, &msg, 1, 1, 0, buf, sizeof buf, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_chat_format(m, &msg, 1, 1, 0, NULL, 8, &n, &err), QHX_E_ARG);
}

static void test_null_session_calls(qhx_model *m) {
    qhx_error err;
    qhx_session_params sp = qhx_session_default_params(m);
    qhx_session *s = NULL;
    CHECK_EQ(qhx_session_create(m, &sp, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_create(NULL, &sp, &s, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_create(m, NULL, &s, &err), QHX_E_ARG);
    sp.prefill = (qhx_prefill_mode)77;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "prefill mode 77");
    CHECK(s == NULL);
    CHECK_EQ(qhx_session_n_past(NULL), 0);
    CHECK_EQ(qhx_session_n_ctx(NULL), 0);
    CHECK(qhx_session_logits(NULL) == NULL);
    CHECK_EQ(qhx_session_sample(NULL), -1);
    CHECK_EQ(qhx_session_last_stop(NULL), QHX_STOP_LENGTH);
    qhx_session_reset(NULL);
    qhx_session_free(NULL);
    qhx_token one = 1;
    qhx_generate_params gp = {.max_tokens = 1};
    CHECK_EQ(qhx_session_feed(NULL, &one, 1, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_feed_text(NULL, "hi", 2, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_feed_chat(NULL, NULL, 0, NULL, 0, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_generate(NULL, &gp, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_save(NULL, "/tmp/x", &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_restore(NULL, "/tmp/x", &err), QHX_E_ARG);
    sp = qhx_session_default_params(m);
    sp.n_ctx = 64;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    if (!s) return;
    CHECK_EQ(qhx_session_feed(s, NULL, 3, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_feed_text(s, NULL, 3, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_feed_chat(s, NULL, 1, NULL, 0, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_generate(s, NULL, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_save(s, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_restore(s, NULL, &err), QHX_E_ARG);
    qhx_session_free(s);
}

/* qhx_session_embed: refused arguments leave the session as it was; a served embedding leaves it
 * empty and does not depend on what it held. */
static void test_embed_contract(qhx_model *m) {
    qhx_error err;
    const int64_t H = qhx_model_n_embd(m);
    CHECK(H > 0);
    CHECK_EQ(qhx_model_n_embd(NULL), 0);
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 16;
    qhx_session *s = NULL;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    if (!s) return;
    float *a = calloc((size_t)H, sizeof *a), *b = calloc((size_t)H, sizeof *b);
    qhx_token ids[20] = {1, 2, 3, 4, 5};
    qhx_embed_params ep = qhx_embed_default_params();
    CHECK_EQ(ep.pooling, QHX_POOLING_LAST);
    CHECK_EQ(ep.normalize, 2);
    CHECK_EQ(qhx_session_embed(NULL, ids, 5, &ep, a, (size_t)H, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_embed(s, NULL, 5, &ep, a, (size_t)H, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_embed(s, ids, 0, &ep, a, (size_t)H, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_embed(s, ids, 5, NULL, a, (size_t)H, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_embed(s, ids, 5, &ep, NULL, (size_t)H, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_embed(s, ids, 5, &ep, a, (size_t)H - 1, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "an embedding of this model has");
    qhx_embed_params bad = ep;
    bad.pooling = (qhx_pooling)9;
    CHECK_EQ(qhx_session_embed(s, ids, 5, &bad, a, (size_t)H, &err), QHX_E_ARG);
    bad = ep;
    bad.normalize = -2;
    CHECK_EQ(qhx_session_embed(s, ids, 5, &bad, a, (size_t)H, &err), QHX_E_ARG);
    CHECK_EQ(qhx_session_feed(s, ids, 3, &err), QHX_OK); /* held before: refusals keep it */
    CHECK_EQ(qhx_session_embed(s, ids, 20, &ep, a, (size_t)H, &err), QHX_E_LIMIT); /* past n_ctx 16 */
    ids[0] = (qhx_token)qhx_model_n_vocab(m);
    CHECK_EQ(qhx_session_embed(s, ids, 5, &ep, a, (size_t)H, &err), QHX_E_ARG);
    ids[0] = 1;
    CHECK_EQ(qhx_session_n_past(s), 3);
    CHECK_EQ(qhx_session_embed(s, ids, 5, &ep, a, (size_t)H, &err), QHX_OK);
    CHECK_EQ(qhx_session_n_past(s), 0);
    CHECK_EQ(qhx_session_embed(s, ids, 5, &ep, b, (size_t)H, &err), QHX_OK);
    CHECK(memcmp(a, b, (size_t)H * sizeof *a) == 0); /* what the session held did not matter */
    double norm = 0;
    for (int64_t i = 0; i < H; i++) norm += (double)a[i] * a[i];
    CHECK(norm > 0.9999 && norm < 1.0001);
    free(a);
    free(b);
    qhx_session_free(s);
}

/* A callback that calls back into its own session: every mutating call is refused. */
typedef struct reenter {
    qhx_session *s;
    const qhx_model *m;
    qhx_status feed, text, gen, save, restore, embed;
    qhx_token sampled;
    int64_t n_past;
    int calls;
} reenter;

static int on_token_reenter(void *user, qhx_token t, const char *text, size_t len) {
    (void)t, (void)text, (void)len;
    reenter *r = user;
    qhx_error err;
    qhx_token one = 1;
    qhx_generate_params gp = {.max_tokens = 1};
    r->calls++;
    r->gen = qhx_session_generate(r->s, &gp, NULL, &err);
    r->feed = qhx_session_feed(r->s, &one, 1, &err);
    r->text = qhx_session_feed_text(r->s, "x", 1, &err);
    r->save = qhx_session_save(r->s, "/tmp/qhx_contract_never", &err);
    r->restore = qhx_session_restore(r->s, "/tmp/qhx_contract_never", &err);
    r->sampled = qhx_session_sample(r->s);
    size_t H = (size_t)qhx_model_n_embd(r->m);
    float *e = malloc(H * sizeof *e);
    qhx_embed_params ep = qhx_embed_default_params();
    r->embed = qhx_session_embed(r->s, &one, 1, &ep, e, H, &err); /* arguments fine: the guard refuses */
    free(e);
    qhx_session_reset(r->s); /* ignored */
    r->n_past = qhx_session_n_past(r->s);
    return 1;
}

static void test_reentrancy(qhx_model *m) {
    qhx_error err;
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 64;
    qhx_session *s = NULL;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    if (!s) return;
    CHECK_EQ(qhx_session_feed_text(s, "Hello", 5, &err), QHX_OK);
    int64_t before = qhx_session_n_past(s);
    reenter r = {.s = s, .m = m};
    qhx_generate_params gp = {.max_tokens = 4, .ignore_stop = 1, .on_token = on_token_reenter, .user = &r};
    CHECK_EQ(qhx_session_generate(s, &gp, NULL, &err), QHX_OK);
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.gen, QHX_E_ARG);
    CHECK_EQ(r.feed, QHX_E_ARG);
    CHECK_EQ(r.text, QHX_E_ARG);
    CHECK_EQ(r.save, QHX_E_ARG);
    CHECK_EQ(r.restore, QHX_E_ARG);
    CHECK_EQ(r.embed, QHX_E_ARG);
    CHECK_EQ(r.sampled, -1);
    CHECK_EQ(r.n_past, before); /* the reset did nothing */
    CHECK(access("/tmp/qhx_contract_never", F_OK) != 0);
    /* after the call returns, the session takes calls again */
    qhx_token one = 1;
    CHECK_EQ(qhx_session_feed(s, &one, 1, &err), QHX_OK);
    qhx_session_free(s);
}

static int abort_after(void *user) {
    int *left = user;
    return --*left < 0;
}

static void test_long_text(qhx_model *m) {
    qhx_error err;
    size_t n = (size_t)4 << 20;
    char *text = malloc(n);
    for (size_t i = 0; i < n; i++) text[i] = "ab c"[i % 4];
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 64;
    qhx_session *s = NULL;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    /* 4 MB cannot make fewer than 1365 tokens: refused before tokenizing */
    CHECK_EQ(qhx_session_feed_text(s, text, n, &err), QHX_E_LIMIT);
    CHECK_CONTAINS(err.msg, "at least");
    qhx_session_free(s);
    int left = 3;
    sp.n_ctx = qhx_model_max_context(m);
    sp.abort_cb = abort_after;
    sp.abort_user = &left;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    size_t fits = (size_t)sp.n_ctx * 3 * 1024 - 1; /* passes the early check, then the tokenizer polls */
    CHECK_EQ(qhx_session_feed_text(s, text, fits < n ? fits : n, &err), QHX_E_ABORTED);
    CHECK_CONTAINS(err.msg, "interrupted");
    CHECK_EQ(qhx_session_n_past(s), 0);
    qhx_session_free(s);
    free(text);
}

/* Several images in one chat turn through the public API: a Qwen3.5 checkpoint folder opened for
 * images; the turn's prompt holds both images' tokens; the limits and a text model's refusal. */
static void test_chat_images(qhx_model *text_model) {
    char dir[1100], a[1200], b[1200];
    snprintf(dir, sizeof dir, "%s/fixtures/parity/qwen35vl-tiny-f32", QHX_DATA_DIR);
    snprintf(a, sizeof a, "%s/image-64x96.png", dir);
    snprintf(b, sizeof b, "%s/image-64x64.png", dir);
    qhx_error err;
    qhx_model_params mp = qhx_model_default_params();
    mp.vision = 1;
    qhx_model *m = NULL;
    CHECK_EQ(qhx_model_open(dir, &mp, &m, &err), QHX_OK);
    if (!m) return;
    CHECK_EQ(qhx_model_takes_images(m), 1);
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 256;
    qhx_session *s = NULL;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    const qhx_chat_msg msg = {"user", "What differs?"};
    const char *two[2] = {a, b};
    CHECK_EQ(qhx_session_feed_chat_images(s, &msg, 1, two, 2, 0, &err), QHX_OK);
    const int64_t with_two = qhx_session_n_past(s);
    qhx_session_reset(s);
    CHECK_EQ(qhx_session_feed_chat_images(s, &msg, 1, two, 1, 0, &err), QHX_OK);
    CHECK_EQ(with_two, qhx_session_n_past(s) + 4 + 2); /* the 64x64 image: 4 pads, vision_start, _end */
    qhx_generate_params gp = {.max_tokens = 2, .ignore_stop = 1};
    CHECK_EQ(qhx_session_generate(s, &gp, NULL, &err), QHX_OK);
    const char *none[2] = {a, NULL};
    CHECK_EQ(qhx_session_feed_chat_images(s, &msg, 1, none, 2, 0, &err), QHX_E_ARG);
    const char *many[17];
    for (int k = 0; k < 17; k++) many[k] = b;
    CHECK_EQ(qhx_session_feed_chat_images(s, &msg, 1, many, 17, 0, &err), QHX_E_LIMIT);
    CHECK_EQ(qhx_session_feed_chat_images(s, &msg, 1, NULL, 2, 0, &err), QHX_E_ARG);
    qhx_session_free(s);
    qhx_model_free(m);
    /* a model whose host-op takes no images refuses them */
    s = NULL;
    sp = qhx_session_default_params(text_model);
    CHECK_EQ(qhx_session_create(text_model, &sp, &s, &err), QHX_OK);
    CHECK_EQ(qhx_session_feed_chat_images(s, &msg, 1, two, 2, 0, &err), QHX_E_UNSUPPORTED);
    qhx_session_free(s);
}

int main(void) {
    snprintf(fx, sizeof fx, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    qhx_error err;
    qhx_model *m = NULL;
    if (qhx_model_open(fx, NULL, &m, &err)) {
        fprintf(stderr, "test_api_contract: %s\n", err.msg);
        return 1;
    }
    test_null_model_calls(m);
    test_null_session_calls(m);
    test_reentrancy(m);
    test_embed_contract(m);
    test_long_text(m);
    test_chat_images(m);
    qhx_model_free(m);
    return t_done("test_api_contract");
}
