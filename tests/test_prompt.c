// ctest-labels: unit
/* The prompt object (qhx.h qhx_prompt) as the one call family for chat prompts, through the
 * public header only: rendered only, its text has the generation prompt or not, image
 * placeholders of the given pads, and is the text of the former qhx_chat_format (now its
 * wrapper); a turn built for a session closes the earlier answer, holds the image's pads, and fed
 * gives the state and logits of its text tokenized and fed with the image encoded by the caller
 * (qhx_session_feed_image), on the first turn and the next; the images' room (max_tokens,
 * image_budget, a session's context) scales a file image down or refuses it; a text prompt
 * tokenizes as qhx_tokenize and feeds as the former qhx_session_feed_text; a range without its
 * image may hold no image-pad id; NULL and bad parts refused. */
#include "qhx.h"
#include "t.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the former calls are compared with the prompt object they now wrap */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static char q35[1024], vl[1024], image[1100];

static qhx_model *open_model(const char *path) {
    qhx_error err;
    qhx_model *m = NULL;
    if (qhx_model_open(path, NULL, &m, &err)) fprintf(stderr, "test_prompt: %s\n", err.msg);
    CHECK(m != NULL);
    return m;
}

static qhx_session *new_session(const qhx_model *m, int64_t n_ctx) {
    qhx_error err;
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = n_ctx;
    qhx_session *s = NULL;
    if (qhx_session_create(m, &sp, &s, &err)) fprintf(stderr, "test_prompt: %s\n", err.msg);
    CHECK(s != NULL);
    return s;
}

static int same_logits(const qhx_model *m, const qhx_session *a, const qhx_session *b) {
    const float *x = qhx_session_logits(a), *y = qhx_session_logits(b);
    return x && y && !memcmp(x, y, (size_t)qhx_model_n_vocab(m) * sizeof *x);
}

/* The user turn "text" with n_images image parts before it: the files (paths) or placeholders
 * of pads[k] tokens. parts: (n_images + 1,). */
static qhx_chat_turn user_turn(const char *text, const char *const *paths, const int64_t *pads, size_t n_images,
                               qhx_chat_content *parts) {
    for (size_t k = 0; k < n_images; k++)
        parts[k] = paths ? (qhx_chat_content){.image_path = paths[k]} : (qhx_chat_content){.image_tokens = pads[k]};
    parts[n_images] = (qhx_chat_content){.text = text, .text_len = strlen(text)};
    return (qhx_chat_turn){.role = "user", .content = text, .parts = n_images ? parts : NULL,
                           .n_parts = n_images ? n_images + 1 : 0};
}


/* How many ids of text are the token tok. */
static int count_token(const qhx_model *m, const char *text, const char *tok) {
    qhx_token ids[4096];
    size_t n = 0;
    qhx_error err;
    qhx_token id = qhx_model_token_id(m, tok);
    if (id < 0 || qhx_tokenize(m, text, strlen(text), ids, 4096, &n, &err)) return -1;
    int c = 0;
    for (size_t i = 0; i < n; i++) c += ids[i] == id;
    return c;
}

static char *render(const qhx_model *m, const qhx_session *s, const qhx_chat_spec *spec) {
    qhx_error err;
    qhx_prompt *p = NULL;
    qhx_status rc = s ? qhx_prompt_for_session(s, spec, &p, &err) : qhx_prompt_from_chat(m, spec, &p, &err);
    if (rc) fprintf(stderr, "test_prompt: %s\n", err.msg);
    size_t n_ids = 1;
    qhx_prompt_ids(p, &n_ids);
    if (spec->render_only) CHECK_EQ(n_ids, 0); /* rendered only: no ids */
    char *text = rc ? NULL : strdup(qhx_prompt_text(p, NULL));
    qhx_prompt_free(p);
    return text;
}

static void test_render_only(const qhx_model *m, const qhx_model *v) {
    qhx_error err;
    char former[4096];
    size_t len;
    qhx_chat_msg msgs[2] = {{"system", "Be brief."}, {"user", "Describe it."}};
    qhx_chat_content parts[3];
    qhx_chat_turn turns[2] = {{.role = "system", .content = "Be brief."}, user_turn("Describe it.", NULL, NULL, 0, parts)};
    qhx_chat_spec spec = {.turns = turns, .n_turns = 2, .render_only = 1};
    char *with = render(m, NULL, &spec);
    CHECK_EQ(qhx_chat_format(m, msgs, 2, 1, 0, former, sizeof former, &len, &err), QHX_OK);
    CHECK(with && !strcmp(with, former)); /* the former call is a wrapper: the same text */
    spec.no_generation_prompt = 1;
    char *without = render(m, NULL, &spec);
    /* the generation prompt is the assistant header after the same conversation */
    CHECK(with && without && strlen(with) > strlen(without) && !strncmp(with, without, strlen(without)));
    CHECK(with && without && strstr(with + strlen(without), "assistant") != NULL);
    qhx_chat_markers mk;
    qhx_model_chat_markers(m, &mk);
    size_t n_end = strlen(mk.turn_end); /* it ends with the last turn's end and a line break */
    CHECK(without && strlen(without) > n_end && !strncmp(without + strlen(without) - n_end - 1, mk.turn_end, n_end));
    free(with);
    free(without);
    /* two image placeholders before the user text: each its start, pads, end */
    const int64_t pads[2] = {5, 2};
    turns[1] = user_turn("Describe it.", NULL, pads, 2, parts);
    spec = (qhx_chat_spec){.turns = turns, .n_turns = 2, .render_only = 1, .max_images = 2};
    char *text = render(v, NULL, &spec);
    CHECK_EQ(count_token(v, text ? text : "", "<|image_pad|>"), 7);
    CHECK_EQ(count_token(v, text ? text : "", "<|vision_start|>"), 2);
    CHECK(text && strstr(text, "<|vision_end|>Describe it.") != NULL); /* the text after the images */
    free(text);
    spec.max_images = 1; /* more images than the spec allows */
    qhx_prompt *p = (qhx_prompt *)1;
    CHECK_EQ(qhx_prompt_from_chat(v, &spec, &p, &err), QHX_E_LIMIT);
    spec.max_images = 2;
    parts[0].image_tokens = 0; /* a placeholder needs its count */
    CHECK_EQ(qhx_prompt_from_chat(v, &spec, &p, &err), QHX_E_ARG);
    CHECK(p == NULL);
    spec.render_only = 0; /* a part that is neither text, bytes nor a file */
    parts[0].image_tokens = 5;
    CHECK(qhx_prompt_from_chat(v, &spec, &p, &err) != QHX_OK);
    CHECK(p == NULL);
}

/* A turn built for a session and fed with qhx_session_feed_prompt, against a twin session fed
 * the prompt's text tokenized by qhx_tokenize with the image encoded by qhx_encoded_image_load
 * (qhx_session_feed_image): the same position and logits, for the first turn and the next one,
 * whose text first closes the answer cut by length. */
static void test_session_turns(const qhx_model *v) {
    qhx_error err;
    qhx_session *a = new_session(v, 512), *b = new_session(v, 512);
    qhx_encoded_image *im = NULL;
    if (!a || !b || qhx_encoded_image_load(v, image, 0, &im, &err)) goto done;
    const char *paths[1] = {image};
    qhx_chat_content parts[2];
    qhx_chat_turn turn = user_turn("What is this?", paths, NULL, 1, parts);
    qhx_chat_spec spec = {.turns = &turn, .n_turns = 1, .max_images = 1};
    qhx_chat_markers mk;
    qhx_model_chat_markers(v, &mk);
    for (int round = 0; round < 2; round++) {
        qhx_prompt *p = NULL;
        CHECK_EQ(qhx_prompt_for_session(b, &spec, &p, &err), QHX_OK);
        size_t n = 0;
        const qhx_token *ids = qhx_prompt_ids(p, &n);
        CHECK(ids != NULL && n > 0);
        CHECK(qhx_prompt_reusable(p) < n); /* the image's run is inside */
        const char *text = qhx_prompt_text(p, NULL);
        CHECK_EQ(count_token(v, text, "<|image_pad|>"), (int)qhx_encoded_image_n_tokens(im));
        /* the second turn closes the first answer (cut by length: the marker is written) */
        CHECK_EQ(!strncmp(text, mk.turn_end, strlen(mk.turn_end)), round == 1);
        qhx_token own[4096];
        size_t n_own = 0;
        CHECK_EQ(qhx_tokenize(v, text, strlen(text), own, 4096, &n_own, &err), QHX_OK);
        CHECK(n_own == n && !memcmp(own, ids, n * sizeof *ids));
        CHECK_EQ(qhx_session_feed_image(a, own, n_own, im, &err), QHX_OK);
        CHECK_EQ(qhx_session_feed_prompt(b, p, 0, n, &err), QHX_OK);
        qhx_prompt_free(p);
        CHECK_EQ(qhx_session_n_past(a), qhx_session_n_past(b));
        CHECK(same_logits(v, a, b));
        qhx_generate_params gp = {.max_tokens = 2, .ignore_stop = 1};
        CHECK_EQ(qhx_session_generate(a, &gp, NULL, &err), QHX_OK);
        CHECK_EQ(qhx_session_generate(b, &gp, NULL, &err), QHX_OK);
        CHECK(same_logits(v, a, b));
    }
done:
    qhx_encoded_image_free(im);
    qhx_session_free(a);
    qhx_session_free(b);
}

/* The images' room: max_tokens and image_budget scale a file image down; a session's context
 * does too, and refuses it when the text leaves nothing. */
static void test_image_room(const qhx_model *m, const qhx_model *v) {
    qhx_error err;
    const char *paths[1] = {image};
    qhx_chat_content parts[2];
    qhx_chat_turn turn = user_turn("What is this?", paths, NULL, 1, parts);
    qhx_chat_spec spec = {.turns = &turn, .n_turns = 1, .max_images = 1};
    qhx_prompt *p = NULL;
    CHECK_EQ(qhx_prompt_from_chat(v, &spec, &p, &err), QHX_OK);
    size_t full = 0;
    qhx_prompt_ids(p, &full);
    qhx_prompt_free(p);
    qhx_encoded_image *im = NULL;
    CHECK_EQ(qhx_encoded_image_load(v, image, 0, &im, &err), QHX_OK);
    const int64_t n_img = qhx_encoded_image_n_tokens(im), n_text = (int64_t)full - n_img;
    qhx_encoded_image_free(im);
    CHECK(n_img > 1 && n_text > 0);
    size_t n = 0;
    spec.image_budget = n_img - 1;
    CHECK_EQ(qhx_prompt_from_chat(v, &spec, &p, &err), QHX_OK);
    qhx_prompt_ids(p, &n);
    CHECK(n < full && (int64_t)n <= n_text + n_img - 1);
    qhx_prompt_free(p);
    spec.image_budget = 0;
    spec.max_tokens = n_text + n_img - 1; /* the text's tokens count against the room */
    CHECK_EQ(qhx_prompt_from_chat(v, &spec, &p, &err), QHX_OK);
    qhx_prompt_ids(p, &n);
    CHECK(n < full && (int64_t)n <= spec.max_tokens);
    qhx_prompt_free(p);
    spec.max_tokens = n_text; /* no room at all */
    CHECK_EQ(qhx_prompt_from_chat(v, &spec, &p, &err), QHX_E_LIMIT);
    CHECK(strstr(err.msg, "no room for the image") != NULL);
    spec.max_tokens = 0;
    /* a session: what its context leaves after one token of answer */
    qhx_session *s = new_session(v, n_text + n_img); /* one short */
    if (s) {
        CHECK_EQ(qhx_prompt_for_session(s, &spec, &p, &err), QHX_OK);
        qhx_prompt_ids(p, &n);
        CHECK((int64_t)n < qhx_session_n_ctx(s));
        CHECK_EQ(qhx_session_feed_prompt(s, p, 0, n, &err), QHX_OK);
        qhx_prompt_free(p);
    }
    qhx_session_free(s);
    s = new_session(v, n_text);
    if (s) CHECK_EQ(qhx_prompt_for_session(s, &spec, &p, &err), QHX_E_LIMIT);
    qhx_session_free(s);
    /* a model that takes no images says so, as the former call did */
    qhx_session *t = new_session(m, 256);
    qhx_chat_msg msg = {"user", "What is this?"};
    qhx_error former;
    if (t) {
        CHECK_EQ(qhx_prompt_for_session(t, &spec, &p, &err), QHX_E_UNSUPPORTED);
        CHECK_EQ(qhx_session_feed_chat(t, &msg, 1, image, 0, &former), QHX_E_UNSUPPORTED);
        CHECK(!strcmp(err.msg, former.msg));
    }
    qhx_session_free(t);
}

static void test_text(const qhx_model *m, const qhx_model *v) {
    qhx_error err;
    const char *text = "Once upon a time";
    qhx_prompt *p = NULL;
    CHECK_EQ(qhx_prompt_from_text(m, text, strlen(text), &p, &err), QHX_OK);
    qhx_token want[64];
    size_t n_want = 0, n = 0;
    CHECK_EQ(qhx_tokenize(m, text, strlen(text), want, 64, &n_want, &err), QHX_OK);
    const qhx_token *ids = qhx_prompt_ids(p, &n);
    CHECK_EQ(n, n_want);
    CHECK(ids && !memcmp(ids, want, n * sizeof *ids));
    CHECK(!strcmp(qhx_prompt_text(p, NULL), text));
    /* fed, it is the state the former qhx_session_feed_text makes */
    qhx_session *a = new_session(m, 128), *b = new_session(m, 128);
    if (a && b) {
        CHECK_EQ(qhx_session_feed_text(a, text, strlen(text), &err), QHX_OK);
        CHECK_EQ(qhx_session_feed_prompt(b, p, 0, n, &err), QHX_OK);
        CHECK(same_logits(m, a, b));
    }
    qhx_session_free(a);
    qhx_session_free(b);
    qhx_prompt_free(p);
    CHECK_EQ(qhx_prompt_from_text(NULL, text, 4, &p, &err), QHX_E_ARG);
    CHECK_EQ(qhx_prompt_from_text(m, NULL, 4, &p, &err), QHX_E_ARG);
    CHECK_EQ(qhx_prompt_from_text(m, text, 4, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_prompt_for_session(NULL, NULL, &p, &err), QHX_E_ARG);
    CHECK(p == NULL);
    CHECK(!strcmp(qhx_prompt_text(NULL, NULL), ""));
    /* a Qwen3-VL text prompt holding an image pad, without its image: refused when fed */
    size_t len = 0;
    char pads[256];
    const int64_t one = 1;
    qhx_chat_msg msg = {"user", "x"};
    CHECK_EQ(qhx_chat_format_image(v, &msg, 1, 1, 0, one, pads, sizeof pads, &len, &err), QHX_OK);
    qhx_session *s = new_session(v, 128);
    if (s && qhx_prompt_from_text(v, pads, len, &p, &err) == QHX_OK) {
        qhx_prompt_ids(p, &n);
        CHECK_EQ(qhx_session_feed_prompt(s, p, 0, n, &err), QHX_E_ARG);
        CHECK_EQ(qhx_session_n_past(s), 0);
        qhx_prompt_free(p);
    }
    qhx_session_free(s);
}

int main(void) {
    snprintf(q35, sizeof q35, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    snprintf(vl, sizeof vl, "%s/fixtures/parity/qwen3vl-tiny-f32", QHX_DATA_DIR);
    snprintf(image, sizeof image, "%s/image-64x96.png", vl);
    qhx_model *m = open_model(q35), *v = open_model(vl);
    if (m && v) {
        test_render_only(m, v);
        test_session_turns(v);
        test_image_room(m, v);
        test_text(m, v);
    }
    qhx_model_free(m);
    qhx_model_free(v);
    return t_done("test_prompt");
}
