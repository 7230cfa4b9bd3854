// ctest-labels: golden
/* test_qwen3vl_golden: the qwen3vl-tiny-f32 parity fixture (fixtures/parity/README.md §5).
 * For every prompt: free-running greedy (32 tokens, tolerant gate), teacher-forced logits of
 * every row (prompt prefill, then the golden tokens one at a time), and for image prompts the
 * image embeddings; p033's per-layer residual stream; prompt/image count errors; and that
 * splitting a prefill anywhere (also inside the image run) gives the same logits. */
#include "t.h"

#include "core/alloc.h"
#include "core/file.h"
#include "io/json.h"
#include "models/qwen3vl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAU_TEXT 1e-3
#define TAU_IMAGE 5e-3
#define TOL_TEXT 2e-4
#define TOL_IMAGE 5e-3
#define TOL_EMBD 3e-3
#define TOL_LAYERS 1e-4

static char fixture[4096];

static float *read_f32(const char *name, size_t want) {
    char *path = qhx_path_join(fixture, name);
    char *d = NULL;
    size_t n = 0;
    qhx_error err;
    if (!path || qhx_file_read_all(path, (size_t)1 << 30, &d, &n, &err) || n != want * 4) {
        fprintf(stderr, "%s: cannot read %zu floats\n", name, want);
        qhx_free(path);
        qhx_free(d);
        return NULL;
    }
    qhx_free(path);
    return (float *)d; /* qhx_file_read_all buffers come from qhx_malloc: aligned for float */
}

static int32_t *json_ids(const json_t *a, int64_t *n) {
    *n = (int64_t)json_array_size(a);
    int32_t *ids = qhx_malloc((size_t)(*n ? *n : 1) * sizeof *ids);
    for (int64_t i = 0; i < *n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return ids;
}

static int32_t argmax(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return (int32_t)b;
}

static void run_prompt(const qhx_qwen3vl *m, const json_t *prompt, const json_t *gold) {
    const char *name = json_string_value(json_object_get(prompt, "name"));
    const char *image = json_string_value(json_object_get(prompt, "image"));
    int is_img = image != NULL;
    double tau = is_img ? TAU_IMAGE : TAU_TEXT, tol = is_img ? TOL_IMAGE : TOL_TEXT;
    int64_t n, ng;
    int32_t *ids = json_ids(json_object_get(prompt, "ids"), &n);
    int32_t *greedy = json_ids(json_object_get(gold, "greedy"), &ng);
    const json_t *margins = json_object_get(gold, "greedy_margins");
    const json_t *row_top1 = json_object_get(gold, "row_top1");
    const json_t *row_margins = json_object_get(gold, "row_margins");
    int64_t V = m->cfg.vocab_size, rows = n + ng - 1;
    qhx_error err = {0};
    qhx_vl_image im = {0};
    double embd_max = 0;
    if (is_img) {
        char *path = qhx_path_join(fixture, image);
        qhx_status rc = qhx_qwen3vl_image_load(m, path, &im, &err);
        qhx_free(path);
        CHECK_EQ(rc, QHX_OK);
        if (rc) { fprintf(stderr, "%s: %s\n", name, err.msg); goto out; }
        const json_t *shape = json_object_get(gold, "image_embd_shape");
        CHECK_EQ(im.n_tokens, json_integer_value(json_array_get(shape, 0)));
        CHECK_EQ(im.row_width, json_integer_value(json_array_get(shape, 1)));
        float *want = read_f32(json_string_value(json_object_get(gold, "image_embd_file")), (size_t)(im.n_tokens * im.row_width));
        CHECK(want != NULL);
        for (int64_t i = 0; want && i < im.n_tokens * im.row_width; i++) {
            double d = fabs((double)want[i] - im.embd[i]);
            if (d > embd_max) embd_max = d;
        }
        qhx_free(want);
        CHECK(embd_max <= TOL_EMBD);
    }
    qhx_vl_plan plan;
    CHECK_EQ(qhx_qwen3vl_plan(m, ids, n, is_img ? &im : NULL, &plan, &err), QHX_OK);
    /* The golden's (t, h, w) per prompt row. */
    const json_t *thw = json_object_get(gold, "mrope_positions_thw");
    int pos_bad = 0;
    for (int64_t i = 0; thw && i < n; i++)
        for (int a = 0; a < 3; a++)
            pos_bad += plan.pos[i * 3 + a] != json_integer_value(json_array_get(json_array_get(thw, (size_t)i), (size_t)a));
    CHECK_EQ(pos_bad, 0);

    /* Free-running greedy. */
    qhx_vl_state *s = NULL;
    CHECK_EQ(qhx_vl_state_create(m, n + ng, &s, &err), QHX_OK);
    float *logits = qhx_malloc((size_t)(rows * V) * sizeof(float));
    int64_t first_diff = ng;
    if (s && logits) {
        qhx_status rc = qhx_qwen3vl_eval(m, s, ids, n, &plan, 0, logits, QHX_VL_LOGITS_LAST, NULL, &err);
        CHECK_EQ(rc, QHX_OK);
        for (int64_t k = 0; !rc && k < ng; k++) {
            int32_t tok = argmax(logits, V);
            if (tok != greedy[k]) { first_diff = k; break; }
            if (k + 1 < ng) rc = qhx_qwen3vl_eval(m, s, &tok, 1, NULL, 0, logits, QHX_VL_LOGITS_LAST, NULL, &err);
        }
    }
    qhx_vl_state_free(s);
    s = NULL;
    if (first_diff < ng) {
        double mg = json_real_value(json_array_get(margins, (size_t)first_diff));
        fprintf(stderr, "%s: greedy diverges at step %lld (golden margin %.3g)\n", name, (long long)first_diff, mg);
        CHECK(mg < tau);
    }

    /* Teacher-forced rows: the prompt in one batch, then golden greedy[0..ng-2] one by one. */
    double lmax = 0;
    int flips = 0, over = 0;
    CHECK_EQ(qhx_vl_state_create(m, rows, &s, &err), QHX_OK);
    if (s && logits) {
        qhx_status rc = qhx_qwen3vl_eval(m, s, ids, n, &plan, 0, logits, QHX_VL_LOGITS_ALL, NULL, &err);
        for (int64_t k = 0; !rc && k + 1 < ng; k++)
            rc = qhx_qwen3vl_eval(m, s, &greedy[k], 1, NULL, 0, logits + (n + k) * V, QHX_VL_LOGITS_ALL, NULL, &err);
        CHECK_EQ(rc, QHX_OK);
        char fname[256];
        snprintf(fname, sizeof fname, "%s.logits.f32", name);
        float *want = read_f32(fname, (size_t)(rows * V));
        CHECK(want != NULL);
        for (int64_t r = 0; want && !rc && r < rows; r++) {
            double rm = 0;
            for (int64_t i = 0; i < V; i++) {
                double d = fabs((double)want[r * V + i] - logits[r * V + i]);
                if (d > rm) rm = d;
            }
            if (rm > lmax) lmax = rm;
            if (rm > tol) over++;
            int32_t top = argmax(logits + r * V, V);
            if (top != json_integer_value(json_array_get(row_top1, (size_t)r)) &&
                !(json_real_value(json_array_get(row_margins, (size_t)r)) < tau))
                flips++;
        }
        qhx_free(want);
    }
    CHECK_EQ(over, 0);
    CHECK_EQ(flips, 0);
    fprintf(stderr, "%-9s greedy %lld/%lld exact, logits max|d| %.3g (tol %g)%s", name, (long long)first_diff,
            (long long)ng, lmax, tol, is_img ? "" : "\n");
    if (is_img) fprintf(stderr, ", image_embd max|d| %.3g (tol %g)\n", embd_max, TOL_EMBD);

    /* Prefill split at every point (image prompts: also inside the image run) = one batch. */
    if (is_img && logits) {
        float *one = qhx_malloc((size_t)(n * V) * sizeof(float));
        double split_max = 0;
        for (int64_t cut = 1; one && cut < n; cut++) {
            qhx_vl_state *s2 = NULL;
            qhx_vl_state_create(m, n, &s2, &err);
            qhx_status rc = qhx_qwen3vl_eval(m, s2, ids, cut, &plan, 0, one, QHX_VL_LOGITS_ALL, NULL, &err);
            if (!rc) rc = qhx_qwen3vl_eval(m, s2, ids + cut, n - cut, &plan, cut, one + cut * V, QHX_VL_LOGITS_ALL, NULL, &err);
            CHECK_EQ(rc, QHX_OK);
            for (int64_t i = 0; i < n * V; i++) {
                double d = fabs((double)one[i] - logits[i]);
                if (d > split_max) split_max = d;
            }
            qhx_vl_state_free(s2);
        }
        CHECK(split_max <= 1e-5);
        qhx_free(one);
    }
    qhx_free(logits);
    qhx_vl_state_free(s);
    qhx_vl_plan_deinit(&plan);
out:
    qhx_vl_image_deinit(&im);
    qhx_free(ids);
    qhx_free(greedy);
}

static void test_layers(const qhx_qwen3vl *m, const json_t *prompts, const json_t *golden) {
    const json_t *lf = json_object_get(golden, "layers_file");
    const json_t *shape = json_object_get(lf, "shape");
    int64_t L = json_integer_value(json_array_get(shape, 0)), n = json_integer_value(json_array_get(shape, 1));
    int64_t D = json_integer_value(json_array_get(shape, 2));
    CHECK_EQ(L, m->cfg.num_hidden_layers);
    CHECK_EQ(D, m->cfg.hidden_size);
    const json_t *p = NULL;
    for (size_t i = 0; i < json_array_size(prompts); i++)
        if ((int64_t)json_array_size(json_object_get(json_array_get(prompts, i), "ids")) == n &&
            !json_object_get(json_array_get(prompts, i), "image"))
            p = json_array_get(prompts, i);
    CHECK(p != NULL);
    if (!p || L != m->cfg.num_hidden_layers || D != m->cfg.hidden_size) return;
    int64_t ni;
    int32_t *ids = json_ids(json_object_get(p, "ids"), &ni);
    float *want = read_f32(json_string_value(json_object_get(lf, "file")), (size_t)(L * n * D));
    float *got = qhx_malloc((size_t)(L * n * D) * sizeof(float));
    qhx_vl_state *s = NULL;
    qhx_error err;
    CHECK_EQ(qhx_vl_state_create(m, n, &s, &err), QHX_OK);
    CHECK_EQ(qhx_qwen3vl_eval(m, s, ids, n, NULL, 0, NULL, QHX_VL_LOGITS_NONE, got, &err), QHX_OK);
    for (int64_t l = 0; want && l < L; l++) {
        double mx = 0;
        for (int64_t i = 0; i < n * D; i++) {
            double d = fabs((double)want[l * n * D + i] - got[l * n * D + i]);
            if (d > mx) mx = d;
        }
        fprintf(stderr, "layer %lld: residual max|d| %.3g\n", (long long)l, mx);
        CHECK(mx <= TOL_LAYERS);
    }
    qhx_vl_state_free(s);
    qhx_free(got);
    qhx_free(want);
    qhx_free(ids);
}

static void test_errors(const qhx_qwen3vl *m, const json_t *prompts) {
    qhx_error err;
    qhx_vl_image im = {0};
    char *path = qhx_path_join(fixture, "image-64x96.png");
    CHECK_EQ(qhx_qwen3vl_image_load(m, path, &im, &err), QHX_OK);
    qhx_free(path);
    const json_t *p = NULL;
    for (size_t i = 0; i < json_array_size(prompts); i++)
        if (json_object_get(json_array_get(prompts, i), "image")) p = json_array_get(prompts, i);
    int64_t n;
    int32_t *ids = json_ids(json_object_get(p, "ids"), &n);
    qhx_vl_plan plan;
    /* Drop one pad: the count no longer matches the image. */
    int64_t j = 0;
    while (j < n && ids[j] != m->cfg.image_token_id) j++;
    memmove(ids + j, ids + j + 1, (size_t)(n - j - 1) * sizeof *ids);
    CHECK_EQ(qhx_qwen3vl_plan(m, ids, n - 1, &im, &plan, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "needs 6");
    CHECK_EQ(qhx_qwen3vl_plan(m, ids, n - 1, NULL, &plan, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "no image");
    int32_t bad = (int32_t)m->cfg.vocab_size;
    qhx_vl_state *s = NULL;
    CHECK_EQ(qhx_vl_state_create(m, 4, &s, &err), QHX_OK);
    CHECK_EQ(qhx_qwen3vl_eval(m, s, &bad, 1, NULL, 0, NULL, QHX_VL_LOGITS_NONE, NULL, &err), QHX_E_ARG);
    int32_t few[5] = {1, 2, 3, 4, 5};
    CHECK_EQ(qhx_qwen3vl_eval(m, s, few, 5, NULL, 0, NULL, QHX_VL_LOGITS_NONE, NULL, &err), QHX_E_LIMIT);
    qhx_vl_state_free(s);
    qhx_free(ids);
    qhx_vl_image_deinit(&im);
}

int main(void) {
    snprintf(fixture, sizeof fixture, "%s/fixtures/parity/qwen3vl-tiny-f32", QHX_SHARED_DIR);
    if (!qhx_path_is_dir(fixture)) {
        fprintf(stderr, "skip: no fixture at %s\n", fixture);
        return 77;
    }
    qhx_error err;
    qhx_qwen3vl *m = NULL;
    CHECK_EQ(qhx_qwen3vl_open(fixture, &m, &err), QHX_OK);
    if (!m) { fprintf(stderr, "%s\n", err.msg); return t_done("test_qwen3vl_golden"); }
    char *gp = qhx_path_join(fixture, "golden.json"), *pp = qhx_path_join(fixture, "prompts.json");
    json_t *golden = qhx_json_load_file(gp, &err), *prompts = qhx_json_load_file(pp, &err);
    qhx_free(gp);
    qhx_free(pp);
    CHECK(golden && prompts);
    if (golden && prompts) {
        for (size_t i = 0; i < json_array_size(prompts); i++) {
            const json_t *p = json_array_get(prompts, i);
            const json_t *g = json_object_get(json_object_get(golden, "prompts"), json_string_value(json_object_get(p, "name")));
            CHECK(g != NULL);
            if (g) run_prompt(m, p, g);
        }
        test_layers(m, prompts, golden);
        test_errors(m, prompts);
    }
    json_decref(golden);
    json_decref(prompts);
    qhx_qwen3vl_free(m);
    return t_done("test_qwen3vl_golden");
}
