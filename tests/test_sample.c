// ctest-labels: unit
/* Sampler: greedy ties, determinism per seed, the filters' semantics, and that the empirical
 * distribution follows softmax(logits / T). */
#include "runtime/sample.h"
#include "t.h"

#include <math.h>
#include <string.h>

static qhx_sampler *make(qhx_sample_params p, int64_t V) {
    qhx_sampler *s = NULL;
    qhx_error err;
    if (qhx_sampler_create_raw(&p, V, &s, &err) != QHX_OK) fprintf(stderr, "%s\n", err.msg);
    return s;
}

static void test_greedy(void) {
    float l[6] = {0.5f, 2.0f, NAN, 2.0f, -1.0f, 1.0f};
    CHECK_EQ(qhx_argmax(l, 6), 1); /* tie between 1 and 3: lowest id */
    qhx_sampler *s = make(qhx_sample_default_params(), 6);
    CHECK_EQ(qhx_sampler_sample(s, l), -1); /* a NaN in the row: an error, never a token */
    l[2] = 0.0f;
    CHECK_EQ(qhx_sampler_sample(s, l), 1);
    qhx_sampler_free_raw(s);
    float nan_first[3] = {NAN, -5.0f, -7.0f};
    CHECK_EQ(qhx_argmax(nan_first, 3), 1);
}

static void test_params(void) {
    qhx_error err;
    qhx_sample_params p = qhx_sample_default_params();
    p.top_p = 2.0f;
    CHECK_EQ(qhx_sample_params_check(&p, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "top_p");
    p = qhx_sample_default_params();
    p.temperature = -1.0f;
    CHECK_EQ(qhx_sample_params_check(&p, &err), QHX_E_ARG);
    p = qhx_sample_default_params();
    p.min_p = 1.0f;
    CHECK_EQ(qhx_sample_params_check(&p, &err), QHX_E_ARG);
    qhx_sample_params zero = {0}; /* all-zero parameters: greedy, everything off */
    CHECK_EQ(qhx_sample_params_check(&zero, &err), QHX_OK);
}

/* Empirical frequencies over `draws` vs expected probabilities; max abs error returned. */
static double freq_error(qhx_sample_params p, const float *logits, const double *expect, int V, int draws) {
    qhx_sampler *s = make(p, V);
    int counts[16] = {0};
    for (int i = 0; i < draws; i++) counts[qhx_sampler_sample(s, logits)]++;
    qhx_sampler_free_raw(s);
    double worst = 0;
    for (int v = 0; v < V; v++) worst = fmax(worst, fabs(counts[v] / (double)draws - expect[v]));
    return worst;
}

static void test_distribution(void) {
    float l[4] = {1.0f, 2.0f, 0.0f, 1.5f};
    double e[4], z = 0;
    for (int i = 0; i < 4; i++) z += exp(l[i] / 0.7);
    for (int i = 0; i < 4; i++) e[i] = exp(l[i] / 0.7) / z;
    qhx_sample_params p = qhx_sample_default_params();
    p.temperature = 0.7f;
    p.seed = 42;
    CHECK(freq_error(p, l, e, 4, 40000) < 0.01);
    /* top-k 2 keeps ids 1 and 3, renormalised */
    p.top_k = 2;
    double e2[4] = {0, exp(2.0 / 0.7) / (exp(2.0 / 0.7) + exp(1.5 / 0.7)), 0, 0};
    e2[3] = 1 - e2[1];
    CHECK(freq_error(p, l, e2, 4, 40000) < 0.01);
    /* top-p: the best token alone holds > 0.5 after sharpening (T = 0.1) */
    p = qhx_sample_default_params();
    p.temperature = 0.1f;
    p.top_p = 0.5f;
    double e3[4] = {0, 1, 0, 0};
    CHECK(freq_error(p, l, e3, 4, 2000) == 0);
    /* min-p: with T = 1, p(0)/p(1) = e^-1 = 0.37 < 0.5 -> only 1 and 3 (ratio 0.61) stay */
    p = qhx_sample_default_params();
    p.temperature = 1.0f;
    p.min_p = 0.5f;
    double e4[4] = {0, exp(2.0) / (exp(2.0) + exp(1.5)), 0, exp(1.5) / (exp(2.0) + exp(1.5))};
    CHECK(freq_error(p, l, e4, 4, 40000) < 0.01);
}

static void test_seed_and_penalty(void) {
    float l[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
    qhx_sample_params p = qhx_sample_default_params();
    p.temperature = 1.0f;
    p.seed = 7;
    qhx_sampler *a = make(p, 8), *b = make(p, 8);
    int same = 1;
    for (int i = 0; i < 200; i++) same &= qhx_sampler_sample(a, l) == qhx_sampler_sample(b, l);
    CHECK(same);
    qhx_sampler_reset(a);
    qhx_sampler_reset(b);
    p.seed = 8;
    qhx_sampler *c = make(p, 8);
    int differ = 0;
    for (int i = 0; i < 200; i++) differ |= qhx_sampler_sample(a, l) != qhx_sampler_sample(c, l);
    CHECK(differ);
    qhx_sampler_free_raw(a);
    qhx_sampler_free_raw(b);
    qhx_sampler_free_raw(c);
    /* greedy with a penalty: the repeated best token loses to the runner-up */
    p = qhx_sample_default_params();
    p.repeat_penalty = 2.0f;
    qhx_sampler *g = make(p, 8);
    CHECK_EQ(qhx_sampler_sample(g, l), 7);
    qhx_sampler_accept(g, 7);
    CHECK_EQ(qhx_sampler_sample(g, l), 6); /* 0.8 / 2 = 0.4 < 0.7 */
    qhx_sampler_free_raw(g);
}

/* Presence and frequency penalties: a token seen c times loses presence + c x frequency once,
 * whatever the order of the window; other tokens are untouched; bad values are refused. */
static void test_presence_frequency(void) {
    float l[4] = {1.0f, 0.9f, 0.5f, 0.0f};
    qhx_sample_params p = qhx_sample_default_params();
    p.presence_penalty = 0.2f;
    qhx_sampler *g = make(p, 4);
    CHECK_EQ(qhx_sampler_sample(g, l), 0);
    qhx_sampler_accept(g, 0);
    CHECK_EQ(qhx_sampler_sample(g, l), 1); /* 1.0 - 0.2 = 0.8 < 0.9 */
    qhx_sampler_free_raw(g);
    p = qhx_sample_default_params();
    p.frequency_penalty = 0.3f;
    g = make(p, 4);
    qhx_sampler_accept(g, 1);
    CHECK_EQ(qhx_sampler_sample(g, l), 0);
    qhx_sampler_accept(g, 0);
    CHECK_EQ(qhx_sampler_sample(g, l), 0); /* 0.7 each: the lower id wins the tie */
    qhx_sampler_accept(g, 0);
    CHECK_EQ(qhx_sampler_sample(g, l), 1); /* 1.0 - 0.6 = 0.4 < 0.6 */
    qhx_sampler_free_raw(g);
    /* both, and a negative presence penalty that favours a seen token */
    p = qhx_sample_default_params();
    p.presence_penalty = -0.6f;
    g = make(p, 4);
    qhx_sampler_accept(g, 2);
    qhx_sampler_accept(g, 2);
    CHECK_EQ(qhx_sampler_sample(g, l), 2); /* 0.5 + 0.6 = 1.1 > 1.0, counted once */
    qhx_sampler_free_raw(g);
    qhx_error err;
    p = qhx_sample_default_params();
    p.frequency_penalty = 1000.0f;
    CHECK_EQ(qhx_sample_params_check(&p, &err), QHX_E_ARG);
    CHECK(strstr(err.msg, "frequency_penalty") != NULL);
    p.frequency_penalty = NAN;
    CHECK_EQ(qhx_sample_params_check(&p, &err), QHX_E_ARG);
}

/* Non-finite rows are refused at every temperature; a temperature so small that logit / T
 * overflows float still samples the best token (it is then all the mass), never NaN -> id 0. */
static void test_non_finite(void) {
    float l[4] = {-3.0f, 5.0f, 4.5f, 1.0f};
    qhx_sample_params p = qhx_sample_default_params();
    p.temperature = 1e-39f;
    p.seed = 3;
    qhx_sampler *s = make(p, 4);
    for (int i = 0; i < 20; i++) CHECK_EQ(qhx_sampler_sample(s, l), 1);
    p.top_p = 0.9f;
    p.top_k = 2;
    qhx_sampler *f = make(p, 4);
    for (int i = 0; i < 20; i++) CHECK_EQ(qhx_sampler_sample(f, l), 1);
    float neg[4] = {-3e38f, -1e38f, -2e38f, -INFINITY};
    CHECK_EQ(qhx_sampler_sample(s, neg), 1);
    float inf[4] = {0.0f, INFINITY, 1.0f, 2.0f};
    CHECK_EQ(qhx_sampler_sample(s, inf), -1);
    float nan[4] = {NAN, NAN, NAN, NAN};
    CHECK_EQ(qhx_sampler_sample(s, nan), -1);
    CHECK_EQ(qhx_sampler_sample(f, nan), -1);
    qhx_sampler_free_raw(s);
    qhx_sampler_free_raw(f);
}

int main(void) {
    test_greedy();
    test_presence_frequency();
    test_non_finite();
    test_params();
    test_distribution();
    test_seed_and_penalty();
    return t_done("test_sample");
}
