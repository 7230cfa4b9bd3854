// ctest-labels: unit;golden
/* Thread-count and weights-mode invariance on the parity fixtures (qwen35-tiny-*, qwen3vl-tiny-*):
 * the same prompt (300 tokens, prefilled in steps of 64 so the chunked delta rule carries state
 * across steps and attention spans two key blocks) and 4 decode steps give bitwise-identical
 * logits with 1, 2 and 3 threads, with the weights read into memory or mapped, for the SIMD
 * kernels and the references. Qwen3-VL also encodes an image: its embeddings must match too.
 * Skips (77) when no fixture is present. */
#include "core/alloc.h"
#include "core/file.h"
#include "core/pool.h"
#include "core/rng.h"
#include "families/family.h"
#include "runtime/model.h"
#include "t.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_PROMPT 300
#define N_DECODE 4

typedef struct run_cfg {
    int threads;
    qhx_weights_mode weights;
    qhx_isa isa;
} run_cfg;

/* Logits of every prompt position and of each decode step: (N_PROMPT + N_DECODE, V); plus the
 * image embeddings (Qwen3-VL with a vision tower), *n_img floats. NULL on failure. */
static float *run(const char *dir, const run_cfg *c, int64_t *V_out, float **img, int64_t *n_img) {
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = c->threads;
    mp.weights = c->weights;
    mp.max_isa = c->isa;
    qhx_model *m = NULL;
    qhx_error err = {0};
    *img = NULL;
    *n_img = 0;
    if (qhx_model_open(dir, &mp, &m, &err)) {
        fprintf(stderr, "%s: %s\n", dir, err.msg);
        return NULL;
    }
    qhx_backend_info bi;
    qhx_model_backend_info(m, &bi);
    CHECK_EQ(bi.n_threads, c->threads);
    const int64_t V = qhx_model_n_vocab(m);
    *V_out = V;
    float *out = qhx_malloc((size_t)((N_PROMPT + N_DECODE) * V) * sizeof(float));
    int32_t ids[N_PROMPT + N_DECODE];
    qhx_rng rng;
    qhx_rng_seed(&rng, 7);
    for (int i = 0; i < N_PROMPT + N_DECODE; i++) ids[i] = (int32_t)qhx_rng_below(&rng, (uint64_t)(V < 900 ? V : 900));
    qhx_seq *st = NULL;
    qhx_seq_params sp = {.n_ctx = N_PROMPT + N_DECODE, .n_batch = 64};
    CHECK_EQ(qhx_model_state_create(m, &sp, &st, &err), QHX_OK);
    if (st && out) {
        qhx_forward_opts o = {.flags = QHX_FWD_LOGITS_ALL, .logits = out};
        CHECK_EQ(qhx_model_forward(m, st, ids, N_PROMPT, &o, &err), QHX_OK);
        for (int k = 0; k < N_DECODE; k++) {
            qhx_forward_opts od = {.logits = out + (N_PROMPT + k) * V};
            CHECK_EQ(qhx_model_forward(m, st, ids + N_PROMPT + k, 1, &od, &err), QHX_OK);
        }
    }
    char *png = qhx_path_join(dir, "image-64x64.png");
    if (qhx_model_takes_images(m) && png && qhx_path_is_file(png)) {
        qhx_image_embed im = {0};
        if (qhx_model_image_load(m, png, 0, &im, &err) == QHX_OK) {
            *n_img = im.n_tokens * im.row_width;
            *img = qhx_malloc((size_t)*n_img * sizeof(float));
            memcpy(*img, im.embd, (size_t)*n_img * sizeof(float));
        } else {
            fprintf(stderr, "%s: %s\n", png, err.msg);
            CHECK(0);
        }
        qhx_image_embed_deinit(&im);
    }
    qhx_free(png);
    qhx_model_state_free(st);
    qhx_model_free(m);
    return out;
}

static void check_case(const char *dir) {
    static const run_cfg simd[] = {{1, QHX_WEIGHTS_READ, QHX_ISA_BEST},
                                   {2, QHX_WEIGHTS_MMAP, QHX_ISA_BEST},
                                   {2, QHX_WEIGHTS_READ, QHX_ISA_BEST},
                                   {3, QHX_WEIGHTS_DEFAULT, QHX_ISA_BEST}};
    static const run_cfg ref[] = {{1, QHX_WEIGHTS_MMAP, QHX_ISA_REF}, {3, QHX_WEIGHTS_READ, QHX_ISA_REF}};
    const run_cfg *sets[2] = {simd, ref};
    const int counts[2] = {4, 2};
    for (int s = 0; s < 2; s++) {
        int64_t V = 0, n_img0 = 0;
        float *img0 = NULL;
        float *base = run(dir, &sets[s][0], &V, &img0, &n_img0);
        CHECK(base != NULL);
        if (!base) return;
        for (int i = 1; i < counts[s]; i++) {
            const run_cfg *c = &sets[s][i];
            int64_t V2 = 0, n_img = 0;
            float *img = NULL;
            float *got = run(dir, c, &V2, &img, &n_img);
            CHECK(got != NULL);
            CHECK_EQ(V2, V);
            if (got && V2 == V) {
                size_t bytes = (size_t)((N_PROMPT + N_DECODE) * V) * sizeof(float);
                int same = !memcmp(base, got, bytes);
                printf("  %s: isa %s, %d threads, weights %d: logits %s the %d-thread run\n", dir,
                       c->isa == QHX_ISA_REF ? "ref" : "best", c->threads, (int)c->weights,
                       same ? "bitwise equal to" : "DIFFER from", sets[s][0].threads);
                CHECK(same);
            }
            CHECK_EQ(n_img, n_img0);
            if (img && img0 && n_img == n_img0) {
                int same = !memcmp(img0, img, (size_t)n_img * sizeof(float));
                printf("  %s: image embeddings %s\n", dir, same ? "bitwise equal" : "DIFFER");
                CHECK(same);
            }
            qhx_free(img);
            qhx_free(got);
        }
        qhx_free(img0);
        qhx_free(base);
    }
}

int main(void) {
    static const char *const cases[] = {"qwen35-tiny-f32", "qwen35-tiny-bf16", "qwen3vl-tiny-f32"};
    int found = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/fixtures/parity/%s", QHX_DATA_DIR, cases[i]);
        if (!qhx_path_is_dir(dir)) continue;
        found++;
        check_case(dir);
    }
    if (!found) {
        fprintf(stderr, "FAIL: no fixtures under %s/fixtures/parity\n", QHX_DATA_DIR);
        return 1;
    }
    return t_done("test_threads");
}
