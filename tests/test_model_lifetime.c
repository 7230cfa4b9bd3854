// ctest-labels: unit
/* The model's lifetime (qhx.h, qhx_model_free): sessions, prompts and text streams hold their
 * own reference, so one used or freed after qhx_model_free finds its model alive (no
 * use-after-free: the ASan build of this test is the proof), gives the same logits as before the
 * model was released, and the model goes with the last of them. */
#include "qhx.h"
#include "t.h"

/* the former chat calls (deprecated wrappers over the prompt object) are what this test exercises */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char fx[1024];

static qhx_model *open_model(void) {
    qhx_error err;
    qhx_model *m = NULL;
    if (qhx_model_open(fx, NULL, &m, &err)) {
        fprintf(stderr, "fixture: %s\n", err.msg);
        exit(1);
    }
    return m;
}

/* Feed a prompt, then 4 greedy tokens; the last logits' first value and the tokens. */
static float run(qhx_session *s, qhx_token *toks) {
    qhx_error err;
    CHECK_EQ(qhx_session_feed_text(s, "Once upon a time", 16, &err), QHX_OK);
    for (int i = 0; i < 4; i++) {
        const float *l = qhx_session_logits(s);
        int64_t best = 0;
        for (int64_t k = 1; k < 64; k++)
            if (l[k] > l[best]) best = k;
        toks[i] = (qhx_token)best;
        CHECK_EQ(qhx_session_feed(s, &toks[i], 1, &err), QHX_OK);
    }
    return qhx_session_logits(s)[0];
}

/* A session outlives its model: it keeps working, then frees the model with itself. */
static void test_session_after_model(void) {
    qhx_error err;
    qhx_model *m = open_model();
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 256;
    qhx_session *a = NULL, *b = NULL;
    CHECK_EQ(qhx_session_create(m, &sp, &a, &err), QHX_OK);
    CHECK_EQ(qhx_session_create(m, &sp, &b, &err), QHX_OK);
    qhx_token ta[4], tb[4];
    float la = run(a, ta);
    int64_t n_past = qhx_session_n_past(a);
    CHECK(n_past > 4);
    qhx_model_free(m); /* the opener's reference; a and b hold theirs */
    qhx_session_reset(a);
    float la2 = run(a, tb);
    CHECK(la == la2);
    CHECK(!memcmp(ta, tb, sizeof ta));
    qhx_session_free(a);
    float lb = run(b, tb); /* the other session, after the first one went too */
    CHECK(lb == la);
    CHECK_EQ(qhx_session_n_past(b), n_past);
    qhx_session_free(b); /* the last reference: the model goes here (ASan: no leak, no UAF) */
}

/* A prompt and a text stream outlive the model too. */
static void test_prompt_and_stream_after_model(void) {
    qhx_error err;
    qhx_model *m = open_model();
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 128;
    qhx_session *s = NULL;
    qhx_prompt *p = NULL;
    qhx_text_stream *ts = NULL;
    qhx_token ids[3] = {1, 2, 3};
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    CHECK_EQ(qhx_prompt_from_ids(m, ids, 3, &p, &err), QHX_OK);
    CHECK_EQ(qhx_text_stream_new(m, &ts, &err), QHX_OK);
    qhx_model_free(m);
    qhx_session_free(s); /* not the last: the prompt and the stream still hold the model */
    const char *t;
    size_t n;
    CHECK_EQ(qhx_text_stream_push(ts, 65, &t, &n, &err), QHX_OK);
    CHECK_EQ(qhx_text_stream_flush(ts, &t, &n, &err), QHX_OK);
    size_t np = 0;
    const qhx_token *pi = qhx_prompt_ids(p, &np);
    CHECK_EQ(np, 3);
    CHECK_EQ(pi[2], 3);
    qhx_text_stream_free(ts);
    qhx_prompt_free(p); /* the last one */
}

/* Freed in the usual order, nothing changes. */
static void test_usual_order(void) {
    qhx_error err;
    qhx_model *m = open_model();
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 64;
    qhx_session *s = NULL;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    qhx_session_free(s);
    CHECK_EQ(qhx_model_n_vocab(m) > 0, 1); /* still the opener's */
    qhx_model_free(m);
}

int main(void) {
    snprintf(fx, sizeof fx, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    test_session_after_model();
    test_prompt_and_stream_after_model();
    test_usual_order();
    return t_done("test_model_lifetime");
}
