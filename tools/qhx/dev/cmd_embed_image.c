/* qhx embed-image: run the vision tower of a Qwen3-VL or Qwen3.5 checkpoint on one image and write the
 * image-token embeddings as float32 [n_image_tokens, hidden * (1 + n_deepstack)]; each row is
 * [final merger | deepstack 0 | deepstack 1 | ...], rows in the order of the image tokens. With
 * --video instead of --image, the rows of a video's temporal groups, one group after the other
 * (the order of its tokens in the prompt). */
#include "cli_dev.h"
#include "cli_dev_args.h"
#include "runtime/model.h"

#include <stdio.h>
#include <string.h>

static const char *CMD = "embed-image";

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx embed-image -m MODEL (--image FILE | --video FILE) --out FILE [--device D]\n"
            "  -m, --model DIR   Hugging Face Qwen3-VL checkpoint folder\n"
            "  --image FILE      PNG or JPEG image\n"
            "  --video FILE      a video instead (sampled as Qwen3-VL's video processor does): the\n"
            "                    rows of its temporal groups in turn\n"
            "  --mmproj FILE     a GGUF model's vision tower (llama.cpp's mmproj file)\n"
            "  --out FILE        float32 [n_image_tokens, hidden * (1 + n_deepstack)], little-endian\n"
            "  --device D        %s\n", qhx_cli_device_help());
}

int qhx_embed_image_parse_args(int argc, char **argv, qhx_embed_image_args *a) {
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "unknown option or missing value: '%s'", o);
        const char *v = argv[++i];
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--image")) a->image = v;
        else if (!strcmp(o, "--video")) a->video = v;
        else if (!strcmp(o, "--mmproj")) a->mmproj = v;
        else if (!strcmp(o, "--out")) a->out = v;
        else if (!strcmp(o, "--device")) {
            if (qhx_cli_check_device(CMD, v)) return QHX_EXIT_USAGE;
            a->device = v;
        } else return qhx_cli_usage_error(CMD, "unknown option '%s'", o);
    }
    if (!a->model) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    if (!a->image == !a->video) return qhx_cli_usage_error(CMD, "give one of --image FILE and --video FILE");
    if (!a->out) return qhx_cli_usage_error(CMD, "missing --out FILE");
    return -1;
}

int qhx_cmd_embed_image(int argc, char **argv) {
    qhx_embed_image_args a;
    int prc = qhx_embed_image_parse_args(argc, argv, &a);
    if (prc >= 0) return prc;
    const char *model = a.model, *image = a.image, *out_path = a.out;
    qhx_error err = {0};
    qhx_model *m = NULL;
    qhx_image_embed im = {0};
    qhx_video_embed ve = {0};
    qhx_cli_out out = {0};
    int rc = QHX_EXIT_RUNTIME;
    qhx_model_params mp = qhx_model_default_params();
    mp.vision = 1; /* a checkpoint folder opens with its tower (a Qwen3.5 one would not by default) */
    mp.backend = a.device;
    mp.mmproj = a.mmproj;
    if (qhx_model_open(model, &mp, &m, &err)) goto fail;
    if (!qhx_model_takes_images(m)) {
        qhx_fail(&err, QHX_E_UNSUPPORTED, "%s: its run plan takes no images (host-op %s)", model, qhx_model_host_op(m));
        goto fail;
    }
    if (a.video) {
        if (qhx_model_video_load(m, a.video, 0, 0, &ve, &err)) goto fail;
    } else if (qhx_model_image_load(m, image, 0, &im, &err)) goto fail;
    if (qhx_cli_out_open(&out, out_path, &err)) goto fail;
    /* a short write shows in the commit's check */
    if (!a.video) fwrite(im.embd, sizeof(float), (size_t)(im.n_tokens * im.row_width), out.f);
    for (int g = 0; g < ve.n_frames; g++)
        fwrite(ve.frames[g].embd, sizeof(float), (size_t)(ve.frames[g].n_tokens * ve.frames[g].row_width), out.f);
    if (qhx_cli_out_commit(&out, &err)) goto fail;
    rc = QHX_EXIT_OK;
    goto done;
fail:
    rc = qhx_cli_runtime_error(CMD, &err);
done:
    qhx_cli_out_abort(&out);
    qhx_image_embed_deinit(&im);
    qhx_video_embed_deinit(&ve);
    qhx_model_free(m);
    return rc;
}
