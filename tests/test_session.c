// ctest-labels: unit;golden
/* The public session API (qhx.h only): sampling determinism across seeds and thread counts,
 * stop conditions, context overflow, multi-turn state reuse, save/restore equality, and the
 * two prompt paths agreeing. */
#include "qhx.h"
#include "t.h"

/* the former chat calls (deprecated wrappers over the prompt object) are what this test exercises */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fx[1024];

typedef struct collect {
    qhx_token ids[512];
    int n;
    int stop_after; /* callback stops after this many (0: never) */
} collect;

static int on_token(void *user, qhx_token t, const char *text, size_t len) {
    (void)text;
    (void)len;
    collect *c = user;
    if (t < 0) return 0; /* trailing text */
    if (c->n < 512) c->ids[c->n++] = t;
    return c->stop_after && c->n >= c->stop_after;
}

static qhx_model *open_model(int threads) {
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = threads;
    qhx_model *m = NULL;
    qhx_error err;
    if (qhx_model_open(fx, &mp, &m, &err)) fprintf(stderr, "%s\n", err.msg);
    return m;
}

static qhx_session *new_session(qhx_model *m, int64_t n_ctx, qhx_sample_params sp) {
    qhx_session_params p = qhx_session_default_params(m);
    p.n_ctx = n_ctx;
    p.sampling = sp;
    qhx_session *s = NULL;
    qhx_error err;
    if (qhx_session_create(m, &p, &s, &err)) fprintf(stderr, "%s\n", err.msg);
    return s;
}

static const qhx_token PROMPT[] = {961, 82, 198, 40, 179, 264, 415, 13, 962, 198, 961, 77, 198};
#define N_PROMPT ((size_t)(sizeof PROMPT / sizeof PROMPT[0]))

/* Generate n tokens after PROMPT with sampling sp; returns the count. */
static int run(qhx_model *m, qhx_sample_params sp, int n, int ignore_stop, qhx_token *out) {
    qhx_session *s = new_session(m, 256, sp);
    qhx_error err;
    collect c = {.n = 0};
    CHECK_EQ(qhx_session_feed(s, PROMPT, N_PROMPT, &err), QHX_OK);
    qhx_generate_params gp = {.max_tokens = n, .ignore_stop = ignore_stop, .on_token = on_token, .user = &c};
    CHECK_EQ(qhx_session_generate(s, &gp, NULL, &err), QHX_OK);
    memcpy(out, c.ids, (size_t)c.n * sizeof *out);
    qhx_session_free(s);
    return c.n;
}

static void test_sampling_determinism(void) {
    qhx_model *m1 = open_model(1), *m2 = open_model(2);
    CHECK(m1 && m2);
    if (!m1 || !m2) return;
    qhx_sample_params sp = {.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .min_p = 0.02f,
                            .repeat_penalty = 1.1f, .seed = 1234};
    qhx_token a[64], b[64], c[64];
    int na = run(m1, sp, 48, 1, a), nb = run(m2, sp, 48, 1, b);
    CHECK_EQ(na, 48);
    CHECK_EQ(nb, 48);
    CHECK(memcmp(a, b, sizeof(qhx_token) * 48) == 0); /* same seed, 1 vs 2 threads */
    sp.seed = 99;
    run(m1, sp, 48, 1, c);
    CHECK(memcmp(a, c, sizeof(qhx_token) * 48) != 0); /* another seed, another text */
    qhx_model_free(m1);
    qhx_model_free(m2);
}

static void test_stops_and_limits(void) {
    qhx_model *m = open_model(1);
    if (!m) return;
    qhx_error err;
    qhx_sample_params greedy = {0};
    /* greedy run without stops: find a position, then make that token a stop by ignore_stop = 0
     * only if the plan lists it; here: the callback stop and the length stop */
    qhx_session *s = new_session(m, 64, greedy);
    collect c = {.stop_after = 3};
    qhx_generate_stats st;
    CHECK_EQ(qhx_session_feed(s, PROMPT, N_PROMPT, &err), QHX_OK);
    qhx_generate_params gp = {.max_tokens = 10, .ignore_stop = 1, .on_token = on_token, .user = &c};
    CHECK_EQ(qhx_session_generate(s, &gp, &st, &err), QHX_OK);
    CHECK_EQ(c.n, 3);
    CHECK_EQ(st.stop, QHX_STOP_CALLBACK);
    CHECK_EQ(qhx_session_last_stop(s), QHX_STOP_CALLBACK);
    /* context overflow: a clear error before anything is generated */
    int64_t room = qhx_session_n_ctx(s) - qhx_session_n_past(s);
    collect c2 = {0};
    gp.max_tokens = room + 1;
    gp.user = &c2;
    CHECK_EQ(qhx_session_generate(s, &gp, NULL, &err), QHX_E_LIMIT);
    CHECK_CONTAINS(err.msg, "would pass the context");
    CHECK_EQ(c2.n, 0);
    qhx_token big[80] = {0};
    CHECK_EQ(qhx_session_feed(s, big, 80, &err), QHX_E_LIMIT);
    CHECK_CONTAINS(err.msg, "context full");
    qhx_token bad = 1 << 20;
    CHECK_EQ(qhx_session_feed(s, &bad, 1, &err), QHX_E_ARG);
    qhx_session_free(s);
    /* the plan's stop ids end generation (tiny fixture: <|im_end|> = 962, <|endoftext|> = 960) */
    CHECK(qhx_model_is_stop(m, 960) || qhx_model_is_stop(m, 962));
    CHECK(!qhx_model_is_stop(m, 5));
    qhx_model_free(m);
}

/* Feeding a conversation turn by turn equals feeding it whole: the state carries over. */
static void test_chat_state_reuse(void) {
    qhx_model *m = open_model(1);
    if (!m) return;
    qhx_error err;
    qhx_sample_params greedy = {0};
    qhx_session *a = new_session(m, 256, greedy), *b = new_session(m, 256, greedy);
    qhx_token gen[8];
    collect c = {0};
    CHECK_EQ(qhx_session_feed(a, PROMPT, N_PROMPT, &err), QHX_OK);
    qhx_generate_params gp = {.max_tokens = 8, .ignore_stop = 1, .on_token = on_token, .user = &c};
    CHECK_EQ(qhx_session_generate(a, &gp, NULL, &err), QHX_OK);
    memcpy(gen, c.ids, sizeof gen);
    static const qhx_token turn2[] = {962, 198, 961, 82, 198, 100, 200, 962, 198, 961, 77, 198};
    CHECK_EQ(qhx_session_feed(a, turn2, sizeof turn2 / sizeof turn2[0], &err), QHX_OK);
    /* b: the whole history in one prompt (the last generated token was pending in a) */
    qhx_token all[64];
    size_t n = 0;
    memcpy(all + n, PROMPT, sizeof PROMPT), n += N_PROMPT;
    memcpy(all + n, gen, sizeof gen), n += 8;
    memcpy(all + n, turn2, sizeof turn2), n += sizeof turn2 / sizeof turn2[0];
    CHECK_EQ(qhx_session_feed(b, all, n, &err), QHX_OK);
    CHECK_EQ(qhx_session_n_past(a), qhx_session_n_past(b));
    const float *la = qhx_session_logits(a), *lb = qhx_session_logits(b);
    double worst = 0;
    for (int64_t i = 0; i < qhx_model_n_vocab(m); i++) worst = fmax(worst, fabs(la[i] - lb[i]));
    CHECK(worst < 1e-4); /* prompt path vs decode path: float32 noise */
    qhx_session_free(a);
    qhx_session_free(b);
    qhx_model_free(m);
}

/* Save mid-conversation, continue; restore into a fresh session, continue: same tokens. */
static void test_save_restore(void) {
    qhx_model *m = open_model(1);
    if (!m) return;
    qhx_error err;
    qhx_sample_params sp = {.temperature = 0.8f, .top_k = 20, .seed = 5};
    char path[] = "/tmp/qhx_state_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    qhx_session *s = new_session(m, 128, sp);
    CHECK_EQ(qhx_session_feed(s, PROMPT, N_PROMPT, &err), QHX_OK);
    collect c1 = {0}, c2 = {0}, c3 = {0};
    qhx_generate_params gp = {.max_tokens = 6, .ignore_stop = 1, .on_token = on_token, .user = &c1};
    CHECK_EQ(qhx_session_generate(s, &gp, NULL, &err), QHX_OK);
    CHECK_EQ(qhx_session_save(s, path, &err), QHX_OK);
    gp.user = &c2;
    CHECK_EQ(qhx_session_generate(s, &gp, NULL, &err), QHX_OK); /* uninterrupted */
    qhx_session *r = new_session(m, 128, sp);
    CHECK_EQ(qhx_session_restore(r, path, &err), QHX_OK);
    CHECK_EQ(qhx_session_n_past(r), qhx_session_n_past(s) - 6);
    gp.user = &c3;
    CHECK_EQ(qhx_session_generate(r, &gp, NULL, &err), QHX_OK); /* restored */
    CHECK_EQ(c2.n, 6);
    CHECK(c2.n == c3.n && memcmp(c2.ids, c3.ids, sizeof(qhx_token) * 6) == 0);
    /* refusals: another context size, a corrupt byte, a truncated file; r stays usable */
    qhx_session *other = new_session(m, 64, sp);
    CHECK_EQ(qhx_session_restore(other, path, &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "context");
    FILE *f = fopen(path, "r+b");
    fseek(f, 100, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, 100, SEEK_SET);
    fputc(ch ^ 0x55, f);
    fclose(f);
    int64_t before = qhx_session_n_past(r);
    CHECK_EQ(qhx_session_restore(r, path, &err), QHX_E_FORMAT);
    CHECK_CONTAINS(err.msg, "checksum");
    CHECK_EQ(qhx_session_n_past(r), before);
    CHECK(truncate(path, 50) == 0);
    CHECK_EQ(qhx_session_restore(r, path, &err), QHX_E_FORMAT);
    CHECK_EQ(qhx_session_restore(r, "/nonexistent/state", &err), QHX_E_IO);
    unlink(path);
    qhx_session_free(other);
    qhx_session_free(r);
    qhx_session_free(s);
    qhx_model_free(m);
}

/* A model opened with its multi-token-prediction block (mtp 1) or without; kv: the cache type. */
static qhx_model *open_model_mtp(int mtp, qhx_kv_type kv) {
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = 1;
    mp.mtp = mtp;
    mp.kv_cache = kv;
    qhx_model *m = NULL;
    qhx_error err;
    if (qhx_model_open(fx, &mp, &m, &err)) fprintf(stderr, "%s\n", err.msg);
    return m;
}

static qhx_session *greedy_session(qhx_model *m, int64_t n_ctx, int spec_draft) {
    qhx_session_params p = qhx_session_default_params(m);
    p.n_ctx = n_ctx;
    p.sampling = (qhx_sample_params){0};
    p.spec_draft = spec_draft;
    qhx_session *s = NULL;
    qhx_error err;
    if (qhx_session_create(m, &p, &s, &err)) fprintf(stderr, "%s\n", err.msg);
    return s;
}

/* Generate n greedy tokens into c (reset first); the stats into st. */
static void gen_into(qhx_session *s, int n, collect *c, qhx_generate_stats *st) {
    qhx_error err;
    *c = (collect){0};
    qhx_generate_params gp = {.max_tokens = n, .ignore_stop = 1, .on_token = on_token, .user = c};
    CHECK_EQ(qhx_session_generate(s, &gp, st, &err), QHX_OK);
    CHECK_EQ(c->n, n);
}

/* A session file does not depend on speculative decoding (docs/robustness.md, "Session files"):
 * saved from a session with the MTP block (spec_draft 3) it loads into one without it, and the
 * reverse, and both go on with the tokens the saving session gives. The restored speculating
 * session decodes without drafts (the block's cache is not in the file) until it is reset, then
 * drafts again. What must match still does: another KV type, another context, another model. */
static void test_save_restore_spec(void) {
    qhx_model *spec_m = open_model_mtp(1, QHX_KV_DEFAULT), *plain_m = open_model_mtp(0, QHX_KV_DEFAULT);
    CHECK(spec_m && plain_m);
    if (!spec_m || !plain_m) goto out;
    qhx_error err;
    char p_spec[] = "/tmp/qhx_spec_XXXXXX", p_plain[] = "/tmp/qhx_plain_XXXXXX";
    int fd1 = mkstemp(p_spec), fd2 = mkstemp(p_plain);
    CHECK(fd1 >= 0 && fd2 >= 0);
    close(fd1);
    close(fd2);
    collect first, rest, got;
    qhx_generate_stats st;
    for (int dir = 0; dir < 2; dir++) { /* 0: saved with speculation, loaded without; 1: the reverse */
        qhx_model *from = dir ? plain_m : spec_m, *to = dir ? spec_m : plain_m;
        const char *path = dir ? p_plain : p_spec;
        qhx_session *s = greedy_session(from, 128, dir ? 0 : 3);
        CHECK_EQ(qhx_session_feed(s, PROMPT, N_PROMPT, &err), QHX_OK);
        gen_into(s, 6, &first, &st);
        CHECK_EQ(qhx_session_save(s, path, &err), QHX_OK);
        const int64_t saved_at = qhx_session_n_past(s);
        gen_into(s, 8, &rest, &st); /* what the saving session gives next */
        qhx_session *r = greedy_session(to, 128, dir ? 3 : 0);
        CHECK_EQ(qhx_session_restore(r, path, &err), QHX_OK);
        CHECK_EQ(qhx_session_n_past(r), saved_at);
        gen_into(r, 8, &got, &st);
        CHECK(memcmp(got.ids, rest.ids, sizeof(qhx_token) * 8) == 0);
        if (dir == 1) { /* restored into a speculating session: cold until a reset */
            CHECK_EQ(st.n_drafted, 0);
            qhx_session_reset(r);
            CHECK_EQ(qhx_session_feed(r, PROMPT, N_PROMPT, &err), QHX_OK);
            gen_into(r, 8, &got, &st);
            CHECK(st.n_drafted > 0);
            CHECK(memcmp(got.ids, first.ids, sizeof(qhx_token) * 6) == 0);
        }
        /* what must match still does, with or without the block */
        qhx_session *small = greedy_session(to, 64, dir ? 3 : 0);
        CHECK_EQ(qhx_session_restore(small, path, &err), QHX_E_FORMAT);
        CHECK_CONTAINS(err.msg, "context");
        qhx_session_free(small);
        qhx_session_free(r);
        qhx_session_free(s);
    }
    /* another KV element type, the block loaded or not: refused by name */
    for (int mtp = 0; mtp < 2; mtp++) {
        qhx_model *q8 = open_model_mtp(mtp, QHX_KV_Q8);
        CHECK(q8 != NULL);
        if (!q8) continue;
        qhx_session *r = greedy_session(q8, 128, mtp ? 3 : 0);
        CHECK_EQ(qhx_session_restore(r, mtp ? p_plain : p_spec, &err), QHX_E_FORMAT);
        CHECK_CONTAINS(err.msg, "KV cache");
        qhx_session_free(r);
        qhx_model_free(q8);
    }
    /* another model of the same shapes (the bf16 fixture) stays refused with the block loaded */
    char other[1100];
    snprintf(other, sizeof other, "%s/fixtures/parity/qwen35-tiny-bf16", QHX_DATA_DIR);
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = 1;
    mp.mtp = 1;
    qhx_model *om = NULL;
    if (qhx_model_open(other, &mp, &om, &err) == QHX_OK) {
        qhx_session *r = greedy_session(om, 128, 3);
        CHECK_EQ(qhx_session_restore(r, p_spec, &err), QHX_E_FORMAT);
        CHECK_CONTAINS(err.msg, "different model");
        qhx_session_free(r);
        qhx_model_free(om);
    }
    unlink(p_spec);
    unlink(p_plain);
out:
    qhx_model_free(spec_m);
    qhx_model_free(plain_m);
}

/* The chunked prompt path and decode-over-prompt (the seed's way) agree. */
static void test_prefill_modes(void) {
    qhx_model *m = open_model(1);
    if (!m) return;
    qhx_error err;
    qhx_session_params p = qhx_session_default_params(m);
    p.n_ctx = 64;
    qhx_session *a, *b;
    CHECK_EQ(qhx_session_create(m, &p, &a, &err), QHX_OK);
    p.prefill = QHX_PREFILL_DECODE;
    CHECK_EQ(qhx_session_create(m, &p, &b, &err), QHX_OK);
    CHECK_EQ(qhx_session_feed(a, PROMPT, N_PROMPT, &err), QHX_OK);
    CHECK_EQ(qhx_session_feed(b, PROMPT, N_PROMPT, &err), QHX_OK);
    double worst = 0;
    for (int64_t i = 0; i < qhx_model_n_vocab(m); i++)
        worst = fmax(worst, fabs(qhx_session_logits(a)[i] - qhx_session_logits(b)[i]));
    CHECK(worst < 1e-4);
    qhx_session_free(a);
    qhx_session_free(b);
    qhx_model_free(m);
}

static void test_text_api(void) {
    qhx_model *m = open_model(1);
    if (!m) return;
    qhx_error err;
    qhx_token ids[64];
    size_t n = 0;
    CHECK_EQ(qhx_tokenize(m, "Hello world", 11, ids, 64, &n, &err), QHX_OK);
    CHECK(n > 0);
    size_t need = 0;
    CHECK_EQ(qhx_tokenize(m, "Hello world", 11, NULL, 0, &need, &err), QHX_E_LIMIT);
    CHECK_EQ(need, n);
    char buf[64];
    size_t len = 0;
    CHECK_EQ(qhx_detokenize(m, ids, n, buf, sizeof buf, &len, &err), QHX_OK);
    CHECK_STR(buf, "Hello world");
    qhx_chat_msg msgs[] = {{"system", "Be brief."}, {"user", "Hi"}};
    char chat[512];
    CHECK_EQ(qhx_chat_format(m, msgs, 2, 1, 0, chat, sizeof chat, &len, &err), QHX_OK);
    CHECK_STR(chat, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    /* the prompt object writes that text (qhx_chat_format is its wrapper) */
    qhx_chat_turn turns[] = {{.role = "system", .content = "Be brief."}, {.role = "user", .content = "Hi"}};
    qhx_chat_spec spec = {.turns = turns, .n_turns = 2, .render_only = 1};
    qhx_prompt *p = NULL;
    CHECK_EQ(qhx_prompt_from_chat(m, &spec, &p, &err), QHX_OK);
    CHECK_STR(qhx_prompt_text(p, NULL), chat);
    qhx_prompt_free(p);
    CHECK_EQ(qhx_model_token_id(m, "<|im_end|>"), 962);
    CHECK_STR(qhx_model_family_name(m), "qwen3_5");
    CHECK(qhx_tokenize(m, "\xff", 1, ids, 64, &n, &err) != QHX_OK); /* invalid UTF-8 */
    qhx_model_free(m);
}

int main(void) {
    snprintf(fx, sizeof fx, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    test_sampling_determinism();
    test_stops_and_limits();
    test_chat_state_reuse();
    test_save_restore();
    test_save_restore_spec();
    test_prefill_modes();
    test_text_api();
    return t_done("test_session");
}
