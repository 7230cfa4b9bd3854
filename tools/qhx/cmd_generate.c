/* qhx generate: continue a token sequence.
 *   qhx generate -m MODEL --ids 1,2,3,... -n N --greedy [--ignore-eos] --print-ids [--threads N]
 * The prompt goes through the prompt path in one call, then one decode step per new token.
 * Greedy = argmax over the whole vocabulary, lowest id on ties. Without --ignore-eos generation
 * stops after config.json's eos_token_id. Options are parsed into gen_args first, so text
 * prompts and sampling options can be added beside the existing ones. */
#include "cli.h"
#include "cli_model.h"

#include "core/alloc.h"
#include "runtime/session.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *CMD = "generate";

typedef struct gen_args {
    const char *model_dir;
    const char *ids_arg;
    int64_t n_new;
    int64_t threads;
    bool greedy;
    bool ignore_eos;
    bool print_ids;
} gen_args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx generate -m MODEL --ids ID,ID,... -n N --greedy [--ignore-eos] --print-ids [--threads N]\n"
            "  -m, --model DIR   Hugging Face checkpoint folder (config.json, *.safetensors)\n"
            "  --ids LIST        prompt as comma-separated token ids\n"
            "  -n N              tokens to generate\n"
            "  --greedy          argmax decoding (lowest id on ties)\n"
            "  --ignore-eos      do not stop at the end-of-sequence token\n"
            "  --print-ids       print the generated ids, space-separated\n"
            "  --threads N       worker threads (accepted; single-threaded for now)\n");
}

/* Fill a from argv. Returns -1 to continue, else an exit code (help or usage error). */
static int parse_args(int argc, char **argv, gen_args *a) {
    memset(a, 0, sizeof *a);
    a->n_new = -1;
    a->threads = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        /* flags */
        if (!strcmp(o, "--greedy")) { a->greedy = true; continue; }
        if (!strcmp(o, "--ignore-eos")) { a->ignore_eos = true; continue; }
        if (!strcmp(o, "--print-ids")) { a->print_ids = true; continue; }
        /* options with a value */
        if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "unknown option or missing value: '%s'", o);
        const char *v = argv[++i];
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) a->model_dir = v;
        else if (!strcmp(o, "--ids")) a->ids_arg = v;
        else if (!strcmp(o, "-n")) {
            if (qhx_cli_parse_i64(v, 0, INT32_MAX, &a->n_new)) return qhx_cli_usage_error(CMD, "-n: '%s' is not a count", v);
        } else if (!strcmp(o, "--threads")) {
            if (qhx_cli_parse_i64(v, 1, 4096, &a->threads)) return qhx_cli_usage_error(CMD, "--threads: '%s' is not in [1, 4096]", v);
        } else
            return qhx_cli_usage_error(CMD, "unknown option '%s'", o);
    }
    if (!a->model_dir) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    if (!a->ids_arg) return qhx_cli_usage_error(CMD, "missing --ids (text prompts are not supported yet)");
    if (a->n_new < 0) return qhx_cli_usage_error(CMD, "missing -n N");
    if (!a->greedy) return qhx_cli_usage_error(CMD, "only --greedy decoding is supported so far");
    if (!a->print_ids) return qhx_cli_usage_error(CMD, "text output needs a tokenizer; pass --print-ids");
    return -1;
}

int qhx_cmd_generate(int argc, char **argv) {
    gen_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    int32_t *ids;
    int64_t n_ids;
    char why[160];
    if (qhx_cli_parse_ids(a.ids_arg, &ids, &n_ids, why, sizeof why)) return qhx_cli_usage_error(CMD, "--ids: %s", why);

    rc = QHX_EXIT_RUNTIME;
    qhx_error err = {0};
    qhx_model *m = NULL;
    qhx_session *s = NULL;
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = (int)a.threads;
    if (qhx_model_open(a.model_dir, &mp, &m, &err)) goto fail;
    int64_t eos = a.ignore_eos ? -1 : qhx_model_get_config(m)->eos_token_id;
    if (qhx_session_create(m, &(qhx_session_params){.n_ctx = n_ids + (a.n_new ? a.n_new : 1)}, &s, &err)) goto fail;
    if (qhx_session_prefill(s, ids, n_ids, NULL, &err)) goto fail;
    for (int64_t k = 0; k < a.n_new; k++) {
        int32_t next = qhx_argmax_f32(qhx_session_logits(s), qhx_session_n_vocab(s));
        printf(k ? " %d" : "%d", next);
        if (next == eos) break;
        if (k + 1 < a.n_new && qhx_session_decode(s, next, &err)) goto fail;
    }
    printf("\n");
    if (fflush(stdout)) {
        qhx_fail(&err, QHX_E_IO, "stdout: write failed");
        goto fail;
    }
    rc = QHX_EXIT_OK;
    goto done;
fail:
    fflush(stdout);
    rc = qhx_cli_runtime_error(CMD, &err);
done:
    qhx_session_free(s);
    qhx_model_free(m);
    qhx_free(ids);
    return rc;
}
