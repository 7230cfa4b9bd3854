/* qhx embed-image: run the vision tower of a Qwen3-VL checkpoint on one image and write the
 * image-token embeddings as float32 [n_image_tokens, hidden * (1 + n_deepstack)]; each row is
 * [final merger | deepstack 0 | deepstack 1 | ...], rows in the order of the image tokens. */
#include "cli.h"

#include "models/qwen3vl.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx embed-image -m MODEL --image FILE --out FILE\n"
            "  -m, --model DIR   Hugging Face Qwen3-VL checkpoint folder\n"
            "  --image FILE      PNG or JPEG image\n"
            "  --out FILE        float32 [n_image_tokens, hidden * (1 + n_deepstack)], little-endian\n");
}

int qhx_cmd_embed_image(int argc, char **argv) {
    const char *model = NULL, *image = NULL, *outp = NULL, *cmd = "embed-image";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (i + 1 >= argc) return qhx_cli_usage_error(cmd, "missing value for %s", a);
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = argv[++i];
        else if (!strcmp(a, "--image")) image = argv[++i];
        else if (!strcmp(a, "--out") || !strcmp(a, "-o")) outp = argv[++i];
        else return qhx_cli_usage_error(cmd, "unknown option '%s'", a);
    }
    if (!model || !image || !outp) return qhx_cli_usage_error(cmd, "-m, --image and --out are required");
    qhx_error err = {0};
    qhx_qwen3vl *m = NULL;
    qhx_vl_image im = {0};
    if (qhx_qwen3vl_open(model, &m, &err)) return qhx_cli_runtime_error(cmd, &err);
    if (qhx_qwen3vl_image_load(m, image, &im, &err)) {
        qhx_qwen3vl_free(m);
        return qhx_cli_runtime_error(cmd, &err);
    }
    FILE *f = fopen(outp, "wb");
    size_t n = (size_t)(im.n_tokens * im.row_width);
    int ok = f && fwrite(im.embd, sizeof(float), n, f) == n;
    if (f && fclose(f)) ok = 0;
    qhx_vl_image_deinit(&im);
    qhx_qwen3vl_free(m);
    if (!ok) {
        fprintf(stderr, "qhx %s: cannot write %s\n", cmd, outp);
        return QHX_EXIT_RUNTIME;
    }
    return QHX_EXIT_OK;
}
