/* Speculative decoding with the MTP block (runtime/spec.h), on every Qwen3.5 text fixture (their
 * mtp.* blocks have random weights: drafts are mostly refused, which exercises the cut-back) and
 * the trained demo model (models/shakespeare: drafts mostly kept):
 *   - the verify graph: n tokens in one call give logits and hidden rows bit-identical to n
 *     one-token decode steps, and keeping the first k then decoding on gives the bits of a
 *     sequence that never saw the rest (recurrent state restored from the snapshots);
 *   - greedy generation with speculation equals generation without it, token for token, for
 *     fixed draft lengths 1 .. 8 and the adaptive rule, with and without a repetition penalty;
 *   - a callback that stops the generation inside a speculative step leaves the session where
 *     token-by-token decoding leaves it (the next generate continues identically);
 *   - on the demo model the trained block's drafts are accepted often (a block fed the wrong
 *     hidden rows or positions would be right only by chance);
 *   - the front-end form (qhx_session_spec_step / _cut, what qhx serve drives) gives the plain
 *     greedy tokens too, also when every step is cut back to its first token;
 *   - refusals: a model opened without its block, a draft length out of range. */
#include "runtime/model.h"
#include "runtime/session_impl.h"
#include "t.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NGEN 40

typedef struct last_rows {
    int64_t layer, H;
    float *rows; /* (n, H) by position */
} last_rows;

static void keep_last(void *user, int64_t layer, int64_t pos0, const float *x, int64_t n) {
    last_rows *r = user;
    if (layer == r->layer) memcpy(r->rows + pos0 * r->H, x, (size_t)(n * r->H) * sizeof(float));
}

/* verify n tokens vs decoding them one by one; keep k, decode on: bit-identical rows */
static void check_verify(const char *path) {
    qhx_error err = {0};
    qhx_model_params mp = qhx_model_default_params();
    mp.mtp = 1;
    qhx_model *m = NULL;
    CHECK_EQ(qhx_model_open(path, &mp, &m, &err), QHX_OK);
    if (!m) return;
    CHECK(qhx_model_can_verify(m));
    const qhx_model_config *c = qhx_model_get_config(m);
    const int64_t V = c->vocab_size, H = c->hidden_size;
    enum { NP = 6, NT = 9, K = 3, NA = 4 };
    const int32_t prompt[NP] = {11, 200, 37, 5, 90, 301};
    const int32_t toks[NT] = {17, 3, 250, 99, 64, 7, 128, 300, 41};
    const int32_t after[NA] = {8, 77, 140, 2};
    float *ref = calloc((size_t)((NT + NA) * V), sizeof(float)), *got = calloc((size_t)(NT * V), sizeof(float));
    float *href = calloc((size_t)((NP + NT + NA) * H), sizeof(float)), *hgot = calloc((size_t)(NT * H), sizeof(float));
    float *one = calloc((size_t)V, sizeof(float));
    qhx_seq *a = NULL, *b = NULL;
    CHECK(ref && got && href && hgot && one);
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 64}, &a, &err), QHX_OK);
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 64}, &b, &err), QHX_OK);
    last_rows lr = {.layer = c->num_hidden_layers - 1, .H = H, .rows = href};
    qhx_forward_opts fo = {.layer_cb = keep_last, .layer_cb_user = &lr};
    CHECK_EQ(qhx_model_forward(m, a, prompt, NP, &fo, &err), QHX_OK);
    CHECK_EQ(qhx_model_forward(m, b, prompt, NP, NULL, &err), QHX_OK);
    for (int i = 0; i < NT; i++) { /* the reference: one-token decode steps */
        fo.logits = ref + i * V;
        CHECK_EQ(qhx_model_forward(m, a, &toks[i], 1, &fo, &err), QHX_OK);
    }
    CHECK_EQ(qhx_model_verify(m, b, toks, NT, got, hgot, &err), QHX_OK);
    CHECK(memcmp(ref, got, (size_t)(NT * V) * sizeof(float)) == 0);
    CHECK(memcmp(href + NP * H, hgot, (size_t)(NT * H) * sizeof(float)) == 0);
    CHECK_EQ(qhx_model_state_n_past(b), NP + NT);
    /* keep K, then decode other tokens: the reference decodes them after toks[0 .. K) */
    CHECK_EQ(qhx_model_verify_keep(m, b, K, &err), QHX_OK);
    CHECK_EQ(qhx_model_state_n_past(b), NP + K);
    CHECK_EQ(qhx_model_verify_keep(m, b, K + 1, &err), QHX_E_ARG); /* only shorter */
    qhx_model_state_reset(a);
    fo.logits = NULL;
    CHECK_EQ(qhx_model_forward(m, a, prompt, NP, NULL, &err), QHX_OK);
    for (int i = 0; i < K; i++) CHECK_EQ(qhx_model_forward(m, a, &toks[i], 1, NULL, &err), QHX_OK);
    int same = 1;
    for (int i = 0; i < NA; i++) {
        fo.logits = ref + i * V;
        CHECK_EQ(qhx_model_forward(m, a, &after[i], 1, &fo, &err), QHX_OK);
        CHECK_EQ(qhx_model_forward(m, b, &after[i], 1, &(qhx_forward_opts){.logits = one}, &err), QHX_OK);
        same &= memcmp(ref + i * V, one, (size_t)V * sizeof(float)) == 0;
    }
    CHECK(same);
    /* a verify after other calls cannot be cut; bad lengths are refused */
    CHECK_EQ(qhx_model_verify_keep(m, b, 1, &err), QHX_E_ARG);
    CHECK_EQ(qhx_model_verify(m, b, toks, 0, got, NULL, &err), QHX_E_ARG);
    CHECK_EQ(qhx_model_verify(m, b, toks, QHX_VERIFY_MAX + 1, got, NULL, &err), QHX_E_ARG);
    const int32_t bad[2] = {1, (int32_t)V};
    CHECK_EQ(qhx_model_verify(m, b, bad, 2, got, NULL, &err), QHX_E_ARG);
    qhx_model_state_free(a);
    qhx_model_state_free(b);
    qhx_model_free(m);
    free(ref), free(got), free(href), free(hgot), free(one);
}

typedef struct collect {
    int32_t ids[4 * NGEN];
    int n, stop_at; /* stop_at >= 0: the callback asks to stop after that many tokens */
} collect;

static int on_tok(void *user, qhx_token t, const char *text, size_t len) {
    (void)text, (void)len;
    collect *c = user;
    if (t < 0) return 0;
    if (c->n < 4 * NGEN) c->ids[c->n++] = t;
    return c->stop_at >= 0 && c->n == c->stop_at;
}

/* Greedy tokens of a prompt: one generate of n (stop_at < 0), or one stopped by the callback
 * after stop_at tokens and a second one of n. */
static int run(const qhx_model *m, int draft, int fixed, float penalty, const int32_t *prompt, int np, int n,
               int stop_at, collect *out, qhx_generate_stats *stats) {
    qhx_error err = {0};
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 256;
    sp.sampling = qhx_sample_default_params();
    sp.sampling.repeat_penalty = penalty;
    sp.spec_draft = draft;
    sp.spec_fixed = fixed;
    qhx_session *s = NULL;
    if (qhx_session_create(m, &sp, &s, &err)) {
        fprintf(stderr, "session: %s\n", err.msg);
        return -1;
    }
    memset(out, 0, sizeof *out);
    out->stop_at = stop_at;
    qhx_generate_params gp = {.max_tokens = n, .ignore_stop = 1, .on_token = on_tok, .user = out};
    int rc = qhx_session_feed(s, prompt, (size_t)np, &err);
    if (!rc) rc = qhx_session_generate(s, &gp, stats, &err);
    if (!rc && stop_at >= 0) {
        out->stop_at = -1;
        qhx_generate_stats s2;
        rc = qhx_session_generate(s, &gp, &s2, &err);
        if (stats) stats->n_verify += s2.n_verify, stats->n_drafted += s2.n_drafted, stats->n_accepted += s2.n_accepted;
    }
    if (rc) fprintf(stderr, "generate: %s\n", err.msg);
    qhx_session_free(s);
    return rc;
}

static int same_ids(const collect *a, const collect *b) {
    return a->n == b->n && memcmp(a->ids, b->ids, (size_t)a->n * sizeof(int32_t)) == 0;
}

/* Greedy with and without speculation on one model; returns the acceptance rate of draft 4. */
static double check_greedy(const char *path, const int32_t *prompt, int np) {
    qhx_error err = {0};
    qhx_model_params mp = qhx_model_default_params();
    mp.mtp = 1;
    qhx_model *m = NULL;
    CHECK_EQ(qhx_model_open(path, &mp, &m, &err), QHX_OK);
    if (!m) return 0;
    double rate4 = 0;
    const float penalties[2] = {1.0f, 1.3f};
    for (int pi = 0; pi < 2; pi++) {
        collect base, got;
        qhx_generate_stats bs = {0};
        CHECK_EQ(run(m, 0, 0, penalties[pi], prompt, np, NGEN, -1, &base, &bs), 0);
        CHECK_EQ(base.n, NGEN);
        CHECK_EQ(bs.n_verify, 0);
        for (int draft = 1; draft <= QHX_SPEC_MAX_DRAFT + 1; draft++) {
            const int d = draft <= QHX_SPEC_MAX_DRAFT ? draft : 4, fixed = draft <= QHX_SPEC_MAX_DRAFT;
            qhx_generate_stats gs = {0};
            CHECK_EQ(run(m, d, fixed, penalties[pi], prompt, np, NGEN, -1, &got, &gs), 0);
            if (!same_ids(&base, &got)) fprintf(stderr, "%s: draft %d%s penalty %g: output differs\n", path, d,
                                                fixed ? "" : " (adaptive)", penalties[pi]);
            CHECK(same_ids(&base, &got));
            CHECK(gs.n_verify > 0);
            CHECK(gs.n_accepted <= gs.n_drafted);
            if (fixed) CHECK(gs.n_drafted > 0);
            if (fixed && d == 4 && pi == 0 && gs.n_drafted) rate4 = (double)gs.n_accepted / (double)gs.n_drafted;
        }
        /* stopped by the callback inside a step, then continued: as without speculation */
        for (int stop = 1; stop <= 9; stop += 4) {
            collect b2, g2;
            CHECK_EQ(run(m, 0, 0, penalties[pi], prompt, np, NGEN / 2, stop, &b2, NULL), 0);
            CHECK_EQ(run(m, 6, 1, penalties[pi], prompt, np, NGEN / 2, stop, &g2, NULL), 0);
            CHECK(same_ids(&b2, &g2));
        }
    }
    qhx_model_free(m);
    return rate4;
}

/* The serve engine's form: its own sampler and loop; cut_first: every step cut back to out[0]. */
static void check_front_end(const char *path, const int32_t *prompt, int np, int cut_first) {
    qhx_error err = {0};
    qhx_model_params mp = qhx_model_default_params();
    mp.mtp = 1;
    qhx_model *m = NULL;
    CHECK_EQ(qhx_model_open(path, &mp, &m, &err), QHX_OK);
    if (!m) return;
    collect base;
    CHECK_EQ(run(m, 0, 0, 1.0f, prompt, np, NGEN, -1, &base, NULL), 0);
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 256;
    sp.sampling = qhx_sample_default_params();
    sp.spec_draft = 4;
    sp.spec_fixed = 1;
    qhx_session *s = NULL;
    qhx_sampler_handle *smp = NULL;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    CHECK_EQ(qhx_sampler_create(m, &sp.sampling, &smp, &err), QHX_OK);
    CHECK(s && smp && qhx_session_spec_enabled(s));
    if (s && smp) {
        CHECK_EQ(qhx_session_feed(s, prompt, (size_t)np, &err), QHX_OK);
        for (int i = 0; i < np; i++) qhx_sampler_push(smp, prompt[i]);
        int32_t got[NGEN + 8];
        int n = 0;
        qhx_token t = qhx_sampler_pick(smp, qhx_session_logits(s)), out[9];
        got[n++] = t;
        while (n < NGEN) {
            int n_out = 0;
            CHECK_EQ(qhx_session_spec_step(s, smp, t, NGEN - n, 0, -1, 1, out, &n_out, &err), QHX_OK);
            if (n_out < 1) break;
            if (cut_first && n_out > 1) {
                CHECK_EQ(qhx_session_spec_cut(s, smp, 0, &err), QHX_OK);
                n_out = 1;
            }
            for (int i = 0; i < n_out && n < NGEN; i++) got[n++] = out[i];
            t = out[n_out - 1];
        }
        CHECK_EQ(n, NGEN);
        CHECK(n == base.n && memcmp(got, base.ids, (size_t)n * sizeof(int32_t)) == 0);
        int64_t tot[4];
        qhx_session_spec_totals(s, tot);
        CHECK(tot[0] > 0 && tot[1] > 0 && tot[2] <= tot[1]);
        CHECK_EQ(qhx_session_spec_cut(s, smp, 5, &err), QHX_E_ARG); /* past the last step's tokens */
    }
    qhx_sampler_free(smp);
    qhx_session_free(s);
    qhx_model_free(m);
}

static void check_refusals(const char *path) {
    qhx_error err = {0};
    qhx_model *m = NULL;
    CHECK_EQ(qhx_model_open(path, NULL, &m, &err), QHX_OK); /* no mtp asked for */
    if (!m) return;
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 64;
    sp.spec_draft = 2;
    qhx_session *s = NULL;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_E_UNSUPPORTED);
    CHECK(s == NULL);
    qhx_model_free(m);
    qhx_model_params mp = qhx_model_default_params();
    mp.mtp = 1;
    CHECK_EQ(qhx_model_open(path, &mp, &m, &err), QHX_OK);
    if (!m) return;
    sp.spec_draft = QHX_SPEC_MAX_DRAFT + 1;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_E_ARG);
    sp.spec_draft = -1;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_E_ARG);
    qhx_model_free(m);
}

int main(void) {
    static const char *const fixtures[] = {"qwen35-tiny-f32", "qwen35-tiny-bf16", "qwen35-tiny-vrep-f32",
                                           "qwen35-tiny-untied-f32", "qwen35vl-tiny-f32"};
    const int32_t prompt[5] = {5, 17, 300, 42, 7};
    char path[1024];
    for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) {
        snprintf(path, sizeof path, "%s/fixtures/parity/%s", QHX_DATA_DIR, fixtures[i]);
        check_verify(path);
        check_front_end(path, prompt, 5, i == 0);
        double r = check_greedy(path, prompt, 5);
        printf("%s: greedy identical for drafts 1..8 and adaptive (acceptance at 4: %.2f)\n", fixtures[i], r);
    }
    check_refusals(QHX_DATA_DIR "/fixtures/parity/qwen35-tiny-f32");
    /* the demo model: a prompt of its own text */
    const char *demo = QHX_SOURCE_DIR "/models/shakespeare";
    qhx_error err = {0};
    qhx_model *m = NULL;
    CHECK_EQ(qhx_model_open(demo, NULL, &m, &err), QHX_OK);
    if (m) {
        int32_t ids[64];
        size_t n = 0;
        const char *text = "KING HENRY:\nNow, lords, for France; the enterprise whereof\n";
        CHECK_EQ(qhx_tokenize(m, text, strlen(text), ids, 64, &n, &err), QHX_OK);
        qhx_model_free(m);
        check_verify(demo);
        check_front_end(demo, ids, (int)n, 0);
        check_front_end(demo, ids, (int)n, 1);
        double r = check_greedy(demo, ids, (int)n);
        printf("demo model: greedy identical for drafts 1..8 and adaptive (acceptance at 4: %.2f)\n", r);
        CHECK(r > 0.3); /* the trained block */
    }
    return t_done("test_spec");
}
