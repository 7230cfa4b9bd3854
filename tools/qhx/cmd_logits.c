/* qhx logits: the logits after every position of a token sequence, for parity checks.
 *   qhx logits -m MODEL --ids 1,2,3,... [--prefill N] --out FILE [--threads N]
 * The first N ids (default: all) go through the prompt path in one call; each further id goes
 * through the single-token decode path. FILE gets little-endian float32 (n_ids, vocab). */
#include "cli.h"
#include "cli_model.h"

#include "core/alloc.h"
#include "runtime/session.h"

#include <stdio.h>
#include <string.h>

static const char *CMD = "logits";

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx logits -m MODEL --ids ID,ID,... [--prefill N] --out FILE [--threads N]\n"
            "  -m, --model DIR   Hugging Face checkpoint folder (config.json, *.safetensors)\n"
            "  --ids LIST        comma-separated token ids\n"
            "  --prefill N       feed the first N ids as one prompt (default: all); the rest one by one\n"
            "  --out FILE        write float32 [n_ids, vocab] logits, little-endian\n"
            "  --threads N       worker threads (accepted; single-threaded for now)\n");
}

int qhx_cmd_logits(int argc, char **argv) {
    const char *model_dir = NULL, *ids_arg = NULL, *out_path = NULL;
    int64_t prefill = -1, threads = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "unknown option or missing value: '%s'", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_dir = v;
        else if (!strcmp(a, "--ids")) ids_arg = v;
        else if (!strcmp(a, "--out")) out_path = v;
        else if (!strcmp(a, "--prefill")) {
            if (qhx_cli_parse_i64(v, 0, INT32_MAX, &prefill)) return qhx_cli_usage_error(CMD, "--prefill: '%s' is not a count", v);
        } else if (!strcmp(a, "--threads")) {
            if (qhx_cli_parse_i64(v, 1, 4096, &threads)) return qhx_cli_usage_error(CMD, "--threads: '%s' is not in [1, 4096]", v);
        } else
            return qhx_cli_usage_error(CMD, "unknown option '%s'", a);
    }
    if (!model_dir) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    if (!ids_arg) return qhx_cli_usage_error(CMD, "missing --ids");
    if (!out_path) return qhx_cli_usage_error(CMD, "missing --out FILE");
    int32_t *ids;
    int64_t n_ids;
    char why[160];
    if (qhx_cli_parse_ids(ids_arg, &ids, &n_ids, why, sizeof why)) return qhx_cli_usage_error(CMD, "--ids: %s", why);
    if (prefill < 0) prefill = n_ids;
    if (prefill > n_ids) {
        qhx_free(ids);
        return qhx_cli_usage_error(CMD, "--prefill %lld is more than the %lld ids", (long long)prefill, (long long)n_ids);
    }

    int rc = QHX_EXIT_RUNTIME;
    qhx_error err = {0};
    qhx_model *m = NULL;
    qhx_session *s = NULL;
    float *rows = NULL;
    FILE *f = NULL;
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = (int)threads;
    if (qhx_model_open(model_dir, &mp, &m, &err)) goto fail;
    if (qhx_session_create(m, &(qhx_session_params){.n_ctx = n_ids}, &s, &err)) goto fail;
    int64_t V = qhx_session_n_vocab(s);
    f = fopen(out_path, "wb");
    if (!f) {
        qhx_fail(&err, QHX_E_IO, "%s: cannot open for writing", out_path);
        goto fail;
    }
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
    if (fclose(f)) {
        f = NULL;
        goto write_fail;
    }
    f = NULL;
    rc = QHX_EXIT_OK;
    goto done;
write_fail:
    qhx_fail(&err, QHX_E_IO, "%s: write failed", out_path);
fail:
    rc = qhx_cli_runtime_error(CMD, &err);
done:
    if (f) fclose(f);
    qhx_free(rows);
    qhx_session_free(s);
    qhx_model_free(m);
    qhx_free(ids);
    return rc;
}
