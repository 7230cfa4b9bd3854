/* qhx embed-image: run the vision tower of a Qwen3-VL checkpoint on one image and write the
 * image-token embeddings as float32 [n_image_tokens, hidden * (1 + n_deepstack)]; each row is
 * [final merger | deepstack 0 | deepstack 1 | ...], rows in the order of the image tokens. */
#include "cli.h"

#include "models/qwen3vl.h"

#include <stdio.h>
#include <string.h>

static const char *CMD = "embed-image";

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx embed-image -m MODEL --image FILE --out FILE\n"
            "  -m, --model DIR   Hugging Face Qwen3-VL checkpoint folder\n"
            "  --image FILE      PNG or JPEG image\n"
            "  --out FILE        float32 [n_image_tokens, hidden * (1 + n_deepstack)], little-endian\n");
}

int qhx_cmd_embed_image(int argc, char **argv) {
    const char *model = NULL, *image = NULL, *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "unknown option or missing value: '%s'", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--image")) image = v;
        else if (!strcmp(a, "--out")) out_path = v;
        else return qhx_cli_usage_error(CMD, "unknown option '%s'", a);
    }
    if (!model) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    if (!image) return qhx_cli_usage_error(CMD, "missing --image FILE");
    if (!out_path) return qhx_cli_usage_error(CMD, "missing --out FILE");
    qhx_error err = {0};
    qhx_model *m = NULL;
    qhx_vl_image im = {0};
    FILE *f = NULL;
    int rc = QHX_EXIT_RUNTIME;
    if (qhx_model_open(model, NULL, &m, &err)) goto fail;
    if (!qhx_qwen3vl_of(m)) {
        qhx_fail(&err, QHX_E_UNSUPPORTED, "%s: not a Qwen3-VL checkpoint", model);
        goto fail;
    }
    if (qhx_qwen3vl_image_load(qhx_qwen3vl_of(m), image, &im, &err)) goto fail;
    f = fopen(out_path, "wb");
    size_t n = (size_t)(im.n_tokens * im.row_width);
    if (!f || fwrite(im.embd, sizeof(float), n, f) != n || fclose(f)) {
        f = NULL;
        qhx_fail(&err, QHX_E_IO, "%s: cannot write", out_path);
        goto fail;
    }
    f = NULL;
    rc = QHX_EXIT_OK;
    goto done;
fail:
    rc = qhx_cli_runtime_error(CMD, &err);
done:
    if (f) fclose(f);
    qhx_vl_image_deinit(&im);
    qhx_model_free(m);
    return rc;
}
