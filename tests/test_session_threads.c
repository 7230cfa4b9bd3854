// ctest-labels: unit;tsan
/* Concurrency (also run under TSan: make test-tsan): two sessions on one model, each in its own
 * thread with its own seed, give exactly the tokens they give one after the other - for a
 * Qwen3.5 text prompt and a Qwen3-VL chat turn with an image - while sharing the model's
 * weights, tokenizer and thread pool (a second caller of a busy pool runs its tasks itself).
 * And the pool alone: two threads running on one pool at once, every task of every run
 * executed exactly once. */
#include "qhx.h"

#include "core/file.h"
#include "core/pool.h"
#include "t.h"

/* the former chat calls (deprecated wrappers over the prompt object) are what this test exercises */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define N_GEN 24

typedef struct job {
    const qhx_model *m;
    const char *image; /* Qwen3-VL: a chat turn with this image; NULL: a text prompt */
    uint64_t seed;
    qhx_token out[N_GEN];
    int n;
    qhx_status rc;
    char msg[QHX_ERROR_MSG_SIZE];
} job;

static int collect(void *user, qhx_token t, const char *text, size_t len) {
    (void)text;
    (void)len;
    job *j = user;
    if (t >= 0 && j->n < N_GEN) j->out[j->n++] = t;
    return 0;
}

static void *run_job(void *arg) {
    job *j = arg;
    qhx_error err = {0};
    qhx_session *s = NULL;
    qhx_session_params sp = qhx_session_default_params(j->m);
    sp.n_ctx = 96;
    sp.sampling = (qhx_sample_params){.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .seed = j->seed};
    j->n = 0;
    j->rc = qhx_session_create(j->m, &sp, &s, &err);
    if (!j->rc) {
        if (j->image) {
            qhx_chat_msg msgs[] = {{"user", "Describe the picture."}};
            j->rc = qhx_session_feed_chat(s, msgs, 1, j->image, 0, &err);
        } else {
            j->rc = qhx_session_feed_text(s, "Once upon a time, in a land far away,", 37, &err);
        }
    }
    qhx_generate_params gp = {.max_tokens = N_GEN, .ignore_stop = 1, .on_token = collect, .user = j};
    if (!j->rc) j->rc = qhx_session_generate(s, &gp, NULL, &err);
    snprintf(j->msg, sizeof j->msg, "%s", err.msg);
    qhx_session_free(s);
    return NULL;
}

/* Sequential references for two seeds, then both at once (three times): the same tokens. */
static void check_parallel(const char *path, const char *image) {
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = 2;
    qhx_model *m = NULL;
    qhx_error err;
    if (qhx_model_open(path, &mp, &m, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        CHECK(0);
        return;
    }
    job ref[2] = {{.m = m, .image = image, .seed = 11}, {.m = m, .image = image, .seed = 12}};
    for (int k = 0; k < 2; k++) {
        run_job(&ref[k]);
        CHECK_EQ(ref[k].rc, QHX_OK);
        if (ref[k].rc) fprintf(stderr, "%s\n", ref[k].msg);
        CHECK_EQ(ref[k].n, N_GEN);
    }
    CHECK(memcmp(ref[0].out, ref[1].out, sizeof ref[0].out) != 0); /* the seeds matter */
    for (int round = 0; round < 3; round++) {
        job par[2] = {{.m = m, .image = image, .seed = 11}, {.m = m, .image = image, .seed = 12}};
        pthread_t th[2];
        for (int k = 0; k < 2; k++) CHECK_EQ(pthread_create(&th[k], NULL, run_job, &par[k]), 0);
        for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
        for (int k = 0; k < 2; k++) {
            CHECK_EQ(par[k].rc, QHX_OK);
            CHECK_EQ(par[k].n, N_GEN);
            CHECK(memcmp(par[k].out, ref[k].out, sizeof ref[k].out) == 0);
        }
    }
    qhx_model_free(m);
}

/* ---- the pool alone ------------------------------------------------------------------------- */

typedef struct counts {
    _Atomic int hits[257];
} counts;

static void hit(void *ctx, int64_t task, int thread_index) {
    (void)thread_index;
    atomic_fetch_add(&((counts *)ctx)->hits[task], 1);
}

typedef struct pool_user {
    qhx_pool *pool;
    int bad;
} pool_user;

static void *pool_runs(void *arg) {
    pool_user *u = arg;
    for (int r = 0; r < 300; r++) {
        counts c;
        for (int i = 0; i < 257; i++) atomic_init(&c.hits[i], 0);
        int64_t n = 1 + (r * 37) % 257;
        qhx_pool_run(u->pool, hit, &c, n);
        for (int64_t i = 0; i < n; i++) u->bad += atomic_load(&c.hits[i]) != 1;
    }
    return NULL;
}

static void test_pool_two_callers(void) {
    qhx_pool *p = NULL;
    qhx_error err;
    CHECK_EQ(qhx_pool_create(3, &p, &err), QHX_OK);
    if (!p) return;
    pool_user u[2] = {{.pool = p}, {.pool = p}};
    pthread_t th[2];
    for (int k = 0; k < 2; k++) CHECK_EQ(pthread_create(&th[k], NULL, pool_runs, &u[k]), 0);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    CHECK_EQ(u[0].bad + u[1].bad, 0);
    qhx_pool_free(p);
}

int main(void) {
    char fx[512], vl[512], png[600];
    snprintf(fx, sizeof fx, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    snprintf(vl, sizeof vl, "%s/fixtures/parity/qwen3vl-tiny-f32", QHX_DATA_DIR);
    snprintf(png, sizeof png, "%s/image-64x64.png", vl);
    test_pool_two_callers();
    if (!qhx_path_is_dir(fx) || !qhx_path_is_dir(vl)) {
        fprintf(stderr, "FAIL: fixtures missing under %s\n", QHX_DATA_DIR);
        return 1;
    }
    check_parallel(fx, NULL);
    check_parallel(vl, png);
    return t_done("test_session_threads");
}
