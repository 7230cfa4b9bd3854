/* cli_run.h: what the text-generating commands share (generate, chat): sampling and model
 * options (with the llama.cpp spellings as aliases), the context (the library's policy), Ctrl-C
 * handling, streaming output and the speed line. */
#ifndef QHX_CLI_RUN_H
#define QHX_CLI_RUN_H

#include "cli.h"
#include "qhx.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QHX_RUN_MAX_STOPS 16

/* Which sampling options were given (index into qhx_run_opts.sampling_set). */
enum {
    QHX_RUN_S_TEMP, QHX_RUN_S_TOP_K, QHX_RUN_S_TOP_P, QHX_RUN_S_MIN_P, QHX_RUN_S_REPEAT,
    QHX_RUN_S_SEED, QHX_RUN_S_GREEDY, QHX_RUN_S_LAST_N, QHX_RUN_S_PRESENCE, QHX_RUN_S_FREQUENCY,
    QHX_RUN_N_SAMPLING
};

typedef struct qhx_run_opts {
    const char *model;
    const char *mmproj;      /* --mmproj: a GGUF model's vision tower, or NULL */
    int64_t n_new;          /* -n; 0 = not given, -1 = until a stop or the context is full */
    int64_t threads;        /* 0 = physical cores */
    int64_t ctx;            /* --ctx; 0 = the context policy's default */
    qhx_isa isa;
    qhx_weights_mode weights;
    qhx_prefill_mode prefill;
    qhx_prefill_math prefill_math;
    qhx_prefill_math decode_math;
    qhx_kv_type kv;         /* --kv; DEFAULT = the run plan's */
    qhx_sample_params sampling;
    bool sampling_set[QHX_RUN_N_SAMPLING];
    const char *system;
    int think;              /* -1 = the model's default, 0 = --no-think, 1 = --think */
    const char *stops[QHX_RUN_MAX_STOPS]; /* --stop strings, matched on the decoded text */
    int n_stops;
    qhx_token stop_ids[QHX_RUN_MAX_STOPS]; /* --stop-id ids: more stop tokens */
    int n_stop_ids;
    int64_t image_max_tokens; /* --image-max-tokens; 0 = what leaves room in the context */
    bool ignore_eos;
    bool quiet;             /* no speed line */
    bool verbose;           /* seed, context and format notes on stderr */
    bool spec;              /* --spec mtp: speculative decoding with the MTP block */
    int draft;              /* --draft N; 0 = the default (3) */
    bool draft_fixed;       /* --draft-fixed */
    const char *device;     /* --device NAME (qhx devices); NULL = cpu */
    bool seed_random;       /* --seed -1: a random seed, printed on stderr */
    bool ngl_given;         /* -ngl / --n-gpu-layers: accepted, and one line says what --device does */
    bool color;             /* --color: generated text in colour (on a terminal, without NO_COLOR) */
    bool no_context_shift;  /* chat --no-context-shift: refuse a message that does not fit */
} qhx_run_opts;

/* Defaults: nothing given. */
void qhx_run_opts_init(qhx_run_opts *o);

/* Try to consume argv[*i] (and its value) as a shared option. Returns 1 if consumed, 0 if not
 * a shared option, or an exit code >= 2 after printing a usage error. */
int qhx_run_parse_opt(const char *cmd, int argc, char **argv, int *i, qhx_run_opts *o);

/* The options that act only with another one (--draft and --draft-fixed need --spec mtp; the
 * sampling filters are off under --greedy), then the command's own rules (extra, n_extra), all
 * judged by qhx_cli_check_needs. Returns 0, or QHX_EXIT_USAGE after the error line. */
int qhx_run_check_needs(const char *cmd, const qhx_run_opts *o, const qhx_cli_needs *extra, size_t n_extra);

/* The names of the shared options, for "did you mean". */
extern const char *const QHX_RUN_OPT_NAMES[];
extern const size_t QHX_RUN_N_OPT_NAMES;

/* The help text of the shared options (--device's choices are the build's). */
const char *qhx_run_opts_help(void);

/* Model parameters and session sampling from the options (session defaults come from the
 * model's run plan; options override them; --greedy turns every filter off). When the result
 * samples (temperature > 0) and no --seed was given, the seed is drawn at random. */
qhx_model_params qhx_run_model_params(const qhx_run_opts *o);
void qhx_run_apply_sampling(const qhx_run_opts *o, qhx_session_params *sp);
/* Open o->model as generate and chat do: the path checked first, the options' parameters (vision:
 * a checkpoint folder opens with its tower), a progress line on a terminal while loading, and
 * --think/--no-think refused (QHX_EXIT_USAGE, printed for cmd) on a format without thinking.
 * Returns -1 with *m and *load_s set, else the exit code (the error printed). */
int qhx_run_open_model(const char *cmd, const qhx_run_opts *o, int vision, qhx_model **m, double *load_s,
                       qhx_error *err);
/* Whether sp samples (temperature > 0), i.e. whether its seed matters. */
bool qhx_run_samples(const qhx_session_params *sp);

/* ---- the context: the library's policy (qhx_model_choose_context) for --ctx ----------------
 * --ctx N: N, at most the model's trained context. Otherwise a bundle's run plan context, or
 * for a checkpoint folder the trained context, lowered (and said so, once) to what the
 * memory can hold. */
typedef struct qhx_run_context {
    int64_t limit;     /* most tokens a session may hold */
    int64_t trained;   /* qhx_model_trained_context */
    bool by_memory;    /* limit was lowered to fit in memory */
    bool by_flag;      /* limit is --ctx */
} qhx_run_context;
qhx_status qhx_run_context_of(const qhx_model *m, const qhx_run_opts *o, qhx_run_context *out /* OUT */,
                              qhx_error *err);
/* What to tell a user whose prompt does not fit limit (" (--ctx can go up to N)" and the like:
 * only advice that can work), written into buf. */
void qhx_run_context_advice(const qhx_run_context *c, char *buf, size_t size);

/* The chat format is built in (text/tok_chat.c). When the model's folder ships a chat_template
 * (tokenizer_config.json, chat_template.jinja or chat_template.json) whose sha256 is not one of
 * the released templates the built-in format was checked against, say so once on stderr, as
 * a template edited by a fine-tune may expect another format. */
/* The model's own chat template against the built-in format: a note on stderr when it is
 * another one in the family's turn marks (-1: go on), one line and QHX_EXIT_RUNTIME when it
 * writes other turns (chat would silently differ). */
int qhx_run_chat_template_check(const char *cmd, const qhx_model *m);

/* Ctrl-C: after qhx_run_catch_sigint, the first SIGINT (or SIGTERM, SIGHUP, SIGQUIT) sets a
 * flag that the abort callback (qhx_run_interrupted) reports; a second one exits at once. */
void qhx_run_catch_sigint(void);
int qhx_run_interrupted(void *unused);
void qhx_run_clear_interrupt(void);

/* ---- output: text and ids, the speed line -------------------------------------------------
 * A qhx_run_out is the on_token callback's state: it prints text (or ids) as it comes (the
 * library matches the stop strings, qhx_generate_params.stops, and gives only final text).
 * Collects text and ids for --json. */
typedef struct qhx_run_out {
    const char *const *stops; /* --stop strings: the generate parameters' */
    int n_stops;
    bool print_ids, print_text, collect;
    char *text;             /* --json: the text so far (owned) */
    size_t n_text, cap_text;
    qhx_token *ids;         /* --json: the ids so far (owned) */
    size_t n_ids, cap_ids;
    int n_printed_ids;
    bool failed;            /* out of memory while collecting */
    bool lost;              /* stdout took no more output (a closed pipe, a full disk) */
    bool color;             /* --color on a terminal without NO_COLOR */
    /* --spec mtp: plain decoding's speed measured after the run (0: not measured) and whether
     * the adaptive rule retired drafting; the speed line and --json report them */
    double spec_plain_tok_s;
    bool spec_retired;
    uint64_t t_start_ns, t_first_ns; /* the feed's start; the first token's arrival (0: none) */
} qhx_run_out;
void qhx_run_out_init(qhx_run_out *out, const qhx_run_opts *o, bool print_ids, bool collect);
void qhx_run_out_free(qhx_run_out *out);
/* The qhx_token_cb. user is a qhx_run_out. */
int qhx_run_on_token(void *user, qhx_token token, const char *text, size_t len);

/* The stop reason in words: "eos", "length", "stop string", "context", "interrupted". */
const char *qhx_run_stop_name(const qhx_generate_stats *st, const qhx_run_out *out, bool context_full,
                              bool interrupted);

/* "qhx: load 0.31 s, first token 42 ms, prompt 12 tokens (300.0 tok/s), generated 64 tokens
 * (25.0 tok/s), stop: eos" on stderr; interrupted: the same line starting "qhx CMD:
 * interrupted: ", so it is the one line an interrupted run prints. load_s < 0: no load time. */
/* --spec mtp: the plain decode steps timed after the run, for the speed against plain decoding. */
#define QHX_RUN_PLAIN_STEPS 16

void qhx_run_print_speed(const char *cmd, double load_s, const qhx_generate_stats *st, const qhx_run_out *out,
                         const char *stop, bool interrupted);

/* A prompt's videos on stderr: when they were fitted to the context, one notice saying what
 * was lowered and to what (unless quiet); with verbose, "qhx: video: ..." with the frames, the
 * grid, the tokens and the time spent decoding, preprocessing and in the vision tower. Nothing
 * for a prompt without a video. */
void qhx_run_report_video(const qhx_prompt *p, bool quiet, bool verbose);

#endif
