/* Fuzz target: session-state files (runtime/session_file.c) from arbitrary bytes, restored into
 * a session (n_ctx 8) of the tiny Qwen3.5 parity fixture, opened once.
 *
 * Input byte 0, bit 0 set: the last 32 bytes of the rest are replaced by the SHA-256 of what
 * precedes them, so the checks behind the checksum are reached too (the committed seeds are real
 * saved files, valid either way). Properties checked:
 *   - a refused file leaves the session as it was (position and logits) and carries a message;
 *   - an accepted file gives a position inside the context, and the session then generates.
 * Without the fixture (QHX_DATA_DIR) every input is a no-op. */
#include "qhx.h"

#include "core/alloc.h"
#include "core/sha256.h"
#include "runtime/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define N_CTX 8

static qhx_model *model;
static qhx_session *sess;
static float *before;
static int ready;

static void setup(void) {
    ready = 1;
    char path[1024];
    snprintf(path, sizeof path, "%s/fixtures/parity/qwen35-tiny-f32", QHX_DATA_DIR);
    qhx_error err = {0};
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = 1;
    if (qhx_model_open(path, &mp, &model, &err)) {
        fprintf(stderr, "fuzz_session_file: %s: fixture not usable, inputs are not run\n", err.msg);
        return;
    }
    qhx_session_params sp = qhx_session_default_params(model);
    sp.n_ctx = N_CTX;
    sp.sampling = (qhx_sample_params){0}; /* greedy: the restored sampler state is still read */
    sp.kv_cache = QHX_KV_F32; /* the seeds' cache (v3_f32_* are files of this build, saved from such a session) */
    if (qhx_session_create(model, &sp, &sess, &err)) {
        fprintf(stderr, "fuzz_session_file: %s\n", err.msg);
        __builtin_trap();
    }
    before = malloc((size_t)qhx_model_n_vocab(model) * sizeof *before);
    if (!before) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ready) setup();
    if (!sess || size < 1) return 0;
    int fix_sum = data[0] & 1;
    size_t n = size - 1;
    uint8_t *buf = qhx_malloc(n ? n : 1); /* a copy of its own size, so ASan sees every overread */
    if (!buf) return 0;
    memcpy(buf, data + 1, n);
    if (fix_sum && n > 32) {
        qhx_sha256 sha;
        qhx_sha256_init(&sha);
        qhx_sha256_update(&sha, buf, n - 32);
        qhx_sha256_final(&sha, buf + n - 32);
    }
    int64_t V = qhx_model_n_vocab(model), past = qhx_session_n_past(sess);
    memcpy(before, qhx_session_logits(sess), (size_t)V * sizeof *before);
    qhx_error err = {0};
    qhx_status rc = qhx_session_restore_buf(sess, buf, n, "fuzz", &err);
    if (rc != QHX_OK) {
        if (!err.msg[0]) __builtin_trap();                          /* every refusal says why */
        if (qhx_session_n_past(sess) != past) __builtin_trap();      /* unchanged on failure */
        if (memcmp(before, qhx_session_logits(sess), (size_t)V * sizeof *before)) __builtin_trap();
    } else {
        int64_t p = qhx_session_n_past(sess);
        if (p < 0 || p > N_CTX) __builtin_trap();
        /* whatever the state holds (NaN included), generating must work or fail cleanly */
        qhx_generate_params gp = {.max_tokens = 1, .ignore_stop = 1};
        qhx_session_generate(sess, &gp, NULL, &err);
        qhx_session_reset(sess);
    }
    qhx_free(buf);
    return 0;
}
