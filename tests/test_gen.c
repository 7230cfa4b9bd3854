/* The generation step every front end runs (runtime/gen.c): stop strings across text pieces
 * (qhx_stop_matcher), the public decoder against qhx_session_generate on the tiny Qwen3.5
 * fixture (the same tokens, the same stop reasons: length, stop string, end of turn, a caller's
 * stop id), and a
 * session restored after each stop reason. */
#include "t.h"
#include "core/alloc.h"
#include "qhx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the stop matcher ------------------------------------------------------------------------ */

/* push pieces; out gets the final text, returns the index of the piece that completed a stop
 * string (-1: none) */
static int feed(qhx_stop_matcher *sm, const char *const *pieces, int n, char *out, size_t cap) {
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        const char *t;
        size_t len;
        int r = qhx_stop_matcher_push(sm, pieces[i], strlen(pieces[i]), &t, &len);
        CHECK(r >= 0);
        strncat(out, t, len < cap - strlen(out) - 1 ? len : cap - strlen(out) - 1);
        if (r == 1) return i;
    }
    const char *t;
    size_t len;
    CHECK_EQ(qhx_stop_matcher_finish(sm, &t, &len), 0);
    strncat(out, t, len < cap - strlen(out) - 1 ? len : cap - strlen(out) - 1);
    return -1;
}

static void test_matcher(void) {
    qhx_error err = {0};
    char out[256];
    const char *stops[] = {"o w", "zzz"};
    qhx_stop_matcher *sm = NULL;
    CHECK_EQ(qhx_stop_matcher_create(stops, 2, &sm, &err), QHX_OK);
    const char *a[] = {"Hel", "lo ", "world", "!"};
    CHECK_EQ(feed(sm, a, 4, out, sizeof out), 2); /* completed by "world", across three pieces */
    CHECK_STR(out, "Hell");
    const char *t;
    size_t len;
    CHECK_EQ(qhx_stop_matcher_push(sm, "more", 4, &t, &len), 1); /* nothing after a match */
    CHECK_EQ(len, 0);
    qhx_stop_matcher_free(sm);

    /* a possible start is held, then given when it turns out not to be one */
    CHECK_EQ(qhx_stop_matcher_create(stops, 2, &sm, &err), QHX_OK);
    CHECK_EQ(qhx_stop_matcher_push(sm, "ab zz", 5, &t, &len), 0);
    CHECK(len == 3 && !memcmp(t, "ab ", 3));
    CHECK_EQ(qhx_stop_matcher_push(sm, "y", 1, &t, &len), 0);
    CHECK(len == 3 && !memcmp(t, "zzy", 3));
    CHECK_EQ(qhx_stop_matcher_push(sm, "zz", 2, &t, &len), 0);
    CHECK_EQ(len, 0);
    CHECK_EQ(qhx_stop_matcher_finish(sm, &t, &len), 0); /* the end: the held "zz" is text */
    CHECK(len == 2 && !memcmp(t, "zz", 2));
    qhx_stop_matcher_free(sm);

    /* the earliest match wins, whichever string it is */
    const char *two[] = {"cd", "b"};
    CHECK_EQ(qhx_stop_matcher_create(two, 2, &sm, &err), QHX_OK);
    const char *b[] = {"abcd"};
    CHECK_EQ(feed(sm, b, 1, out, sizeof out), 0);
    CHECK_STR(out, "a");
    qhx_stop_matcher_free(sm);

    /* no strings: text passes as it is; bad lists are refused */
    CHECK_EQ(qhx_stop_matcher_create(NULL, 0, &sm, &err), QHX_OK);
    const char *c[] = {"x", "y"};
    CHECK_EQ(feed(sm, c, 2, out, sizeof out), -1);
    CHECK_STR(out, "xy");
    qhx_stop_matcher_free(sm);
    const char *empty[] = {"ok", ""};
    CHECK_EQ(qhx_stop_matcher_create(empty, 2, &sm, &err), QHX_E_ARG);
    CHECK(sm == NULL);
    CHECK_EQ(qhx_stop_matcher_create(NULL, 3, &sm, &err), QHX_E_ARG);
    qhx_stop_matcher_free(NULL);
}

/* ---- the decoder against the session's generate ---------------------------------------------- */

typedef struct got {
    qhx_token ids[256];
    int n;
    char text[4096];
} got;

static int on_token(void *user, qhx_token t, const char *text, size_t len) {
    got *g = user;
    if (t >= 0 && g->n < 256) g->ids[g->n++] = t;
    strncat(g->text, text, len < sizeof g->text - strlen(g->text) - 1 ? len : sizeof g->text - strlen(g->text) - 1);
    return 0;
}

static qhx_model *open_fixture(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    qhx_model_params mp = qhx_model_default_params();
    qhx_model *m = NULL;
    qhx_error err = {0};
    if (qhx_model_open(path, &mp, &m, &err)) fprintf(stderr, "%s: %s\n", path, err.msg);
    return m;
}

static qhx_session *session_with_prompt(qhx_model *m, const qhx_token *ids, size_t n) {
    qhx_error err = {0};
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 256;
    qhx_session *s = NULL;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    if (s) CHECK_EQ(qhx_session_feed(s, ids, n, &err), QHX_OK);
    return s;
}

/* The answer the decoder gives, stepped by hand as a server does. */
static qhx_stop_reason decode(qhx_model *m, const qhx_token *ids, size_t n, const qhx_decoder_params *dp, got *g) {
    qhx_error err = {0};
    qhx_session *s = session_with_prompt(m, ids, n);
    qhx_decoder *d = NULL;
    CHECK_EQ(qhx_decoder_create(m, dp, &d, &err), QHX_OK);
    qhx_decoder_push(d, ids, n);
    qhx_stop_reason why = QHX_STOP_LENGTH;
    for (int k = 0; s && d && k < 300; k++) {
        qhx_decoder_step st;
        CHECK_EQ(qhx_decoder_next(d, qhx_session_logits(s), &st, &err), QHX_OK);
        if (st.report) on_token(g, st.token, st.text, st.len);
        if (!st.feed) {
            why = st.stop;
            break;
        }
        CHECK_EQ(qhx_sessions_decode(&s, &st.token, 1, NULL, &err), QHX_OK);
    }
    const char *t;
    size_t len;
    CHECK_EQ(qhx_decoder_finish(d, &t, &len, &err), QHX_OK);
    on_token(g, -1, t, len);
    qhx_decoder_step st;
    CHECK_EQ(qhx_decoder_next(d, qhx_session_logits(s), &st, &err), QHX_E_ARG); /* the answer has ended */
    qhx_decoder_free(d);
    qhx_session_free(s);
    return why;
}

static qhx_stop_reason generate(qhx_model *m, const qhx_token *ids, size_t n, qhx_generate_params gp, got *g,
                                qhx_generate_stats *st) {
    qhx_error err = {0};
    qhx_session *s = session_with_prompt(m, ids, n);
    gp.on_token = on_token;
    gp.user = g;
    CHECK_EQ(qhx_session_generate(s, &gp, st, &err), QHX_OK);
    qhx_stop_reason why = qhx_session_last_stop(s);
    CHECK_EQ(why, st->stop);
    qhx_session_free(s);
    return why;
}

static void test_decoder(void) {
    qhx_model *m = open_fixture();
    CHECK(m != NULL);
    if (!m) return;
    qhx_error err = {0};
    qhx_token ids[64];
    size_t n = 0;
    CHECK_EQ(qhx_tokenize(m, "Once upon a time", 16, ids, 64, &n, &err), QHX_OK);

    /* greedy, to the length: the same tokens and text both ways */
    got a = {0}, b = {0};
    qhx_generate_stats st;
    qhx_generate_params gp = {.max_tokens = 24, .ignore_stop = 1};
    qhx_decoder_params dp = {.sampling = qhx_session_default_params(m).sampling, .max_tokens = 24, .ignore_stop = 1};
    CHECK_EQ(generate(m, ids, n, gp, &a, &st), QHX_STOP_LENGTH);
    CHECK_EQ(decode(m, ids, n, &dp, &b), QHX_STOP_LENGTH);
    CHECK_EQ(a.n, 24);
    CHECK_EQ(b.n, 24);
    CHECK(!memcmp(a.ids, b.ids, sizeof a.ids[0] * 24));
    CHECK_STR(a.text, b.text);

    /* a stop string from the middle of that text: cut there both ways, QHX_STOP_STRING */
    size_t tl = strlen(a.text);
    CHECK(tl > 8);
    char stop[8] = {0};
    memcpy(stop, a.text + tl / 2, 3);
    const char *stops[] = {stop};
    const char *cut = strstr(a.text, stop);
    size_t want = (size_t)(cut - a.text);
    got c = {0}, d = {0};
    gp.stops = stops;
    gp.n_stops = 1;
    dp.stops = stops;
    dp.n_stops = 1;
    CHECK_EQ(generate(m, ids, n, gp, &c, &st), QHX_STOP_STRING);
    CHECK_EQ(decode(m, ids, n, &dp, &d), QHX_STOP_STRING);
    CHECK_EQ(strlen(c.text), want);
    CHECK(!strncmp(c.text, a.text, want));
    CHECK_STR(c.text, d.text);
    CHECK_EQ(c.n, d.n);
    CHECK(c.n < 24 && st.n_generated == c.n);

    /* the end of turn as a stop token, when it is the greedy pick: not reported either way */
    qhx_chat_markers mk;
    qhx_model_chat_markers(m, &mk);
    qhx_token te = qhx_model_token_id(m, mk.turn_end);
    CHECK(te >= 0);
    got e = {0}, f = {0};
    qhx_generate_params gp2 = {.max_tokens = 24, .stop_at_turn_end = 1};
    qhx_decoder_params dp2 = {.sampling = dp.sampling, .max_tokens = 24, .stop_at_turn_end = 1};
    qhx_stop_reason r1 = generate(m, ids, n, gp2, &e, &st), r2 = decode(m, ids, n, &dp2, &f);
    CHECK_EQ(r1, r2);
    CHECK_EQ(e.n, f.n);
    CHECK_STR(e.text, f.text);
    for (int k = 0; k < e.n; k++) CHECK(e.ids[k] != te && !qhx_model_is_stop(m, e.ids[k]));

    /* a caller's stop id, the greedy answer's 6th token, under ignore_stop: the answer ends
     * before its first occurrence both ways, QHX_STOP_TOKEN, the token not reported */
    const qhx_token sid = a.ids[5];
    int first = 0;
    while (a.ids[first] != sid) first++;
    got g = {0}, h = {0};
    qhx_generate_params gp3 = {.max_tokens = 24, .ignore_stop = 1, .stop_ids = &sid, .n_stop_ids = 1};
    qhx_decoder_params dp3 = {.sampling = dp.sampling, .max_tokens = 24, .ignore_stop = 1, .stop_ids = &sid,
                              .n_stop_ids = 1};
    CHECK_EQ(generate(m, ids, n, gp3, &g, &st), QHX_STOP_TOKEN);
    CHECK_EQ(decode(m, ids, n, &dp3, &h), QHX_STOP_TOKEN);
    CHECK_EQ(g.n, first);
    CHECK_EQ(h.n, first);
    CHECK(!memcmp(g.ids, a.ids, sizeof a.ids[0] * (size_t)first));
    CHECK_STR(g.text, h.text);

    /* bad parameters */
    qhx_decoder *x = NULL;
    qhx_decoder_params bad = dp;
    const qhx_token outside = (qhx_token)qhx_model_n_vocab(m);
    bad.stop_ids = &outside;
    bad.n_stop_ids = 1;
    CHECK_EQ(qhx_decoder_create(m, &bad, &x, &err), QHX_E_ARG);
    bad.stop_ids = NULL;
    CHECK_EQ(qhx_decoder_create(m, &bad, &x, &err), QHX_E_ARG);
    bad = dp;
    bad.max_tokens = 0;
    CHECK_EQ(qhx_decoder_create(m, &bad, &x, &err), QHX_E_ARG);
    CHECK(x == NULL);
    qhx_decoder_free(NULL);
    qhx_model_free(m);
}

/* A session saved after a stop string (and after a grammar's end) restores. */
static void test_restore_after_stop(void) {
    qhx_model *m = open_fixture();
    if (!m) return;
    qhx_error err = {0};
    qhx_token ids[64];
    size_t n = 0;
    CHECK_EQ(qhx_tokenize(m, "Once upon a time", 16, ids, 64, &n, &err), QHX_OK);
    qhx_session *s = session_with_prompt(m, ids, n);
    got g = {0};
    qhx_generate_params gp = {.max_tokens = 24, .ignore_stop = 1, .on_token = on_token, .user = &g};
    qhx_generate_stats st;
    CHECK_EQ(qhx_session_generate(s, &gp, &st, &err), QHX_OK);
    char stop[8] = {0};
    memcpy(stop, g.text + strlen(g.text) / 2, 2);
    const char *stops[] = {stop};
    qhx_session_reset(s);
    CHECK_EQ(qhx_session_feed(s, ids, n, &err), QHX_OK);
    got h = {0};
    gp.user = &h;
    gp.stops = stops;
    gp.n_stops = 1;
    CHECK_EQ(qhx_session_generate(s, &gp, &st, &err), QHX_OK);
    CHECK_EQ(qhx_session_last_stop(s), QHX_STOP_STRING);
    char path[] = "/tmp/qhx_test_gen_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd >= 0) {
        close(fd);
        CHECK_EQ(qhx_session_save(s, path, &err), QHX_OK);
        qhx_session *r = session_with_prompt(m, ids, 1);
        CHECK_EQ(qhx_session_restore(r, path, &err), QHX_OK);
        CHECK_EQ(qhx_session_last_stop(r), QHX_STOP_STRING);
        qhx_session_free(r);
        remove(path);
    }
    qhx_session_free(s);
    qhx_model_free(m);
}

/* Every allocation of a decoder's life failing in turn: a clean error (or a shorter answer
 * ending in QHX_E_NOMEM), never a crash or a leak (ASan). */
static void test_alloc_failures(void) {
    qhx_model *m = open_fixture();
    if (!m) return;
    qhx_error err = {0};
    qhx_token ids[64];
    size_t n = 0;
    CHECK_EQ(qhx_tokenize(m, "Once upon a time", 16, ids, 64, &n, &err), QHX_OK);
    qhx_session *s = session_with_prompt(m, ids, n);
    const char *stops[] = {"zq", "e t"};
    qhx_decoder_params dp = {.sampling = qhx_session_default_params(m).sampling, .max_tokens = 6, .ignore_stop = 1,
                             .stops = stops, .n_stops = 2};
    int clean = 0;
    for (int64_t k = 0; k < 400 && clean < 3; k++) {
        qhx_alloc_fail_after(k);
        qhx_decoder *d = NULL;
        qhx_status rc = qhx_decoder_create(m, &dp, &d, &err);
        for (int i = 0; rc == QHX_OK && i < 6; i++) {
            qhx_decoder_step st;
            rc = qhx_decoder_next(d, qhx_session_logits(s), &st, &err);
            if (rc == QHX_OK && !st.feed) break;
        }
        const char *t;
        size_t len;
        if (d && rc == QHX_OK) rc = qhx_decoder_finish(d, &t, &len, &err);
        bool failed = qhx_alloc_failed();
        qhx_alloc_fail_after(-1);
        CHECK(rc == QHX_OK || rc == QHX_E_NOMEM);
        if (rc) CHECK(d == NULL || failed);
        clean += !failed;
        qhx_decoder_free(d);
    }
    CHECK(clean >= 1); /* the sweep reached a run with no failure */
    qhx_session_free(s);
    qhx_model_free(m);
}

int main(void) {
    test_alloc_failures();
    test_matcher();
    test_decoder();
    test_restore_after_stop();
    return t_done("test_gen");
}
