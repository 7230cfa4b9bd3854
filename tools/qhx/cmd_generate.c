/* qhx generate: continue a prompt, printing text as it is generated.
 *   qhx generate -m MODEL (-p PROMPT | -f FILE | --ids 1,2,3 | < stdin) [-n N] [sampling]
 *                [--chat [--system S] [--think|--no-think]] [--image FILE]... [--stop STR] [--json]
 * The prompt goes through the prompt path, then one decode step per new token; generation stops
 * at the run plan's stop ids (a chat also at its turn end; none with --ignore-eos), at a --stop
 * string, after N tokens or when the context is full. A speed line goes to stderr. Ctrl-C
 * stops generation: what was generated stays printed, the speed line says "interrupted", the
 * exit code is 130. */
#include "cli.h"
#include "cli_args.h"
#include "cli_model.h"
#include "cli_run.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *CMD = "generate";

typedef qhx_generate_args gen_args;

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx generate -m MODEL (-p PROMPT | -f FILE | --ids ID,ID,... | < PROMPT) [options]\n"
            "       qhx generate -m MODEL [options] PROMPT\n"
            "  -m, --model PATH     manifest, bundle folder or Hugging Face checkpoint folder;\n"
            "                       ORG/NAME: that repository in the Hugging Face cache;\n"
            "                       ollama:NAME[:TAG]: a model in ollama's store (docs/hub.md)\n"
            "  -hf REPO[:QUANT]     a Hugging Face repository (ORG/NAME[:QUANT][@REVISION]):\n"
            "                       fetched into its cache when missing (qhx pull), then run\n"
            "  -p, --prompt TEXT    the prompt (UTF-8); '-' reads it from stdin; a last argument\n"
            "                       that is not an option is the prompt too\n"
            "  -f, --file FILE      the prompt from a file ('-': stdin). With no prompt option\n"
            "                       the prompt is read from stdin when it is not a terminal\n"
            "  --ids LIST           the prompt as token ids, separated by commas or spaces (the\n"
            "                       output of qhx tokenize)\n"
            "  --image FILE         PNG or JPEG (Qwen3-VL, Qwen3.5); repeat it for several, in\n"
            "                       order. With -p --chat the images go before the text of the\n"
            "                       user turn; with --ids the ids already hold one run per\n"
            "                       image: the chat format's image start, image-pad ids (one\n"
            "                       per image token), image end\n"
            "  --video FILE         a video (MP4, WebM, MKV, AVI, ...: what FFmpeg reads; Qwen3-VL,\n"
            "                       Qwen3.5; with -p --chat): sampled and encoded as Qwen3-VL's\n"
            "                       video processor does, placed after the images, before the text\n"
            "  --video-fps F        frames sampled per second of video (default: the checkpoint's\n"
            "                       video processor, 2)\n"
            "  --video-max-frames N at most N frames sampled (default 768); a video that does not\n"
            "                       fit the context with -n is sampled with fewer frames (then\n"
            "                       fewer pixels), one line on stderr saying so\n"
            "  --chat               wrap the prompt in the model's chat format (a user turn); the\n"
            "                       answer stops at the format's end of turn\n"
            "  --system TEXT        system message (with --chat)\n"
            "  --think, --no-think  Qwen3.5 thinking mode (with --chat; default: the run plan's)\n"
            "  --print-ids          print the generated ids, space-separated, instead of text\n"
            "  --json               print one JSON object instead of the text: text, ids, stop\n"
            "                       reason, timings, seed (with --video: its frames, grid, tokens\n"
            "                       and the decode / preprocess / vision tower times)\n"
            "  --print-prompt       print the prompt as the model will read it (after the chat\n"
            "                       format) and stop\n"
            "  --grammar FILE       constrain the output to a GBNF grammar (docs/grammar.md)\n"
            "  --json-schema S      constrain the output to JSON valid under a JSON Schema: the\n"
            "                       schema itself when S starts with '{', '[' or '\"' or is one JSON\n"
            "                       value (true, false), else a file (the subset in docs/grammar.md;\n"
            "                       a keyword outside it is an error)\n"
            "  --json-object        constrain the output to one JSON object\n"
            "%s",
            qhx_run_opts_help());
}

static const char *const GEN_NAMES[] = {"-p", "--prompt", "-f", "--file", "--ids", "--image", "--video", "--video-fps",
                                        "--video-max-frames", "--chat",
                                        "--print-ids", "--json", "--print-prompt", "--help", "--grammar",
                                        "--json-schema", "--json-object"};

static int unknown(const char *arg) {
    const char *names[64];
    size_t n = 0;
    for (size_t k = 0; k < QHX_RUN_N_OPT_NAMES && n < 64; k++) names[n++] = QHX_RUN_OPT_NAMES[k];
    for (size_t k = 0; k < sizeof GEN_NAMES / sizeof GEN_NAMES[0] && n < 64; k++) names[n++] = GEN_NAMES[k];
    return qhx_cli_unknown_option(CMD, arg, names, n);
}

/* -p/--prompt, -f/--file, --ids: one of them, once; --image: repeatable. */
static int parse_prompt_opt(int argc, char **argv, int *i, gen_args *a) {
    const char *o = argv[*i];
    if (*i + 1 >= argc) return qhx_cli_usage_error(CMD, "%s needs a value", o);
    const char *v = argv[++*i];
    if (!strcmp(o, "--video")) {
        if (a->video) return qhx_cli_usage_error(CMD, "--video: one video per prompt");
        if (!*v) return qhx_cli_usage_error(CMD, "--video: the file name is empty");
        a->video = v;
        return 0;
    }
    if (!strcmp(o, "--video-fps")) {
        char *end;
        double f = strtod(v, &end);
        if (*end || !(f > 0 && f <= 1000)) return qhx_cli_usage_error(CMD, "--video-fps: '%s' is not in (0, 1000]", v);
        a->video_fps = f;
        return 0;
    }
    if (!strcmp(o, "--video-max-frames")) {
        if (qhx_cli_parse_i64(v, 2, 768, &a->video_max_frames))
            return qhx_cli_usage_error(CMD, "--video-max-frames: '%s' is not in [2, 768]", v);
        return 0;
    }
    if (!strcmp(o, "--image")) {
        if (a->n_images == QHX_CLI_MAX_IMAGES) return qhx_cli_usage_error(CMD, "--image: more than %d images", QHX_CLI_MAX_IMAGES);
        if (!*v) return qhx_cli_usage_error(CMD, "--image: the file name is empty");
        a->images[a->n_images++] = v;
        return 0;
    }
    if (a->prompt || a->prompt_file || a->ids_arg)
        return qhx_cli_usage_error(CMD, "give one of -p PROMPT, -f FILE and --ids LIST, once");
    if (!strcmp(o, "--ids")) a->ids_arg = v;
    else if (!strcmp(o, "-f") || !strcmp(o, "--file") || !strcmp(v, "-")) a->prompt_file = v;
    else if (!*v) return qhx_cli_usage_error(CMD, "-p: the prompt is empty");
    else a->prompt = v;
    return 0;
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
        if (!strcmp(o, "--chat")) a->chat = true;
        else if (!strcmp(o, "--print-ids")) a->print_ids = true;
        else if (!strcmp(o, "--json")) a->json = true;
        else if (!strcmp(o, "--print-prompt")) a->print_prompt = true;
        else if (!strcmp(o, "--json-object")) a->json_object = true;
        else if (!strcmp(o, "--grammar") || !strcmp(o, "--json-schema")) {
            if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "%s needs a value", o);
            if (!*argv[i + 1]) return qhx_cli_usage_error(CMD, "%s: the value is empty", o);
            if (!strcmp(o, "--grammar")) a->grammar_file = argv[++i];
            else a->json_schema = argv[++i];
        }
        else if (!strcmp(o, "-p") || !strcmp(o, "--prompt") || !strcmp(o, "-f") || !strcmp(o, "--file") ||
                 !strcmp(o, "--ids") || !strcmp(o, "--image") || !strcmp(o, "--video") || !strcmp(o, "--video-fps") ||
                 !strcmp(o, "--video-max-frames")) {
            if ((r = parse_prompt_opt(argc, argv, &i, a))) return r;
        } else if (o[0] != '-' && o[0]) { /* llama.cpp's habit: the prompt as the last word, no -p */
            if (a->prompt || a->prompt_file || a->ids_arg)
                return qhx_cli_usage_error(CMD, "'%s': a second prompt (give one of -p PROMPT, -f FILE, --ids LIST "
                                           "and a prompt without an option)", o);
            a->prompt = o;
        } else return unknown(o);
    }
    if (!a->run.model) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    if (!a->prompt && !a->prompt_file && !a->ids_arg) {
        a->prompt_file = "-";
        a->prompt_implicit = true;
    }
    if (a->chat && a->ids_arg) return qhx_cli_usage_error(CMD, "--chat needs a text prompt (-p or -f)");
    const qhx_cli_needs needs[] = { /* what only a chat-formatted text prompt uses */
        {"--system", a->run.system != NULL, "--chat", a->chat},
        {"--think/--no-think", a->run.think >= 0, "--chat", a->chat},
        {"--image-max-tokens", a->run.image_max_tokens > 0, "--image with a text prompt and --chat",
         a->n_images && a->chat && !a->ids_arg},
    };
    int nr = qhx_run_check_needs(CMD, &a->run, needs, sizeof needs / sizeof needs[0]);
    if (nr) return nr;
    if ((a->video_fps > 0 || a->video_max_frames > 0) && !a->video)
        return qhx_cli_usage_error(CMD, "--video-fps and --video-max-frames need --video");
    if (a->video && !a->chat)
        return qhx_cli_usage_error(CMD, "--video needs a text prompt and --chat (the video goes into the user turn)");
    if (a->n_images && !a->ids_arg && !a->chat) return qhx_cli_usage_error(CMD, "--image with a text prompt needs --chat (the image goes into the user turn)");
    if (a->print_ids && a->json) return qhx_cli_usage_error(CMD, "--print-ids and --json: choose one");
    if ((a->grammar_file != NULL) + (a->json_schema != NULL) + a->json_object > 1)
        return qhx_cli_usage_error(CMD, "--grammar, --json-schema and --json-object: choose one");
    if ((a->grammar_file || a->json_schema || a->json_object) && a->run.think == 1)
        return qhx_cli_usage_error(CMD, "--think with a grammar: the think block would have to follow it (a grammar implies --no-think)");
    if (a->run.n_new == 0) a->run.n_new = 128;
    return -1;
}

/* ---- the prompt ---------------------------------------------------------------------------- */

/* The chat spec of the prompt (--chat): --system, then the user turn with one part per --image,
 * in order (the files; render_only: one pad each), then the text. turns (2,) and parts
 * (QHX_CLI_MAX_IMAGES + 2,) are its storage. */
static void chat_spec(const qhx_model *m, const gen_args *a, bool render_only, qhx_chat_turn *turns,
                      qhx_chat_content *parts, qhx_chat_spec *spec) {
    size_t nt = 0;
    if (a->run.system) turns[nt++] = (qhx_chat_turn){.role = "system", .content = a->run.system};
    int np = 0;
    for (int k = 0; k < a->n_images; k++)
        parts[np++] = render_only ? (qhx_chat_content){.image_tokens = 1} : (qhx_chat_content){.image_path = a->images[k]};
    if (a->video) parts[np++] = (qhx_chat_content){.video_path = a->video};
    parts[np] = (qhx_chat_content){.text = a->prompt, .text_len = strlen(a->prompt)};
    turns[nt++] = (qhx_chat_turn){.role = "user", .content = a->prompt, .parts = np ? parts : NULL,
                                  .n_parts = np ? (size_t)np + 1 : 0};
    bool constrained = a->grammar_file || a->json_schema || a->json_object; /* the answer follows it from byte one */
    int think = a->run.think >= 0 ? a->run.think : constrained ? 0 : qhx_model_thinking_default(m);
    *spec = (qhx_chat_spec){.turns = turns, .n_turns = nt, .thinking = think, .render_only = render_only,
                            .max_images = a->n_images, .video_fps = a->video_fps,
                            .video_max_frames = a->video_max_frames};
}

/* --print-prompt: the prompt text, chat-formatted when asked (one pad per --image). */
static qhx_status print_prompt(const qhx_model *m, const gen_args *a, qhx_error *err) {
    if (!a->chat) {
        fputs(a->prompt, stdout);
        return QHX_OK;
    }
    qhx_chat_turn turns[2];
    qhx_chat_content parts[QHX_CLI_MAX_IMAGES + 2];
    qhx_chat_spec spec;
    chat_spec(m, a, true, turns, parts, &spec);
    qhx_prompt *p;
    qhx_status rc = qhx_prompt_from_chat(m, &spec, &p, err);
    if (rc) return rc;
    fputs(qhx_prompt_text(p, NULL), stdout);
    qhx_prompt_free(p);
    return QHX_OK;
}

/* ---- running ------------------------------------------------------------------------------- */

typedef struct run {
    gen_args a;
    char *user;               /* the prompt text read from -f / stdin (owned), or NULL */
    qhx_model *m;
    qhx_session *s;
    qhx_prompt *prompt;       /* -p / -f / stdin: the text, chat-formatted with --chat, and its images */
    qhx_token *ids;           /* owned: free (--ids, or a copy of the prompt's) */
    size_t n_ids;
    qhx_encoded_image *im[QHX_CLI_MAX_IMAGES]; /* --ids: the --image files, encoded, in order */
    qhx_run_context ctx;
    qhx_grammar *grammar;     /* --grammar / --json-schema / --json-object, or NULL */
    qhx_constraint *constraint;
    qhx_run_out out;
    double load_s;
    uint64_t seed;
    bool sampling;
    qhx_error err;
} run;

/* The text prompt: -p, or read from -f FILE / stdin. Returns an exit code >= 0 on failure. */
static int read_prompt(run *r) {
    gen_args *a = &r->a;
    if (a->prompt || a->ids_arg) return -1;
    if (a->prompt_implicit && isatty(STDIN_FILENO))
        return qhx_cli_usage_error(CMD, "missing -p PROMPT (or -f FILE, or the prompt on stdin)");
    size_t len;
    if (qhx_cli_read_text(a->prompt_file, &r->user, &len, &r->err)) return qhx_cli_runtime_error(CMD, &r->err);
    if (!len) return qhx_cli_usage_error(CMD, "the prompt from %s is empty", strcmp(a->prompt_file, "-") ? a->prompt_file : "stdin");
    if (strlen(r->user) != len) return qhx_cli_usage_error(CMD, "the prompt holds a NUL byte");
    a->prompt = r->user;
    return -1;
}

/* Checks that need the model: what the options ask must be something it does. */
static int check_model_options(run *r) {
    const gen_args *a = &r->a; /* --think is checked by qhx_run_open_model */
    if (!a->n_images || qhx_model_takes_images(r->m)) return -1;
    qhx_encoded_image *none = NULL; /* the model's own message: which host-op, and where images are */
    qhx_encoded_image_load(r->m, a->images[0], 0, &none, &r->err);
    qhx_encoded_image_free(none);
    return qhx_cli_runtime_error(CMD, &r->err);
}

/* The prompt (text, or with --chat the chat turn with the images encoded within the room the
 * text and the answer leave in the context, --image-max-tokens bounding their sum), and its ids. */
static qhx_status build_prompt(run *r) {
    const gen_args *a = &r->a;
    qhx_error *err = &r->err;
    if (a->ids_arg) { /* the ids fix each image's token count: no budget */
        if (a->n_images && qhx_encoded_images_load(r->m, a->images, (size_t)a->n_images, 0, r->im, err)) return err->code;
        return QHX_OK; /* parsed by the caller */
    }
    if (!qhx_model_has_tokenizer(r->m)) return qhx_cli_fail(err, QHX_E_ARG, "the model has no tokenizer.json: use --ids");
    qhx_status rc;
    if (!a->chat) {
        rc = qhx_prompt_from_text(r->m, a->prompt, strlen(a->prompt), &r->prompt, err);
    } else {
        qhx_chat_turn turns[2];
        qhx_chat_content parts[QHX_CLI_MAX_IMAGES + 2];
        qhx_chat_spec spec;
        chat_spec(r->m, a, false, turns, parts, &spec);
        const int64_t answer = a->run.n_new > 0 ? a->run.n_new : 1;
        spec.max_tokens = r->ctx.limit - answer > 1 ? r->ctx.limit - answer : 1;
        spec.image_budget = a->run.image_max_tokens;
        rc = qhx_prompt_from_chat(r->m, &spec, &r->prompt, err);
        if (rc == QHX_E_LIMIT && (a->n_images || a->video)) { /* the images found no room: how to make some */
            char advice[160];
            qhx_run_context_advice(&r->ctx, advice, sizeof advice);
            size_t used = strlen(err->msg);
            snprintf(err->msg + used, sizeof err->msg - used, "%s", advice);
        }
    }
    if (rc) return rc;
    qhx_run_report_video(r->prompt, a->run.quiet, a->run.verbose);
    size_t n;
    const qhx_token *ids = qhx_prompt_ids(r->prompt, &n);
    if (n && !(r->ids = malloc(n * sizeof *ids))) return qhx_cli_fail(err, QHX_E_NOMEM, "out of memory");
    if (n) memcpy(r->ids, ids, n * sizeof *ids);
    r->n_ids = n;
    return QHX_OK;
}

/* --json: one object on stdout. Text that is not valid UTF-8 (a tail cut by -n) gets '?' for
 * its non-ASCII bytes, as JSON must be UTF-8. */
static void print_json(const run *r, const qhx_generate_stats *st, const char *stop) {
    const qhx_run_out *o = &r->out;
    json_t *text = json_stringn(o->text ? o->text : "", o->n_text);
    if (!text) {
        char *copy = malloc(o->n_text + 1);
        for (size_t k = 0; copy && k < o->n_text; k++) copy[k] = (unsigned char)o->text[k] >= 0x80 ? '?' : o->text[k];
        text = copy ? json_stringn(copy, o->n_text) : json_string("");
        free(copy);
    }
    json_t *ids = json_array();
    for (size_t k = 0; k < o->n_ids; k++) json_array_append_new(ids, json_integer(o->ids[k]));
    double first = o->t_first_ns ? (double)(o->t_first_ns - o->t_start_ns) / 1e6 : 0;
    json_t *obj = json_pack("{s:o, s:o, s:s, s:I, s:b, s:I, s:I, s:f, s:f, s:f, s:f}", "text", text, "ids", ids,
                            "stop", stop, "seed", (json_int_t)r->seed, "sampling", r->sampling, "n_prompt",
                            (json_int_t)st->n_prompt, "n_generated", (json_int_t)st->n_generated, "load_ms",
                            qhx_cli_round(r->load_s * 1000.0, 2), "first_token_ms", qhx_cli_round(first, 2), "prompt_ms",
                            qhx_cli_round(st->prefill_ms, 2), "generate_ms", qhx_cli_round(st->decode_ms, 2));
    qhx_prompt_video_stats v;
    qhx_prompt_video_stats_get(r->prompt, &v);
    if (obj && v.n_videos) /* where the time to the first token went */
        json_object_set_new(obj, "video",
                            json_pack("{s:I, s:[I,I,I], s:I, s:f, s:f, s:f, s:b, s:I}", "frames", (json_int_t)v.frames,
                                      "grid", (json_int_t)v.grid_t, (json_int_t)v.grid_h, (json_int_t)v.grid_w, "tokens",
                                      (json_int_t)v.n_tokens, "decode_ms", qhx_cli_round(v.decode_ms, 2),
                                      "preprocess_ms", qhx_cli_round(v.preprocess_ms, 2), "vision_ms",
                                      qhx_cli_round(v.vision_ms, 2), "fitted", v.fitted, "max_pixels",
                                      (json_int_t)v.max_pixels));
    if (obj && st->n_verify > 0) /* speculative decoding */
        json_object_set_new(obj, "spec",
                            json_pack("{s:I, s:I, s:I, s:f, s:f}", "verify_steps", (json_int_t)st->n_verify, "drafted",
                                      (json_int_t)st->n_drafted, "accepted", (json_int_t)st->n_accepted,
                                      "acceptance",
                                      qhx_cli_round(st->n_drafted ? (double)st->n_accepted / (double)st->n_drafted : 0.0, 3),
                                      "tokens_per_step", qhx_cli_round((double)st->n_spec_tokens / (double)st->n_verify, 2)));
    json_t *spec = obj ? json_object_get(obj, "spec") : NULL;
    if (spec) { /* against plain decoding: measured after the run (measure_plain_decode) */
        const double tok_s = st->decode_ms > 0 ? (double)st->n_generated * 1000.0 / st->decode_ms : 0;
        json_object_set_new(spec, "tok_s", json_real(qhx_cli_round(tok_s, 1)));
        json_object_set_new(spec, "plain_tok_s", o->spec_plain_tok_s > 0 ? json_real(qhx_cli_round(o->spec_plain_tok_s, 1)) : json_null());
        json_object_set_new(spec, "speedup", o->spec_plain_tok_s > 0 && tok_s > 0
                                                 ? json_real(qhx_cli_round(tok_s / o->spec_plain_tok_s, 2)) : json_null());
        json_object_set_new(spec, "retired", json_boolean(o->spec_retired));
    }
    char *s = obj ? json_dumps(obj, QHX_CLI_JSON_FLAGS) : NULL;
    if (s) printf("%s\n", s);
    fflush(stdout);
    free(s);
    json_decref(obj);
}

/* --json-schema S: S is the schema itself when it is JSON text: it starts with '{', '[' or '"'
 * (an error in it is then reported as a JSON error, not as a missing file), or the whole of it
 * is one JSON value (true and false: boolean schemas; null or 5 are then refused as schemas).
 * Anything else is a file name: a file named "true" is ./true (docs/grammar.md). */
static bool schema_is_inline(const char *p) {
    if (*p == '{' || *p == '[' || *p == '"') return true;
    json_t *v = json_loads(p, JSON_DECODE_ANY, NULL);
    json_decref(v);
    return v != NULL;
}

/* The grammar of --grammar / --json-schema / --json-object (none: r->grammar stays NULL). */
static qhx_status load_grammar(run *r) {
    const gen_args *a = &r->a;
    qhx_error *err = &r->err;
    if (a->json_object) return qhx_grammar_json_object(&r->grammar, err);
    const char *src = a->grammar_file ? a->grammar_file : a->json_schema;
    if (!src) return QHX_OK;
    const char *p = src;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    char *text = NULL;
    size_t len;
    qhx_status rc;
    if (a->json_schema && schema_is_inline(p)) { /* the schema itself */
        rc = qhx_grammar_from_json_schema(src, strlen(src), &r->grammar, err);
    } else if ((rc = qhx_cli_read_text(src, &text, &len, err)) == QHX_OK) {
        rc = a->grammar_file ? qhx_grammar_parse(text, len, NULL, &r->grammar, err)
                             : qhx_grammar_from_json_schema(text, len, &r->grammar, err);
        if (rc) {
            char why[QHX_ERROR_MSG_SIZE];
            memcpy(why, err->msg, sizeof why);
            qhx_cli_fail(err, rc, "%s: %s", src, why);
        }
    }
    free(text);
    return rc;
}

/* --spec mtp: what plain decoding does here, for the speed line's comparison. The adaptive
 * rule's own timings are per step kind and interleaved with drafting; a separate short run is
 * what a user would compare against: a session without speculation holding the same prompt,
 * then QHX_RUN_PLAIN_STEPS decode steps, timed (prefill not counted). Best effort: on any
 * failure, or with images, nothing is reported. Returns tokens per second, or 0. */
static double measure_plain_decode(run *r, int64_t n_ctx) {
    if (!r->n_ids || r->a.n_images || r->a.video) return 0;
    qhx_session_params sp = qhx_session_default_params(r->m);
    sp.n_ctx = n_ctx < (int64_t)r->n_ids + QHX_RUN_PLAIN_STEPS ? n_ctx : (int64_t)r->n_ids + QHX_RUN_PLAIN_STEPS;
    if (sp.n_ctx < (int64_t)r->n_ids + QHX_RUN_PLAIN_STEPS) return 0;
    sp.spec_draft = 0;
    qhx_session *s = NULL;
    qhx_error err = {0};
    double tok_s = 0;
    if (!qhx_session_create(r->m, &sp, &s, &err) && !qhx_session_feed(s, r->ids, r->n_ids, &err)) {
        const uint64_t t0 = qhx_cli_time_ns();
        int k = 0;
        while (k < QHX_RUN_PLAIN_STEPS && !qhx_session_feed(s, &r->ids[r->n_ids - 1], 1, &err)) k++; /* one token: a decode step */
        const double ms = (double)(qhx_cli_time_ns() - t0) / 1e6;
        if (k == QHX_RUN_PLAIN_STEPS && ms > 0) tok_s = k * 1000.0 / ms;
    }
    qhx_session_free(s);
    return tok_s;
}

/* Session, prompt, generation, output. Returns the exit code. */
static int generate(run *r) {
    gen_args *a = &r->a;
    qhx_error *err = &r->err;
    /* Only a prompt that leaves no room for one token is an error: -n beyond the context stops
     * at the context (stop "context"), as llama.cpp does, with one line saying so. */
    if ((int64_t)r->n_ids + 1 > r->ctx.limit) {
        char advice[160];
        qhx_run_context_advice(&r->ctx, advice, sizeof advice);
        if (r->ctx.by_flag)
            qhx_cli_fail(err, QHX_E_LIMIT, "the prompt (%zu tokens) leaves no room to generate: --ctx is %lld%s",
                         r->n_ids, (long long)r->ctx.limit, advice);
        else
            qhx_cli_fail(err, QHX_E_LIMIT, "the prompt (%zu tokens) leaves no room to generate in the model's context of %lld tokens%s",
                         r->n_ids, (long long)r->ctx.limit, advice);
        return qhx_cli_runtime_error(CMD, err);
    }
    const bool capped = a->run.n_new > 0 && (int64_t)r->n_ids + a->run.n_new > r->ctx.limit;
    int64_t n_ctx = a->run.n_new > 0 && !capped ? (int64_t)r->n_ids + a->run.n_new : r->ctx.limit;
    if (capped && !a->run.quiet) {
        char advice[160] = "";
        if (r->ctx.limit < r->ctx.trained && !r->ctx.by_memory) qhx_run_context_advice(&r->ctx, advice, sizeof advice);
        const long long room = (long long)(r->ctx.limit - (int64_t)r->n_ids);
        fprintf(stderr, "qhx: -n %lld goes beyond the context of %lld tokens (the prompt holds %zu): at most %lld token%s, "
                        "then stop: context%s\n", (long long)a->run.n_new, (long long)r->ctx.limit, r->n_ids, room,
                room == 1 ? "" : "s", advice);
    }
    if (r->ctx.by_flag) n_ctx = r->ctx.limit;
    if (a->run.n_new < 0 && r->ctx.by_memory)
        fprintf(stderr, "qhx: context limited to %lld tokens by the free memory (the model was trained for %lld)\n",
                (long long)r->ctx.limit, (long long)r->ctx.trained);
    qhx_session_params sp = qhx_session_default_params(r->m);
    sp.n_ctx = n_ctx;
    qhx_run_apply_sampling(&a->run, &sp);
    r->seed = sp.sampling.seed;
    r->sampling = qhx_run_samples(&sp);
    if (a->run.verbose)
        fprintf(stderr, "qhx: context %lld tokens (trained %lld), %s, seed %llu\n", (long long)n_ctx,
                (long long)r->ctx.trained, r->sampling ? "sampling" : "greedy", (unsigned long long)r->seed);
    qhx_run_catch_sigint();
    sp.abort_cb = qhx_run_interrupted;
    if (qhx_session_create(r->m, &sp, &r->s, err)) return qhx_cli_runtime_error(CMD, err);
    qhx_run_out_init(&r->out, &a->run, a->print_ids, a->json);
    /* with the images at their pad ids; a Qwen3-VL prompt without one may hold no pad id */
    qhx_status frc = r->prompt ? qhx_session_feed_prompt(r->s, r->prompt, 0, r->n_ids, err)
                               : qhx_session_feed_images(r->s, r->ids, r->n_ids,
                                                         (const qhx_encoded_image *const *)r->im, (size_t)r->a.n_images, err);
    if (frc) return qhx_cli_runtime_error(CMD, err);
    int64_t max_tokens = a->run.n_new > 0 && !capped ? a->run.n_new : n_ctx - (int64_t)r->n_ids;
    if (r->grammar && qhx_constraint_new(r->m, r->grammar, &r->constraint, err)) return qhx_cli_runtime_error(CMD, err);
    qhx_generate_params gp = {.max_tokens = max_tokens, .ignore_stop = a->run.ignore_eos,
                              .stop_at_turn_end = a->chat && !a->run.ignore_eos, .on_token = qhx_run_on_token,
                              .user = &r->out, .constraint = r->constraint, .stops = r->out.stops,
                              .n_stops = (size_t)r->out.n_stops, .stop_ids = a->run.stop_ids,
                              .n_stop_ids = (size_t)a->run.n_stop_ids};
    qhx_generate_stats st = {0};
    qhx_status grc = qhx_session_generate(r->s, &gp, &st, err);
    bool stopped = grc == QHX_E_ABORTED;
    if (!grc && st.n_verify > 0 && (!a->run.quiet || a->json)) {
        r->out.spec_retired = qhx_session_spec_retired(r->s) != 0;
        r->out.spec_plain_tok_s = measure_plain_decode(r, n_ctx);
    }
    bool full = (a->run.n_new < 0 || capped) && st.stop == QHX_STOP_LENGTH;
    const char *stop = qhx_run_stop_name(&st, &r->out, full, stopped);
    if (a->json && !grc) print_json(r, &st, stop);
    else if (!a->json) printf("\n");
    if (r->out.lost || qhx_cli_stdout_flush()) return qhx_cli_stdout_error(CMD); /* the tokens went nowhere */
    if (stopped) {
        qhx_run_print_speed(CMD, r->load_s, &st, &r->out, stop, true);
        return QHX_EXIT_INTERRUPTED;
    }
    if (grc) return qhx_cli_runtime_error(CMD, err);
    if (r->out.failed) {
        qhx_cli_fail(err, QHX_E_NOMEM, "out of memory while collecting the output");
        return qhx_cli_runtime_error(CMD, err);
    }
    if (!a->run.quiet) qhx_run_print_speed(CMD, r->load_s, &st, &r->out, stop, false);
    /* Output held to a grammar but cut before its end (a JSON object never closed) is not what
     * was asked for: the text stays printed, and a distinct exit status tells a script that it is
     * not valid, where exit 0 would pass invalid JSON on (docs/grammar.md). */
    if (r->constraint && !qhx_constraint_can_end(r->constraint)) {
        fprintf(stderr, "qhx %s: the output is incomplete: generation stopped (%s) after %lld tokens, before the end of "
                        "the %s; raise -n%s\n", CMD, stop, (long long)st.n_generated,
                a->json_object ? "JSON object" : a->json_schema ? "JSON the schema asks for" : "grammar",
                full ? " or --ctx" : "");
        return QHX_EXIT_INCOMPLETE;
    }
    if (r->constraint && a->run.verbose) {
        qhx_constraint_stats cs;
        qhx_constraint_get_stats(r->constraint, &cs);
        fprintf(stderr, "qhx: grammar: %llu tokens, %llu full masks (%llu from the cache), %.3f ms in the grammar, "
                "%.3f ms per token\n", (unsigned long long)cs.picks, (unsigned long long)cs.masks,
                (unsigned long long)cs.cached, (double)cs.ns / 1e6, cs.picks ? (double)cs.ns / 1e6 / (double)cs.picks : 0.0);
    }
    return QHX_EXIT_OK;
}

static int run_all(run *r) {
    gen_args *a = &r->a;
    qhx_error *err = &r->err;
    int rc = read_prompt(r);
    if (rc >= 0) return rc;
    if (a->ids_arg) {
        int64_t cnt;
        char why[160];
        if (qhx_cli_parse_ids(a->ids_arg, &r->ids, &cnt, why, sizeof why)) return qhx_cli_usage_error(CMD, "--ids: %s", why);
        r->n_ids = (size_t)cnt;
    }
    if (load_grammar(r)) return qhx_cli_runtime_error(CMD, err); /* before the model: a bad schema fails fast */
    if ((rc = qhx_run_open_model(CMD, &a->run, a->n_images > 0 || a->video, &r->m, &r->load_s, err)) >= 0) return rc;
    if ((rc = check_model_options(r)) >= 0) return rc;
    if (qhx_run_context_of(r->m, &a->run, &r->ctx, err)) return qhx_cli_runtime_error(CMD, err);
    if (a->print_prompt && !a->ids_arg) {
        if (print_prompt(r->m, a, err)) return qhx_cli_runtime_error(CMD, err);
        fflush(stdout);
        return QHX_EXIT_OK;
    }
    if (a->chat && (rc = qhx_run_chat_template_check(CMD, r->m)) >= 0) return rc;
    if (build_prompt(r)) return qhx_cli_runtime_error(CMD, err);
    if (r->n_ids == 0) return qhx_cli_usage_error(CMD, "the prompt is empty");
    return generate(r);
}

int qhx_cmd_generate(int argc, char **argv) {
    run r;
    memset(&r, 0, sizeof r);
    int rc = qhx_generate_parse_args(argc, argv, &r.a);
    if (rc >= 0) return rc;
    rc = run_all(&r);
    qhx_run_out_free(&r.out);
    qhx_session_free(r.s);
    qhx_constraint_free(r.constraint);
    qhx_grammar_free(r.grammar);
    for (int k = 0; k < r.a.n_images; k++) qhx_encoded_image_free(r.im[k]);
    qhx_prompt_free(r.prompt);
    qhx_model_free(r.m);
    free(r.ids);
    free(r.user);
    return rc;
}
