/* qhx serve: an OpenAI-compatible HTTP server (docs/server.md).
 *   qhx serve -m MODEL [--host 127.0.0.1] [--port 8080] [-np N] [--queue N] [-c N] [-t N]
 *             [--api-key KEY | --api-key-file F] [-a NAME] [--log-format text|json] [--max-tokens N]
 *             [--max-body BYTES] [--timeout S] [--images | --text-only] [--device D]
 * Prints "qhx serve: listening on http://HOST:PORT" on stdout when ready; SIGINT or SIGTERM
 * stop accepting connections, let the requests in hand finish, and exit 0. */
#include "cli.h"
#include "serve/serve.h"


#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "serve";

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx serve -m MODEL [options]\n"
            "  An HTTP server with OpenAI's endpoints (/v1/chat/completions, /v1/completions,\n"
            "  /v1/models, /v1/embeddings), llama-server's (/completion, /embedding, /tokenize,\n"
            "  /detokenize, /props, /slots, /health, /metrics) and ollama's (/api/chat,\n"
            "  /api/generate, /api/embed, /api/embeddings, /api/tags, /api/show, /api/ps,\n"
            "  /api/version) (docs/server.md).\n"
            "  -m, --model PATH     manifest, bundle or checkpoint folder; ORG/NAME (the Hugging\n"
            "                       Face cache), ollama:NAME[:TAG] (ollama's store)\n"
            "  -hf REPO[:QUANT]     a Hugging Face repository, fetched when missing (docs/hub.md)\n"
            "  --mmproj FILE        a GGUF model's vision tower (llama.cpp's mmproj file)\n"
            "  --host ADDR          address or name to listen on: 127.0.0.1 (default: this machine\n"
            "                       only), ::1, localhost, 0.0.0.0 (every interface) ...\n"
            "  --port N             port (default 8080; 0: any free port)\n"
            "  -np, --parallel N    slots: requests generated at once (default 4)\n"
            "  --queue N            requests that may wait for a slot before 503 (default 64)\n"
            "  -c, --ctx-size, --ctx N  context per slot (default: the model's, as qhx generate\n"
            "                       chooses it: a checkpoint folder's trained context, lowered\n"
            "                       so that the KV caches of all slots fit the free memory)\n"
            "  -t, --threads N      compute threads (default: one per physical core)\n"
            "  --device D           %s\n"
            "  --api-key KEY        require Authorization: Bearer KEY (not /health)\n"
            "  --api-key-file F     the same, the key read from a file\n"
            "  -a, --alias NAME     the model id reported (default: the model path's last part)\n"
            "  --log-format F       the access log on stderr, one line per request: text\n"
            "                       (default) or json\n"
            "  --max-tokens N       most tokens one request may generate (default 4096)\n"
            "  --no-context-shift   a chat past the context is refused (400); by default its\n"
            "                       oldest turns after the system prompt are dropped until it\n"
            "                       fits (usage \"truncated\": true); --context-shift: the default\n"
            "  --pooling P          how an embedding pools a text's rows: last (default; the\n"
            "                       last token's, as Qwen3-Embedding), mean or cls (the first)\n"
            "  --embeddings         accepted (llama-server's switch): the embeddings endpoints\n"
            "                       are always served\n"
            "  --max-body BYTES     request body cap (default 32 MiB)\n"
            "  --timeout S          seconds a connection may stay idle, and the whole header\n"
            "                       section and the whole body may each take to arrive (default 30)\n"
            "  --images, --text-only  a checkpoint folder with a vision tower: open it for images,\n"
            "                       or for text only (default: the family's choice, Qwen3-VL with\n"
            "                       images, Qwen3.5 text only)\n"
            "  --spec mtp [--draft N]  speculative decoding with the checkpoint's MTP block, at\n"
            "                       most N drafts per step (default 3; a request's \"spec_draft\"\n"
            "                       lowers or turns it off); output unchanged (docs/generation.md)\n",
            qhx_cli_device_help());
}

srv_limits srv_default_limits(void) {
    return (srv_limits){.max_body = (size_t)32 << 20, .max_messages = 1024, .max_images = 4,
                        .max_image_pixels = (int64_t)16 << 20, .max_image_tokens = 16384, .max_tokens = 4096,
                        .max_stops = 16, .max_stop_len = 256, .max_tools = 128, .max_parts = 4096,
                        .max_calls = 1024, .max_args = 8192, .max_depth = 128, .max_json_nodes = 100000,
                        .max_top_logprobs = 20, .max_prompt_ids = 1 << 20, .conn_timeout_s = 30,
                        .head_timeout_s = 30, .body_timeout_s = 30, .max_connections = 256, .max_per_ip = 128};
}

typedef struct serve_args {
    srv_config cfg;
    const char *key_file;
    int vision; /* qhx_model_params.vision */
    int draft;  /* --draft */
    const char *device; /* --device: qhx_model_params.backend */
    const char *mmproj; /* --mmproj: a GGUF model's vision tower */
} serve_args;

static const char *const NAMES[] = {"-m", "--model", "--host", "--port", "--parallel", "-np", "--queue", "--ctx", "-c",
                                    "--ctx-size", "--threads", "-t", "--api-key", "--api-key-file", "--alias", "-a",
                                    "--max-tokens", "--max-body", "--timeout", "--images", "--text-only", "--help",
                                    "--spec", "--draft", "--device", "--log-format", "--context-shift",
                                    "--no-context-shift", "--mmproj", "--pooling", "--embeddings"};

/* llama-server's spellings of the same options: one name each from here on. */
static const char *canonical(const char *o) {
    static const char *const same[][2] = {{"-np", "--parallel"}, {"-c", "--ctx"},   {"--ctx-size", "--ctx"},
                                          {"-t", "--threads"},   {"-a", "--alias"}, {"--model", "-m"}};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        if (!strcmp(o, same[i][0])) return same[i][1];
    return o;
}

static int parse(int argc, char **argv, serve_args *a) {
    srv_config *c = &a->cfg;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return -1;
        }
        if (o[0] != '-') return qhx_cli_usage_error(CMD, "unexpected argument '%s'", o);
        bool known = false;
        for (size_t k = 0; k < sizeof NAMES / sizeof NAMES[0]; k++) known |= !strcmp(o, NAMES[k]);
        if (!known) return qhx_cli_unknown_option(CMD, o, NAMES, sizeof NAMES / sizeof NAMES[0]);
        if (!strcmp(o, "--context-shift") || !strcmp(o, "--no-context-shift")) {
            c->context_shift = !strcmp(o, "--context-shift");
            continue;
        }
        if (!strcmp(o, "--embeddings")) continue; /* the endpoints are always there */
        if (!strcmp(o, "--images") || !strcmp(o, "--text-only")) {
            if (a->vision && a->vision != (!strcmp(o, "--images") ? 1 : -1))
                return qhx_cli_usage_error(CMD, "--images and --text-only: choose one");
            a->vision = !strcmp(o, "--images") ? 1 : -1;
            continue;
        }
        if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "%s needs a value", o);
        const char *v = argv[++i];
        int64_t x = 0;
        const char *given = o; /* messages name the spelling the user gave */
        o = canonical(o);
        if (!strcmp(o, "-m")) c->model_path = v;
        else if (!strcmp(o, "--mmproj")) a->mmproj = v;
        else if (!strcmp(o, "--host")) c->host = v;
        else if (!strcmp(o, "--api-key")) c->api_key = v;
        else if (!strcmp(o, "--api-key-file")) a->key_file = v;
        else if (!strcmp(o, "--alias")) c->alias = v;
        else if (!strcmp(o, "--pooling")) {
            static const char *const P[] = {"last", "mean", "cls"};
            const qhx_pooling V[] = {QHX_POOLING_LAST, QHX_POOLING_MEAN, QHX_POOLING_CLS};
            int k = -1;
            for (int p = 0; p < 3; p++)
                if (!strcmp(v, P[p])) k = p;
            if (k < 0) return qhx_cli_usage_error(CMD, "--pooling: '%s' is not last, mean or cls", v);
            c->pooling = V[k];
        }
        else if (!strcmp(o, "--log-format")) {
            if (strcmp(v, "text") && strcmp(v, "json")) return qhx_cli_usage_error(CMD, "--log-format: '%s' is not text or json", v);
            c->log_json = !strcmp(v, "json");
        }
        else if (!strcmp(o, "--spec")) {
            if (strcmp(v, "mtp")) return qhx_cli_usage_error(CMD, "--spec: '%s' is not mtp", v);
            if (!c->spec_draft) c->spec_draft = 3;
        } else if (!strcmp(o, "--draft")) {
            if (qhx_cli_parse_i64(v, 1, 8, &x)) return qhx_cli_usage_error(CMD, "--draft: '%s' is not in [1, 8]", v);
            a->draft = (int)x;
        } else if (!strcmp(o, "--device")) {
            if (qhx_cli_check_device(CMD, v)) return QHX_EXIT_USAGE;
            a->device = v;
        }
        else if (!strcmp(o, "--port")) {
            if (qhx_cli_parse_i64(v, 0, 65535, &x)) return qhx_cli_usage_error(CMD, "--port: '%s' is not in [0, 65535]", v);
            c->port = (int)x;
        } else if (!strcmp(o, "--parallel")) {
            if (qhx_cli_parse_i64(v, 1, QHX_MAX_BATCH, &x))
                return qhx_cli_usage_error(CMD, "%s: '%s' is not in [1, %d]", given, v, QHX_MAX_BATCH);
            c->parallel = (int)x;
        } else if (!strcmp(o, "--queue")) {
            if (qhx_cli_parse_i64(v, 0, 100000, &x)) return qhx_cli_usage_error(CMD, "--queue: '%s' is not in [0, 100000]", v);
            c->queue = (int)x;
        } else if (!strcmp(o, "--ctx")) {
            if (qhx_cli_parse_i64(v, 16, (int64_t)1 << 24, &x)) return qhx_cli_usage_error(CMD, "%s: '%s' is not in [16, 16777216]", given, v);
            c->ctx = x;
        } else if (!strcmp(o, "--threads")) {
            if (qhx_cli_parse_i64(v, 1, 1024, &x)) return qhx_cli_usage_error(CMD, "%s: '%s' is not in [1, 1024]", given, v);
            c->threads = (int)x;
        } else if (!strcmp(o, "--max-tokens")) {
            if (qhx_cli_parse_i64(v, 1, (int64_t)1 << 24, &x)) return qhx_cli_usage_error(CMD, "--max-tokens: '%s' is not in [1, 16777216]", v);
            c->lim.max_tokens = x;
        } else if (!strcmp(o, "--timeout")) {
            if (qhx_cli_parse_i64(v, 1, 3600, &x)) return qhx_cli_usage_error(CMD, "--timeout: '%s' is not in [1, 3600]", v);
            c->lim.conn_timeout_s = c->lim.head_timeout_s = c->lim.body_timeout_s = (int)x;
        } else if (!strcmp(o, "--max-body")) {
            if (qhx_cli_parse_i64(v, 1024, (int64_t)1 << 30, &x)) return qhx_cli_usage_error(CMD, "--max-body: '%s' is not in [1024, 1 GiB]", v);
            c->lim.max_body = (size_t)x;
        }
    }
    if (!c->model_path) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    const qhx_cli_needs needs[] = {{"--draft", a->draft > 0, "--spec mtp", c->spec_draft > 0}};
    if (qhx_cli_check_needs(CMD, needs, 1)) return QHX_EXIT_USAGE;
    if (a->draft) c->spec_draft = a->draft;
    if (c->api_key && a->key_file) return qhx_cli_usage_error(CMD, "--api-key and --api-key-file: choose one");
    return 0;
}

/* The key from a file: its first line, surrounding whitespace dropped. */
static int read_key(const char *path, char **out, qhx_error *err) {
    char *text = NULL;
    size_t len = 0;
    if (qhx_cli_read_text(path, &text, &len, err)) return -1;
    size_t b = 0, e = strcspn(text, "\r\n");
    while (b < e && (text[b] == ' ' || text[b] == '\t')) b++;
    while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\t')) e--;
    if (e == b) {
        free(text);
        qhx_cli_fail(err, QHX_E_FORMAT, "%s: the key file is empty", path);
        return -1;
    }
    memmove(text, text + b, e - b);
    text[e - b] = '\0';
    *out = text;
    return 0;
}

static const char *default_alias(const char *path, char *buf, size_t n) {
    /* a snapshot of the Hugging Face cache (-hf, -m ORG/NAME): .../models--ORG--NAME/snapshots/COMMIT */
    const char *repo = strstr(path, "/models--"), *snap = repo ? strstr(repo, "/snapshots/") : NULL;
    const char *sep = repo ? strstr(repo + 9, "--") : NULL;
    if (snap && sep && sep < snap) {
        snprintf(buf, n, "%.*s/%.*s", (int)(sep - repo - 9), repo + 9, (int)(snap - sep - 2), sep + 2);
        return buf;
    }
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    size_t b = len;
    while (b > 0 && path[b - 1] != '/') b--;
    snprintf(buf, n, "%.*s", (int)(len - b), path + b);
    return buf;
}

int qhx_cmd_serve(int argc, char **argv) {
    serve_args a = {.cfg = {.host = "127.0.0.1", .port = 8080, .parallel = 4, .queue = 64, .context_shift = true,
                            .lim = srv_default_limits()}};
    int pr = parse(argc, argv, &a);
    if (pr) return pr < 0 ? QHX_EXIT_OK : pr;
    srv_config *cfg = &a.cfg;
    qhx_error err = {0};
    char *key = NULL, alias[256];
    if (a.key_file) {
        if (read_key(a.key_file, &key, &err)) return qhx_cli_runtime_error(CMD, &err);
        cfg->api_key = key;
    }
    if (!cfg->alias) cfg->alias = default_alias(cfg->model_path, alias, sizeof alias);
    if (qhx_cli_check_model_path(cfg->model_path, &err)) {
        free(key);
        return qhx_cli_runtime_error(CMD, &err);
    }

    /* SIGINT/SIGTERM are taken by sigwait below: blocked here, before any thread starts, so
       every thread inherits the mask */
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
    signal(SIGPIPE, SIG_IGN);

    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = cfg->threads;
    mp.vision = a.vision;
    mp.mtp = cfg->spec_draft > 0;
    mp.backend = a.device;
    mp.mmproj = a.mmproj;
    qhx_model *m = NULL;
    srv_engine *e = NULL;
    srv_http *h = NULL;
    srv_stats stats = {0};
    int rc = QHX_EXIT_RUNTIME, port = 0;
    if (qhx_model_open(cfg->model_path, &mp, &m, &err)) goto out;
    /* Each slot's context: --ctx (checked), else the library's policy as qhx generate and qhx
       chat apply it (a checkpoint folder: its trained context). Every slot's KV cache is
       allocated whole when the server starts, so the memory budget covers all the slots: where
       the memory does not bind, a slot gets generate's context; where it does, its share. */
    qhx_context_choice cc;
    if (qhx_model_choose_context(m, cfg->ctx, cfg->parallel, "--ctx", &cc, &err)) goto out;
    if (cc.by_memory)
        fprintf(stderr, "qhx serve: context limited to %lld tokens per slot by the free memory (%d slots; the model was trained for %lld)\n",
                (long long)cc.n_ctx, cfg->parallel, (long long)cc.trained);
    cfg->ctx = cc.n_ctx;
    if (srv_engine_start(m, cfg, &stats, &e, &err)) goto out;
    if (!(h = srv_http_start(m, cfg, e, &stats, &port, &err))) goto out;
    printf("qhx serve: listening on http://%s%s%s:%d (model %s, %d slots)\n", strchr(cfg->host, ':') ? "[" : "",
           cfg->host, strchr(cfg->host, ':') ? "]" : "", port, cfg->alias, cfg->parallel);
    fflush(stdout);
    int sig = 0;
    sigwait(&stop_set, &sig);
    fprintf(stderr, "qhx serve: %s: finishing the requests in hand\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    srv_http_quiesce(h);
    srv_engine_stop(e);     /* drains the queue and the slots */
    srv_http_drain(h, 30);  /* lets their responses go out */
    rc = QHX_EXIT_OK;
out:
    srv_http_stop(h);
    srv_engine_free(e);
    qhx_model_free(m);
    free(key);
    if (rc) return qhx_cli_runtime_error(CMD, &err);
    return rc;
}
