/* cli_dev_args.h: the argument parsers of the developer commands, by the rules of cli_args.h
 * (the same return values; tests and tests/fuzz/fuzz_cli_args.c run them without a model). */
#ifndef QHX_CLI_DEV_ARGS_H
#define QHX_CLI_DEV_ARGS_H

#include "cli_args.h"

#include "forge/forge.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct qhx_logits_args {
    const char *model, *out, *mtp_out; /* mtp_out: --mtp-out FILE or NULL */
    const char *device;                /* --device, or NULL (cpu) */
    const char *mmproj;                /* --mmproj: a GGUF model's vision tower, or NULL */
    const char *images[QHX_CLI_MAX_IMAGES]; /* --image, repeatable, in order */
    int n_images;
    int32_t *ids;    /* owned: free (set only when the parser returns -1) */
    int64_t n_ids;
    int64_t prefill; /* in [0, n_ids] */
    int64_t threads;
    qhx_kv_type kv;  /* --kv; DEFAULT = the run plan's */
} qhx_logits_args;
int qhx_logits_parse_args(int argc, char **argv, qhx_logits_args *a /* OUT */);

typedef struct qhx_perplexity_args {
    const char *model, *file, *kl_base;
    const char *device; /* --device, or NULL (cpu) */
    int64_t ctx, stride, batch, chunks, threads; /* chunks 0: every window */
    bool kl;         /* --kl-divergence: compare against kl_base instead of writing it */
    qhx_kv_type kv;  /* --kv; DEFAULT = the run plan's */
} qhx_perplexity_args;
int qhx_perplexity_parse_args(int argc, char **argv, qhx_perplexity_args *a /* OUT */);

typedef struct qhx_embed_image_args {
    const char *model, *image, *out;
    const char *video;  /* --video FILE instead of --image: every temporal group's rows in turn */
    const char *device; /* --device, or NULL (cpu) */
    const char *mmproj; /* --mmproj: a GGUF model's vision tower, or NULL */
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
