/* qhx_generate: the seed's positional command line, on the public API only.
 *
 *   qhx_generate MANIFEST BACKEND_LIB SYSTEM_LIB MODEL_DIR N PROMPT [IMAGE]
 *
 * MANIFEST   a run plan (*.json); looked up as given, then inside MODEL_DIR
 * BACKEND_LIB  "cpu" or "-" runs the CPU backend (another device of the build by its name); a QNN library path (libQnnHtp.so) is refused:
 *            this build has no QNN backend (docs/backends.md)
 * SYSTEM_LIB the QNN system library; ignored by the CPU backend ("-" allowed)
 * MODEL_DIR  the bundle folder
 * N          tokens to generate (greedy, stops at the run plan's stop ids)
 * PROMPT     Qwen3.5 (qwen3_5_generate): a plain completion of the text, as the seed runs it;
 *            Qwen3-VL: a user turn in the chat format, with IMAGE before the text
 * Text streams to stdout; a speed line goes to stderr. Exit: 0 ok, 1 runtime error, 2 usage. */
#include "qhx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int usage(const char *msg) {
    fprintf(stderr, "qhx_generate: %s\n", msg);
    fprintf(stderr, "usage: qhx_generate MANIFEST BACKEND_LIB SYSTEM_LIB MODEL_DIR N PROMPT [IMAGE]\n"
                    "  BACKEND_LIB: cpu (or -); SYSTEM_LIB: ignored by the CPU backend (- allowed)\n");
    return 2;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int print_piece(void *user, qhx_token t, const char *text, size_t len) {
    (void)user;
    (void)t;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: qhx_generate MANIFEST BACKEND_LIB SYSTEM_LIB MODEL_DIR N PROMPT [IMAGE]\n");
        return 0;
    }
    if (argc < 7 || argc > 8) return usage("expected 6 or 7 arguments");
    const char *manifest = argv[1], *backend = argv[2], *model_dir = argv[4], *prompt = argv[6];
    const char *image = argc == 8 ? argv[7] : NULL;
    char *end;
    errno = 0;
    long long n = strtoll(argv[5], &end, 10);
    if (errno || *end || n < 1 || n > 1000000) return usage("N must be an integer in [1, 1000000]");
    if (!is_dir(model_dir)) {
        fprintf(stderr, "qhx_generate: %s: not a folder\n", model_dir);
        return 1;
    }
    char path[4096];
    if (is_file(manifest)) snprintf(path, sizeof path, "%s", manifest);
    else if ((size_t)snprintf(path, sizeof path, "%s/%s", model_dir, manifest) >= sizeof path || !is_file(path)) {
        fprintf(stderr, "qhx_generate: %s: no such manifest (also looked in %s)\n", manifest, model_dir);
        return 1;
    }

    qhx_error err;
    qhx_model *m = NULL;
    qhx_session *s = NULL;
    int rc = 1;
    qhx_model_params mp = qhx_model_default_params();
    mp.backend = backend; /* "cpu"/"-"; a QNN library is refused here with one line */
    if (qhx_model_open(path, &mp, &m, &err)) goto fail;
    int vlm = !strcmp(qhx_model_family_name(m), "qwen3_vl");
    if (image && !vlm) {
        fprintf(stderr, "qhx_generate: %s: an image needs a Qwen3-VL manifest\n", image);
        goto done;
    }
    qhx_session_params sp = qhx_session_default_params(m);
    memset(&sp.sampling, 0, sizeof sp.sampling); /* greedy, as the seed */
    sp.prefill = QHX_PREFILL_DECODE;             /* decode-over-prompt, as the seed */
    if (qhx_session_create(m, &sp, &s, &err)) goto fail;
    qhx_prompt *p = NULL;
    if (vlm) { /* the user turn, the image before its text */
        qhx_chat_content parts[2] = {{.image_path = image}, {.text = prompt, .text_len = strlen(prompt)}};
        qhx_chat_turn turn = {.role = "user", .content = prompt, .parts = image ? parts : NULL, .n_parts = image ? 2 : 0};
        qhx_chat_spec spec = {.turns = &turn, .n_turns = 1, .max_images = 1};
        if (qhx_prompt_for_session(s, &spec, &p, &err)) goto fail;
    } else if (qhx_prompt_from_text(m, prompt, strlen(prompt), &p, &err)) {
        goto fail;
    }
    size_t n_ids = 0;
    qhx_prompt_ids(p, &n_ids);
    qhx_status frc = n_ids ? qhx_session_feed_prompt(s, p, 0, n_ids, &err) : QHX_OK;
    qhx_prompt_free(p);
    if (frc) goto fail;
    qhx_generate_params gp = {.max_tokens = n, .on_token = print_piece};
    qhx_generate_stats st;
    if (qhx_session_generate(s, &gp, &st, &err)) goto fail;
    printf("\n");
    fprintf(stderr, "qhx_generate: prompt %lld tokens, %lld generated, %.1f tok/s decode\n", (long long)st.n_prompt,
            (long long)st.n_generated, st.decode_ms > 0 ? st.n_generated * 1000.0 / st.decode_ms : 0.0);
    rc = 0;
    goto done;
fail:
    fflush(stdout);
    fprintf(stderr, "qhx_generate: %s\n", err.msg);
done:
    qhx_session_free(s);
    qhx_model_free(m);
    return rc;
}
