/* cli_args.h: the argument parsers of the qhx subcommands, apart from the work they start, so
 * tests and the fuzz target tests/fuzz/fuzz_cli_args.c can run them without a model.
 *
 * Every parser takes the command's argc/argv (argv[0] is the command name) and returns -1 when
 * the command should run with the filled arguments, or an exit code: QHX_EXIT_OK after --help
 * printed the usage on stdout, QHX_EXIT_USAGE after one usage-error line on stderr. String fields
 * point into argv. Only qhx_logits_parse_args allocates (the ids, on -1 only). This header has
 * the product commands' parsers (public API only); cli_dev_args.h the developer commands'. */
#ifndef QHX_CLI_ARGS_H
#define QHX_CLI_ARGS_H

#include "cli_run.h"

#include <stdbool.h>
#include <stdint.h>

/* Most --image options one command takes (a cap on the command line; the library's per-turn
 * limit is the same). */
#define QHX_CLI_MAX_IMAGES 16

/* Exactly one of prompt, prompt_file and ids_arg is set when the parser returns -1. */
typedef struct qhx_generate_args {
    qhx_run_opts run;
    const char *prompt;      /* -p TEXT */
    const char *prompt_file; /* -f FILE; "-" for stdin (-p -, or no prompt option at all) */
    bool prompt_implicit;    /* no prompt option: stdin, unless it is a terminal */
    const char *ids_arg;
    const char *images[QHX_CLI_MAX_IMAGES]; /* --image, repeatable, in order */
    int n_images;
    const char *video;       /* --video FILE (with --chat) */
    double video_fps;        /* --video-fps F (0: the checkpoint's video processor) */
    int64_t video_max_frames; /* --video-max-frames N (0: its default) */
    bool chat;
    bool print_ids;
    bool json;               /* one JSON object: text, ids, stop reason, timings, seed */
    bool print_prompt;       /* print the (chat-formatted) prompt text and stop */
    const char *grammar_file; /* --grammar FILE (GBNF) */
    const char *json_schema;  /* --json-schema FILE or inline JSON */
    bool json_object;         /* --json-object */
} qhx_generate_args;
int qhx_generate_parse_args(int argc, char **argv, qhx_generate_args *a /* OUT */);

/* chat takes the shared run options only; n_new defaults to 512 here. */
int qhx_chat_parse_args(int argc, char **argv, qhx_run_opts *o /* OUT */);

#endif
