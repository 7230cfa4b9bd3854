/* qhx generate: continue a prompt, printing text as it is generated.
 *   qhx generate -m MODEL -p PROMPT [-n N] [sampling] [--chat [--system S] [--think|--no-think]]
 *   qhx generate -m MODEL --ids 1,2,3,... -n N --greedy --ignore-eos --print-ids [--image FILE]
 * The prompt goes through the prompt path, then one decode step per new token; generation stops
 * at the run plan's stop ids (unless --ignore-eos) or after N tokens. A speed line goes to
 * stderr. Ctrl-C stops generation: what was generated stays printed, the exit code is 130. */
#include "cli.h"
#include "cli_args.h"
#include "cli_model.h"
#include "cli_run.h"

#include "core/alloc.h"
#include "io/manifest.h"
#include "models/family.h"
#include "models/qwen3vl.h"
#include "runtime/session.h"
#include "text/tokenizer.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *CMD = "generate";

typedef qhx_generate_args gen_args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx generate -m MODEL (-p PROMPT | --ids ID,ID,...) [options]\n"
            "  -m, --model PATH     manifest, bundle folder or Hugging Face checkpoint folder\n"
            "  -p, --prompt TEXT    the prompt (UTF-8)\n"
            "  --ids LIST           the prompt as comma-separated token ids\n"
            "  --image FILE         PNG or JPEG (Qwen3-VL). With -p --chat the image goes before the\n"
            "                       text; with --ids the ids already hold <|vision_start|>, one\n"
            "                       image-pad id per image token and <|vision_end|>\n"
            "  --chat               wrap the prompt in the model's chat format (a user turn)\n"
            "  --system TEXT        system message (with --chat)\n"
            "  --think, --no-think  Qwen3.5 thinking mode (with --chat; default: the run plan's)\n"
            "  --print-ids          print the generated ids, space-separated, instead of text\n"
            "%s",
            QHX_RUN_OPTS_HELP);
}

int qhx_generate_parse_args(int argc, char **argv, gen_args *a) {
    memset(a, 0, sizeof *a);
    qhx_run_opts_init(&a->run);
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        int r = qhx_run_parse_opt(CMD, argc, argv, &i, &a->run);
        if (r > 1) return r;
        if (r == 1) continue;
        if (!strcmp(o, "--chat")) { a->chat = true; continue; }
        if (!strcmp(o, "--print-ids")) { a->print_ids = true; continue; }
        if (!strcmp(o, "-p") || !strcmp(o, "--prompt") || !strcmp(o, "--ids") || !strcmp(o, "--image")) {
            if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "%s needs a value", o);
            const char *v = argv[++i];
            if (!strcmp(o, "--ids")) a->ids_arg = v;
            else if (!strcmp(o, "--image")) a->image = v;
            else a->prompt = v;
            continue;
        }
        return qhx_cli_usage_error(CMD, "unknown option '%s'", o);
    }
    if (!a->run.model) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    if (!a->prompt == !a->ids_arg) return qhx_cli_usage_error(CMD, "give exactly one of -p PROMPT and --ids LIST");
    if (a->chat && a->ids_arg) return qhx_cli_usage_error(CMD, "--chat needs a text prompt (-p)");
    if ((a->run.system || a->run.think >= 0) && !a->chat) return qhx_cli_usage_error(CMD, "--system/--think/--no-think need --chat");
    if (a->image && a->prompt && !a->chat) return qhx_cli_usage_error(CMD, "--image with -p needs --chat (the image goes into the user turn)");
    if (a->run.n_new < 0) a->run.n_new = 128;
    return -1;
}

/* The prompt as ids: parsed --ids, or the (chat-formatted) text tokenized. With an image and a
 * chat prompt, the user turn holds the image placeholder expanded to n_image_tokens pads. */
static qhx_status prompt_ids(const qhx_model *m, const gen_args *a, int64_t n_image_tokens, int32_t **ids,
                             size_t *n, qhx_error *err) {
    *ids = NULL;
    *n = 0;
    if (a->ids_arg) {
        int64_t cnt;
        char why[160];
        if (qhx_cli_parse_ids(a->ids_arg, ids, &cnt, why, sizeof why))
            return qhx_fail(err, QHX_E_ARG, "--ids: %s", why);
        *n = (size_t)cnt;
        return QHX_OK;
    }
    if (!m->tok) return qhx_fail(err, QHX_E_ARG, "%s: the model has no tokenizer.json: use --ids", a->run.model);
    const char *text = a->prompt;
    char *formatted = NULL;
    if (a->chat) {
        qhx_chat_part parts[2] = {{.text = NULL, .image_tokens = (int32_t)n_image_tokens},
                                  {.text = a->prompt, .text_len = strlen(a->prompt)}};
        qhx_chat_message msgs[2];
        size_t nm = 0;
        if (a->run.system) msgs[nm++] = (qhx_chat_message){.role = "system", .content = a->run.system};
        msgs[nm++] = a->image ? (qhx_chat_message){.role = "user", .parts = parts, .n_parts = 2}
                              : (qhx_chat_message){.role = "user", .content = a->prompt};
        int think = a->run.think >= 0 ? a->run.think : (m->plan && m->plan->generation.thinking);
        qhx_chat_options opt = {.add_generation_prompt = 1, .enable_thinking = think};
        size_t len;
        qhx_chat_family fam = m->family == QHX_FAMILY_QWEN3_VL ? QHX_CHAT_QWEN3VL : QHX_CHAT_QWEN35;
        qhx_status rc = qhx_tok_chat_format(fam, msgs, nm, &opt, &formatted, &len, err);
        if (rc) return rc;
        text = formatted;
    }
    qhx_status rc = qhx_tok_encode_alloc(m->tok, text, strlen(text), ids, n, err);
    qhx_free(formatted);
    if (rc == QHX_OK && *n == 0) rc = qhx_fail(err, QHX_E_ARG, "the prompt is empty");
    return rc;
}

/* --print-ids: ids space-separated on one line. */
static int print_id(void *user, qhx_token t, const char *text, size_t len) {
    (void)text;
    (void)len;
    int *count = user;
    if (t >= 0) printf((*count)++ ? " %d" : "%d", t);
    return qhx_cli_stdout_flush() != 0; /* streamed, as text is; lost output stops generation */
}

int qhx_cmd_generate(int argc, char **argv) {
    gen_args a;
    int rc = qhx_generate_parse_args(argc, argv, &a);
    if (rc >= 0) return rc;

    qhx_error err = {0};
    qhx_model *m = NULL;
    qhx_session *s = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    qhx_vl_image im = {0};
    qhx_generate_stats st = {0};
    int n_printed = 0;
    qhx_model_params mp = qhx_run_model_params(&a.run);
    if (qhx_model_open(a.run.model, &mp, &m, &err)) goto fail;
    const qhx_qwen3vl *vl = qhx_qwen3vl_of(m);
    if (a.image) {
        if (!vl) {
            qhx_fail(&err, QHX_E_UNSUPPORTED, "--image needs a Qwen3-VL model");
            goto fail;
        }
        if (m->plan && m->plan->host_op == QHX_HOST_OP_QWEN3_VL_TEXT_GENERATE) {
            qhx_fail(&err, QHX_E_UNSUPPORTED, "%s: the run plan's host-op qwen3_vl_text_generate takes no images (use the -vlm- manifest)",
                     a.image);
            goto fail;
        }
        if (qhx_qwen3vl_image_load(vl, a.image, &im, &err)) goto fail;
    }
    if (prompt_ids(m, &a, im.n_tokens, &ids, &n_ids, &err)) goto fail;
    int64_t need = (int64_t)n_ids + a.run.n_new;
    int64_t max_ctx = qhx_model_max_context(m);
    if (a.run.ctx && a.run.ctx < need) {
        qhx_fail(&err, QHX_E_LIMIT, "prompt (%zu tokens) + generation (%lld) need %lld tokens of context; --ctx is %lld",
                 n_ids, (long long)a.run.n_new, (long long)need, (long long)a.run.ctx);
        goto fail;
    }
    if (max_ctx > 0 && need > max_ctx) {
        qhx_fail(&err, QHX_E_LIMIT, "prompt (%zu tokens) + generation (%lld) exceed the model's context of %lld tokens",
                 n_ids, (long long)a.run.n_new, (long long)max_ctx);
        goto fail;
    }
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = a.run.ctx ? a.run.ctx : need;
    qhx_run_apply_sampling(&a.run, &sp);
    qhx_run_catch_sigint();
    sp.abort_cb = qhx_run_interrupted;
    if (qhx_session_create(m, &sp, &s, &err)) goto fail;
    if (vl && qhx_qwen3vl_attach(qhx_session_state(s), a.image ? &im : NULL, ids, (int64_t)n_ids, &err)) goto fail;
    if (qhx_session_feed(s, ids, n_ids, &err)) goto fail;
    qhx_generate_params gp = {.max_tokens = a.run.n_new, .ignore_stop = a.run.ignore_eos};
    if (a.print_ids) {
        gp.on_token = print_id;
        gp.user = &n_printed;
    } else {
        gp.on_token = qhx_run_print_text;
    }
    qhx_status grc = qhx_session_generate(s, &gp, &st, &err);
    printf("\n");
    if (qhx_cli_stdout_flush()) {
        rc = qhx_cli_stdout_error(CMD); /* the tokens went nowhere: no success line */
        goto done;
    }
    if (grc) goto fail; /* the error is the one stderr line (Ctrl-C included) */
    if (!a.run.quiet) qhx_run_print_stats(&st);
    rc = QHX_EXIT_OK;
    goto done;
fail:
    fflush(stdout);
    rc = qhx_cli_runtime_error(CMD, &err);
done:
    qhx_session_free(s);
    qhx_vl_image_deinit(&im);
    qhx_model_free(m);
    qhx_free(ids);
    return rc;
}
