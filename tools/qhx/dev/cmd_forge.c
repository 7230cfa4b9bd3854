/* qhx forge: convert a Hugging Face checkpoint folder into a qhexrt bundle, or write a
 * random-weight checkpoint of a family. The work is in src/forge; this file parses arguments,
 * draws the progress bar (only when stderr is a terminal) and turns SIGINT into a cancel. */
#include "cli_dev.h"
#include "cli_dev_args.h"
#include "io/gguf.h"

#include "forge/forge.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: qhx forge HF_DIR OUT_DIR --precision f16|bf16|w8|q4|q4a [--lmhead f16|bf16|w8|q6|q4|q4a]\n"
    "                 [--tensor-precision GLOB=PREC[,GLOB=PREC...]]\n"
    "                 [--embed f16|bf16] [--text-only] [--mtp] [--max-context N] [--name NAME] [--threads N] [--quiet]\n"
    "                 [--calibrate FILE [--calibrate-tokens N]]\n"
    "       qhx forge MODEL.gguf OUT_DIR [--mmproj FILE] [--max-context N] [--name NAME] [--quiet]\n"
    "       qhx forge --random FAMILY OUT_DIR --preset tiny|demo|0.8b|2b|4b|9b|27b [--layers N]\n"
    "                 [--seed N] [--dtype f32|bf16] [--tokenizer FILE] [--vision] [--quiet]\n"
    "\n"
    "The first form converts a Hugging Face checkpoint folder (config.json, *.safetensors,\n"
    "tokenizer.json) into a bundle: weights in the chosen precision, tokenizer, configs and one\n"
    "manifest per runnable configuration (docs/bundle.md). The second writes a random-weight\n"
    "checkpoint of FAMILY (qwen3_5 or qwen3_vl) with the tiny (parity fixture) shapes or those of\n"
    "a released model (qwen3_5: 0.8b, 2b, 4b, 9b, 27b, the 9b and 27b with an untied lm_head;\n"
    "qwen3_vl: 2b); --layers N makes N decoder layers instead, keeping the layer-type pattern (a\n"
    "9b or 27b at a depth a small machine holds; the first layers' weights are those of the full\n"
    "depth). OUT_DIR must not exist; it appears only when complete. Ctrl-C stops cleanly\n"
    "(exit 130). --random qwen3_5 with a released size copies the released Qwen3.5 tokenizer.json\n"
    "($QHX_QWEN35_TOKENIZER, else the source tree's tests/data copy) unless --tokenizer is given;\n"
    "otherwise a filler byte-level BPE of the family's size is written.\n"
    "\n"
    "From a GGUF file (llama.cpp's qwen35 or qwen3vl, and --mmproj its vision tower's file) the\n"
    "bundle holds the files as they are, blocks untouched, beside the config.json and\n"
    "tokenizer.json made of their keys and one manifest per runnable configuration.\n"
    "\n"
    "A tied embedding is stored once, as the lm-head in its precision (--lmhead; default: the\n"
    "precision, q6 for q4 and q4a), and the embedding lookup reads its rows; --embed adds a separate\n"
    "lookup table of that dtype instead. A checkpoint with a vision tower (Qwen3-VL, Qwen3.5) gets a\n"
    "-vlm- manifest (image + text) beside the text one; --text-only leaves the tower out, and then\n"
    "the bundle carries no vision weights and only the text manifest. --mtp keeps the\n"
    "multi-token-prediction block (mtp.*) in the bundle's precision as its own artifact, for\n"
    "speculative decoding (--spec mtp); without it the block is dropped. --vision (with --random\n"
    "qwen3_5) also writes the Qwen3.5 vision tower. --threads N: threads that quantize (default:\n"
    "one per physical core; the bundle's bytes do not depend on it). --tensor-precision gives the\n"
    "decoder matrices whose names match GLOB (fnmatch) the precision PREC (f16, bf16, w8, q4, q4a,\n"
    "q6), after the default policy of --precision (q4a keeps some FFN-down matrices at q6); the\n"
    "last matching rule wins.\n"
    "\n"
    "--calibrate FILE (UTF-8 text, at most 64 MiB) first runs the checkpoint over the text (f32\n"
    "arithmetic, windows of 512 tokens, the first --calibrate-tokens N tokens: default 16384) and\n"
    "takes the mean square of every input column of every linear layer; the q4a, q4 and q6\n"
    "matrices are then quantized for the least error weighted by it (plus a floor of 1% of its\n"
    "mean; the tied embedding, which the lookup reads too, a floor of its whole mean). w8, f16 and\n"
    "bf16 matrices, the vision tower and the mtp block are as without it. The weight files record\n"
    "it (\"qhexrt.calibration\" metadata). Without --calibrate the bundle's bytes are unchanged.\n";

// ---- progress bar and cancel --------------------------------------------------------------------

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct ui {
    int bar;          /* draw the bar (stderr is a terminal and not --quiet) */
    int quiet;
    int drawn;        /* a bar line is on screen */
    double t0, last;  /* seconds */
    uint64_t done, total;
} ui;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void draw_bar(ui *u) {
    double el = now_s() - u->t0, frac = u->total ? (double)u->done / (double)u->total : 0;
    double rate = el > 0 ? (double)u->done / el : 0;
    double eta = rate > 0 && u->total > u->done ? (double)(u->total - u->done) / rate : 0;
    char bar[31];
    int fill = (int)(frac * 30 + 0.5);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '-';
    bar[30] = '\0';
    fprintf(stderr, "\r\033[K%7.2f / %.2f GB [%s] %3d%%  %6.1f MB/s  ETA %d:%02d", (double)u->done / 1e9,
            (double)u->total / 1e9, bar, (int)(frac * 100), rate / 1e6, (int)eta / 60, (int)eta % 60);
    u->drawn = 1;
}

static void on_progress(void *user, uint64_t done, uint64_t total) {
    ui *u = user;
    u->done = done;
    u->total = total;
    if (!u->bar) return;
    double t = now_s();
    if (t - u->last < 0.1 && done < total) return;
    u->last = t;
    draw_bar(u);
}

static void on_log(void *user, const char *line) {
    ui *u = user;
    if (u->quiet) return;
    if (u->drawn) fprintf(stderr, "\r\033[K");
    fprintf(stderr, "qhx forge: %s\n", line);
    if (u->drawn) draw_bar(u);
}

static int on_cancel(void *user) {
    (void)user;
    return interrupted;
}

static void on_staging(void *user, const char *dir) {
    (void)user;
    qhx_cli_stage_set(dir); /* so the SIGBUS exit removes it too */
}

// ---- arguments -----------------------------------------------------------------------------------

/* Whether v is one of the names in the NULL-terminated list. */
static int one_of(const char *v, const char *const *names) {
    for (; *names; names++)
        if (!strcmp(v, *names)) return 1;
    return 0;
}

/* The option values the converter and the random writer accept, so a typo is a usage error. */
static int check_values(const qhx_forge_params *p) {
    static const char *const lin[] = {"f16", "bf16", "w8", "q4", "q4a", NULL},
                             *const head[] = {"f16", "bf16", "w8", "q6", "q4", "q4a", NULL},
                             *const emb[] = {"f16", "bf16", NULL},
                             *const dt[] = {"f32", "bf16", NULL},
                             *const pre[] = {"tiny", "demo", "0.8b", "2b", "4b", "9b", "27b", NULL};
    if (p->precision && !one_of(p->precision, lin))
        return qhx_cli_usage_error("forge", "--precision: '%s' is not f16, bf16, w8, q4 or q4a", p->precision);
    if (p->lmhead && !one_of(p->lmhead, head))
        return qhx_cli_usage_error("forge", "--lmhead: '%s' is not f16, bf16, w8, q6, q4 or q4a", p->lmhead);
    if (p->embed && !one_of(p->embed, emb))
        return qhx_cli_usage_error("forge", "--embed: '%s' is not f16 or bf16", p->embed);
    if (p->dtype && !one_of(p->dtype, dt))
        return qhx_cli_usage_error("forge", "--dtype: '%s' is not f32 or bf16", p->dtype);
    if (p->preset && !one_of(p->preset, pre))
        return qhx_cli_usage_error("forge", "--preset: '%s' is not tiny, demo, 0.8b, 2b, 4b, 9b or 27b", p->preset);
    return -1;
}

int qhx_forge_parse_args(int argc, char **argv, qhx_forge_args *fa) {
    memset(fa, 0, sizeof *fa);
    qhx_forge_params *p = &fa->p;
    const char *pos[3] = {0};
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            return QHX_EXIT_OK;
        } else if (!strcmp(a, "--random")) {
            fa->random = true;
            continue;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            fa->quiet = true;
            continue;
        } else if (!strcmp(a, "--text-only")) {
            p->text_only = true;
            continue;
        } else if (!strcmp(a, "--mtp")) {
            p->mtp = true;
            continue;
        } else if (!strcmp(a, "--vision")) {
            p->vision = true;
            continue;
        } else if (!strcmp(a, "--precision")) slot = &p->precision;
        else if (!strcmp(a, "--lmhead")) slot = &p->lmhead;
        else if (!strcmp(a, "--tensor-precision")) slot = &p->tensor_precision;
        else if (!strcmp(a, "--embed")) slot = &p->embed;
        else if (!strcmp(a, "--name")) slot = &p->name;
        else if (!strcmp(a, "--preset")) slot = &p->preset;
        else if (!strcmp(a, "--dtype")) slot = &p->dtype;
        else if (!strcmp(a, "--tokenizer")) slot = &p->tokenizer;
        else if (!strcmp(a, "--calibrate")) slot = &p->calibrate;
        else if (!strcmp(a, "--mmproj")) slot = &p->mmproj;
        else if (!strcmp(a, "--calibrate-tokens")) {
            int64_t v;
            if (i + 1 >= argc) return qhx_cli_usage_error("forge", "%s needs a value", a);
            if (qhx_cli_parse_i64(argv[++i], 1, 1 << 24, &v) != 0)
                return qhx_cli_usage_error("forge", "%s: '%s' is not an integer in [1, 16777216]", a, argv[i]);
            p->calibrate_tokens = v;
            continue;
        }
        else if (!strcmp(a, "--seed")) {
            if (i + 1 >= argc) return qhx_cli_usage_error("forge", "%s needs a value", a);
            if (qhx_cli_parse_u64(argv[++i], &p->seed) != 0)
                return qhx_cli_usage_error("forge", "--seed: '%s' is not an integer in [0, 18446744073709551615]",
                                           argv[i]);
            continue;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
            int64_t v;
            if (i + 1 >= argc) return qhx_cli_usage_error("forge", "%s needs a value", a);
            if (qhx_cli_parse_i64(argv[++i], 1, 512, &v) != 0)
                return qhx_cli_usage_error("forge", "%s: '%s' is not an integer in [1, 512]", a, argv[i]);
            p->threads = (int)v;
            continue;
        } else if (!strcmp(a, "--layers")) {
            int64_t v;
            if (i + 1 >= argc) return qhx_cli_usage_error("forge", "%s needs a value", a);
            if (qhx_cli_parse_i64(argv[++i], 1, 1024, &v) != 0)
                return qhx_cli_usage_error("forge", "%s: '%s' is not an integer in [1, 1024]", a, argv[i]);
            p->layers = v;
            continue;
        } else if (!strcmp(a, "--max-context")) {
            int64_t v;
            if (i + 1 >= argc) return qhx_cli_usage_error("forge", "%s needs a value", a);
            if (qhx_cli_parse_i64(argv[++i], 1, 1048576, &v) != 0) /* the manifest's bound */
                return qhx_cli_usage_error("forge", "%s: '%s' is not an integer in [1, 1048576]", a, argv[i]);
            p->max_context = v;
            continue;
        } else if (a[0] == '-' && a[1]) {
            return qhx_cli_usage_error("forge", "unknown option '%s'", a);
        } else {
            if (n_pos >= 3) return qhx_cli_usage_error("forge", "too many arguments ('%s')", a);
            pos[n_pos++] = a;
            continue;
        }
        if (i + 1 >= argc) return qhx_cli_usage_error("forge", "%s needs a value", a);
        *slot = argv[++i];
    }
    if (n_pos != 2)
        return qhx_cli_usage_error("forge", fa->random ? "--random needs FAMILY and OUT_DIR" : "needs HF_DIR and OUT_DIR");
    if (fa->random) {
        static const char *const families[] = {"qwen3_5", "qwen3_vl"};
        if (strcmp(pos[0], families[0]) && strcmp(pos[0], families[1])) {
            const char *near = qhx_cli_closest(pos[0], families, 2);
            return qhx_cli_usage_error("forge", "--random: unknown family '%s' (qwen3_5 or qwen3_vl%s%s%s)", pos[0],
                                       near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
        }
        if (!p->preset) return qhx_cli_usage_error("forge", "--random needs --preset tiny|demo|0.8b|2b|4b|9b|27b");
        if (p->precision || p->lmhead || p->embed || p->name || p->max_context || p->text_only || p->tensor_precision ||
            p->mtp || p->calibrate || p->calibrate_tokens)
            return qhx_cli_usage_error("forge", "--precision/--lmhead/--tensor-precision/--embed/--name/--max-context/--text-only/--mtp/"
                                                "--calibrate are for conversion");
        if (p->preset && strcmp(pos[0], "qwen3_5") && strcmp(p->preset, "tiny") && strcmp(p->preset, "2b"))
            return qhx_cli_usage_error("forge", "--preset %s is a qwen3_5 size (qwen3_vl has tiny and 2b)", p->preset);
        if (p->vision && strcmp(pos[0], "qwen3_5"))
            return qhx_cli_usage_error("forge", "--vision is for --random qwen3_5 (qwen3_vl checkpoints always have their tower)");
    } else if (qhx_gguf_path_has_magic(pos[0])) { /* a GGUF file: its blocks are kept as they are */
        if (p->precision || p->lmhead || p->embed || p->text_only || p->tensor_precision || p->mtp || p->calibrate ||
            p->calibrate_tokens || p->preset || p->layers || p->dtype || p->tokenizer || p->vision)
            return qhx_cli_usage_error("forge", "%s is a GGUF file: its blocks are kept as they are (only --name, "
                                                "--max-context and --mmproj apply)", pos[0]);
    } else {
        if (p->mmproj) return qhx_cli_usage_error("forge", "--mmproj goes with a GGUF model file");
        if (!p->precision) return qhx_cli_usage_error("forge", "--precision f16|bf16|w8|q4|q4a is required");
        if (p->preset || p->layers || p->dtype || p->tokenizer || p->vision)
            return qhx_cli_usage_error("forge", "--preset/--layers/--dtype/--tokenizer/--vision are for --random");
        if (p->calibrate_tokens && !p->calibrate) return qhx_cli_usage_error("forge", "--calibrate-tokens needs --calibrate");
    }
    int rc = check_values(p);
    if (rc >= 0) return rc;
    fa->in = pos[0];
    fa->out = pos[1];
    return -1;
}

/* The released Qwen3.5 tokenizer, for the presets of a released size (the shapes of the released
 * models, so their vocabulary too): $QHX_QWEN35_TOKENIZER, else the copy in the source tree this qhx was built
 * from (tests/data/fixtures/tokenizer/qwen3_5, Apache-2.0 with its NOTICE there); NULL when
 * neither is there: the filler byte-level BPE is written then, and the log says so. */
static const char *released_qwen35_tokenizer(void) {
    const char *env = getenv("QHX_QWEN35_TOKENIZER");
    if (env && *env) return env;
#ifdef QHX_TREE_DATA_DIR
    static const char tree[] = QHX_TREE_DATA_DIR "/fixtures/tokenizer/qwen3_5/tokenizer.json";
    if (qhx_path_is_file(tree)) return tree;
#endif
    return NULL;
}

int qhx_cmd_forge(int argc, char **argv) {
    qhx_forge_args fa;
    int prc = qhx_forge_parse_args(argc, argv, &fa);
    if (prc >= 0) return prc;
    qhx_forge_params p = fa.p;
    const char *pos[2] = {fa.in, fa.out};
    int random = fa.random, quiet = fa.quiet;
    const char *family = random ? fa.in : NULL;
    if (random && !strcmp(family, "qwen3_5") && strcmp(p.preset, "tiny") && strcmp(p.preset, "demo") && !p.tokenizer) {
        p.tokenizer = released_qwen35_tokenizer();
        if (!quiet)
            fprintf(stderr, p.tokenizer ? "qhx forge: tokenizer: the released Qwen3.5 vocabulary, %s\n"
                                        : "qhx forge: tokenizer: the released Qwen3.5 vocabulary is not here (set "
                                          "QHX_QWEN35_TOKENIZER or pass --tokenizer): a filler byte-level BPE%s\n",
                    p.tokenizer ? p.tokenizer : "");
    }

    ui u = {.bar = !quiet && isatty(STDERR_FILENO), .quiet = quiet, .t0 = now_s()};
    p.progress = on_progress;
    p.log = on_log;
    p.cancel = on_cancel;
    p.staging = on_staging;
    p.user = &u;
    /* every signal that ends a program by default from outside: cancel, so the staging
     * folder goes with the job */
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    struct sigaction sa, old[4];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < 4; k++) sigaction(sigs[k], &sa, &old[k]);

    qhx_error err = {0};
    qhx_status rc = random                            ? qhx_forge_random(family, pos[1], &p, &err)
                    : qhx_gguf_path_has_magic(pos[0]) ? qhx_forge_gguf(pos[0], pos[1], &p, &err)
                                                      : qhx_forge_convert(pos[0], pos[1], &p, &err);

    for (int k = 0; k < 4; k++) sigaction(sigs[k], &old[k], NULL);
    if (u.drawn) {
        if (rc == QHX_OK) draw_bar(&u);
        fputc('\n', stderr);
    }
    if (rc != QHX_OK) return qhx_cli_runtime_error("forge", &err);
    if (!quiet) {
        double el = now_s() - u.t0;
        fprintf(stderr, "qhx forge: wrote %s (%.2f GB in %.1f s)\n", pos[1], (double)u.done / 1e9, el);
    }
    return QHX_EXIT_OK;
}
