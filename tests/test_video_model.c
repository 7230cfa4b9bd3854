// ctest-labels: golden
/* test_video_model: a video prompt through the tiny vision checkpoints (qwen3vl-tiny-f32 and
 * qwen35vl-tiny-f32) against transformers (tests/data/video/model, made by
 * tests/hf/video_model_golden.py): the prompt ids the processor expands the chat template's video
 * into (timestamps, one vision run per temporal group) equal token for token; the logits of the
 * last prompt row and of 15 greedy steps within LOGIT_TOL of HF's; the 16 greedy ids exact. Then
 * the video errors through the prompt object: a model without a vision tower, a file that is no
 * video. Skipped (77) without FFmpeg in the build. */
#include "t.h"

#include "qhx.h"
#include "runtime/model.h"
#include "video/video.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Measured on one thread: 4.2e-4 (Qwen3-VL) and 2.1e-4 (Qwen3.5). Not a video effect: the text
 * rows before the video already differ that much (3.9e-4 and 3.4e-4 on the first four tokens;
 * HF's own text rows are unchanged by the video to 7e-7), and the video's embeddings agree to
 * 1.4e-6. The image prompts' gate is 5e-3. */
#define LOGIT_TOL 2e-3
/* The image embeddings' gate (docs/vision.md). */
#define EMBD_TOL 3e-3

static const char *path_of(const char *fmt, const char *a) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], fmt, a);
    return buf[k];
}

static float *read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    float *x = f ? malloc(n * sizeof *x) : NULL;
    size_t got = x ? fread(x, sizeof *x, n, f) : 0;
    if (f) fclose(f);
    if (got != n) {
        free(x);
        return NULL;
    }
    return x;
}

static void one_case(const char *fixture, const char *clip, const char *name, int thinking) {
    char gpath[1024];
    snprintf(gpath, sizeof gpath, "%s/video/model/%s.json", QHX_TEST_DATA, name);
    json_error_t je;
    json_t *g = json_load_file(gpath, 0, &je);
    CHECK(g != NULL);
    if (!g) return;
    qhx_error err = {0};
    qhx_model_params mp = qhx_model_default_params();
    mp.vision = 1;
    mp.n_threads = 1;
    qhx_model *m = NULL;
    CHECK_EQ(qhx_model_open(path_of(QHX_DATA_DIR "/fixtures/parity/%s", fixture), &mp, &m, &err), QHX_OK);
    if (!m) {
        fprintf(stderr, "%s\n", err.msg);
        json_decref(g);
        return;
    }
    const char *text = json_string_value(json_object_get(g, "text"));
    qhx_chat_content parts[2] = {{.video_path = path_of(QHX_TEST_DATA "/video/%s", clip)},
                                 {.text = text, .text_len = strlen(text)}};
    qhx_chat_turn turn = {.role = "user", .parts = parts, .n_parts = 2};
    qhx_chat_spec spec = {.turns = &turn, .n_turns = 1, .thinking = thinking};
    qhx_prompt *p = NULL;
    qhx_status rc = qhx_prompt_from_chat(m, &spec, &p, &err);
    if (rc) fprintf(stderr, "%s: %s\n", name, err.msg);
    CHECK_EQ(rc, QHX_OK);
    size_t n = 0;
    const qhx_token *ids = p ? qhx_prompt_ids(p, &n) : NULL;
    json_t *want = json_object_get(g, "prompt_ids");
    CHECK_EQ(n, json_array_size(want));
    int ids_equal = n == json_array_size(want);
    for (size_t i = 0; ids_equal && i < n; i++) ids_equal = ids[i] == json_integer_value(json_array_get(want, i));
    CHECK(ids_equal);
    if (!ids_equal && p) fprintf(stderr, "%s: prompt text:\n%s\n", name, qhx_prompt_text(p, NULL));
    /* the logits, the greedy ids */
    const int64_t V = qhx_model_n_vocab(m);
    json_t *greedy = json_object_get(g, "greedy");
    const size_t n_rows = (size_t)json_integer_value(json_object_get(g, "n_rows"));
    float *rows = read_f32(path_of(QHX_TEST_DATA "/video/model/%s.logits.f32", name), n_rows * (size_t)V);
    CHECK(rows != NULL);
    qhx_session_params sp = qhx_session_default_params(m);
    qhx_session *s = NULL;
    CHECK_EQ(qhx_session_create(m, &sp, &s, &err), QHX_OK);
    if (p && s && rows && ids_equal) {
        CHECK_EQ(qhx_session_feed_prompt(s, p, 0, n, &err), QHX_OK);
        double worst = 0;
        int exact = 1;
        for (size_t step = 0; step < json_array_size(greedy); step++) {
            const float *lg = qhx_session_logits(s);
            qhx_token best = 0;
            for (int64_t v = 0; v < V; v++) {
                if (lg[v] > lg[best]) best = (qhx_token)v;
                if (step < n_rows) {
                    double d = fabs((double)lg[v] - (double)rows[step * (size_t)V + (size_t)v]);
                    if (d > worst) worst = d;
                }
            }
            exact &= best == json_integer_value(json_array_get(greedy, step));
            if (qhx_session_feed(s, &best, 1, &err)) break;
        }
        CHECK(exact);
        CHECK(worst <= LOGIT_TOL);
        printf("test_video_model: %s: %zu prompt ids equal, greedy %zu/%zu exact, max |d logit| %.3g\n", name, n,
               exact ? json_array_size(greedy) : 0, json_array_size(greedy), worst);
    }
    qhx_session_free(s);
    qhx_prompt_free(p);
    free(rows);
    /* the vision tower's rows for the video, group after group, against HF's visual() */
    qhx_video_embed ve;
    CHECK_EQ(qhx_model_video_load(m, path_of(QHX_TEST_DATA "/video/%s", clip), 0, 0, &ve, &err), QHX_OK);
    if (ve.frames) {
        const int64_t rw = ve.frames[0].row_width;
        float *want_e = read_f32(path_of(QHX_TEST_DATA "/video/model/%s.video_embd.f32", name), (size_t)(ve.n_tokens * rw));
        CHECK(want_e != NULL);
        double worst = 0;
        for (int grp = 0, o = 0; want_e && grp < ve.n_frames; grp++)
            for (int64_t i = 0; i < ve.frames[grp].n_tokens * rw; i++, o++) {
                double d = fabs((double)ve.frames[grp].embd[i] - (double)want_e[o]);
                if (d > worst) worst = d;
            }
        CHECK(worst <= EMBD_TOL);
        printf("test_video_model: %s: %d groups of %lld tokens, max |d embedding| %.3g\n", name, ve.n_frames,
               (long long)ve.frames[0].n_tokens, worst);
        free(want_e);
        qhx_video_embed_deinit(&ve);
    }
    /* a file that is not a video: one line naming it */
    parts[0].video_path = path_of(QHX_TEST_DATA "/video/%s", "garbage.mp4");
    CHECK_EQ(qhx_prompt_from_chat(m, &spec, &p, &err), QHX_E_FORMAT);
    CHECK(strstr(err.msg, "garbage.mp4") && !strchr(err.msg, '\n'));
    qhx_model_free(m);
    json_decref(g);
}

int main(void) {
    qhx_error err = {0};
    qhx_model *t = NULL;
    CHECK_EQ(qhx_model_open(QHX_DATA_DIR "/fixtures/parity/qwen35-tiny-f32", NULL, &t, &err), QHX_OK);
    if (t) { /* a model without a vision tower */
        qhx_chat_content parts[2] = {{.video_path = QHX_TEST_DATA "/video/h264.mp4"}, {.text = "x", .text_len = 1}};
        qhx_chat_turn turn = {.role = "user", .parts = parts, .n_parts = 2};
        qhx_chat_spec spec = {.turns = &turn, .n_turns = 1};
        qhx_prompt *p = NULL;
        CHECK_EQ(qhx_prompt_from_chat(t, &spec, &p, &err), QHX_E_UNSUPPORTED);
        CHECK(strstr(err.msg, "takes no images") != NULL);
        qhx_model_free(t);
    }
    if (!qhx_video_available()) {
        printf("test_video_model: no FFmpeg in this build: skipped\n");
        return t_done("test_video_model") ? 1 : 77;
    }
    one_case("qwen3vl-tiny-f32", "h264.mp4", "qwen3vl-tiny-f32.h264", 0);
    one_case("qwen35vl-tiny-f32", "vp9.webm", "qwen35vl-tiny-f32.vp9", 1);
    return t_done("test_video_model");
}
