/* qhx detokenize: token ids -> text with a model's tokenizer.
 *   qhx detokenize --tokenizer PATH [--skip-special]
 * Reads ids (separated by spaces, tabs or newlines) on stdin and writes the decoded text, as
 * decode(ids) of the Hugging Face tokenizers library, with no newline added. */
#include "cli_dev.h"
#include "cli_dev_args.h"

#include "core/alloc.h"
#include "text/tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "detokenize";

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx detokenize --tokenizer PATH [--skip-special]\n"
            "  Reads token ids (whitespace-separated) on stdin and writes their text, as\n"
            "  decode(ids) of the Hugging Face tokenizers library, without adding a newline.\n"
            "  Ids the tokenizer does not have are skipped, as the library does.\n"
            "  --tokenizer PATH  tokenizer.json, tokenizer.qhxtok, or a model folder holding one\n"
            "  --skip-special    leave out special tokens (the chat format's turn markers, ...)\n");
}

int qhx_detokenize_parse_args(int argc, char **argv, qhx_detokenize_args *d) {
    memset(d, 0, sizeof *d);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (!strcmp(a, "--skip-special")) {
            d->flags |= QHX_TOK_SKIP_SPECIAL;
            continue;
        }
        if (!strcmp(a, "--tokenizer")) {
            if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "--tokenizer needs a value");
            d->path = argv[++i];
            continue;
        }
        if (!strncmp(a, "--tokenizer=", 12)) {
            d->path = a + 12;
            continue;
        }
        return qhx_cli_usage_error(CMD, "unknown argument '%s'", a);
    }
    if (!d->path || !*d->path) return qhx_cli_usage_error(CMD, "missing --tokenizer PATH");
    return -1;
}

int qhx_cmd_detokenize(int argc, char **argv) {
    qhx_detokenize_args d;
    int prc = qhx_detokenize_parse_args(argc, argv, &d);
    if (prc >= 0) return prc;
    const char *path = d.path;
    unsigned flags = d.flags;

    /* read the ids first, so bad input is reported before any output */
    size_t n = 0, cap = 1024;
    int32_t *ids = malloc(cap * sizeof *ids);
    char word[64];
    int c, rc = QHX_EXIT_OK;
    size_t wl = 0;
    if (!ids) {
        fprintf(stderr, "qhx %s: out of memory\n", CMD);
        return QHX_EXIT_RUNTIME;
    }
    do {
        c = getchar();
        if (c != EOF && c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            if (wl + 1 >= sizeof word) {
                word[sizeof word - 1] = '\0';
                fprintf(stderr, "qhx %s: id %zu on stdin is not a number: '%.20s...'\n", CMD, n + 1, word);
                rc = QHX_EXIT_RUNTIME;
                break;
            }
            word[wl++] = (char)c;
            continue;
        }
        if (!wl) continue;
        word[wl] = '\0';
        wl = 0;
        int64_t v;
        if (qhx_cli_parse_i64(word, 0, INT32_MAX, &v)) {
            fprintf(stderr, "qhx %s: id %zu on stdin is not a token id: '%s'\n", CMD, n + 1, word);
            rc = QHX_EXIT_RUNTIME;
            break;
        }
        if (n == cap) {
            int32_t *p = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!p) {
                fprintf(stderr, "qhx %s: out of memory\n", CMD);
                rc = QHX_EXIT_RUNTIME;
                break;
            }
            ids = p;
        }
        ids[n++] = (int32_t)v;
    } while (c != EOF);
    if (rc == QHX_EXIT_OK && ferror(stdin)) {
        fprintf(stderr, "qhx %s: cannot read stdin: %s\n", CMD, strerror(errno));
        rc = QHX_EXIT_RUNTIME;
    }
    if (rc != QHX_EXIT_OK) {
        free(ids);
        return rc;
    }

    qhx_error err = {0};
    qhx_tok *tok = NULL;
    char *text = NULL;
    size_t len = 0;
    if (qhx_cli_load_tokenizer(path, &tok, &err) != QHX_OK ||
        qhx_tok_decode_alloc(tok, ids, n, flags, &text, &len, &err) != QHX_OK) {
        rc = qhx_cli_runtime_error(CMD, &err);
    } else if (fwrite(text, 1, len, stdout) != len || fflush(stdout)) {
        fprintf(stderr, "qhx %s: cannot write the output\n", CMD);
        rc = QHX_EXIT_RUNTIME;
    }
    qhx_free(text);
    qhx_tok_free(tok);
    free(ids);
    return rc;
}
