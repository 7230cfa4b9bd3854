/* simple.c: the smallest qhexrt program: open a model, feed a prompt, stream 32 tokens.
 * Against an installed qhexrt (make install; PKG_CONFIG_PATH=PREFIX/lib/pkgconfig when PREFIX
 * is not in pkg-config's search path):
 *   cc simple.c $(pkg-config --cflags --libs qhx) -o simple && ./simple MODEL "The capital of France is"
 * qhx.pc puts the install's lib folder in the program's rpath, so no LD_LIBRARY_PATH is needed. */
#include "qhx.h"

#include <stdio.h>
#include <string.h>

static int print_piece(void *user, qhx_token token, const char *text, size_t len) {
    (void)user;
    (void)token;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0; /* keep going */
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL PROMPT\n", argv[0]);
        return 2;
    }
    if (!QHX_VERSION_COMPATIBLE(qhx_version_number())) {
        fprintf(stderr, "built for qhexrt %s, but the library is %s\n", QHX_VERSION, qhx_version());
        return 1;
    }
    qhx_error err;
    qhx_model *model = NULL;
    qhx_session *session = NULL;
    int rc = 1;
    if (qhx_model_open(argv[1], NULL, &model, &err)) goto fail;
    qhx_session_params sp = qhx_session_default_params(model);
    sp.n_ctx = 512;
    if (qhx_session_create(model, &sp, &session, &err)) goto fail;
    qhx_prompt *prompt = NULL; /* the text as it is; qhx_prompt_from_chat writes a chat turn */
    if (qhx_prompt_from_text(model, argv[2], strlen(argv[2]), &prompt, &err)) goto fail;
    size_t n_ids;
    qhx_prompt_ids(prompt, &n_ids);
    qhx_status frc = qhx_session_feed_prompt(session, prompt, 0, n_ids, &err);
    qhx_prompt_free(prompt);
    if (frc) goto fail;
    qhx_generate_params gp = {.max_tokens = 32, .on_token = print_piece};
    qhx_generate_stats stats;
    if (qhx_session_generate(session, &gp, &stats, &err)) goto fail;
    printf("\n[%lld tokens, %.1f tok/s]\n", (long long)stats.n_generated,
           stats.decode_ms > 0 ? stats.n_generated * 1000.0 / stats.decode_ms : 0.0);
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "simple: %s\n", err.msg);
done:
    qhx_session_free(session);
    qhx_model_free(model);
    return rc;
}
