/* qhx logits: the logits after every position of a token sequence, for parity checks.
 *   qhx logits -m MODEL --ids 1,2,3,... [--prefill N] [--image FILE] --out FILE [--threads N]
 * The first N ids (default: all) go through the prompt path in one call; each further id goes
 * through the single-token decode path. FILE gets little-endian float32 (n_ids, vocab).
 * --image (Qwen3-VL): the ids hold the image's pad tokens, which take its embeddings.
 * --mtp-out FILE (a checkpoint with a multi-token-prediction block): the ids in one prompt pass,
 * then the block over positions 0 .. n-2 with the next id of each: FILE gets float32
 * (n_ids - 1, vocab), row i the block's draft for id i + 2. */
#include "cli_dev.h"
#include "cli_dev_args.h"
#include "cli_model.h"
#include "cli_run.h"

#include "core/alloc.h"
#include "runtime/model.h"
#include "runtime/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "logits";

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx logits -m MODEL --ids ID,ID,... [--prefill N] [--image FILE]... --out FILE [--threads N]\n"
            "  -m, --model DIR   Hugging Face checkpoint folder (config.json, *.safetensors)\n"
            "  --ids LIST        comma-separated token ids\n"
            "  --prefill N       feed the first N ids as one prompt (default: all); the rest one by one\n"
            "  --image FILE      PNG or JPEG for the image-pad ids (Qwen3-VL, Qwen3.5): the ids already\n"
            "                    hold the image start, one image-pad id per image token, the image end;\n"
            "                    repeat it for several images, in the order of their pad runs\n"
            "  --out FILE        write float32 [n_ids, vocab] logits, little-endian\n"
            "  --threads N       worker threads (accepted; single-threaded for now)\n"
            "  --mmproj FILE     a GGUF model's vision tower (llama.cpp's mmproj file)\n"
            "  --device D        %s\n"
            "  --kv f32|f16|q8   KV cache element type (default: the run plan's, else f16)\n"
            "  --mtp-out FILE    also write the multi-token-prediction block's draft logits,\n"
            "                    float32 [n_ids - 1, vocab]: row i drafts id i + 2 from the last\n"
            "                    layer's row i and id i + 1\n", qhx_cli_device_help());
}

int qhx_logits_parse_args(int argc, char **argv, qhx_logits_args *a) {
    memset(a, 0, sizeof *a);
    const char *ids_arg = NULL;
    int64_t prefill = -1;
    a->threads = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "unknown option or missing value: '%s'", o);
        const char *v = argv[++i];
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--ids")) ids_arg = v;
        else if (!strcmp(o, "--mmproj")) a->mmproj = v;
        else if (!strcmp(o, "--out")) a->out = v;
        else if (!strcmp(o, "--mtp-out")) a->mtp_out = v;
        else if (!strcmp(o, "--device")) {
            if (qhx_cli_check_device(CMD, v)) return QHX_EXIT_USAGE;
            a->device = v;
        }
        else if (!strcmp(o, "--image")) {
            if (a->n_images == QHX_CLI_MAX_IMAGES) return qhx_cli_usage_error(CMD, "--image: more than %d images", QHX_CLI_MAX_IMAGES);
            a->images[a->n_images++] = v;
        }
        else if (!strcmp(o, "--prefill")) {
            if (qhx_cli_parse_i64(v, 0, INT32_MAX, &prefill)) return qhx_cli_usage_error(CMD, "--prefill: '%s' is not a count", v);
        } else if (!strcmp(o, "--threads")) {
            if (qhx_cli_parse_i64(v, 1, 512, &a->threads)) return qhx_cli_usage_error(CMD, "--threads: '%s' is not in [1, 512]", v);
        } else if (!strcmp(o, "--kv")) {
            if (qhx_cli_parse_kv(v, &a->kv)) return qhx_cli_usage_error(CMD, "--kv: '%s' is not f32, f16 or q8", v);
        } else
            return qhx_cli_usage_error(CMD, "unknown option '%s'", o);
    }
    if (!a->model) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    if (!ids_arg) return qhx_cli_usage_error(CMD, "missing --ids");
    if (!a->out) return qhx_cli_usage_error(CMD, "missing --out FILE");
    char why[160];
    if (qhx_cli_parse_ids(ids_arg, &a->ids, &a->n_ids, why, sizeof why)) return qhx_cli_usage_error(CMD, "--ids: %s", why);
    if (prefill < 0) prefill = a->n_ids;
    if (prefill > a->n_ids) {
        free(a->ids);
        a->ids = NULL;
        return qhx_cli_usage_error(CMD, "--prefill %lld is more than the %lld ids", (long long)prefill, (long long)a->n_ids);
    }
    a->prefill = prefill;
    return -1;
}

/* The last layer's rows of every position, captured from the forward pass. */
typedef struct last_rows {
    int64_t layer, H;
    float *rows;
} last_rows;

static void keep_last(void *user, int64_t layer, int64_t pos0, const float *x, int64_t n) {
    last_rows *r = user;
    if (layer == r->layer) memcpy(r->rows + pos0 * r->H, x, (size_t)(n * r->H) * sizeof(float));
}

/* The MTP block's draft logits over ids (n >= 2) into path (see the header). */
static qhx_status write_mtp(const qhx_model *m, const int32_t *ids, int64_t n, const char *path, qhx_error *err) {
    const qhx_model_config *c = qhx_model_get_config(m);
    const int64_t V = c->vocab_size;
    if (!qhx_model_has_mtp(m)) return qhx_fail(err, QHX_E_UNSUPPORTED, "--mtp-out: this checkpoint has no mtp.* block");
    if (n < 2) return qhx_fail(err, QHX_E_ARG, "--mtp-out: needs at least two ids");
    last_rows r = {.layer = c->num_hidden_layers - 1, .H = c->hidden_size};
    float *logits = NULL;
    qhx_seq *st = NULL;
    qhx_cli_out out = {0};
    size_t hb, lb;
    qhx_status rc = QHX_E_NOMEM;
    if (!qhx_size_mul((size_t)n, (size_t)r.H * sizeof(float), &hb) || !qhx_size_mul((size_t)(n - 1), (size_t)V * sizeof(float), &lb) ||
        !(r.rows = qhx_malloc(hb)) || !(logits = qhx_malloc(lb))) {
        qhx_fail(err, rc, "out of memory for %lld rows", (long long)n);
        goto done;
    }
    const qhx_seq_params sp = {.n_ctx = n};
    const qhx_forward_opts fo = {.layer_cb = keep_last, .layer_cb_user = &r};
    if ((rc = qhx_model_state_create(m, &sp, &st, err)) || (rc = qhx_model_forward(m, st, ids, n, &fo, err)) ||
        (rc = qhx_model_mtp(m, st, 0, r.rows, ids + 1, n - 1, logits, err)) || (rc = qhx_cli_out_open(&out, path, err)))
        goto done;
    if (fwrite(logits, sizeof(float), (size_t)((n - 1) * V), out.f) != (size_t)((n - 1) * V)) {
        rc = qhx_fail(err, QHX_E_IO, "%s: write failed: %s", path, strerror(errno));
        goto done;
    }
    rc = qhx_cli_out_commit(&out, err);
done:
    qhx_cli_out_abort(&out);
    qhx_model_state_free(st);
    qhx_free(logits);
    qhx_free(r.rows);
    return rc;
}

int qhx_cmd_logits(int argc, char **argv) {
    qhx_logits_args a;
    int prc = qhx_logits_parse_args(argc, argv, &a);
    if (prc >= 0) return prc;
    const char *model_dir = a.model, *out_path = a.out;
    int32_t *ids = a.ids;
    int64_t n_ids = a.n_ids, prefill = a.prefill, threads = a.threads;

    int rc = QHX_EXIT_RUNTIME;
    qhx_error err = {0};
    qhx_model *m = NULL;
    qhx_session *s = NULL;
    float *rows = NULL;
    qhx_cli_out out = {0};
    qhx_image_embed im[QHX_CLI_MAX_IMAGES] = {{0}};
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = (int)threads;
    mp.kv_cache = a.kv;
    mp.backend = a.device;
    mp.mmproj = a.mmproj;
    if (a.n_images) mp.vision = 1; /* a checkpoint folder opens with its tower */
    if (a.mtp_out) mp.mtp = 1;
    qhx_cli_progress lp;
    qhx_cli_progress_attach(&mp, &lp);
    qhx_status open_rc = qhx_model_open(model_dir, &mp, &m, &err);
    qhx_cli_progress_end(&lp);
    if (open_rc) goto fail;
    qhx_run_opts defaults;
    qhx_run_opts_init(&defaults);
    qhx_run_context ctx;
    if (qhx_run_context_of(m, &defaults, &ctx, &err)) goto fail;
    if (n_ids > ctx.limit) {
        qhx_fail(&err, QHX_E_LIMIT, "%lld ids exceed the model's context of %lld tokens", (long long)n_ids,
                 (long long)ctx.limit);
        goto fail;
    }
    qhx_run_catch_sigint(); /* Ctrl-C: stop between layers, leave no output file, exit 130 */
    qhx_session_params sp = {.n_ctx = n_ids, .abort_cb = qhx_run_interrupted};
    if (qhx_session_create(m, &sp, &s, &err)) goto fail;
    if (qhx_cli_attach_images(m, s, a.images, a.n_images, ids, n_ids, im, &err)) goto fail;
    int64_t V = qhx_session_n_vocab(s);
    if (qhx_cli_out_open(&out, out_path, &err)) goto fail;
    FILE *f = out.f;
    if (prefill > 0) {
        size_t bytes;
        if (!qhx_size_mul((size_t)prefill, (size_t)V * sizeof(float), &bytes) || !(rows = qhx_malloc(bytes))) {
            qhx_fail(&err, QHX_E_NOMEM, "out of memory for %lld x %lld logits", (long long)prefill, (long long)V);
            goto fail;
        }
        if (qhx_session_prefill(s, ids, prefill, rows, &err)) goto fail;
        if (fwrite(rows, sizeof(float), (size_t)(prefill * V), f) != (size_t)(prefill * V)) goto write_fail;
    }
    for (int64_t i = prefill; i < n_ids; i++) {
        if (qhx_session_decode(s, ids[i], &err)) goto fail;
        if (fwrite(qhx_session_logits(s), sizeof(float), (size_t)V, f) != (size_t)V) goto write_fail;
    }
    if (a.mtp_out && write_mtp(m, ids, n_ids, a.mtp_out, &err)) goto fail;
    if (qhx_run_interrupted(NULL)) { /* a signal after the last layer: still no file */
        qhx_fail(&err, QHX_E_ABORTED, "interrupted");
        goto fail;
    }
    if (qhx_cli_out_commit(&out, &err)) goto fail;
    rc = QHX_EXIT_OK;
    goto done;
write_fail:
    qhx_fail(&err, QHX_E_IO, "%s: write failed: %s", out_path, strerror(errno));
fail:
    rc = qhx_cli_runtime_error(CMD, &err);
done:
    qhx_cli_out_abort(&out);
    qhx_free(rows);
    qhx_session_free(s);
    for (int k = 0; k < a.n_images; k++) qhx_image_embed_deinit(&im[k]);
    qhx_model_free(m);
    free(ids);
    return rc;
}
