/* Fuzz target: the argument parsers of the qhx subcommands (tools/qhx/cli_args.h), run without
 * a model. Input byte 0 picks the command; the rest, split at NUL bytes, is its argv (at most 64
 * arguments). stdout and stderr are captured in memory for each call, and checked:
 *   - "run" (-1): nothing printed, and the arguments are consistent (required ones present);
 *   - --help (0): the usage on stdout, nothing on stderr;
 *   - usage error (2): nothing on stdout, exactly one line on stderr, "qhx CMD: ... --help')";
 *   - no other return value; nothing leaks (LeakSanitizer). */
#include "cli.h"
#include "cli_dev_args.h"

#include "core/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 64

static const char *const NAMES[] = {"generate", "chat", "logits", "embed-image", "tokenize",
                                    "detokenize", "inspect", "forge", "perplexity"};
enum { N_CMDS = sizeof NAMES / sizeof NAMES[0] };

/* Run command c on argv; check its arguments when it would run. Returns the parser's result. */
static int parse(int c, int argc, char **argv) {
    int rc = -2;
    switch (c) {
    case 0: {
        qhx_generate_args a;
        rc = qhx_generate_parse_args(argc, argv, &a);
        if (rc == -1 && (!a.run.model || (!!a.prompt + !!a.prompt_file + !!a.ids_arg) != 1 ||
                         (a.run.n_new < 1 && a.run.n_new != -1)))
            __builtin_trap();
        break;
    }
    case 1: {
        qhx_run_opts o;
        rc = qhx_chat_parse_args(argc, argv, &o);
        if (rc == -1 && (!o.model || (o.n_new < 1 && o.n_new != -1))) __builtin_trap();
        break;
    }
    case 2: {
        qhx_logits_args a;
        rc = qhx_logits_parse_args(argc, argv, &a);
        if (rc == -1) {
            if (!a.model || !a.out || !a.ids || a.n_ids < 1 || a.prefill < 0 || a.prefill > a.n_ids) __builtin_trap();
            volatile int32_t last = a.ids[a.n_ids - 1]; /* the ids array holds n_ids */
            (void)last;
            free(a.ids);
        }
        break;
    }
    case 3: {
        qhx_embed_image_args a;
        rc = qhx_embed_image_parse_args(argc, argv, &a);
        if (rc == -1 && (!a.model || !a.image || !a.out)) __builtin_trap();
        break;
    }
    case 4: {
        qhx_tokenize_args a;
        rc = qhx_tokenize_parse_args(argc, argv, &a);
        if (rc == -1 && (!a.path || !*a.path || (a.save && a.jsonl))) __builtin_trap();
        break;
    }
    case 5: {
        qhx_detokenize_args a;
        rc = qhx_detokenize_parse_args(argc, argv, &a);
        if (rc == -1 && (!a.path || !*a.path)) __builtin_trap();
        break;
    }
    case 6: {
        qhx_inspect_args a;
        rc = qhx_inspect_parse_args(argc, argv, &a);
        if (rc == -1 && (!a.path || !*a.path)) __builtin_trap();
        break;
    }
    case 7: {
        qhx_forge_args a;
        rc = qhx_forge_parse_args(argc, argv, &a);
        if (rc == -1 && (!a.in || !a.out || (!a.random && !a.p.precision) || (a.random && !a.p.preset) ||
                         (a.p.calibrate_tokens && !a.p.calibrate) || (a.random && a.p.calibrate)))
            __builtin_trap();
        break;
    }
    case 8: {
        qhx_perplexity_args a;
        rc = qhx_perplexity_parse_args(argc, argv, &a);
        if (rc == -1 && (!a.model || !a.file || a.ctx < 4 || a.batch < 1 || (a.stride && a.stride >= a.ctx) ||
                         (a.kl && !a.kl_base)))
            __builtin_trap();
        break;
    }
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int c = data[0] % N_CMDS;
    /* the arguments: NUL-separated, each NUL-terminated in a private copy */
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)NAMES[c];
    if (size > 1) {
        for (char *p = buf; argc < MAX_ARGS + 1 && p <= buf + size - 1;) {
            argv[argc++] = p;
            p += strlen(p) + 1;
        }
    }
    argv[argc] = NULL;

    char *out_text = NULL, *err_text = NULL;
    size_t out_len = 0, err_len = 0;
    FILE *out = open_memstream(&out_text, &out_len), *errs = open_memstream(&err_text, &err_len);
    if (!out || !errs) __builtin_trap();
    FILE *real_out = stdout, *real_err = stderr;
    stdout = out;
    stderr = errs;
    int rc = parse(c, argc, argv);
    stdout = real_out;
    stderr = real_err;
    fclose(out);
    fclose(errs);

    if (rc == -1) {
        if (out_len || err_len) __builtin_trap();
    } else if (rc == QHX_EXIT_OK) {
        if (!out_len || err_len) __builtin_trap();
    } else if (rc == QHX_EXIT_USAGE) {
        char head[32];
        snprintf(head, sizeof head, "qhx %s: ", NAMES[c]);
        const char *tail = "--help')\n";
        size_t tl = strlen(tail);
        if (out_len || err_len < strlen(head) + tl) __builtin_trap();
        if (memchr(err_text, '\n', err_len) != err_text + err_len - 1) __builtin_trap(); /* one line */
        if (strncmp(err_text, head, strlen(head)) || memcmp(err_text + err_len - tl, tail, tl)) __builtin_trap();
    } else {
        __builtin_trap();
    }
    free(out_text);
    free(err_text);
    free(buf);
    return 0;
}
