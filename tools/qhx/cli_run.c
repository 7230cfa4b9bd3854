/* cli_run.c: options, the context (the library's policy), Ctrl-C and output shared by generate
 * and chat (the stop strings go to the library's generation step). */
#include "cli_run.h"

#include "cli.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

static const char RUN_OPTS_HELP[] =
    "  -n, --n-predict N    most tokens to generate (default: 128 in generate, 512 per answer\n"
    "                       in chat; -1: until a stop or the context's end)\n"
    "  --temp T             sampling temperature, >= 0 (0 = greedy)\n"
    "  --top-k K            keep the K most likely tokens (0 = off)\n"
    "  --top-p P            nucleus sampling, P in (0, 1]\n"
    "  --min-p P            drop tokens below P x the best one, P in [0, 1)\n"
    "  --repeat-penalty R   penalise recent tokens, R > 0 (1 = off)\n"
    "  --repeat-last-n N    how many recent tokens the penalties see (default 64)\n"
    "  --presence-penalty P subtract P from the logit of every recent token, P in [-100, 100]\n"
    "  --frequency-penalty F  subtract F x its count from every recent token's logit\n"
    "  -s, --seed S         sampling seed (same seed, same text at any thread count; default:\n"
    "                       random when sampling, shown by --verbose and --json); -1: random,\n"
    "                       printed on stderr\n"
    "  --greedy             argmax decoding, every filter off\n"
    "  -r, --stop STR       stop when the text contains STR (not printed); repeatable\n"
    "  --stop-id ID         stop at the token ID too (not printed; also with --ignore-eos);\n"
    "                       repeatable\n"
    "  -t, --threads N      worker threads (default: one per physical core)\n"
    "  --device D           @DEVICES@\n"
    "                       (qhx devices lists this machine's)\n"
    "  -ngl, --n-gpu-layers N  accepted for llama.cpp's command lines; layers are not split\n"
    "                       here: --device puts the whole model on one device\n"
    "  --isa ref|avx2|avx512|neon|best  force an instruction set (default best); one this\n"
    "                       build or CPU cannot run is an error\n"
    "  -c, --ctx, --ctx-size N  context of the session (default: a bundle's run plan context;\n"
    "                       for a checkpoint folder the trained context, as far as memory\n"
    "                       allows); at most the model's trained context\n"
    "  --mmproj FILE        a GGUF model's vision tower (llama.cpp's mmproj GGUF file)\n"
    "  --weights mmap|read  weights used in place from a mapping, or read into memory\n"
    "                       (default read); --no-mmap is --weights read\n"
    "  --prefill chunked|decode  prompt through the chunked path (default) or token by token\n"
    "  --prefill-math default|f32|int8  w8/q4 prompt matmul with f32 or int8 activations\n"
    "                       (default: int8 for q4, f32 for w8)\n"
    "  --decode-math default|f32|int8  q4 decode matvec with int8 activations or not\n"
    "                       (default: int8)\n"
    "  --image-max-tokens N most tokens an image may take (Qwen3-VL; default: what leaves room\n"
    "                       in the context for the prompt and the answer); the image is\n"
    "                       scaled down before it is decoded to pixels\n"
    "  --kv f32|f16|q8      KV cache element type (default: the run plan's, else f16)\n"
    "  --spec mtp           speculative decoding with the checkpoint's multi-token-prediction\n"
    "                       block (output unchanged; a checkpoint folder, or a bundle forged\n"
    "                       with --mtp)\n"
    "  --draft N            with --spec: at most N draft tokens per step, 1 to 8 (default 3);\n"
    "                       the length follows the acceptance seen (docs/generation.md)\n"
    "  --draft-fixed        with --spec: always N drafts\n"
    "  --ignore-eos         do not stop at the model's stop tokens\n"
    "  -v, --verbose        the seed, the context and format notes on stderr\n"
    "  --quiet              no speed line on stderr\n"
    "  --color              the generated text in colour when stdout is a terminal and\n"
    "                       NO_COLOR is not set\n";

/* RUN_OPTS_HELP with the build's devices where @DEVICES@ stands */
static char run_opts_help[sizeof RUN_OPTS_HELP + 256];
static void make_run_opts_help(void) {
    const char *at = strstr(RUN_OPTS_HELP, "@DEVICES@");
    snprintf(run_opts_help, sizeof run_opts_help, "%.*s%s%s", (int)(at - RUN_OPTS_HELP), RUN_OPTS_HELP,
             qhx_cli_device_help(), at + strlen("@DEVICES@"));
}

const char *qhx_run_opts_help(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_run_opts_help);
    return run_opts_help;
}

/* llama.cpp's spellings (and a few long forms) of our options. */
static const struct { const char *from, *to; } ALIASES[] = {
    {"--model", "-m"},         {"--n-predict", "-n"},      {"--predict", "-n"},
    {"-t", "--threads"},       {"-c", "--ctx"},            {"--ctx-size", "--ctx"},
    {"-s", "--seed"},          {"-r", "--stop"},           {"--reverse-prompt", "--stop"},
    {"--temperature", "--temp"}, {"-v", "--verbose"},      {"--system-prompt", "--system"},
    {"-sys", "--system"},       {"-ngl", "--n-gpu-layers"},
};

const char *const QHX_RUN_OPT_NAMES[] = {
    "-m", "--model", "-n", "--n-predict", "--predict", "--temp", "--temperature", "--top-k", "--top-p",
    "--min-p", "--repeat-penalty", "--repeat-last-n", "--presence-penalty", "--frequency-penalty", "-s",
    "--seed", "--greedy", "-r", "--stop", "--stop-id", "--reverse-prompt", "-t", "--threads", "--isa", "-c", "--ctx",
    "--ctx-size", "--weights", "--prefill", "--prefill-math", "--decode-math", "--kv", "--image-max-tokens",
    "--ignore-eos", "-v", "--verbose", "--quiet", "--system", "--system-prompt", "--think", "--no-think",
    "--spec", "--draft", "--draft-fixed", "--device", "-ngl", "--n-gpu-layers", "--no-mmap", "--color", "--mmproj",
};
const size_t QHX_RUN_N_OPT_NAMES = sizeof QHX_RUN_OPT_NAMES / sizeof QHX_RUN_OPT_NAMES[0];

void qhx_run_opts_init(qhx_run_opts *o) {
    memset(o, 0, sizeof *o);
    o->isa = QHX_ISA_BEST;
    o->think = -1;
}

static const char *canonical(const char *a) {
    for (size_t k = 0; k < sizeof ALIASES / sizeof ALIASES[0]; k++)
        if (!strcmp(a, ALIASES[k].from)) return ALIASES[k].to;
    return a;
}

/* An instruction set this build can run at all (the CPU's own support is checked when the
 * kernels are chosen): asking for another one would silently run the references. */
static int parse_isa(const char *cmd, const char *v, qhx_isa *out) {
    static const char *const names[] = {"ref", "avx2", "avx512", "neon", "best"};
    int k = 0;
    while (k < 5 && strcmp(v, names[k])) k++;
    if (k == 5) return qhx_cli_usage_error(cmd, "--isa: '%s' is not ref, avx2, avx512, neon or best", v);
#if defined(__x86_64__) || defined(__i386__)
    if (k == QHX_ISA_NEON) return qhx_cli_usage_error(cmd, "--isa neon: this is an x86-64 build (ref, avx2, avx512 or best)");
#elif defined(__aarch64__)
    if (k == QHX_ISA_AVX2 || k == QHX_ISA_AVX512)
        return qhx_cli_usage_error(cmd, "--isa %s: this is an aarch64 build (ref, neon or best)", v);
#endif
    *out = (qhx_isa)k;
    return 0;
}

static int parse_flag(const char *a, qhx_run_opts *o) {
    if (!strcmp(a, "--greedy")) o->sampling_set[QHX_RUN_S_GREEDY] = true;
    else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = true;
    else if (!strcmp(a, "--quiet")) o->quiet = true;
    else if (!strcmp(a, "--verbose")) o->verbose = true;
    else if (!strcmp(a, "--think")) o->think = 1;
    else if (!strcmp(a, "--no-think")) o->think = 0;
    else if (!strcmp(a, "--draft-fixed")) o->draft_fixed = true;
    else if (!strcmp(a, "--no-mmap")) o->weights = QHX_WEIGHTS_READ; /* llama.cpp's spelling */
    else if (!strcmp(a, "--color")) o->color = true;
    else return 0;
    return 1;
}

/* A float option into the sampling parameters. */
static int set_f(const char *cmd, const char *a, const char *v, double lo, double hi, bool lo_open, bool hi_open,
                 float *dst, bool *set) {
    double d;
    if (qhx_cli_parse_f64(v, lo, hi, &d) || (lo_open && d <= lo) || (hi_open && d >= hi))
        return qhx_cli_usage_error(cmd, "%s: '%s' is not in %c%g, %g%c", a, v, lo_open ? '(' : '[', lo, hi,
                                   hi_open ? ')' : ']');
    *dst = (float)d;
    *set = true;
    return 0;
}

static int parse_valued(const char *cmd, const char *a, const char *v, qhx_run_opts *o) {
    int64_t n;
    bool *set = o->sampling_set;
    qhx_sample_params *s = &o->sampling;
    if (!strcmp(a, "-m")) o->model = v;
    else if (!strcmp(a, "--system")) o->system = v;
    else if (!strcmp(a, "-n")) {
        if (qhx_cli_parse_i64(v, -1, INT32_MAX, &o->n_new) || o->n_new == 0)
            return qhx_cli_usage_error(cmd, "-n: '%s' is not a count >= 1 (or -1: until a stop)", v);
    } else if (!strcmp(a, "--temp")) return set_f(cmd, a, v, 0, 1000, false, false, &s->temperature, &set[QHX_RUN_S_TEMP]);
    else if (!strcmp(a, "--top-k")) {
        if (qhx_cli_parse_i64(v, 0, INT32_MAX, &n)) return qhx_cli_usage_error(cmd, "--top-k: '%s' is not a count >= 0", v);
        s->top_k = (int32_t)n, set[QHX_RUN_S_TOP_K] = true;
    } else if (!strcmp(a, "--top-p")) return set_f(cmd, a, v, 0, 1, true, false, &s->top_p, &set[QHX_RUN_S_TOP_P]);
    else if (!strcmp(a, "--min-p")) return set_f(cmd, a, v, 0, 1, false, true, &s->min_p, &set[QHX_RUN_S_MIN_P]);
    else if (!strcmp(a, "--repeat-penalty"))
        return set_f(cmd, a, v, 0, 100, true, false, &s->repeat_penalty, &set[QHX_RUN_S_REPEAT]);
    else if (!strcmp(a, "--presence-penalty"))
        return set_f(cmd, a, v, -100, 100, false, false, &s->presence_penalty, &set[QHX_RUN_S_PRESENCE]);
    else if (!strcmp(a, "--frequency-penalty"))
        return set_f(cmd, a, v, -100, 100, false, false, &s->frequency_penalty, &set[QHX_RUN_S_FREQUENCY]);
    else if (!strcmp(a, "--repeat-last-n")) {
        if (qhx_cli_parse_i64(v, 1, 1 << 20, &n)) return qhx_cli_usage_error(cmd, "--repeat-last-n: '%s' is not in [1, 1048576]", v);
        s->repeat_last_n = (int32_t)n, set[QHX_RUN_S_LAST_N] = true;
    } else if (!strcmp(a, "--seed")) {
        if (!strcmp(v, "-1")) { /* llama.cpp's "random": drawn when the session starts, and printed */
            o->seed_random = true;
            set[QHX_RUN_S_SEED] = false;
            return 0;
        }
        if (qhx_cli_parse_u64(v, &s->seed))
            return qhx_cli_usage_error(cmd, "--seed: '%s' is not -1 (random) or an integer in [0, 18446744073709551615]", v);
        set[QHX_RUN_S_SEED] = true;
        o->seed_random = false;
    } else if (!strcmp(a, "--stop")) {
        if (!*v) return qhx_cli_usage_error(cmd, "--stop: the string is empty");
        if (o->n_stops == QHX_RUN_MAX_STOPS) return qhx_cli_usage_error(cmd, "--stop: more than %d strings", QHX_RUN_MAX_STOPS);
        o->stops[o->n_stops++] = v;
    } else if (!strcmp(a, "--stop-id")) {
        if (qhx_cli_parse_i64(v, 0, INT32_MAX, &n)) return qhx_cli_usage_error(cmd, "--stop-id: '%s' is not a token id", v);
        if (o->n_stop_ids == QHX_RUN_MAX_STOPS) return qhx_cli_usage_error(cmd, "--stop-id: more than %d ids", QHX_RUN_MAX_STOPS);
        o->stop_ids[o->n_stop_ids++] = (qhx_token)n;
    } else if (!strcmp(a, "--threads")) {
        if (qhx_cli_parse_i64(v, 1, 512, &o->threads)) return qhx_cli_usage_error(cmd, "--threads: '%s' is not in [1, 512]", v);
    } else if (!strcmp(a, "--isa")) return parse_isa(cmd, v, &o->isa);
    else if (!strcmp(a, "--device")) {
        if (qhx_cli_check_device(cmd, v)) return QHX_EXIT_USAGE;
        o->device = v;
    }
    else if (!strcmp(a, "--ctx")) {
        if (qhx_cli_parse_i64(v, 1, (int64_t)1 << 24, &o->ctx)) return qhx_cli_usage_error(cmd, "--ctx: '%s' is not in [1, 16777216]", v);
    } else if (!strcmp(a, "--image-max-tokens")) {
        if (qhx_cli_parse_i64(v, 1, 1 << 20, &o->image_max_tokens))
            return qhx_cli_usage_error(cmd, "--image-max-tokens: '%s' is not in [1, 1048576]", v);
    } else if (!strcmp(a, "--weights")) {
        if (!strcmp(v, "mmap")) o->weights = QHX_WEIGHTS_MMAP;
        else if (!strcmp(v, "read")) o->weights = QHX_WEIGHTS_READ;
        else return qhx_cli_usage_error(cmd, "--weights: '%s' is not mmap or read", v);
    } else if (!strcmp(a, "--prefill")) {
        if (!strcmp(v, "chunked")) o->prefill = QHX_PREFILL_CHUNKED;
        else if (!strcmp(v, "decode")) o->prefill = QHX_PREFILL_DECODE;
        else return qhx_cli_usage_error(cmd, "--prefill: '%s' is not chunked or decode", v);
    } else if (!strcmp(a, "--prefill-math")) {
        if (qhx_cli_parse_prefill_math(v, &o->prefill_math))
            return qhx_cli_usage_error(cmd, "--prefill-math: '%s' is not default, f32 or int8", v);
    } else if (!strcmp(a, "--decode-math")) {
        if (qhx_cli_parse_prefill_math(v, &o->decode_math))
            return qhx_cli_usage_error(cmd, "--decode-math: '%s' is not default, f32 or int8", v);
    } else if (!strcmp(a, "--kv")) {
        if (qhx_cli_parse_kv(v, &o->kv)) return qhx_cli_usage_error(cmd, "--kv: '%s' is not f32, f16 or q8", v);
    } else if (!strcmp(a, "--spec")) {
        if (strcmp(v, "mtp")) return qhx_cli_usage_error(cmd, "--spec: '%s' is not mtp (the only draft source)", v);
        o->spec = true;
    } else if (!strcmp(a, "--n-gpu-layers")) {
        if (qhx_cli_parse_i64(v, -1, INT32_MAX, &n))
            return qhx_cli_usage_error(cmd, "%s: '%s' is not a layer count (or -1: all)", a, v);
        o->ngl_given = true;
    } else if (!strcmp(a, "--mmproj")) {
        o->mmproj = v;
    } else if (!strcmp(a, "--draft")) {
        if (qhx_cli_parse_i64(v, 1, 8, &n)) return qhx_cli_usage_error(cmd, "--draft: '%s' is not in [1, 8]", v);
        o->draft = (int)n;
    } else return -1;
    return 0;
}

int qhx_run_parse_opt(const char *cmd, int argc, char **argv, int *i, qhx_run_opts *o) {
    const char *a = canonical(argv[*i]);
    if (parse_flag(a, o)) return 1;
    static const char *const valued[] = {"-m", "-n", "--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty",
                                         "--repeat-last-n", "--presence-penalty", "--frequency-penalty", "--seed",
                                         "--stop", "--stop-id", "--threads", "--isa", "--ctx", "--image-max-tokens", "--weights",
                                         "--prefill", "--prefill-math", "--decode-math", "--kv", "--system",
                                         "--spec", "--draft", "--device", "--n-gpu-layers", "--mmproj"};
    int known = 0;
    for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= !strcmp(a, valued[k]);
    if (!known) return 0;
    if (*i + 1 >= argc) return qhx_cli_usage_error(cmd, "%s needs a value", argv[*i]);
    const char *v = argv[++*i];
    int rc = parse_valued(cmd, a, v, o);
    return rc ? rc : 1;
}

int qhx_run_check_needs(const char *cmd, const qhx_run_opts *o, const qhx_cli_needs *extra, size_t n_extra) {
    static const char *const FILTERS[] = {"--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty",
                                          "--repeat-last-n", "--presence-penalty", "--frequency-penalty"};
    static const int FILTER_IDS[] = {QHX_RUN_S_TEMP, QHX_RUN_S_TOP_K, QHX_RUN_S_TOP_P, QHX_RUN_S_MIN_P,
                                     QHX_RUN_S_REPEAT, QHX_RUN_S_LAST_N, QHX_RUN_S_PRESENCE, QHX_RUN_S_FREQUENCY};
    const bool sampling = !o->sampling_set[QHX_RUN_S_GREEDY]; /* --greedy zeroes every filter */
    qhx_cli_needs shared[2 + sizeof FILTERS / sizeof FILTERS[0]] = {
        {"--draft", o->draft > 0, "--spec mtp", o->spec},
        {"--draft-fixed", o->draft_fixed, "--spec mtp", o->spec},
    };
    size_t n = 2;
    for (size_t k = 0; k < sizeof FILTERS / sizeof FILTERS[0]; k++)
        shared[n++] = (qhx_cli_needs){FILTERS[k], o->sampling_set[FILTER_IDS[k]], "sampling (--greedy turns it off)",
                                      sampling};
    int rc = qhx_cli_check_needs(cmd, shared, n);
    return rc ? rc : qhx_cli_check_needs(cmd, extra, n_extra);
}

qhx_model_params qhx_run_model_params(const qhx_run_opts *o) {
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = (int)o->threads;
    mp.max_isa = o->isa;
    mp.weights = o->weights;
    mp.prefill_math = o->prefill_math;
    mp.decode_math = o->decode_math;
    mp.kv_cache = o->kv;
    mp.mtp = o->spec ? 1 : 0;
    mp.backend = o->device;
    mp.mmproj = o->mmproj;
    return mp;
}

int qhx_run_open_model(const char *cmd, const qhx_run_opts *o, int vision, qhx_model **m, double *load_s,
                       qhx_error *err) {
    if (qhx_cli_check_model_path(o->model, err)) return qhx_cli_runtime_error(cmd, err);
    uint64_t t0 = qhx_cli_time_ns();
    if (o->ngl_given) /* once per run: say what decides where the layers go here */
        fprintf(stderr, "qhx %s: -ngl: layers are not split between devices here; the whole model runs on %s "
                        "(--device %s; qhx devices lists them)\n", cmd, o->device ? o->device : "cpu (the default)",
                qhx_devices_choices());
    qhx_model_params mp = qhx_run_model_params(o);
    mp.vision = vision;
    qhx_cli_progress lp; /* a load progress line on a terminal once loading takes a second */
    qhx_cli_progress_attach(&mp, &lp);
    qhx_status open_rc = qhx_model_open(o->model, &mp, m, err);
    qhx_cli_progress_end(&lp);
    if (open_rc) return qhx_cli_runtime_error(cmd, err);
    *load_s = (double)(qhx_cli_time_ns() - t0) / 1e9;
    if (o->think >= 0 && !qhx_model_has_thinking(*m))
        return qhx_cli_usage_error(cmd, "--think/--no-think: the %s chat format has no thinking mode",
                                   qhx_model_family_title(*m));
    if (o->image_max_tokens && !qhx_model_takes_images(*m))
        return qhx_cli_usage_error(cmd, "--image-max-tokens needs a model that takes images (%s takes none); "
                                   "without one, the option would do nothing", o->model);
    return -1;
}

/* A seed nobody chose: the kernel's random bytes, or the clock and the pid without them. */
static uint64_t random_seed(void) {
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed)
        seed = qhx_cli_time_ns() ^ ((uint64_t)getpid() << 32);
    return seed & (uint64_t)INT64_MAX; /* printable, and --seed takes it back */
}

bool qhx_run_samples(const qhx_session_params *sp) { return sp->sampling.temperature > 0; }

void qhx_run_apply_sampling(const qhx_run_opts *o, qhx_session_params *sp) {
    qhx_sample_params *s = &sp->sampling;
    const bool *set = o->sampling_set;
    sp->prefill = o->prefill;
    sp->spec_draft = o->spec ? (o->draft ? o->draft : 3) : 0;
    sp->spec_fixed = o->draft_fixed ? 1 : 0;
    if (set[QHX_RUN_S_GREEDY]) {
        memset(s, 0, sizeof *s);
        s->seed = o->sampling.seed;
        return;
    }
    if (set[QHX_RUN_S_TEMP]) s->temperature = o->sampling.temperature;
    if (set[QHX_RUN_S_TOP_K]) s->top_k = o->sampling.top_k;
    if (set[QHX_RUN_S_TOP_P]) s->top_p = o->sampling.top_p;
    if (set[QHX_RUN_S_MIN_P]) s->min_p = o->sampling.min_p;
    if (set[QHX_RUN_S_REPEAT]) s->repeat_penalty = o->sampling.repeat_penalty;
    if (set[QHX_RUN_S_LAST_N]) s->repeat_last_n = o->sampling.repeat_last_n;
    if (set[QHX_RUN_S_PRESENCE]) s->presence_penalty = o->sampling.presence_penalty;
    if (set[QHX_RUN_S_FREQUENCY]) s->frequency_penalty = o->sampling.frequency_penalty;
    if (set[QHX_RUN_S_SEED]) s->seed = o->sampling.seed;
    else if (qhx_run_samples(sp) || o->seed_random) s->seed = random_seed(); /* as llama.cpp: a new text each run */
    if (o->seed_random && !set[QHX_RUN_S_SEED])
        fprintf(stderr, "qhx: seed %llu (--seed -1: random; --seed %llu gives this text again)\n",
                (unsigned long long)s->seed, (unsigned long long)s->seed);
}

/* ---- the context policy -------------------------------------------------------------------- */

qhx_status qhx_run_context_of(const qhx_model *m, const qhx_run_opts *o, qhx_run_context *c, qhx_error *err) {
    memset(c, 0, sizeof *c);
    qhx_context_choice cc;
    qhx_status rc = qhx_model_choose_context(m, o->ctx, 1, "--ctx", &cc, err); /* the library's policy */
    if (rc) return rc;
    *c = (qhx_run_context){.limit = cc.n_ctx, .trained = cc.trained, .by_memory = cc.by_memory != 0,
                           .by_flag = cc.by_request != 0};
    return QHX_OK;
}

void qhx_run_context_advice(const qhx_run_context *c, char *buf, size_t size) {
    if (c->by_memory)
        snprintf(buf, size, " (limited by the free memory; the model was trained for %lld: a shorter prompt or -n)",
                 (long long)c->trained);
    else if (c->limit < c->trained)
        snprintf(buf, size, " (--ctx can go up to %lld)", (long long)c->trained);
    else
        snprintf(buf, size, " (the most the model was trained for: a shorter prompt or -n)");
}

/* ---- the checkpoint's own chat template ---------------------------------------------------- */

int qhx_run_chat_template_check(const char *cmd, const qhx_model *m) {
    char hex[65];
    switch (qhx_model_chat_template(m, hex)) {
    case QHX_CHAT_TEMPLATE_OTHER:
        fprintf(stderr, "qhx: the model's chat_template (sha256 %.16s...) is not a released one this build knows: the built-in %s format is used\n",
                hex, qhx_model_family_title(m));
        return -1;
    case QHX_CHAT_TEMPLATE_FOREIGN:
        fprintf(stderr, "qhx %s: the model's chat_template (sha256 %.16s...) does not write %s turns, and only the built-in %s "
                        "format can be written here: use plain text (no --chat) or a model with %s's template\n",
                cmd, hex, qhx_model_family_title(m), qhx_model_family_title(m), qhx_model_family_title(m));
        return QHX_EXIT_RUNTIME;
    default: return -1;
    }
}

/* ---- Ctrl-C -------------------------------------------------------------------------------- */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    if (interrupted) {
        qhx_cli_out_unlink_live(); /* no half-written output file (logits --out) */
        _exit(QHX_EXIT_INTERRUPTED);
    }
    interrupted = 1;
}

void qhx_run_catch_sigint(void) {
    /* SIGTERM, SIGHUP (the terminal went away) and SIGQUIT end the work as Ctrl-C does, so a
     * half-written --out file is removed rather than left by the default action */
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < 4; k++) sigaction(sigs[k], &sa, NULL); /* no SA_RESTART: a read at the chat prompt returns EINTR */
}

int qhx_run_interrupted(void *unused) {
    (void)unused;
    return interrupted != 0;
}

void qhx_run_clear_interrupt(void) { interrupted = 0; }

/* ---- output -------------------------------------------------------------------------------- */

void qhx_run_out_init(qhx_run_out *out, const qhx_run_opts *o, bool print_ids, bool collect) {
    memset(out, 0, sizeof *out);
    out->stops = o->stops;
    out->n_stops = o->n_stops;
    out->print_ids = print_ids;
    out->print_text = !print_ids && !collect;
    out->collect = collect;
    out->color = o->color && out->print_text && qhx_cli_color_ok(STDOUT_FILENO);
    out->t_start_ns = qhx_cli_time_ns();
}

void qhx_run_out_free(qhx_run_out *out) {
    free(out->text);
    free(out->ids);
    memset(out, 0, sizeof *out);
}

/* Append n bytes to a growing buffer; false when out of memory. */
static bool grow_put(char **buf, size_t *len, size_t *cap, const void *p, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        char *q = realloc(*buf, c);
        if (!q) return false;
        *buf = q;
        *cap = c;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = '\0';
    return true;
}

/* Text that is final: printed (or collected). */
static void emit_text(qhx_run_out *out, const char *p, size_t n) {
    if (!n) return;
    if (out->print_text) {
        if (out->color) fputs(QHX_CLI_COLOR_TEXT, stdout); /* each piece closed: Ctrl-C leaves no colour on */
        fwrite(p, 1, n, stdout);
        if (out->color) fputs(QHX_CLI_COLOR_OFF, stdout);
        if (qhx_cli_stdout_flush()) out->lost = true; /* a closed pipe, a full disk: stop now */
    }
    if (out->collect && !grow_put(&out->text, &out->n_text, &out->cap_text, p, n)) out->failed = true;
}

int qhx_run_on_token(void *user, qhx_token token, const char *text, size_t len) {
    qhx_run_out *out = user;
    if (token >= 0 && !out->t_first_ns) out->t_first_ns = qhx_cli_time_ns();
    if (token >= 0 && out->print_ids) {
        printf(out->n_printed_ids++ ? " %d" : "%d", token);
        if (qhx_cli_stdout_flush()) out->lost = true; /* streamed, as text is; lost output stops it */
    }
    if (token >= 0 && out->collect) {
        if (out->n_ids == out->cap_ids) {
            size_t c = out->cap_ids ? out->cap_ids * 2 : 64;
            qhx_token *q = realloc(out->ids, c * sizeof *q);
            if (!q) out->failed = true;
            else out->ids = q, out->cap_ids = c;
        }
        if (out->n_ids < out->cap_ids) out->ids[out->n_ids++] = token;
    }
    emit_text(out, text, len); /* final: the library held back what could start a stop string */
    return out->lost;
}

const char *qhx_run_stop_name(const qhx_generate_stats *st, const qhx_run_out *out, bool context_full,
                              bool was_interrupted) {
    if (was_interrupted) return "interrupted";
    (void)out;
    if (st->stop == QHX_STOP_STRING) return "stop string";
    if (st->stop == QHX_STOP_TOKEN) return "eos";
    if (st->stop == QHX_STOP_GRAMMAR) return "grammar complete";
    if (context_full) return "context"; /* llama.cpp's word: generation reached the context's end */
    return "length";
}

void qhx_run_print_speed(const char *cmd, double load_s, const qhx_generate_stats *st, const qhx_run_out *out,
                         const char *stop, bool was_interrupted) {
    double pf = st->prefill_ms > 0 ? (double)st->n_prompt * 1000.0 / st->prefill_ms : 0;
    double dc = st->decode_ms > 0 ? (double)st->n_generated * 1000.0 / st->decode_ms : 0;
    char first[64] = "";
    if (out && out->t_first_ns)
        snprintf(first, sizeof first, "first token %.1f ms, ", (double)(out->t_first_ns - out->t_start_ns) / 1e6);
    if (was_interrupted) fprintf(stderr, "qhx %s: interrupted: ", cmd);
    else fprintf(stderr, "qhx: ");
    if (load_s >= 0) fprintf(stderr, "load %.2f s, ", load_s);
    fprintf(stderr, "%sprompt %lld tokens (%.1f tok/s), generated %lld tokens (%.1f tok/s)", first,
            (long long)st->n_prompt, pf, (long long)st->n_generated, dc);
    if (st->n_verify > 0) /* speculative decoding */
        fprintf(stderr, ", drafts accepted %lld/%lld (%.0f%%), %.2f tokens per verify step",
                (long long)st->n_accepted, (long long)st->n_drafted,
                st->n_drafted ? 100.0 * (double)st->n_accepted / (double)st->n_drafted : 0.0,
                (double)st->n_spec_tokens / (double)st->n_verify);
    if (st->n_verify > 0 && out && out->spec_plain_tok_s > 0 && dc > 0) {
        const double x = dc / out->spec_plain_tok_s;
        fprintf(stderr, ", %.0f%% %s than plain decoding (%.1f tok/s over %d plain steps)",
                100.0 * (x >= 1 ? x - 1 : 1 - x), x >= 1 ? "faster" : "slower", out->spec_plain_tok_s,
                QHX_RUN_PLAIN_STEPS);
    }
    if (st->n_verify > 0 && out && out->spec_retired) fputs(", drafting retired by the adaptive rule (it did not pay)", stderr);
    fprintf(stderr, ", stop: %s\n", stop);
}

void qhx_run_report_video(const qhx_prompt *p, bool quiet, bool verbose) {
    qhx_prompt_video_stats v;
    qhx_prompt_video_stats_get(p, &v);
    if (!v.n_videos) return;
    if (v.fitted && !quiet) {
        fprintf(stderr, "qhx: the video%s did not fit the context: %lld frame%s sampled instead of %lld", v.n_videos > 1 ? "s" : "",
                (long long)v.frames, v.frames == 1 ? "" : "s", (long long)v.frames_asked);
        if (v.max_pixels > 0)
            fprintf(stderr, ", their pixels lowered to at most %lld (from %lld)", (long long)v.max_pixels,
                    (long long)v.max_pixels_asked);
        fprintf(stderr, ": %lld token%s (as --video-max-frames %lld%s)\n", (long long)v.n_tokens, v.n_tokens == 1 ? "" : "s",
                (long long)v.max_frames, v.max_pixels > 0 ? " with that pixel budget" : "");
    }
    if (verbose)
        fprintf(stderr, "qhx: video: %lld frame%s sampled, grid %lldx%lldx%lld, %lld tokens; decode %.1f ms, preprocess "
                        "%.1f ms, vision tower %.1f ms\n", (long long)v.frames, v.frames == 1 ? "" : "s",
                (long long)v.grid_t, (long long)v.grid_h, (long long)v.grid_w, (long long)v.n_tokens, v.decode_ms,
                v.preprocess_ms, v.vision_ms);
}
