/* cli_run.c: options, Ctrl-C and output shared by generate and chat. */
#include "cli_run.h"

#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char QHX_RUN_OPTS_HELP[] =
    "  -n N                 most tokens to generate (default 128)\n"
    "  --temp T             sampling temperature, >= 0 (0 = greedy)\n"
    "  --top-k K            keep the K most likely tokens (0 = off)\n"
    "  --top-p P            nucleus sampling, P in (0, 1]\n"
    "  --min-p P            drop tokens below P x the best one, P in [0, 1)\n"
    "  --repeat-penalty R   penalise recent tokens, R > 0 (1 = off)\n"
    "  --seed S             sampling seed (same seed, same text at any thread count)\n"
    "  --greedy             argmax decoding, every filter off\n"
    "  --threads N          worker threads (default: one per physical core)\n"
    "  --isa ref|avx2|avx512|neon|best  force an instruction set (default best)\n"
    "  --ctx N              context size of the session (default: prompt + N)\n"
    "  --prefill chunked|decode  prompt through the chunked path (default) or token by token\n"
    "  --prefill-math default|f32|int8  w8/q4 prompt matmul with f32 or int8 activations\n"
    "                       (default: int8 for q4, f32 for w8)\n"
    "  --decode-math default|f32|int8  q4 decode matvec with int8 activations or not\n"
    "                       (default: int8)\n"
    "  --ignore-eos         do not stop at the model's stop tokens\n"
    "  --quiet              no speed line on stderr\n";

void qhx_run_opts_init(qhx_run_opts *o) {
    memset(o, 0, sizeof *o);
    o->n_new = -1;
    o->isa = QHX_ISA_BEST;
    o->think = -1;
}

static int parse_isa(const char *v, qhx_isa *out) {
    static const char *const names[] = {"ref", "avx2", "avx512", "neon", "best"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(v, names[i])) {
            *out = (qhx_isa)i;
            return 0;
        }
    return -1;
}

int qhx_run_parse_opt(const char *cmd, int argc, char **argv, int *i, qhx_run_opts *o) {
    const char *a = argv[*i];
    /* flags */
    if (!strcmp(a, "--greedy")) { o->sampling_set[6] = true; return 1; }
    if (!strcmp(a, "--ignore-eos")) { o->ignore_eos = true; return 1; }
    if (!strcmp(a, "--quiet")) { o->quiet = true; return 1; }
    if (!strcmp(a, "--think")) { o->think = 1; return 1; }
    if (!strcmp(a, "--no-think")) { o->think = 0; return 1; }
    static const char *const valued[] = {"-m", "--model", "-n", "--temp", "--top-k", "--top-p", "--min-p",
                                         "--repeat-penalty", "--seed", "--threads", "--isa", "--ctx",
                                         "--prefill", "--prefill-math", "--decode-math", "--system"};
    int known = 0;
    for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= !strcmp(a, valued[k]);
    if (!known) return 0;
    if (*i + 1 >= argc) return qhx_cli_usage_error(cmd, "%s needs a value", a);
    const char *v = argv[++*i];
    int64_t n;
    double d;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "--system")) o->system = v;
    else if (!strcmp(a, "-n")) {
        if (qhx_cli_parse_i64(v, 1, INT32_MAX, &o->n_new)) return qhx_cli_usage_error(cmd, "-n: '%s' is not a count >= 1", v);
    } else if (!strcmp(a, "--temp")) {
        if (qhx_cli_parse_f64(v, 0, 1000, &d)) return qhx_cli_usage_error(cmd, "--temp: '%s' is not in [0, 1000]", v);
        o->sampling.temperature = (float)d, o->sampling_set[0] = true;
    } else if (!strcmp(a, "--top-k")) {
        if (qhx_cli_parse_i64(v, 0, INT32_MAX, &n)) return qhx_cli_usage_error(cmd, "--top-k: '%s' is not a count >= 0", v);
        o->sampling.top_k = (int32_t)n, o->sampling_set[1] = true;
    } else if (!strcmp(a, "--top-p")) {
        if (qhx_cli_parse_f64(v, 0, 1, &d) || d <= 0) return qhx_cli_usage_error(cmd, "--top-p: '%s' is not in (0, 1]", v);
        o->sampling.top_p = (float)d, o->sampling_set[2] = true;
    } else if (!strcmp(a, "--min-p")) {
        if (qhx_cli_parse_f64(v, 0, 1, &d) || d >= 1) return qhx_cli_usage_error(cmd, "--min-p: '%s' is not in [0, 1)", v);
        o->sampling.min_p = (float)d, o->sampling_set[3] = true;
    } else if (!strcmp(a, "--repeat-penalty")) {
        if (qhx_cli_parse_f64(v, 0, 100, &d) || d <= 0) return qhx_cli_usage_error(cmd, "--repeat-penalty: '%s' is not in (0, 100]", v);
        o->sampling.repeat_penalty = (float)d, o->sampling_set[4] = true;
    } else if (!strcmp(a, "--seed")) {
        if (qhx_cli_parse_u64(v, &o->sampling.seed))
            return qhx_cli_usage_error(cmd, "--seed: '%s' is not an integer in [0, 18446744073709551615]", v);
        o->sampling_set[5] = true;
    } else if (!strcmp(a, "--threads")) {
        if (qhx_cli_parse_i64(v, 1, 512, &o->threads)) return qhx_cli_usage_error(cmd, "--threads: '%s' is not in [1, 512]", v);
    } else if (!strcmp(a, "--isa")) {
        if (parse_isa(v, &o->isa)) return qhx_cli_usage_error(cmd, "--isa: '%s' is not ref, avx2, avx512, neon or best", v);
    } else if (!strcmp(a, "--ctx")) {
        if (qhx_cli_parse_i64(v, 1, (int64_t)1 << 24, &o->ctx)) return qhx_cli_usage_error(cmd, "--ctx: '%s' is not in [1, 16777216]", v);
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
    }
    return 1;
}

qhx_model_params qhx_run_model_params(const qhx_run_opts *o) {
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = (int)o->threads;
    mp.max_isa = o->isa;
    mp.prefill_math = o->prefill_math;
    mp.decode_math = o->decode_math;
    return mp;
}

void qhx_run_apply_sampling(const qhx_run_opts *o, qhx_session_params *sp) {
    qhx_sample_params *s = &sp->sampling;
    if (o->sampling_set[6]) {
        uint64_t seed = s->seed;
        memset(s, 0, sizeof *s);
        s->seed = seed;
        return;
    }
    if (o->sampling_set[0]) s->temperature = o->sampling.temperature;
    if (o->sampling_set[1]) s->top_k = o->sampling.top_k;
    if (o->sampling_set[2]) s->top_p = o->sampling.top_p;
    if (o->sampling_set[3]) s->min_p = o->sampling.min_p;
    if (o->sampling_set[4]) s->repeat_penalty = o->sampling.repeat_penalty;
    if (o->sampling_set[5]) s->seed = o->sampling.seed;
    sp->prefill = o->prefill;
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
    for (int k = 0; k < 4; k++) sigaction(sigs[k], &sa, NULL);
}

int qhx_run_interrupted(void *unused) {
    (void)unused;
    return interrupted != 0;
}

/* ---- output -------------------------------------------------------------------------------- */

int qhx_run_print_text(void *user, qhx_token token, const char *text, size_t len) {
    (void)user;
    (void)token;
    if (len) fwrite(text, 1, len, stdout);
    return qhx_cli_stdout_flush() != 0; /* lost output (a closed pipe, a full disk): stop now */
}

void qhx_run_print_stats(const qhx_generate_stats *st) {
    double pf = st->prefill_ms > 0 ? (double)st->n_prompt * 1000.0 / st->prefill_ms : 0;
    double dc = st->decode_ms > 0 ? (double)st->n_generated * 1000.0 / st->decode_ms : 0;
    fprintf(stderr, "qhx: prompt %lld tokens (%.1f tok/s), generated %lld tokens (%.1f tok/s)\n",
            (long long)st->n_prompt, pf, (long long)st->n_generated, dc);
}
