/* cli_run.h: what the text-generating commands share (generate, chat): sampling and model
 * options, Ctrl-C handling, streaming output and the speed line. */
#ifndef QHX_CLI_RUN_H
#define QHX_CLI_RUN_H

#include "qhx.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct qhx_run_opts {
    const char *model;
    int64_t n_new;          /* -n; -1 = not given */
    int64_t threads;        /* 0 = physical cores */
    int64_t ctx;            /* --ctx; 0 = as needed */
    qhx_isa isa;
    qhx_prefill_mode prefill;
    qhx_prefill_math prefill_math;
    qhx_prefill_math decode_math;
    qhx_sample_params sampling;
    bool sampling_set[7];   /* temp, top-k, top-p, min-p, repeat-penalty, seed, greedy */
    const char *system;
    int think;              /* -1 = the model's default, 0 = --no-think, 1 = --think */
    bool ignore_eos;
    bool quiet;             /* no speed line */
} qhx_run_opts;

/* Defaults: nothing given. */
void qhx_run_opts_init(qhx_run_opts *o);

/* Try to consume argv[*i] (and its value) as a shared option. Returns 1 if consumed, 0 if not
 * a shared option, or an exit code >= 2 after printing a usage error. */
int qhx_run_parse_opt(const char *cmd, int argc, char **argv, int *i, qhx_run_opts *o);

/* The help text of the shared options. */
extern const char QHX_RUN_OPTS_HELP[];

/* Model parameters and session sampling from the options (session defaults come from the
 * model's run plan; options override them; --greedy turns every filter off). */
qhx_model_params qhx_run_model_params(const qhx_run_opts *o);
void qhx_run_apply_sampling(const qhx_run_opts *o, qhx_session_params *sp);

/* Ctrl-C: after qhx_run_catch_sigint, the first SIGINT (or SIGTERM, SIGHUP, SIGQUIT) sets a
 * flag that the abort callback (qhx_run_interrupted) reports; a second one exits at once. */
void qhx_run_catch_sigint(void);
int qhx_run_interrupted(void *unused);

/* Token callback printing each piece of text to stdout as it comes (flushing). */
int qhx_run_print_text(void *user, qhx_token token, const char *text, size_t len);

/* "prompt N tokens (X tok/s), generated M tokens (Y tok/s)" on stderr. */
void qhx_run_print_stats(const qhx_generate_stats *st);

#endif
