// ctest-labels: unit
/* test_profile: the per-op profile (devices/profile.h, QHX_PROFILE).
 *   - qhx_weight_bytes for every format against sizes worked out by hand from docs/formats.md;
 *   - a model opened with QHX_PROFILE gives bit for bit the logits of one opened without it
 *     (prefill and decode, both families' parity fixtures), and the profile is there only then;
 *   - every decode step counts the same linear calls and weight bytes, those bytes are the
 *     bytes of the model's matrices (f32 checkpoints: as stored), and the clear starts again
 *     from zero. */
#include "devices/profile.h"
#include "io/safetensors.h"
#include "runtime/model.h"
#include "t.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_weight_bytes(void) {
    qhx_weight w = {.rows = 3, .cols = 512};
    w.fmt = QHX_W_F32;
    CHECK_EQ(qhx_weight_bytes(&w), 3 * 512 * 4);
    w.fmt = QHX_W_F16;
    CHECK_EQ(qhx_weight_bytes(&w), 3 * 512 * 2);
    w.fmt = QHX_W_BF16;
    CHECK_EQ(qhx_weight_bytes(&w), 3 * 512 * 2);
    w.fmt = QHX_W_Q8; /* int8 codes and one f32 scale per row */
    CHECK_EQ(qhx_weight_bytes(&w), 3 * 512 + 3 * 4);
    w.fmt = QHX_W_Q4, w.group = 64; /* nibbles and one f16 scale per group of 64 */
    CHECK_EQ(qhx_weight_bytes(&w), 3 * 256 + 3 * 8 * 2);
    w.fmt = QHX_W_Q6, w.group = 32; /* 4 low bits, 2 high bits, an f16 scale per group of 32 */
    CHECK_EQ(qhx_weight_bytes(&w), 3 * 256 + 3 * 128 + 3 * 16 * 2);
    w.fmt = QHX_W_Q4A, w.group = 32, w.cols = 288; /* 9 groups: (s, z) bytes each; 2 super-blocks */
    CHECK_EQ(qhx_weight_bytes(&w), 3 * 144 + 3 * 9 * 2 + 3 * 2 * 2);
}

/* Bytes of the matrices a decode step multiplies by: every 2-D decoder tensor and the head
 * (the embedding where the head is tied); not the embedding lookup, the vision tower or MTP. */
static int64_t linear_bytes(const qhx_model *m) {
    const qhx_st_set *set = qhx_model_tensors(m);
    if (!set) return -1;
    const bool tied = !qhx_st_find(set, "lm_head.weight");
    int64_t total = 0;
    for (int64_t i = 0; i < qhx_st_n_tensors(set); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        if (t->n_dims != 2 || !strncmp(t->name, "mtp.", 4) || strstr(t->name, "visual.")) continue;
        if (strstr(t->name, "embed_tokens") && !tied) continue;
        total += (int64_t)t->size;
    }
    return total;
}

typedef struct run_out {
    float *logits; /* (n_steps + 1, V): the prompt's last row, then each decode step's */
    qhx_op_profile step[4];
    bool profiled;
} run_out;

enum { NP = 7, NSTEP = 4 };

static void run(const char *path, bool profile, run_out *o, int64_t *V_out, int64_t *tensor_bytes) {
    if (profile) setenv("QHX_PROFILE", "1", 1);
    else unsetenv("QHX_PROFILE");
    qhx_error err = {0};
    qhx_model *m = NULL;
    CHECK_EQ(qhx_model_open(path, NULL, &m, &err), QHX_OK);
    if (!m) return;
    const int64_t V = qhx_model_get_config(m)->vocab_size;
    *V_out = V;
    *tensor_bytes = linear_bytes(m);
    o->logits = calloc((size_t)((NSTEP + 1) * V), sizeof(float));
    qhx_seq *st = NULL;
    CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 32}, &st, &err), QHX_OK);
    const int32_t prompt[NP] = {3, 141, 59, 26, 5, 35, 89};
    qhx_forward_opts fo = {.logits = o->logits};
    CHECK_EQ(qhx_model_forward(m, st, prompt, NP, &fo, &err), QHX_OK);
    qhx_op_profile p;
    o->profiled = qhx_model_op_profile(m, &p, true);
    if (o->profiled) CHECK(p.calls[QHX_PROF_LINEAR] > 0 && p.weight_bytes[QHX_PROF_LINEAR] > 0);
    for (int i = 0; i < NSTEP; i++) {
        const int32_t id = 100 + 7 * i;
        fo.logits = o->logits + (i + 1) * V;
        CHECK_EQ(qhx_model_forward(m, st, &id, 1, &fo, &err), QHX_OK);
        CHECK_EQ(qhx_model_op_profile(m, &o->step[i], true), o->profiled);
    }
    if (o->profiled) { /* cleared by the last read */
        CHECK(qhx_model_op_profile(m, &p, false));
        for (int k = 0; k < QHX_PROF_COUNT; k++) CHECK(p.calls[k] == 0 && p.ns[k] == 0 && p.weight_bytes[k] == 0);
    }
    qhx_model_state_free(st);
    qhx_model_free(m);
}

static void check_model(const char *path) {
    run_out plain = {0}, prof = {0};
    int64_t V = 0, V2 = 0, tb = 0, tb2 = 0;
    run(path, false, &plain, &V, &tb);
    run(path, true, &prof, &V2, &tb2);
    unsetenv("QHX_PROFILE");
    CHECK(!plain.profiled);
    CHECK(prof.profiled);
    CHECK_EQ(V, V2);
    CHECK_EQ(tb, tb2);
    if (plain.logits && prof.logits)
        CHECK(memcmp(plain.logits, prof.logits, (size_t)((NSTEP + 1) * V) * sizeof(float)) == 0);
    for (int k = 0; k < QHX_PROF_COUNT; k++) CHECK(plain.step[0].calls[k] == 0);
    const qhx_op_profile *s0 = &prof.step[0];
    CHECK(s0->calls[QHX_PROF_LINEAR] > 0);
    CHECK_EQ(s0->weight_bytes[QHX_PROF_LINEAR], tb2); /* f32 checkpoints: the tensors as stored */
    CHECK_EQ(s0->fmt_calls[QHX_W_F32], s0->calls[QHX_PROF_LINEAR]); /* every matrix is f32 */
    CHECK_EQ(s0->fmt_bytes[QHX_W_F32], s0->weight_bytes[QHX_PROF_LINEAR]);
    CHECK_EQ(s0->fmt_ns[QHX_W_F32], s0->ns[QHX_PROF_LINEAR]);
    CHECK(s0->calls[QHX_PROF_NORM] > 0);
    CHECK(s0->calls[QHX_PROF_ATTENTION] > 0);
    for (int i = 1; i < NSTEP; i++) /* every decode step runs the same ops over the same weights */
        for (int k = 0; k < QHX_PROF_COUNT; k++) {
            CHECK_EQ(prof.step[i].calls[k], s0->calls[k]);
            CHECK_EQ(prof.step[i].weight_bytes[k], s0->weight_bytes[k]);
        }
    printf("%s: %lld linear calls, %lld weight bytes per decode step (%lld bytes of matrices)\n", path,
           (long long)s0->calls[QHX_PROF_LINEAR], (long long)s0->weight_bytes[QHX_PROF_LINEAR], (long long)tb);
    free(plain.logits);
    free(prof.logits);
}

int main(void) {
    check_weight_bytes();
    static const char *const fixtures[] = {"qwen35-tiny-f32", "qwen3vl-tiny-f32"};
    for (int i = 0; i < 2; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/fixtures/parity/%s", QHX_DATA_DIR, fixtures[i]);
        check_model(path);
    }
    return t_done("test_profile");
}
