/* Speculative verification of several sequences in one pass (qhx_model_verify_multi) and the
 * speculative step of several sessions (qhx_sessions_spec_step, what qhx serve drives), on the
 * Qwen3.5 fixtures with an MTP block and the demo model (models/shakespeare):
 *   - the multi verify gives every sequence the logits and hidden rows of its own
 *     qhx_model_verify, bit for bit, for sequences at different positions with different token
 *     counts (one of them a single token: the bits of a one-token decode step), and each can
 *     then be cut back (verify_keep) and decode on as after its own verify;
 *   - refusals (a state twice, another model's state, no room, an id outside the vocabulary,
 *     too many rows) leave every state as it was;
 *   - greedy output of several sessions stepped together equals each one's plain greedy
 *     decoding, and an item that is refused does not stop the others. */
#include "runtime/model.h"
#include "runtime/session_impl.h"
#include "t.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NS 4     /* sequences per multi verify */
#define MAXT 9   /* most tokens per sequence here */
#define NGEN 40

static qhx_model *open_mtp(const char *path) {
    qhx_error err = {0};
    qhx_model_params mp = qhx_model_default_params();
    mp.mtp = 1;
    qhx_model *m = NULL;
    CHECK_EQ(qhx_model_open(path, &mp, &m, &err), QHX_OK);
    if (!m) fprintf(stderr, "%s: %s\n", path, err.msg);
    return m;
}

/* Two states per sequence (a: the multi verify, b: its own), each fed its own prompt. */
typedef struct seqs {
    qhx_seq *a[NS], *b[NS];
    int32_t ids[NS][MAXT];
    int64_t n[NS];
} seqs;

static void seqs_make(const qhx_model *m, seqs *q, int64_t V) {
    qhx_error err = {0};
    static const int64_t counts[NS] = {5, 1, 9, 3};
    for (int i = 0; i < NS; i++) {
        int32_t prompt[8];
        const int np = 2 + 2 * i; /* different positions */
        for (int j = 0; j < np; j++) prompt[j] = (int32_t)((37 * (i + 1) + 11 * j) % V);
        q->n[i] = counts[i];
        for (int j = 0; j < MAXT; j++) q->ids[i][j] = (int32_t)((101 * i + 29 * j + 3) % V);
        q->a[i] = q->b[i] = NULL;
        CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 64}, &q->a[i], &err), QHX_OK);
        CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 64}, &q->b[i], &err), QHX_OK);
        if (!q->a[i] || !q->b[i]) continue;
        CHECK_EQ(qhx_model_forward(m, q->a[i], prompt, np, NULL, &err), QHX_OK);
        CHECK_EQ(qhx_model_forward(m, q->b[i], prompt, np, NULL, &err), QHX_OK);
    }
}

static void seqs_free(seqs *q) {
    for (int i = 0; i < NS; i++) qhx_model_state_free(q->a[i]), qhx_model_state_free(q->b[i]);
}

/* The rules a multi verify must refuse, each before anything runs. */
static void check_refusals(const qhx_model *m, const qhx_model *other, seqs *q, float *const *lg, int64_t V) {
    qhx_error err = {0};
    const int32_t *ids[NS + 1];
    int64_t n[NS + 1];
    float *lg5[NS + 1];
    qhx_seq *sts[NS + 1];
    int64_t past[NS];
    for (int i = 0; i < NS; i++) sts[i] = q->a[i], ids[i] = q->ids[i], n[i] = q->n[i], lg5[i] = lg[i];
    for (int i = 0; i < NS; i++) past[i] = qhx_model_state_n_past(q->a[i]);
    sts[NS] = q->a[1], ids[NS] = q->ids[1], n[NS] = 1, lg5[NS] = lg[1];
    CHECK_EQ(qhx_model_verify_multi(m, sts, ids, n, NS + 1, lg5, NULL, &err), QHX_E_ARG); /* a state twice */
    qhx_seq *foreign = NULL;
    CHECK_EQ(qhx_model_state_create(other, &(qhx_seq_params){.n_ctx = 64}, &foreign, &err), QHX_OK);
    sts[NS] = foreign;
    CHECK_EQ(qhx_model_verify_multi(m, sts, ids, n, NS + 1, lg5, NULL, &err), QHX_E_ARG); /* not m's */
    qhx_model_state_free(foreign);
    const int32_t bad = (int32_t)V;
    ids[NS - 1] = &bad, n[NS - 1] = 1;
    CHECK_EQ(qhx_model_verify_multi(m, sts, ids, n, NS, lg5, NULL, &err), QHX_E_ARG); /* id */
    ids[NS - 1] = q->ids[NS - 1], n[NS - 1] = 0;
    CHECK_EQ(qhx_model_verify_multi(m, sts, ids, n, NS, lg5, NULL, &err), QHX_E_ARG); /* no tokens */
    qhx_seq *tiny = NULL; /* room for 2 after its prompt */
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 4}, &tiny, &err), QHX_OK);
    CHECK_EQ(qhx_model_forward(m, tiny, q->ids[0], 2, NULL, &err), QHX_OK);
    sts[NS - 1] = tiny, n[NS - 1] = 3;
    CHECK_EQ(qhx_model_verify_multi(m, sts, ids, n, NS, lg5, NULL, &err), QHX_E_LIMIT); /* no room */
    qhx_model_state_free(tiny);
    sts[NS - 1] = q->a[NS - 1], n[NS - 1] = q->n[NS - 1];
    int64_t many[NS] = {16, 16, 16, 16}; /* 16 tokens each: 65 rows in all with one more */
    static int32_t zeros[16];
    const int32_t *zid[NS + 1] = {zeros, zeros, zeros, zeros, zeros};
    int64_t many5[NS + 1] = {16, 16, 16, 16, 1};
    qhx_seq *five[NS + 1] = {q->a[0], q->a[1], q->a[2], q->a[3], NULL};
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 64}, &five[NS], &err), QHX_OK);
    CHECK_EQ(qhx_model_verify_multi(m, five, zid, many5, NS + 1, lg5, NULL, &err), QHX_E_ARG); /* 65 rows */
    CHECK_EQ(qhx_model_verify_multi(m, five, zid, many, NS, NULL, NULL, &err), QHX_E_ARG); /* no logits */
    qhx_model_state_free(five[NS]);
    for (int i = 0; i < NS; i++) CHECK_EQ(qhx_model_state_n_past(q->a[i]), past[i]);
}

/* The multi verify against each sequence's own, then keep and decode on. */
static void check_verify_multi(const char *path, const qhx_model *other) {
    qhx_model *m = open_mtp(path);
    if (!m) return;
    qhx_error err = {0};
    const qhx_model_config *c = qhx_model_get_config(m);
    const int64_t V = c->vocab_size, H = c->hidden_size;
    seqs q;
    seqs_make(m, &q, V);
    float *ref[NS], *got[NS], *href[NS], *hgot[NS];
    float *one = malloc((size_t)V * sizeof(float)), *two = malloc((size_t)V * sizeof(float));
    for (int i = 0; i < NS; i++) {
        ref[i] = malloc((size_t)(MAXT * V) * sizeof(float)), got[i] = malloc((size_t)(MAXT * V) * sizeof(float));
        href[i] = malloc((size_t)(MAXT * H) * sizeof(float)), hgot[i] = malloc((size_t)(MAXT * H) * sizeof(float));
        CHECK(ref[i] && got[i] && href[i] && hgot[i]);
    }
    CHECK(one && two);
    check_refusals(m, other, &q, got, V);
    const int32_t *ids[NS];
    for (int i = 0; i < NS; i++) {
        ids[i] = q.ids[i];
        CHECK_EQ(qhx_model_verify(m, q.b[i], q.ids[i], q.n[i], ref[i], href[i], &err), QHX_OK);
    }
    CHECK_EQ(qhx_model_verify_multi(m, q.a, ids, q.n, NS, got, hgot, &err), QHX_OK);
    for (int i = 0; i < NS; i++) {
        const int same = memcmp(ref[i], got[i], (size_t)(q.n[i] * V) * sizeof(float)) == 0 &&
                         memcmp(href[i], hgot[i], (size_t)(q.n[i] * H) * sizeof(float)) == 0;
        if (!same) fprintf(stderr, "%s: sequence %d (%lld tokens): the multi verify differs\n", path, i, (long long)q.n[i]);
        CHECK(same);
        CHECK_EQ(qhx_model_state_n_past(q.a[i]), qhx_model_state_n_past(q.b[i]));
    }
    /* the one-token row is a decode step: its logits are those of a plain forward */
    qhx_seq *d = NULL;
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 64}, &d, &err), QHX_OK);
    int32_t prompt[8];
    for (int j = 0; j < 4; j++) prompt[j] = (int32_t)((37 * 2 + 11 * j) % V);
    CHECK_EQ(qhx_model_forward(m, d, prompt, 4, NULL, &err), QHX_OK);
    CHECK_EQ(qhx_model_forward(m, d, q.ids[1], 1, &(qhx_forward_opts){.logits = one}, &err), QHX_OK);
    CHECK(memcmp(one, got[1], (size_t)V * sizeof(float)) == 0);
    qhx_model_state_free(d);
    /* each cut back on its own, then one more token: the bits of its own verify's cut */
    for (int i = 0; i < NS; i++) {
        const int64_t k = (q.n[i] + 1) / 2;
        CHECK_EQ(qhx_model_verify_keep(m, q.a[i], k, &err), QHX_OK);
        CHECK_EQ(qhx_model_verify_keep(m, q.b[i], k, &err), QHX_OK);
        const int32_t t = (int32_t)((7 * i + 5) % V);
        CHECK_EQ(qhx_model_forward(m, q.a[i], &t, 1, &(qhx_forward_opts){.logits = one}, &err), QHX_OK);
        CHECK_EQ(qhx_model_forward(m, q.b[i], &t, 1, &(qhx_forward_opts){.logits = two}, &err), QHX_OK);
        CHECK(memcmp(one, two, (size_t)V * sizeof(float)) == 0);
    }
    seqs_free(&q);
    for (int i = 0; i < NS; i++) free(ref[i]), free(got[i]), free(href[i]), free(hgot[i]);
    free(one), free(two);
    qhx_model_free(m);
}

/* Plain greedy ids of a prompt (no speculation): the sampler's pick, fed one by one. */
static int plain_greedy(const qhx_model *m, const qhx_sample_params *sampling, const int32_t *prompt, int np,
                        int32_t *out) {
    qhx_error err = {0};
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 256;
    sp.sampling = *sampling;
    qhx_session *s = NULL;
    qhx_sampler_handle *smp = NULL;
    int rc = qhx_session_create(m, &sp, &s, &err);
    if (!rc) rc = qhx_sampler_create(m, sampling, &smp, &err);
    if (!rc) rc = qhx_session_feed(s, prompt, (size_t)np, &err);
    for (int j = 0; !rc && j < np; j++) qhx_sampler_push(smp, prompt[j]);
    for (int i = 0; !rc && i < NGEN; i++) {
        out[i] = qhx_sampler_pick(smp, qhx_session_logits(s));
        qhx_sampler_push(smp, out[i]);
        rc = qhx_session_feed(s, &out[i], 1, &err);
    }
    qhx_sampler_free(smp);
    qhx_session_free(s);
    return rc;
}

/* NS sessions stepped together with their own prompts (and one refused item in every step):
 * each gets its plain greedy ids. */
static void check_sessions_step(const char *path, const int32_t *base_prompt, int np0) {
    qhx_model *m = open_mtp(path);
    if (!m) return;
    qhx_error err = {0};
    const int64_t V = qhx_model_n_vocab(m);
    qhx_session *s[NS] = {0};
    qhx_sampler_handle *smp[NS] = {0};
    int32_t prompt[NS][80], want[NS][NGEN], got[NS][NGEN + 9];
    int np[NS], n[NS];
    qhx_token t[NS], out[NS][9];
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 256;
    sp.sampling = qhx_sample_default_params();
    sp.spec_draft = 4;
    sp.spec_fixed = 1;
    for (int i = 0; i < NS; i++) {
        np[i] = np0 + i < 80 ? np0 + i : 80; /* different lengths, the base prompt then filler */
        for (int j = 0; j < np[i]; j++) prompt[i][j] = j < np0 ? base_prompt[j] : (int32_t)((13 * i + j) % V);
        CHECK_EQ(plain_greedy(m, &sp.sampling, prompt[i], np[i], want[i]), 0);
        CHECK_EQ(qhx_session_create(m, &sp, &s[i], &err), QHX_OK);
        CHECK_EQ(qhx_sampler_create(m, &sp.sampling, &smp[i], &err), QHX_OK);
        if (!s[i] || !smp[i]) goto done;
        CHECK_EQ(qhx_session_feed(s[i], prompt[i], (size_t)np[i], &err), QHX_OK);
        for (int j = 0; j < np[i]; j++) qhx_sampler_push(smp[i], prompt[i][j]);
        t[i] = qhx_sampler_pick(smp[i], qhx_session_logits(s[i]));
        got[i][0] = t[i];
        n[i] = 1;
    }
    int64_t drafted = 0;
    for (int steps = 0; steps < NGEN; steps++) {
        qhx_spec_step_item it[NS + 1];
        size_t k = 0;
        int who[NS];
        for (int i = 0; i < NS; i++) {
            if (n[i] >= NGEN) continue;
            it[k] = (qhx_spec_step_item){.session = s[i], .sampler = smp[i], .turn_end = -1, .ignore_stop = 1,
                                         .token = t[i], .room = NGEN - n[i], .draft = 0, .out = out[i]};
            who[k++] = i;
        }
        if (!k) break;
        it[k] = (qhx_spec_step_item){.session = s[who[0]], .sampler = smp[who[0]], .token = 0, .room = 1,
                                     .out = out[who[0]]};
        /* the last item names a session already in the step: refused alone */
        CHECK_EQ(qhx_sessions_spec_step(it, k + 1), QHX_E_ARG);
        CHECK_EQ(it[k].status, QHX_E_ARG);
        for (size_t j = 0; j < k; j++) {
            const int i = who[j];
            CHECK_EQ(it[j].status, QHX_OK);
            if (it[j].status || it[j].n_out < 1) goto done;
            for (int o = 0; o < it[j].n_out && n[i] < NGEN; o++) got[i][n[i]++] = out[i][o];
            t[i] = out[i][it[j].n_out - 1];
        }
    }
    for (int i = 0; i < NS; i++) {
        int64_t tot[4];
        qhx_session_spec_totals(s[i], tot);
        drafted += tot[1];
        const int same = n[i] == NGEN && memcmp(got[i], want[i], NGEN * sizeof(int32_t)) == 0;
        if (!same) fprintf(stderr, "%s: session %d: the shared step's greedy ids differ from plain decoding\n", path, i);
        CHECK(same);
    }
    CHECK(drafted > 0);
done:
    for (int i = 0; i < NS; i++) qhx_sampler_free(smp[i]), qhx_session_free(s[i]);
    qhx_model_free(m);
}

int main(void) {
    static const char *const fixtures[] = {"qwen35-tiny-f32", "qwen35-tiny-bf16", "qwen35-tiny-vrep-f32",
                                           "qwen35-tiny-untied-f32", "qwen35vl-tiny-f32"};
    const char *demo = QHX_SOURCE_DIR "/models/shakespeare";
    qhx_model *other = open_mtp(demo); /* a state of another model, for the refusals */
    if (!other) return t_done("test_spec_multi");
    const int32_t prompt[5] = {5, 17, 300, 42, 7};
    char path[1024];
    for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) {
        snprintf(path, sizeof path, "%s/fixtures/parity/%s", QHX_DATA_DIR, fixtures[i]);
        check_verify_multi(path, other);
        check_sessions_step(path, prompt, 5);
        printf("%s: multi verify and shared steps checked\n", fixtures[i]);
    }
    qhx_error err = {0};
    int32_t ids[64];
    size_t n = 0;
    const char *text = "KING HENRY:\nNow, lords, for France; the enterprise whereof\n";
    CHECK_EQ(qhx_tokenize(other, text, strlen(text), ids, 64, &n, &err), QHX_OK);
    snprintf(path, sizeof path, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    qhx_model *tiny = open_mtp(path);
    if (tiny) check_verify_multi(demo, tiny);
    qhx_model_free(tiny);
    check_sessions_step(demo, ids, (int)n);
    printf("demo model: multi verify and shared steps checked\n");
    qhx_model_free(other);
    return t_done("test_spec_multi");
}
