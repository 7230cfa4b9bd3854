/* The multi-token-prediction graph (qhx_model_mtp) on the tiny Qwen3.5 parity checkpoint, whose
 * mtp.* block has random weights. Its numbers against a torch reference are checked on the
 * trained demo model (tests/cli/demo_model.sh); here the contract:
 *   - without qhx_model_params.mtp the block is not loaded: has_mtp false, QHX_E_UNSUPPORTED;
 *   - with it: draft logits for rows 0..n-1 in one call equal those from two consecutive calls,
 *     and a rewind (pos0 back inside the filled rows) gives the same rows again;
 *   - a gap (pos0 past the rows filled), rows past n_ctx and an id outside the vocabulary are
 *     refused before anything runs. */
#include "runtime/model.h"
#include "t.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 8
#define TOL 1e-4 /* the same rows through different batch splits: float32 noise */

typedef struct last_rows {
    int64_t layer, H;
    float *rows;
} last_rows;

static void keep_last(void *user, int64_t layer, int64_t pos0, const float *x, int64_t n) {
    last_rows *r = user;
    if (layer == r->layer) memcpy(r->rows + pos0 * r->H, x, (size_t)(n * r->H) * sizeof(float));
}

static double maxdiff(const float *a, const float *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m)) m = d; /* NaN propagates */
    }
    return m;
}

int main(void) {
    const char *fx = QHX_DATA_DIR "/fixtures/parity/qwen35-tiny-f32";
    qhx_error err = {0};
    qhx_model *m = NULL;
    qhx_seq *st = NULL;
    if (qhx_model_open(fx, NULL, &m, &err)) {
        fprintf(stderr, "skip: %s\n", err.msg);
        return 77;
    }
    const qhx_model_config *c = qhx_model_get_config(m);
    const int64_t H = c->hidden_size, V = c->vocab_size, L = c->num_hidden_layers; /* c dies with m */
    const int32_t ids[N] = {5, 17, 300, 42, 7, 999, 64, 128};
    float *hidden = calloc((size_t)(N * H), sizeof(float));
    float *one = calloc((size_t)(N * V), sizeof(float)), *two = calloc((size_t)(N * V), sizeof(float));
    CHECK(hidden && one && two);

    /* not asked for: not loaded */
    CHECK(!qhx_model_has_mtp(m));
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 16}, &st, &err), QHX_OK);
    CHECK_EQ(qhx_model_mtp(m, st, 0, hidden, ids + 1, 2, one, &err), QHX_E_UNSUPPORTED);
    qhx_model_state_free(st);
    qhx_model_free(m);
    st = NULL;

    qhx_model_params mp = qhx_model_default_params();
    mp.mtp = 1;
    CHECK_EQ(qhx_model_open(fx, &mp, &m, &err), QHX_OK);
    CHECK(qhx_model_has_mtp(m));
    last_rows r = {.layer = L - 1, .H = H, .rows = hidden};
    const qhx_forward_opts fo = {.layer_cb = keep_last, .layer_cb_user = &r};
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 16, .n_batch = 4}, &st, &err), QHX_OK);
    CHECK_EQ(qhx_model_forward(m, st, ids, N, &fo, &err), QHX_OK);

    /* rows 0..6 (the id after each row is ids[i + 1]) in one call, then in two */
    const int64_t n = N - 1;
    CHECK_EQ(qhx_model_mtp(m, st, 0, hidden, ids + 1, n, one, &err), QHX_OK);
    CHECK_EQ(qhx_model_mtp(m, st, 0, hidden, ids + 1, 3, two, &err), QHX_OK);
    CHECK_EQ(qhx_model_mtp(m, st, 3, hidden + 3 * H, ids + 4, n - 3, two + 3 * V, &err), QHX_OK);
    double d = maxdiff(one, two, n * V);
    CHECK(d <= TOL);
    double mag = 0.0;
    for (int64_t i = 0; i < n * V; i++) mag = fmax(mag, fabs(one[i]));
    CHECK(mag > 1e-3); /* the logits are not all zero */
    /* rewind to row 2 and recompute 2..6 */
    memset(two, 0, (size_t)(n * V) * sizeof(float));
    CHECK_EQ(qhx_model_mtp(m, st, 2, hidden + 2 * H, ids + 3, n - 2, two, &err), QHX_OK);
    double dr = maxdiff(one + 2 * V, two, (n - 2) * V);
    CHECK(dr <= TOL);
    /* the rows differ from each other: each sees its own position and token */
    CHECK(maxdiff(one, one + V, V) > 1e-4);

    /* refused: a gap, past n_ctx, a bad id, no rows */
    CHECK_EQ(qhx_model_mtp(m, st, n + 1, hidden, ids + 1, 1, two, &err), QHX_E_ARG);
    CHECK_EQ(qhx_model_mtp(m, st, n, hidden, ids, 10, two, &err), QHX_E_LIMIT);
    const int32_t bad[2] = {1, (int32_t)V};
    CHECK_EQ(qhx_model_mtp(m, st, 0, hidden, bad, 2, two, &err), QHX_E_ARG);
    CHECK_EQ(qhx_model_mtp(m, st, 0, hidden, ids, 0, two, &err), QHX_E_ARG);
    /* a reset forgets the rows: position 1 is then a gap */
    qhx_model_state_reset(st);
    CHECK_EQ(qhx_model_mtp(m, st, 1, hidden, ids + 1, 1, two, &err), QHX_E_ARG);
    printf("mtp: one call vs two %.3g, rewind %.3g, largest logit %.3g\n", d, dr, mag);

    qhx_model_state_free(st);
    qhx_model_free(m);
    free(hidden);
    free(one);
    free(two);
    return t_done("test_mtp");
}
