/* qhx chat: interactive multi-turn chat on a terminal (or over a pipe: one user turn per line).
 * The session keeps its state between turns and feeds only the new turn: the closing of the
 * previous answer, the user turn and the assistant header. Lines starting with '/' are
 * commands: /reset, /save FILE, /load FILE, /exit. */
#include "cli.h"
#include "cli_args.h"
#include "cli_run.h"

#include "core/alloc.h"
#include "io/manifest.h"
#include "models/family.h"
#include "runtime/session.h"
#include "text/tokenizer.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *CMD = "chat";

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx chat -m MODEL [--system TEXT] [--think|--no-think] [options]\n"
            "  Reads one user turn per line from stdin and prints each answer. Commands:\n"
            "  /reset (new conversation), /save FILE, /load FILE (session state), /exit.\n"
            "  -m, --model PATH     manifest, bundle folder or Hugging Face checkpoint folder\n"
            "  --system TEXT        system message\n"
            "  --think, --no-think  Qwen3.5 thinking mode (default: the run plan's)\n"
            "%s"
            "  (-n is the most tokens per answer; --ctx the whole conversation's context, default 4096)\n",
            QHX_RUN_OPTS_HELP);
}

typedef struct chat {
    qhx_run_opts run;
    qhx_model *m;
    qhx_session *s;
    bool first;               /* nothing fed yet */
    bool interactive;
} chat;

/* The text of one user turn, formatted for the family; NULL on error. */
static char *turn_text(chat *c, const char *user, qhx_error *err) {
    qhx_chat_message msgs[2];
    size_t n = 0;
    if (c->first && c->run.system) msgs[n++] = (qhx_chat_message){.role = "system", .content = c->run.system};
    msgs[n++] = (qhx_chat_message){.role = "user", .content = user};
    int think = c->run.think >= 0 ? c->run.think : (c->m->plan && c->m->plan->generation.thinking);
    qhx_chat_options opt = {.add_generation_prompt = 1, .enable_thinking = think};
    qhx_chat_family fam = c->m->family == QHX_FAMILY_QWEN3_VL ? QHX_CHAT_QWEN3VL : QHX_CHAT_QWEN35;
    char *body = NULL;
    size_t len;
    if (qhx_tok_chat_format(fam, msgs, n, &opt, &body, &len, err)) return NULL;
    if (c->first) return body;
    /* close the previous answer: its stop token (<|im_end|>) is fed with this turn; after a
     * length stop the closing token has to be added */
    const char *sep = qhx_session_last_stop(c->s) == QHX_STOP_TOKEN ? "\n" : "<|im_end|>\n";
    char *t = qhx_malloc(strlen(sep) + len + 1);
    if (!t) {
        qhx_free(body);
        qhx_fail(err, QHX_E_NOMEM, "out of memory");
        return NULL;
    }
    strcpy(t, sep);
    strcat(t, body);
    qhx_free(body);
    return t;
}

static int command(chat *c, char *line, qhx_error *err) {
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) return 1;
    if (!strcmp(line, "/reset")) {
        qhx_session_reset(c->s);
        c->first = true;
        fprintf(stderr, "(new conversation)\n");
        return 0;
    }
    if (!strncmp(line, "/save ", 6) || !strncmp(line, "/load ", 6)) {
        const char *path = line + 6;
        qhx_status rc = line[1] == 's' ? qhx_session_save(c->s, path, err) : qhx_session_restore(c->s, path, err);
        if (rc) fprintf(stderr, "qhx chat: %s\n", err->msg);
        else {
            if (line[1] == 'l') c->first = qhx_session_n_past(c->s) == 0;
            fprintf(stderr, "(%s %s: %lld tokens)\n", line[1] == 's' ? "saved" : "loaded", path,
                    (long long)qhx_session_n_past(c->s));
        }
        return 0;
    }
    fprintf(stderr, "qhx chat: unknown command '%s' (/reset, /save FILE, /load FILE, /exit)\n", line);
    return 0;
}

/* One user turn: feed it, stream the answer. Returns an exit code >= 0 to stop, -1 to go on. */
static int turn(chat *c, const char *user, qhx_error *err) {
    char *text = turn_text(c, user, err);
    if (!text) return qhx_cli_runtime_error(CMD, err);
    qhx_status rc = qhx_session_feed_text(c->s, text, strlen(text), err);
    qhx_free(text);
    if (rc == QHX_E_LIMIT) {
        fprintf(stderr, "qhx chat: %s (use /reset, or a larger --ctx)\n", err->msg);
        return -1;
    }
    if (rc) return qhx_cli_runtime_error(CMD, err);
    c->first = false;
    qhx_generate_stats st = {0};
    qhx_generate_params gp = {.max_tokens = c->run.n_new, .ignore_stop = c->run.ignore_eos,
                              .on_token = qhx_run_print_text};
    int64_t room = qhx_session_n_ctx(c->s) - qhx_session_n_past(c->s) - 1;
    if (gp.max_tokens > room) gp.max_tokens = room;
    if (gp.max_tokens < 1) {
        fprintf(stderr, "qhx chat: the context is full (use /reset, or a larger --ctx)\n");
        return -1;
    }
    rc = qhx_session_generate(c->s, &gp, &st, err);
    printf("\n");
    if (qhx_cli_stdout_flush()) return qhx_cli_stdout_error(CMD); /* nobody reads the answers */
    if (rc) return qhx_cli_runtime_error(CMD, err);
    if (!c->run.quiet) qhx_run_print_stats(&st);
    return -1;
}

int qhx_chat_parse_args(int argc, char **argv, qhx_run_opts *o) {
    qhx_run_opts_init(o);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        int r = qhx_run_parse_opt(CMD, argc, argv, &i, o);
        if (r > 1) return r;
        if (r == 0) return qhx_cli_usage_error(CMD, "unknown option '%s'", argv[i]);
    }
    if (!o->model) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    if (o->n_new < 0) o->n_new = 512;
    return -1;
}

int qhx_cmd_chat(int argc, char **argv) {
    chat c;
    memset(&c, 0, sizeof c);
    int prc = qhx_chat_parse_args(argc, argv, &c.run);
    if (prc >= 0) return prc;
    qhx_error err = {0};
    int rc = QHX_EXIT_OK;
    qhx_model_params mp = qhx_run_model_params(&c.run);
    if (qhx_model_open(c.run.model, &mp, &c.m, &err)) return qhx_cli_runtime_error(CMD, &err);
    qhx_session_params sp = qhx_session_default_params(c.m);
    sp.n_ctx = c.run.ctx ? c.run.ctx : 4096;
    if (qhx_model_max_context(c.m) > 0 && sp.n_ctx > qhx_model_max_context(c.m)) sp.n_ctx = qhx_model_max_context(c.m);
    qhx_run_apply_sampling(&c.run, &sp);
    qhx_run_catch_sigint();
    sp.abort_cb = qhx_run_interrupted;
    if (!c.m->tok) {
        qhx_fail(&err, QHX_E_ARG, "%s: the model has no tokenizer.json", c.run.model);
        rc = qhx_cli_runtime_error(CMD, &err);
        goto done;
    }
    if (qhx_session_create(c.m, &sp, &c.s, &err)) {
        rc = qhx_cli_runtime_error(CMD, &err);
        goto done;
    }
    c.first = true;
    c.interactive = isatty(STDIN_FILENO);
    char line[65536];
    for (;;) {
        if (c.interactive) {
            fprintf(stderr, "> ");
            fflush(stderr);
        }
        if (!fgets(line, sizeof line, stdin)) break;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n') line[--len] = '\0';
        else if (len == sizeof line - 1) {
            fprintf(stderr, "qhx chat: a line is longer than %zu bytes\n", sizeof line - 2);
            rc = QHX_EXIT_RUNTIME;
            break;
        }
        if (!len) continue;
        if (line[0] == '/') {
            if (command(&c, line, &err)) break;
            continue;
        }
        int t = turn(&c, line, &err);
        if (t >= 0) {
            rc = t;
            break;
        }
        if (qhx_run_interrupted(NULL)) {
            rc = QHX_EXIT_INTERRUPTED;
            break;
        }
    }
done:
    qhx_session_free(c.s);
    qhx_model_free(c.m);
    return rc;
}
