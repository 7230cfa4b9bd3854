/* Speculative sampling keeps the model's distribution: on the demo model (models/shakespeare,
 * whose trained MTP block drafts well), R seeded runs of a 4-token continuation with speculation
 * (3 drafts per step, fixed) against R runs without it, for two sampler settings (temperature
 * alone; temperature with top-k, top-p, min-p and a repetition penalty). For each of the tokens
 * 2, 3 and 4 (token 1 comes from the prompt's logits in both) the two samples' frequencies go
 * through a two-sample chi-square test: bins are the tokens seen at least 10 times in the two
 * samples together, the rest pooled into one bin; X2 = sum (a - b)^2 / (a + b) (equal sample
 * sizes) with bins - 1 degrees of freedom. The threshold is the chi-square quantile of 1 - 1e-6
 * (Wilson-Hilferty approximation), so a correct implementation fails a given seed set with
 * probability about 1e-6 per test (6 tests: below 1e-5 together); the seeds are fixed, so the
 * outcome does not change from run to run. The power check: the same test between tokens 2 and
 * 3 of the plain runs (different distributions) must fail; and a rule that keeps every draft
 * (the drafts' distribution instead of the model's) fails 4 of the 6 tests at this R (tried by
 * hand when the test was written). */
#include "qhx.h"
#include "t.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R 1500
#define NTOK 4

typedef struct collect {
    int32_t ids[NTOK];
    int n;
} collect;

static int on_tok(void *user, qhx_token t, const char *text, size_t len) {
    (void)text, (void)len;
    collect *c = user;
    if (t >= 0 && c->n < NTOK) c->ids[c->n++] = t;
    return 0;
}

/* tokens (R, NTOK) of R runs with seeds seed0 .. seed0 + R - 1 */
static int sample_runs(const qhx_model *m, const qhx_sample_params *sp, int draft, const int32_t *prompt, size_t np,
                       uint64_t seed0, int32_t *out, double *acc) {
    qhx_error err = {0};
    int64_t drafted = 0, accepted = 0;
    for (int r = 0; r < R; r++) {
        qhx_session_params p = qhx_session_default_params(m);
        p.n_ctx = 64;
        p.sampling = *sp;
        p.sampling.seed = seed0 + (uint64_t)r;
        p.spec_draft = draft;
        p.spec_fixed = 1;
        qhx_session *s = NULL;
        if (qhx_session_create(m, &p, &s, &err)) return fprintf(stderr, "session: %s\n", err.msg), -1;
        collect c = {0};
        qhx_generate_params gp = {.max_tokens = NTOK, .ignore_stop = 1, .on_token = on_tok, .user = &c};
        qhx_generate_stats st;
        int rc = qhx_session_feed(s, prompt, np, &err);
        if (!rc) rc = qhx_session_generate(s, &gp, &st, &err);
        qhx_session_free(s);
        if (rc || c.n != NTOK) return fprintf(stderr, "generate: %s\n", err.msg), -1;
        memcpy(out + r * NTOK, c.ids, sizeof c.ids);
        drafted += st.n_drafted, accepted += st.n_accepted;
    }
    *acc = drafted ? (double)accepted / (double)drafted : 0.0;
    return 0;
}

/* The chi-square quantile of 1 - 1e-6 for df degrees of freedom (Wilson-Hilferty). */
static double crit(int df) {
    const double z = 4.753424; /* standard normal quantile of 1 - 1e-6 */
    const double k = (double)df, h = 2.0 / (9.0 * k);
    const double c = 1.0 - h + z * sqrt(h);
    return k * c * c * c;
}

/* Two-sample chi-square over column ca of a and column cb of b; returns X2 / threshold. */
static double chi2_ratio(const int32_t *a, int ca, const int32_t *b, int cb, int64_t V, int *df_out) {
    int *na = calloc((size_t)V, sizeof(int)), *nb = calloc((size_t)V, sizeof(int));
    for (int r = 0; r < R; r++) na[a[r * NTOK + ca]]++, nb[b[r * NTOK + cb]]++;
    double x2 = 0, oa = 0, ob = 0;
    int bins = 0;
    for (int64_t t = 0; t < V; t++) {
        if (na[t] + nb[t] >= 10) {
            const double d = na[t] - nb[t];
            x2 += d * d / (na[t] + nb[t]);
            bins++;
        } else {
            oa += na[t], ob += nb[t];
        }
    }
    if (oa + ob > 0) x2 += (oa - ob) * (oa - ob) / (oa + ob), bins++;
    free(na), free(nb);
    *df_out = bins - 1;
    return bins > 1 ? x2 / crit(bins - 1) : 0.0;
}

int main(void) {
    qhx_error err = {0};
    qhx_model_params mp = qhx_model_default_params();
    mp.mtp = 1;
    qhx_model *m = NULL;
    if (qhx_model_open(QHX_SOURCE_DIR "/models/shakespeare", &mp, &m, &err)) {
        fprintf(stderr, "skip: %s\n", err.msg);
        return 77;
    }
    int32_t prompt[64];
    size_t np = 0;
    const char *text = "HAMLET:\nTo be, or not to be, that is the";
    CHECK_EQ(qhx_tokenize(m, text, strlen(text), prompt, 64, &np, &err), QHX_OK);
    const int64_t V = qhx_model_n_vocab(m);
    int32_t *base = malloc(sizeof(int32_t) * R * NTOK), *spec = malloc(sizeof(int32_t) * R * NTOK);
    CHECK(base && spec);
    qhx_sample_params cfg[2];
    memset(cfg, 0, sizeof cfg);
    cfg[0].temperature = 0.9f, cfg[0].top_p = 1.0f, cfg[0].repeat_penalty = 1.0f, cfg[0].repeat_last_n = 64;
    cfg[1].temperature = 0.7f, cfg[1].top_k = 30, cfg[1].top_p = 0.9f, cfg[1].min_p = 0.02f;
    cfg[1].repeat_penalty = 1.2f, cfg[1].repeat_last_n = 64;
    for (int c = 0; c < 2; c++) {
        double acc_b, acc_s;
        CHECK_EQ(sample_runs(m, &cfg[c], 0, prompt, np, 1000000, base, &acc_b), 0);
        CHECK_EQ(sample_runs(m, &cfg[c], 3, prompt, np, 2000000, spec, &acc_s), 0);
        CHECK(acc_s > 0.2); /* the drafts are kept often enough for the rule to matter */
        for (int col = 1; col < NTOK; col++) {
            int df;
            const double ratio = chi2_ratio(base, col, spec, col, V, &df);
            printf("setting %d token %d: X2 / threshold %.3f (df %d), acceptance %.2f\n", c, col + 1, ratio, df, acc_s);
            CHECK(df >= 5);      /* enough distinct tokens for the test to mean something */
            CHECK(ratio < 1.0);
        }
        int df;
        const double power = chi2_ratio(base, 1, base, 2, V, &df);
        printf("setting %d: tokens 2 vs 3 of the plain runs (must differ): X2 / threshold %.1f\n", c, power);
        CHECK(power > 1.0);
    }
    free(base), free(spec);
    qhx_model_free(m);
    return t_done("test_spec_sampling");
}
