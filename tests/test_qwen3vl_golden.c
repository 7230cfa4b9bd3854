// ctest-labels: golden
/* test_qwen3vl_golden: the Qwen3-VL parity fixtures (qwen3vl-tiny-f32 and any other qwen3vl-*;
 * fixtures/parity/README.md §5).
 * For every prompt: free-running greedy (32 tokens, tolerant gate), teacher-forced logits of
 * every row (prompt prefill, then the golden tokens one at a time), and for image prompts the
 * image embeddings; p033's per-layer residual stream; prompt/image count errors; that
 * splitting a prefill anywhere (also inside the image run) gives the same logits; and that a
 * decode step allocates nothing. Every fixtures/parity/qwen3vl-* case is run; fails when there
 * is none. */
#include "t.h"

#include "core/alloc.h"
#include "core/file.h"
#include "io/json.h"
#include "runtime/model.h"
#include "runtime/model.h"
#include "runtime/session.h"

#include <dirent.h>
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

/* A state for n_ctx tokens whose prompt ids (n,) are announced with image (may be NULL). */
static qhx_seq *new_state(const qhx_model *m, int64_t n_ctx, int64_t n_batch, const qhx_image_embed *im,
                                  const int32_t *ids, int64_t n) {
    qhx_seq *st = NULL;
    qhx_error err;
    qhx_seq_params sp = {.n_ctx = n_ctx, .n_batch = n_batch};
    CHECK_EQ(qhx_model_state_create(m, &sp, &st, &err), QHX_OK);
    if (st) CHECK_EQ(qhx_model_state_attach(st, im, im ? 1 : 0, ids, n, &err), QHX_OK);
    return st;
}

static qhx_status feed(const qhx_model *m, qhx_seq *st, const int32_t *ids, int64_t n, float *logits,
                       int all) {
    qhx_forward_opts o = {.flags = all ? QHX_FWD_LOGITS_ALL : 0u, .logits = logits};
    qhx_error err;
    qhx_status rc = qhx_model_forward(m, st, ids, n, &o, &err);
    if (rc) fprintf(stderr, "forward: %s\n", err.msg);
    return rc;
}

static void run_prompt(const qhx_model *m, const json_t *prompt, const json_t *gold) {
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
    int64_t V = qhx_model_n_vocab(m), rows = n + ng - 1;
    qhx_error err = {0};
    qhx_image_embed im = {0};
    const qhx_image_embed *imp = is_img ? &im : NULL;
    double embd_max = 0;
    if (is_img) {
        char *path = qhx_path_join(fixture, image);
        qhx_status rc = qhx_model_image_load(m, path, 0, &im, &err);
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

    /* Free-running greedy; the positions of the prompt against the golden (t, h, w). */
    float *logits = qhx_malloc((size_t)(rows * V) * sizeof(float));
    qhx_seq *st = new_state(m, n + ng, 0, imp, ids, n);
    int64_t first_diff = ng;
    if (st && logits) {
        const int64_t *pos;
        CHECK_EQ(qhx_model_state_positions(st, &pos), n);
        const json_t *thw = json_object_get(gold, "mrope_positions_thw");
        int pos_bad = 0;
        for (int64_t i = 0; thw && i < n; i++)
            for (int a = 0; a < 3; a++)
                pos_bad += pos[i * 3 + a] != json_integer_value(json_array_get(json_array_get(thw, (size_t)i), (size_t)a));
        CHECK_EQ(pos_bad, 0);
        qhx_status rc = feed(m, st, ids, n, logits, 0);
        CHECK_EQ(rc, QHX_OK);
        int64_t allocs = -1;
        for (int64_t k = 0; !rc && k < ng; k++) {
            int32_t tok = qhx_argmax_f32(logits, V);
            if (tok != greedy[k]) { first_diff = k; break; }
            if (k == 1) allocs = qhx_alloc_count();
            if (k + 1 < ng) rc = feed(m, st, &tok, 1, logits, 0);
        }
        if (allocs >= 0 && first_diff == ng) CHECK_EQ(qhx_alloc_count() - allocs, 0); /* decode allocates nothing */
    }
    qhx_model_state_free(st);
    if (first_diff < ng) {
        double mg = json_real_value(json_array_get(margins, (size_t)first_diff));
        fprintf(stderr, "%s: greedy diverges at step %lld (golden margin %.3g)\n", name, (long long)first_diff, mg);
        CHECK(mg < tau);
    }

    /* Teacher-forced rows: the prompt in one batch, then golden greedy[0..ng-2] one by one. */
    double lmax = 0;
    int flips = 0, over = 0;
    st = new_state(m, rows, 0, imp, ids, n);
    if (st && logits) {
        qhx_status rc = feed(m, st, ids, n, logits, 1);
        for (int64_t k = 0; !rc && k + 1 < ng; k++) rc = feed(m, st, &greedy[k], 1, logits + (n + k) * V, 1);
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
            int32_t top = qhx_argmax_f32(logits + r * V, V);
            if (top != json_integer_value(json_array_get(row_top1, (size_t)r)) &&
                !(json_real_value(json_array_get(row_margins, (size_t)r)) < tau))
                flips++;
        }
        qhx_free(want);
    }
    qhx_model_state_free(st);
    CHECK_EQ(over, 0);
    CHECK_EQ(flips, 0);
    fprintf(stderr, "%-9s greedy %lld/%lld exact, logits max|d| %.3g (tol %g)", name, (long long)first_diff,
            (long long)ng, lmax, tol);
    if (is_img) fprintf(stderr, ", image_embd max|d| %.3g (tol %g)", embd_max, TOL_EMBD);
    fprintf(stderr, "\n");

    /* The prompt split at every point (image prompts: also inside the image run), and in
     * batches of 3 tokens, gives the logits of one batch. */
    if (logits) {
        float *part = qhx_malloc((size_t)(n * V) * sizeof(float));
        double split_max = 0;
        for (int64_t cut = is_img ? 1 : n; part && cut <= n; cut++) {
            st = new_state(m, n, cut == n && n > 3 ? 3 : 0, imp, ids, n);
            qhx_status rc = st ? feed(m, st, ids, cut, part, 1) : QHX_E_NOMEM;
            if (!rc && cut < n) rc = feed(m, st, ids + cut, n - cut, part + cut * V, 1);
            CHECK_EQ(rc, QHX_OK);
            for (int64_t i = 0; !rc && i < n * V; i++) {
                double d = fabs((double)part[i] - logits[i]);
                if (d > split_max) split_max = d;
            }
            qhx_model_state_free(st);
        }
        CHECK(split_max <= 1e-5);
        qhx_free(part);
    }
    qhx_free(logits);
out:
    qhx_image_embed_deinit(&im);
    qhx_free(ids);
    qhx_free(greedy);
}

typedef struct layer_cap {
    float *x; /* (L, n, H) */
    int64_t n, H;
} layer_cap;

static void on_layer(void *user, int64_t layer, int64_t pos0, const float *x, int64_t n) {
    layer_cap *c = user;
    if (layer < 0) return; /* the embedding rows */
    memcpy(c->x + (layer * c->n + pos0) * c->H, x, (size_t)(n * c->H) * sizeof(float));
}

static void test_layers(const qhx_model *m, const json_t *prompts, const json_t *golden) {
    const json_t *lf = json_object_get(golden, "layers_file");
    const json_t *shape = json_object_get(lf, "shape");
    int64_t L = json_integer_value(json_array_get(shape, 0)), n = json_integer_value(json_array_get(shape, 1));
    int64_t D = json_integer_value(json_array_get(shape, 2));
    const qhx_model_config *c = qhx_model_get_config(m);
    CHECK_EQ(L, c->num_hidden_layers);
    CHECK_EQ(D, c->hidden_size);
    const json_t *p = NULL;
    for (size_t i = 0; i < json_array_size(prompts); i++)
        if ((int64_t)json_array_size(json_object_get(json_array_get(prompts, i), "ids")) == n &&
            !json_object_get(json_array_get(prompts, i), "image"))
            p = json_array_get(prompts, i);
    CHECK(p != NULL);
    if (!p || L != c->num_hidden_layers || D != c->hidden_size) return;
    int64_t ni;
    int32_t *ids = json_ids(json_object_get(p, "ids"), &ni);
    float *want = read_f32(json_string_value(json_object_get(lf, "file")), (size_t)(L * n * D));
    layer_cap cap = {qhx_malloc((size_t)(L * n * D) * sizeof(float)), n, D};
    qhx_seq *st = new_state(m, n, 0, NULL, ids, n);
    qhx_forward_opts o = {.layer_cb = on_layer, .layer_cb_user = &cap};
    qhx_error err;
    CHECK_EQ(qhx_model_forward(m, st, ids, n, &o, &err), QHX_OK);
    for (int64_t l = 0; want && l < L; l++) {
        double mx = 0;
        for (int64_t i = 0; i < n * D; i++) {
            double d = fabs((double)want[l * n * D + i] - cap.x[l * n * D + i]);
            if (d > mx) mx = d;
        }
        fprintf(stderr, "layer %lld: residual max|d| %.3g\n", (long long)l, mx);
        CHECK(mx <= TOL_LAYERS);
    }
    qhx_model_state_free(st);
    qhx_free(cap.x);
    qhx_free(want);
    qhx_free(ids);
}

/* Wrong pad counts, split pad runs, pads without an image, and ids that differ from the
 * announced prompt, on the case's last image prompt. */
static void test_errors(const qhx_model *m, const json_t *prompts, int64_t pad_id) {
    qhx_error err;
    qhx_image_embed im = {0};
    const json_t *p = NULL;
    for (size_t i = 0; i < json_array_size(prompts); i++)
        if (json_object_get(json_array_get(prompts, i), "image")) p = json_array_get(prompts, i);
    if (!p) return;
    char *path = qhx_path_join(fixture, json_string_value(json_object_get(p, "image")));
    CHECK_EQ(qhx_model_image_load(m, path, 0, &im, &err), QHX_OK);
    qhx_free(path);
    int64_t n;
    int32_t *ids = json_ids(json_object_get(p, "ids"), &n);
    char need[64];
    snprintf(need, sizeof need, "needs %lld", (long long)im.n_tokens);
    qhx_seq *st = NULL;
    qhx_seq_params sp = {.n_ctx = n};
    CHECK_EQ(qhx_model_state_create(m, &sp, &st, &err), QHX_OK);
    /* Drop one pad: the count no longer matches the image. */
    int32_t *fewer = qhx_malloc((size_t)n * sizeof *fewer);
    int64_t j = 0;
    while (j < n && ids[j] != pad_id) j++;
    memcpy(fewer, ids, (size_t)n * sizeof *ids);
    memmove(fewer + j, fewer + j + 1, (size_t)(n - j - 1) * sizeof *ids);
    CHECK_EQ(qhx_model_state_attach(st, &im, 1, fewer, n - 1, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, need);
    CHECK_EQ(qhx_model_state_attach(st, NULL, 0, ids, n, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "no image");
    /* Pads split in two runs. */
    memcpy(fewer, ids, (size_t)n * sizeof *ids);
    fewer[j + 1] = 198;
    fewer[n - 1] = (int32_t)pad_id;
    CHECK_EQ(qhx_model_state_attach(st, &im, 1, fewer, n, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "contiguous");
    /* Feeding other ids than the announced ones is refused. */
    CHECK_EQ(qhx_model_state_attach(st, &im, 1, ids, n, &err), QHX_OK);
    int32_t other = ids[0] == 5 ? 6 : 5;
    CHECK_EQ(qhx_model_forward(m, st, &other, 1, NULL, &err), QHX_E_ARG);
    CHECK_CONTAINS(err.msg, "announced");
    qhx_model_state_free(st);
    qhx_free(fewer);
    qhx_free(ids);
    qhx_image_embed_deinit(&im);
}

/* One fixture case: every prompt, the layer file, the error paths. */
static void run_case(void) {
    qhx_error err;
    qhx_model *m = NULL;
    fprintf(stderr, "== %s\n", fixture);
    /* the goldens' logit tolerance is below the f16 cache's effect (~1e-3): an f32 cache */
    qhx_model_params mp = qhx_model_default_params();
    mp.kv_cache = QHX_KV_F32;
    CHECK_EQ(qhx_model_open(fixture, &mp, &m, &err), QHX_OK);
    if (!m) { fprintf(stderr, "%s\n", err.msg); return; }
    CHECK_STR(qhx_model_family_name(m), "qwen3_vl");
    CHECK(qhx_model_takes_images(m));
    char *gp = qhx_path_join(fixture, "golden.json"), *pp = qhx_path_join(fixture, "prompts.json");
    char *cp = qhx_path_join(fixture, "config.json");
    json_t *golden = qhx_json_load_file(gp, &err), *prompts = qhx_json_load_file(pp, &err);
    json_t *config = qhx_json_load_file(cp, &err);
    qhx_free(gp);
    qhx_free(pp);
    qhx_free(cp);
    CHECK(golden && prompts && config);
    if (golden && prompts && config) {
        for (size_t i = 0; i < json_array_size(prompts); i++) {
            const json_t *p = json_array_get(prompts, i);
            const json_t *g = json_object_get(json_object_get(golden, "prompts"), json_string_value(json_object_get(p, "name")));
            CHECK(g != NULL);
            if (g) run_prompt(m, p, g);
        }
        if (json_object_get(golden, "layers_file")) test_layers(m, prompts, golden);
        const json_t *pad = json_object_get(config, "image_token_id");
        test_errors(m, prompts, pad ? json_integer_value(pad) : 151655);
    }
    json_decref(golden);
    json_decref(prompts);
    json_decref(config);
    qhx_model_free(m);
}

int main(void) {
    char root[2048];
    snprintf(root, sizeof root, "%s/fixtures/parity", QHX_DATA_DIR);
    DIR *d = opendir(root);
    int found = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, "qwen3vl-", 8)) continue;
        snprintf(fixture, sizeof fixture, "%s/%s", root, de->d_name);
        if (!qhx_path_is_dir(fixture)) continue;
        found = 1;
        run_case();
    }
    if (d) closedir(d);
    if (!found) {
        fprintf(stderr, "FAIL: no qwen3vl-* fixture under %s\n", root);
        return 1;
    }
    return t_done("test_qwen3vl_golden");
}
