/* Fuzz target: qhx serve's request-to-prompt path (tools/qhx/serve/request.c): a request body
 * from arbitrary bytes, parsed, checked and rendered into a tokenized prompt (images decoded and
 * encoded) on the tiny parity fixtures, opened once.
 *
 * Input byte 0: bit 0 picks the model (0: Qwen3.5, 1: Qwen3-VL), bit 1 the endpoint (0: chat
 * completions, 1: completions); the rest is the body. Properties checked:
 *   - a refused body gets a 4xx status (400 or 413; 503 only when out of memory) and a message;
 *   - an accepted one gives a prompt of at least one id, every id inside the vocabulary, and a
 *     reusable prefix inside it.
 * Without the fixtures (QHX_DATA_DIR) every input is a no-op. */
#include "qhx.h"
#include "serve/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static qhx_model *models[2];
static srv_config cfg;
static int ready;

static void setup(void) {
    ready = 1;
    const char *names[2] = {"qwen35-tiny-f32", "qwen3vl-tiny-f32"};
    for (int i = 0; i < 2; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/fixtures/parity/%s", QHX_DATA_DIR, names[i]);
        qhx_error err = {0};
        qhx_model_params mp = qhx_model_default_params();
        mp.n_threads = 1;
        if (qhx_model_open(path, &mp, &models[i], &err))
            fprintf(stderr, "fuzz_serve_request: %s: fixture not usable, its inputs are not run\n", err.msg);
    }
    cfg = (srv_config){.host = "127.0.0.1", .parallel = 1, .queue = 1, .alias = "fuzz", .lim = srv_default_limits()};
    cfg.lim.max_image_pixels = 1 << 16; /* keep the vision tower's work small */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ready) setup();
    if (size < 1) return 0;
    const qhx_model *m = models[data[0] & 1];
    if (!m) return 0;
    int status = 0;
    qhx_error err = {0};
    const char *body = (const char *)data + 1;
    srv_job *j = data[0] & 2 ? srv_request_completion(m, &cfg, body, size - 1, &status, &err)
                             : srv_request_chat(m, &cfg, body, size - 1, &status, &err);
    if (!j) {
        if (!(status == 400 || status == 413 || status == 503) || !err.msg[0]) {
            fprintf(stderr, "refused with status %d and message '%s'\n", status, err.msg);
            abort();
        }
        return 0;
    }
    size_t n = 0;
    const qhx_token *ids = qhx_prompt_ids(j->prompt, &n);
    if (n == 0 || qhx_prompt_reusable(j->prompt) > n) abort();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= qhx_model_n_vocab(m)) abort();
    srv_job_unref(j);
    return 0;
}
