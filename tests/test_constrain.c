/* The public constrained-output calls (qhx.h only) on the tiny Qwen3.5 fixture: a generation
 * under a grammar is a sentence of it (greedy and sampled, the text re-checked by a fresh
 * constraint), the greedy fast path gives the masked argmax, masks agree with allows, end
 * tokens only where the grammar may end, QHX_STOP_GRAMMAR under ignore_stop, and the argument
 * errors. */
#include "qhx.h"
#include "t.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct out {
    char text[4096];
    size_t n;
    qhx_token ids[512];
    int n_ids;
} out;

/* Tokenize text and feed it after what s holds (the prompt object). */
static qhx_status feed_text(const qhx_model *m, qhx_session *s, const char *text, size_t len, qhx_error *err) {
    qhx_prompt *p = NULL;
    qhx_status rc = qhx_prompt_from_text(m, text, len, &p, err);
    size_t n = 0;
    qhx_prompt_ids(p, &n);
    if (!rc && n) rc = qhx_session_feed_prompt(s, p, 0, n, err);
    qhx_prompt_free(p);
    return rc;
}

static int on_token(void *user, qhx_token t, const char *text, size_t len) {
    out *o = user;
    if (o->n + len < sizeof o->text) memcpy(o->text + o->n, text, len), o->n += len;
    if (t >= 0 && o->n_ids < 512) o->ids[o->n_ids++] = t;
    return 0;
}

static qhx_status run(qhx_model *m, qhx_grammar *g, float temp, uint64_t seed, int ignore_stop, out *o,
                      qhx_generate_stats *st) {
    qhx_session_params sp = qhx_session_default_params(m);
    sp.sampling.temperature = temp;
    sp.sampling.seed = seed;
    sp.n_ctx = 512;
    qhx_session *s = NULL;
    qhx_constraint *c = NULL;
    qhx_error err = {0};
    qhx_status rc = qhx_session_create(m, &sp, &s, &err);
    if (!rc) rc = qhx_constraint_new(m, g, &c, &err);
    if (!rc) rc = feed_text(m, s, "JSON:", 5, &err);
    memset(o, 0, sizeof *o);
    qhx_generate_params gp = {.max_tokens = 400, .ignore_stop = ignore_stop, .on_token = on_token, .user = o,
                              .constraint = c};
    if (!rc) rc = qhx_session_generate(s, &gp, st, &err);
    if (rc) fprintf(stderr, "run: %s\n", err.msg);
    qhx_constraint_stats cs;
    qhx_constraint_get_stats(c, &cs);
    CHECK(rc || cs.picks >= (uint64_t)o->n_ids);
    qhx_constraint_free(c);
    qhx_session_free(s);
    return rc;
}

/* The text's tokens replayed through a fresh constraint: each allowed in turn, the end reachable. */
static int is_sentence(qhx_model *m, qhx_grammar *g, const out *o) {
    qhx_constraint *c = NULL;
    if (qhx_constraint_new(m, g, &c, NULL)) return 0;
    int ok = 1;
    for (int i = 0; i < o->n_ids && ok; i++) ok = qhx_constraint_allows(c, o->ids[i]) && !qhx_constraint_accept(c, o->ids[i], NULL);
    ok = ok && qhx_constraint_can_end(c);
    qhx_constraint_free(c);
    return ok;
}

int main(void) {
    char fx[1024];
    snprintf(fx, sizeof fx, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    qhx_model *m = NULL;
    qhx_error err = {0};
    if (qhx_model_open(fx, NULL, &m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    static const char schema[] = "{\"type\": \"object\", \"properties\": {\"n\": {\"type\": \"integer\", \"minimum\": 0,"
                                 " \"maximum\": 99}, \"s\": {\"type\": \"string\", \"maxLength\": 5}}, \"required\": [\"n\", \"s\"],"
                                 " \"additionalProperties\": false}";
    qhx_grammar *g = NULL;
    CHECK_EQ(qhx_grammar_from_json_schema(schema, sizeof schema - 1, &g, &err), QHX_OK);
    out o;
    qhx_generate_stats st;
    for (int k = 0; k < 4; k++) {
        CHECK_EQ(run(m, g, k ? 1.5f : 0.0f, (uint64_t)k, 0, &o, &st), QHX_OK);
        CHECK_EQ(st.stop, QHX_STOP_TOKEN);
        CHECK(is_sentence(m, g, &o));
        CHECK(o.n > 0 && o.text[0] == '{');
    }
    /* ignore_stop: no end token may come, the grammar ends it */
    CHECK_EQ(run(m, g, 1.0f, 9, 1, &o, &st), QHX_OK);
    CHECK_EQ(st.stop, QHX_STOP_GRAMMAR);
    CHECK(is_sentence(m, g, &o));

    /* masks: -inf exactly where allows says no; end tokens only at the end */
    qhx_constraint *c = NULL;
    CHECK_EQ(qhx_constraint_new(m, g, &c, &err), QHX_OK);
    int64_t V = qhx_model_n_vocab(m);
    float *lg = malloc((size_t)V * sizeof *lg);
    for (int64_t i = 0; i < V; i++) lg[i] = 0.0f;
    CHECK_EQ(qhx_constraint_mask(c, lg, &err), QHX_OK);
    int64_t bad = 0, allowed = 0;
    for (int64_t i = 0; i < V; i++) {
        int a = qhx_constraint_allows(c, (qhx_token)i);
        bad += a != (lg[i] == 0.0f);
        allowed += a;
        if (qhx_constraint_is_end(c, (qhx_token)i)) CHECK(!a); /* "{" not yet written */
    }
    CHECK_EQ(bad, 0);
    CHECK(allowed > 0 && allowed < V);
    qhx_token brace = -1;
    for (int64_t i = 0; i < V && brace < 0; i++) {
        char t[8];
        size_t n;
        if (!qhx_detokenize(m, (qhx_token[]){(qhx_token)i}, 1, t, sizeof t, &n, NULL) && n == 1 && t[0] == '{') brace = (qhx_token)i;
    }
    CHECK(brace >= 0);
    CHECK_EQ(qhx_constraint_accept(c, brace, &err), QHX_OK);
    CHECK_EQ(qhx_constraint_accept(c, brace, &err), QHX_E_ARG); /* a second '{' cannot come */
    CHECK_CONTAINS(err.msg, "cannot come next");
    CHECK(!qhx_constraint_can_end(c));
    CHECK(qhx_constraint_can_continue(c));
    qhx_constraint_reset(c);
    CHECK(qhx_constraint_allows(c, brace));

    /* a greedy pick equals the argmax of the masked logits */
    qhx_sample_params greedy = {0};
    qhx_sampler_handle *h = NULL;
    CHECK_EQ(qhx_sampler_create(m, &greedy, &h, &err), QHX_OK);
    for (int64_t i = 0; i < V; i++) lg[i] = (float)sin((double)i * 0.37) * 3.0f;
    float *masked = malloc((size_t)V * sizeof *masked);
    memcpy(masked, lg, (size_t)V * sizeof *masked);
    qhx_constraint_mask(c, masked, NULL);
    qhx_token best = 0;
    for (int64_t i = 1; i < V; i++)
        if (masked[i] > masked[best]) best = (qhx_token)i;
    CHECK_EQ(qhx_constraint_pick(c, h, lg, 1, &err), best);
    CHECK_EQ(qhx_constraint_pick(NULL, h, lg, 1, &err), -1);
    /* the former names, deprecated, still make and free the same sampler */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    qhx_sampler_handle *old = NULL;
    CHECK_EQ(qhx_sampler_new(m, &greedy, &old, &err), QHX_OK);
    CHECK(old != NULL);
    CHECK_EQ(qhx_constraint_pick(c, old, lg, 1, &err), best);
    qhx_sampler_delete(old);
    qhx_sampler_delete(NULL);
#pragma GCC diagnostic pop
    qhx_sampler_free(h);
    qhx_sampler_free(NULL);
    free(masked);
    free(lg);
    qhx_constraint_free(c);

    /* errors */
    CHECK_EQ(qhx_constraint_new(m, NULL, &c, &err), QHX_E_ARG);
    CHECK(c == NULL);
    qhx_grammar *g2 = NULL;
    CHECK_EQ(qhx_grammar_parse("root ::= \"a", 11, NULL, &g2, &err), QHX_E_FORMAT);
    CHECK(g2 == NULL);
    /* no sentence at all: refused before any constraint exists, with the reason */
    CHECK_EQ(qhx_grammar_parse("root ::= []", 11, NULL, &g2, &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "no text matches the grammar");
    CHECK_EQ(qhx_grammar_from_json_schema("false", 5, &g2, &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "the schema is false");
    CHECK(g2 == NULL);
    /* a boolean schema: any JSON value, and a generation under it is one */
    CHECK_EQ(qhx_grammar_from_json_schema("true", 4, &g2, &err), QHX_OK);
    CHECK_EQ(run(m, g2, 1.0f, 3, 1, &o, &st), QHX_OK);
    CHECK(st.stop == QHX_STOP_GRAMMAR || st.stop == QHX_STOP_LENGTH);
    if (st.stop == QHX_STOP_GRAMMAR) CHECK(is_sentence(m, g2, &o));
    qhx_grammar_free(g2);
    g2 = NULL;
    CHECK_EQ(qhx_grammar_from_json_schema("{\"not\": {}}", 11, NULL, &err), QHX_E_ARG);
    qhx_grammar *bad_g = (qhx_grammar *)1;
    CHECK_EQ(qhx_grammar_from_json_schema("{\"not\": {}}", 11, &bad_g, &err), QHX_E_UNSUPPORTED);
    CHECK(bad_g == NULL);
    qhx_grammar_free(NULL);
    qhx_constraint_free(NULL);
    qhx_grammar_free(g);
    qhx_model_free(m);
    return t_done("test_constrain");
}
