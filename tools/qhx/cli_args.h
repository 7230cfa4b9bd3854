/* cli_args.h: the argument parsers of the qhx subcommands, apart from the work they start, so
 * tests and the fuzz target tests/fuzz/fuzz_cli_args.c can run them without a model.
 *
 * Every parser takes the command's argc/argv (argv[0] is the command name) and returns -1 when
 * the command should run with the filled arguments, or an exit code: QHX_EXIT_OK after --help
 * printed the usage on stdout, QHX_EXIT_USAGE after one usage-error line on stderr. String fields
 * point into argv. Only qhx_logits_parse_args allocates (the ids, on -1 only). */
#ifndef QHX_CLI_ARGS_H
#define QHX_CLI_ARGS_H

#include "cli_run.h"

#include "forge/forge.h"

#include <stdbool.h>
#include <stdint.h>

/* Exactly one of prompt, prompt_file and ids_arg is set when the parser returns -1. */
typedef struct qhx_generate_args {
    qhx_run_opts run;
    const char *prompt;      /* -p TEXT */
    const char *prompt_file; /* -f FILE; "-" for stdin (-p -, or no prompt option at all) */
    bool prompt_implicit;    /* no prompt option: stdin, unless it is a terminal */
    const char *ids_arg;
    const char *image;
    bool chat;
    bool print_ids;
    bool json;               /* one JSON object: text, ids, stop reason, timings, seed */
    bool print_prompt;       /* print the (chat-formatted) prompt text and stop */
} qhx_generate_args;
int qhx_generate_parse_args(int argc, char **argv, qhx_generate_args *a /* OUT */);

/* chat takes the shared run options only; n_new defaults to 512 here. */
int qhx_chat_parse_args(int argc, char **argv, qhx_run_opts *o /* OUT */);

typedef struct qhx_logits_args {
    const char *model, *out, *image;
    int32_t *ids;    /* owned: qhx_free (set only when the parser returns -1) */
    int64_t n_ids;
    int64_t prefill; /* in [0, n_ids] */
    int64_t threads;
    qhx_kv_type kv;  /* --kv; DEFAULT = the run plan's */
} qhx_logits_args;
int qhx_logits_parse_args(int argc, char **argv, qhx_logits_args *a /* OUT */);

typedef struct qhx_embed_image_args {
    const char *model, *image, *out;
} qhx_embed_image_args;
int qhx_embed_image_parse_args(int argc, char **argv, qhx_embed_image_args *a /* OUT */);

typedef struct qhx_tokenize_args {
    const char *path, *save; /* path: -m MODEL or --tokenizer PATH */
    bool jsonl, pieces;
} qhx_tokenize_args;
int qhx_tokenize_parse_args(int argc, char **argv, qhx_tokenize_args *a /* OUT */);

typedef struct qhx_detokenize_args {
    const char *path;
    unsigned flags; /* QHX_TOK_SKIP_SPECIAL */
} qhx_detokenize_args;
int qhx_detokenize_parse_args(int argc, char **argv, qhx_detokenize_args *a /* OUT */);

typedef struct qhx_inspect_args {
    const char *path;
    bool as_json, verify;
} qhx_inspect_args;
int qhx_inspect_parse_args(int argc, char **argv, qhx_inspect_args *a /* OUT */);

/* forge: in, out (or family, out with --random); p holds the options, no callbacks. */
typedef struct qhx_forge_args {
    qhx_forge_params p;
    const char *in, *out;
    bool random, quiet;
} qhx_forge_args;
int qhx_forge_parse_args(int argc, char **argv, qhx_forge_args *a /* OUT */);

#endif
