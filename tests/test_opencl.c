// ctest-labels: unit;golden
/* The OpenCL device through the library (the op harness, test_device_ops.c, checks every op;
 * tests/cli/opencl.sh the fixtures' goldens): one decode step over several sessions on the
 * device gives each session the logits it gets alone on the device, bit for bit; a w8 and a q4
 * bundle forged from the tiny fixture give the CPU's greedy ids (f32 activations) on several
 * prompts; a checkpoint
 * of the state on the device rolls a session back exactly, and a session file written from it
 * restores it exactly; the layer callback and the MTP block
 * on the device against the CPU; the device names and their errors. Skipped (77) without an OpenCL build or platform, unless
 * QHX_REQUIRE_OPENCL=1. */
#include "devices/device.h"
#include "qhx.h"
#include "runtime/model.h"
#include "t.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[1024];

/* Tokenize text and feed it after what s holds (the prompt object). */
static qhx_status feed_text(const qhx_model *m, qhx_session *s, const char *text, size_t len, qhx_error *err) {
    qhx_prompt *p = NULL;
    qhx_status rc = qhx_prompt_from_text(m, text, len, &p, err);
    size_t n = 0;
    qhx_prompt_ids(p, &n);
    if (!rc && n) rc = qhx_session_feed_prompt(s, p, 0, n, err);
    qhx_prompt_free(p);
    return rc;
}

static qhx_model *open_on(const char *path, const char *device) {
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = 2;
    mp.backend = device;
    /* the CPU with f32 activations: the arithmetic of the OpenCL kernels (the CPU's default
       int8 activations for q4 round differently, enough to flip a near tie) */
    mp.prefill_math = mp.decode_math = QHX_PREFILL_MATH_F32;
    qhx_model *m = NULL;
    qhx_error err = {0};
    if (qhx_model_open(path, &mp, &m, &err)) fprintf(stderr, "%s on %s: %s\n", path, device ? device : "cpu", err.msg);
    return m;
}

static qhx_session *session(qhx_model *m) {
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = 256;
    qhx_session *s = NULL;
    qhx_session_create(m, &sp, &s, NULL);
    return s;
}

static const char *PROMPTS[3] = {"Hello there", "The capital of France is", "Once upon a time, in a land far away"};
enum { NB = 3, STEPS = 8 };

/* NB sessions decoded together against the same prompts alone, all on the device */
static void test_decode_multi(const char *path) {
    qhx_model *m = open_on(path, "opencl");
    CHECK(m != NULL);
    if (!m) return;
    qhx_session *together[NB], *alone[NB];
    const int64_t V = qhx_model_n_vocab(m);
    for (int b = 0; b < NB; b++) {
        together[b] = session(m), alone[b] = session(m);
        CHECK_EQ(feed_text(m, together[b], PROMPTS[b], strlen(PROMPTS[b]), NULL), QHX_OK);
        CHECK_EQ(feed_text(m, alone[b], PROMPTS[b], strlen(PROMPTS[b]), NULL), QHX_OK);
    }
    int same = 1;
    for (int k = 0; k < STEPS; k++) {
        qhx_token t[NB];
        for (int b = 0; b < NB; b++) {
            same &= !memcmp(qhx_session_logits(together[b]), qhx_session_logits(alone[b]), (size_t)V * sizeof(float));
            t[b] = qhx_session_sample(alone[b]);
            CHECK_EQ(qhx_session_feed(alone[b], &t[b], 1, NULL), QHX_OK);
        }
        size_t done = 0;
        CHECK_EQ(qhx_sessions_decode(together, t, NB, &done, NULL), QHX_OK);
        CHECK_EQ(done, NB);
    }
    for (int b = 0; b < NB; b++)
        same &= !memcmp(qhx_session_logits(together[b]), qhx_session_logits(alone[b]), (size_t)V * sizeof(float));
    if (!same) fprintf(stderr, "%s: batched logits on opencl differ from alone on opencl\n", path);
    CHECK(same);
    for (int b = 0; b < NB; b++) qhx_session_free(together[b]), qhx_session_free(alone[b]);
    qhx_model_free(m);
}

/* greedy ids of PROMPTS[p], STEPS of them */
static void greedy(qhx_model *m, int p, qhx_token *out) {
    qhx_session *s = session(m);
    CHECK(s != NULL);
    if (!s) return;
    CHECK_EQ(feed_text(m, s, PROMPTS[p], strlen(PROMPTS[p]), NULL), QHX_OK);
    for (int k = 0; k < STEPS; k++) {
        out[k] = qhx_session_sample(s);
        CHECK_EQ(qhx_session_feed(s, &out[k], 1, NULL), QHX_OK);
    }
    qhx_session_free(s);
}

/* a quantized bundle: the device's greedy ids are the CPU's */
static void test_quantized(const char *precision) {
    char out[1200], cmd[4096];
    snprintf(out, sizeof out, "%s/bundle-%s", dir, precision);
    snprintf(cmd, sizeof cmd, "'%s/qhx' forge '%s/fixtures/parity/qwen35-tiny-f32' '%s' --precision %s >/dev/null 2>&1",
             QHX_BIN_DIR, QHX_DATA_DIR, out, precision);
    if (system(cmd)) {
        fprintf(stderr, "qhx forge --precision %s failed (is %s/qhx built?)\n", precision, QHX_BIN_DIR);
        CHECK(0);
        return;
    }
    qhx_model *cpu = open_on(out, NULL), *ocl = open_on(out, "opencl");
    CHECK(cpu && ocl);
    for (int p = 0; cpu && ocl && p < NB; p++) {
        qhx_token a[STEPS] = {0}, b[STEPS] = {0};
        greedy(cpu, p, a);
        greedy(ocl, p, b);
        if (memcmp(a, b, sizeof a)) fprintf(stderr, "%s prompt %d: greedy ids differ between cpu and opencl\n", precision, p);
        CHECK(!memcmp(a, b, sizeof a));
    }
    qhx_model_free(cpu);
    qhx_model_free(ocl);
}

/* the sequence state on the device through a checkpoint: rolled back, the same logits and the
 * same greedy continuation (qwen35: KV rows, conv FIFO and the SSM state all come back) */
static void test_checkpoint(const char *path) {
    qhx_model *m = open_on(path, "opencl");
    CHECK(m != NULL);
    if (!m) return;
    const int64_t V = qhx_model_n_vocab(m);
    qhx_session *s = session(m);
    const char *t = "A checkpoint here";
    CHECK_EQ(feed_text(m, s, t, strlen(t), NULL), QHX_OK);
    qhx_checkpoint *cp = NULL;
    CHECK_EQ(qhx_session_checkpoint(s, &cp, NULL), QHX_OK);
    float *at = malloc((size_t)V * sizeof(float));
    memcpy(at, qhx_session_logits(s), (size_t)V * sizeof(float));
    qhx_token first[STEPS], again[STEPS];
    for (int k = 0; k < STEPS; k++) {
        first[k] = qhx_session_sample(s);
        CHECK_EQ(qhx_session_feed(s, &first[k], 1, NULL), QHX_OK);
    }
    CHECK_EQ(qhx_session_rollback(s, cp, NULL), QHX_OK);
    CHECK(!memcmp(at, qhx_session_logits(s), (size_t)V * sizeof(float)));
    for (int k = 0; k < STEPS; k++) {
        again[k] = qhx_session_sample(s);
        CHECK_EQ(qhx_session_feed(s, &again[k], 1, NULL), QHX_OK);
    }
    CHECK(!memcmp(first, again, sizeof first));
    /* a session file written from the device and restored into a fresh session on it */
    char file[1200];
    snprintf(file, sizeof file, "%s/session.qhxs", dir);
    CHECK_EQ(qhx_session_rollback(s, cp, NULL), QHX_OK);
    CHECK_EQ(qhx_session_save(s, file, NULL), QHX_OK);
    qhx_session *r = session(m);
    CHECK(r != NULL);
    if (r) {
        CHECK_EQ(qhx_session_restore(r, file, NULL), QHX_OK);
        CHECK(!memcmp(at, qhx_session_logits(r), (size_t)V * sizeof(float)));
        for (int k = 0; k < STEPS; k++) {
            again[k] = qhx_session_sample(r);
            CHECK_EQ(qhx_session_feed(r, &again[k], 1, NULL), QHX_OK);
        }
        CHECK(!memcmp(first, again, sizeof first));
        qhx_session_free(r);
    }
    qhx_checkpoint_free(cp);
    free(at);
    qhx_session_free(s);
    qhx_model_free(m);
}

typedef struct last_rows {
    int64_t layer, H;
    float *rows;
} last_rows;

static void keep_last(void *user, int64_t layer, int64_t pos0, const float *x, int64_t n) {
    last_rows *r = user;
    if (layer == r->layer && x) memcpy(r->rows + pos0 * r->H, x, (size_t)(n * r->H) * sizeof(float));
}

/* The layer callback gets the device's rows (read back to the host), and the MTP block's draft
 * logits over them match the CPU's: max |d| within 1e-3 of logits of magnitude ~1 (the f32
 * fixture tolerance is 2e-4 per logit; the draft adds one more layer over a reordered sum). */
static void test_layer_rows_mtp(void) {
    enum { N = 6 };
    const char *fx = QHX_DATA_DIR "/fixtures/parity/qwen35-tiny-f32";
    const int32_t ids[N] = {5, 17, 300, 42, 7, 999};
    float *hid[2] = {NULL, NULL}, *lg[2] = {NULL, NULL};
    int64_t H = 0, V = 0;
    for (int k = 0; k < 2; k++) {
        qhx_model_params mp = qhx_model_default_params();
        mp.mtp = 1;
        mp.backend = k ? "opencl" : NULL;
        qhx_model *m = NULL;
        qhx_seq *st = NULL;
        qhx_error err = {0};
        CHECK_EQ(qhx_model_open(fx, &mp, &m, &err), QHX_OK);
        if (!m) return;
        const qhx_model_config *c = qhx_model_get_config(m);
        H = c->hidden_size, V = c->vocab_size;
        last_rows r = {.layer = c->num_hidden_layers - 1, .H = H, .rows = calloc((size_t)(N * H), sizeof(float))};
        lg[k] = calloc((size_t)((N - 1) * V), sizeof(float));
        const qhx_forward_opts fo = {.layer_cb = keep_last, .layer_cb_user = &r};
        CHECK_EQ(qhx_model_state_create(m, &(qhx_seq_params){.n_ctx = 16}, &st, &err), QHX_OK);
        CHECK_EQ(qhx_model_forward(m, st, ids, N, &fo, &err), QHX_OK);
        CHECK_EQ(qhx_model_mtp(m, st, 0, r.rows, ids + 1, N - 1, lg[k], &err), QHX_OK);
        hid[k] = r.rows;
        qhx_model_state_free(st);
        qhx_model_free(m);
    }
    double dh = 0.0, dl = 0.0, mag = 0.0;
    for (int64_t i = 0; i < N * H; i++) dh = fmax(dh, fabs((double)hid[0][i] - hid[1][i])), mag = fmax(mag, fabs(hid[0][i]));
    for (int64_t i = 0; i < (N - 1) * V; i++) dl = fmax(dl, fabs((double)lg[0][i] - lg[1][i]));
    if (!(dh <= 1e-4 * (1.0 + mag) && dl <= 1e-3))
        fprintf(stderr, "layer rows max|d| %.3g (magnitude %.3g), mtp logits max|d| %.3g\n", dh, mag, dl);
    CHECK(mag > 0.0);
    CHECK(dh <= 1e-4 * (1.0 + mag));
    CHECK(dl <= 1e-3);
    for (int k = 0; k < 2; k++) free(hid[k]), free(lg[k]);
}

static void test_names(void) {
    CHECK(qhx_device_find("opencl") != NULL);
    CHECK(qhx_device_find("opencl:3") == qhx_device_find("opencl"));
    CHECK(qhx_device_find("openclx") == NULL);
    qhx_error err = {0};
    qhx_device *d = NULL;
    const qhx_device_desc *dd = qhx_device_find("opencl");
    CHECK_EQ(dd->create(&(qhx_device_params){.spec = "opencl:999"}, &d, &err), QHX_E_ARG);
    CHECK(d == NULL && strstr(err.msg, "no such device"));
    CHECK_EQ(dd->create(&(qhx_device_params){.spec = "opencl:-1"}, &d, &err), QHX_E_ARG);
    CHECK(d == NULL);
    CHECK_EQ(dd->create(&(qhx_device_params){.spec = "opencl:0"}, &d, &err), QHX_OK);
    if (d) d->op->destroy(d);
}

int main(void) {
    const char *req = getenv("QHX_REQUIRE_OPENCL");
    const int required = req && !strcmp(req, "1");
    const qhx_device_desc *dd = qhx_device_find("opencl");
    qhx_device *d = NULL;
    qhx_error err = {0};
    if (!dd || dd->create(&(qhx_device_params){0}, &d, &err) != QHX_OK) {
        fprintf(stderr, "%s: %s\n", required ? "FAIL" : "skipped", dd ? err.msg : "this build has no OpenCL device");
        return required ? 1 : 77;
    }
    d->op->destroy(d);
    char tmpl[] = "/tmp/qhx-opencl-XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    snprintf(dir, sizeof dir, "%s", tmpl);
    test_names();
    test_decode_multi(QHX_DATA_DIR "/fixtures/parity/qwen35-tiny-f32");
    test_decode_multi(QHX_DATA_DIR "/fixtures/parity/qwen3vl-tiny-f32");
    test_checkpoint(QHX_DATA_DIR "/fixtures/parity/qwen35-tiny-f32");
    test_layer_rows_mtp();
    test_quantized("w8");
    test_quantized("q4");
    char rm[1200];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm)) fprintf(stderr, "could not remove %s\n", dir);
    return t_done("test_opencl");
}
