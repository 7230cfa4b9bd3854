// ctest-labels: unit
/* test_calib: the activation statistics of qhx forge --calibrate (devices/calib.h).
 *   - qhx_calib_stats_add against sums worked out by hand (strided rows, two weights, first-seen
 *     order, lookup by data pointer, hundreds of weights through the table's growth);
 *   - qhx_calib_importance: the mean plus the floor, and the refusals (no rows, only zeros);
 *   - a model opened on the wrapper gives bit for bit the logits of one opened without it; every
 *     weight the wrapper saw is a 2-D tensor of the model's set by data pointer (the forge's
 *     name mapping), each saw every token of the prefill once, the tied head is the embedding's
 *     entry, and the sums are those of the rows fed through that entry. */
#include "devices/calib.h"
#include "io/safetensors.h"
#include "runtime/model.h"
#include "t.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_sums(void) {
    qhx_calib_stats *s = NULL;
    qhx_error err = {0};
    CHECK_EQ(qhx_calib_stats_create(&s, &err), QHX_OK);
    if (!s) return;
    static const float data_a[1], data_b[1];
    const qhx_weight a = {.fmt = QHX_W_F32, .rows = 5, .cols = 3, .data = data_a};
    const qhx_weight b = {.fmt = QHX_W_F16, .rows = 2, .cols = 2, .data = data_b};
    /* two rows of 3 at stride 4 (the 4th value of a row is not an input) */
    const float X[8] = {1, -2, 3, 100, 0.5f, 4, -1, 100};
    CHECK_EQ(qhx_calib_stats_add(s, &a, X, 4, 2), 0);
    CHECK_EQ(qhx_calib_stats_add(s, &b, X + 1, 4, 2), 0); /* rows {-2, 3}, {4, -1} */
    const qhx_weight a2 = {.fmt = QHX_W_F32, .rows = 5, .cols = 3, .data = data_a}; /* another handle, same data */
    CHECK_EQ(qhx_calib_stats_add(s, &a2, X, 0, 1), 0);
    CHECK_EQ(qhx_calib_stats_count(s), 2);
    const qhx_calib_entry *ea = qhx_calib_stats_find(s, data_a), *eb = qhx_calib_stats_find(s, data_b);
    CHECK(ea == qhx_calib_stats_at(s, 0) && eb == qhx_calib_stats_at(s, 1));
    CHECK(qhx_calib_stats_find(s, X) == NULL);
    CHECK(qhx_calib_stats_at(s, 2) == NULL);
    if (ea && eb) {
        CHECK_EQ(ea->n_rows, 3);
        CHECK_EQ(ea->cols, 3);
        CHECK_EQ(ea->rows, 5);
        CHECK(ea->sum_x2[0] == 1 + 0.25 + 1 && ea->sum_x2[1] == 4 + 16 + 4 && ea->sum_x2[2] == 9 + 1 + 9);
        CHECK_EQ(eb->n_rows, 2);
        CHECK(eb->sum_x2[0] == 4 + 16 && eb->sum_x2[1] == 9 + 1);
        /* importance: mean x^2 per column + 0.5 * the mean over columns */
        float imp[3];
        CHECK_EQ(qhx_calib_importance(ea, 0.5, imp), 0);
        const double mean_all = (2.25 + 24 + 19) / 9.0;
        CHECK_NEAR(imp[0], 2.25 / 3 + 0.5 * mean_all, 1e-5);
        CHECK_NEAR(imp[1], 24.0 / 3 + 0.5 * mean_all, 1e-5);
        CHECK_NEAR(imp[2], 19.0 / 3 + 0.5 * mean_all, 1e-5);
    }
    /* no rows, only zeros: no importance */
    static const float data_c[1], data_d[1];
    const qhx_weight c = {.fmt = QHX_W_F32, .rows = 1, .cols = 2, .data = data_c};
    const qhx_weight d = {.fmt = QHX_W_F32, .rows = 1, .cols = 2, .data = data_d};
    const float zeros[2] = {0, 0};
    CHECK_EQ(qhx_calib_stats_add(s, &c, zeros, 2, 0), 0);
    CHECK_EQ(qhx_calib_stats_add(s, &d, zeros, 2, 1), 0);
    float imp2[2] = {7, 7};
    CHECK_EQ(qhx_calib_importance(qhx_calib_stats_find(s, data_c), 0.01, imp2), -1);
    CHECK_EQ(qhx_calib_importance(qhx_calib_stats_find(s, data_d), 0.01, imp2), -1);
    CHECK(imp2[0] == 7 && imp2[1] == 7);
    /* many weights: the table grows and still finds each one */
    static float many[300];
    for (int i = 0; i < 300; i++) {
        const qhx_weight w = {.fmt = QHX_W_F32, .rows = 1, .cols = 1, .data = &many[i]};
        const float x = (float)i;
        CHECK_EQ(qhx_calib_stats_add(s, &w, &x, 1, 1), 0);
    }
    CHECK_EQ(qhx_calib_stats_count(s), 304);
    int found = 0;
    for (int i = 0; i < 300; i++) {
        const qhx_calib_entry *e = qhx_calib_stats_find(s, &many[i]);
        found += e && e->n_rows == 1 && e->sum_x2[0] == (double)i * i;
    }
    CHECK_EQ(found, 300);
    CHECK_EQ(qhx_calib_stats_missed(s), 0);
    qhx_calib_stats_free(s);
    qhx_calib_stats_free(NULL);
}

static qhx_status wrap(void *user, qhx_device *inner, qhx_device **out, qhx_error *err) {
    return qhx_calib_wrap(inner, user, out, err);
}

enum { NP = 9 };
static const int32_t PROMPT[NP] = {3, 141, 59, 26, 5, 35, 89, 79, 32};

/* Logits of every row of the prompt (V each), on the wrapper when stats is given. */
static float *run(const char *path, qhx_calib_stats *stats, int64_t *V, const qhx_st_set **set, qhx_model **keep) {
    qhx_error err = {0};
    qhx_model *m = NULL;
    qhx_model_params p = qhx_model_default_params();
    p.prefill_math = QHX_PREFILL_MATH_F32;
    const qhx_device_wrap w = {.fn = wrap, .user = stats};
    CHECK_EQ(stats ? qhx_model_open_wrapped(path, &p, &w, &m, &err) : qhx_model_open(path, &p, &m, &err), QHX_OK);
    if (!m) return NULL;
    *V = qhx_model_get_config(m)->vocab_size;
    float *logits = calloc((size_t)(NP * *V), sizeof(float));
    qhx_seq *st = NULL;
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 32}, &st, &err), QHX_OK);
    const qhx_forward_opts fo = {.flags = QHX_FWD_LOGITS_ALL, .logits = logits};
    CHECK_EQ(qhx_model_forward(m, st, PROMPT, NP, &fo, &err), QHX_OK);
    qhx_model_state_free(st);
    *set = qhx_model_tensors(m);
    *keep = m;
    return logits;
}

static void check_model(const char *path) {
    qhx_calib_stats *s = NULL;
    qhx_error err = {0};
    CHECK_EQ(qhx_calib_stats_create(&s, &err), QHX_OK);
    int64_t V = 0, V2 = 0;
    const qhx_st_set *set = NULL, *set2 = NULL;
    qhx_model *m = NULL, *m2 = NULL;
    float *plain = run(path, NULL, &V, &set2, &m2);
    float *watched = run(path, s, &V2, &set, &m);
    CHECK_EQ(V, V2);
    if (plain && watched) CHECK(memcmp(plain, watched, (size_t)(NP * V) * sizeof(float)) == 0);
    const int64_t n = qhx_calib_stats_count(s);
    CHECK(n > 0);
    int64_t named = 0, two_d = 0;
    const qhx_st_tensor *embed = NULL;
    for (int64_t i = 0; set && i < qhx_st_n_tensors(set); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        if (strstr(t->name, "embed_tokens.weight")) embed = t;
        if (t->n_dims == 2 && strncmp(t->name, "mtp.", 4)) two_d++;
        const qhx_calib_entry *e = qhx_calib_stats_find(s, t->data);
        if (!e) continue;
        named++;
        CHECK_EQ(t->n_dims, 2);
        CHECK(e->rows == t->shape[0] && e->cols == t->shape[1]);
        CHECK_EQ(e->n_rows, NP); /* every token once, the head over every row too */
        double sum = 0;
        for (int64_t c = 0; c < e->cols; c++) sum += e->sum_x2[c];
        CHECK(sum > 0 && isfinite(sum));
    }
    CHECK_EQ(named, n);           /* every weight seen is a tensor of the set */
    CHECK_EQ(named, two_d);       /* and every matrix (the tied head on the embedding) is seen */
    CHECK(embed && qhx_calib_stats_find(s, embed->data));
    printf("%s: %lld matrices watched over %d tokens\n", path, (long long)n, NP);
    free(plain);
    free(watched);
    qhx_model_free(m);
    qhx_model_free(m2);
    qhx_calib_stats_free(s);
}

int main(void) {
    check_sums();
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    check_model(path);
    return t_done("test_calib");
}
