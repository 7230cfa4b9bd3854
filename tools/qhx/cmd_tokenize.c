/* qhx tokenize: text -> token ids with a model's tokenizer.
 *   qhx tokenize --tokenizer PATH              stdin (all of it, one text) -> ids on one line
 *   qhx tokenize --tokenizer PATH --jsonl      lines {"text": ...} -> lines {"ids": [...]}
 *   qhx tokenize --tokenizer PATH --save-binary FILE
 * PATH is a tokenizer.json, a tokenizer.qhxtok, or a model folder holding one. */
#include "cli.h"
#include "cli_args.h"

#include "core/alloc.h"
#include "text/tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "tokenize";

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx tokenize --tokenizer PATH [--jsonl | --save-binary FILE]\n"
            "  Reads UTF-8 text on stdin (all of it, newlines included, as one text) and prints\n"
            "  its token ids, space-separated, on one line (as encode(text,\n"
            "  add_special_tokens=False) of the Hugging Face tokenizers library).\n"
            "  --tokenizer PATH    tokenizer.json, tokenizer.qhxtok, or a model folder holding one\n"
            "  --jsonl             read lines {\"text\": \"...\"}; write, in order, lines {\"ids\": [...]}\n"
            "  --save-binary FILE  write the tokenizer's compact binary form (.qhxtok) and exit;\n"
            "                      saved as tokenizer.qhxtok next to tokenizer.json it is used\n"
            "                      instead of the JSON while the JSON is unchanged\n");
}

/* Read all of a stream into a new buffer (owned: free). NULL on error. */
static char *read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        if (n == cap) {
            if (cap > SIZE_MAX / 2) break;
            char *p = realloc(buf, cap *= 2);
            if (!p) break;
            buf = p;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) break;
            *len = n;
            return buf;
        }
    }
    free(buf);
    return NULL;
}

static int print_ids(FILE *out, const int32_t *ids, size_t n, int jsonl) {
    if (jsonl) fputs("{\"ids\": [", out);
    for (size_t k = 0; k < n; k++) {
        if (k) fputs(jsonl ? ", " : " ", out);
        fprintf(out, "%d", (int)ids[k]);
    }
    fputs(jsonl ? "]}\n" : "\n", out);
    return ferror(out) ? -1 : 0;
}

static int run_jsonl(qhx_tok *tok) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long lineno = 0;
    int rc = QHX_EXIT_OK;
    qhx_error err = {0};
    while ((n = getline(&line, &cap, stdin)) > 0) {
        lineno++;
        size_t k = 0;
        while (k < (size_t)n && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r' || line[k] == '\n')) k++;
        if (k == (size_t)n) continue; /* a blank line is no record */
        json_error_t je;
        json_t *o = json_loadb(line, (size_t)n, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &je);
        json_t *text = json_object_get(o, "text");
        if (!o || !json_is_string(text)) {
            fprintf(stderr, "qhx %s: stdin line %ld: %s\n", CMD, lineno,
                    o ? "expected an object with a string \"text\"" : je.text);
            json_decref(o);
            rc = QHX_EXIT_RUNTIME;
            break;
        }
        int32_t *ids = NULL;
        size_t n_ids = 0;
        /* the length comes from the JSON library: the text may hold U+0000 */
        if (qhx_tok_encode_alloc(tok, json_string_value(text), json_string_length(text), &ids, &n_ids, &err)) {
            fprintf(stderr, "qhx %s: stdin line %ld: %s\n", CMD, lineno, err.msg);
            json_decref(o);
            rc = QHX_EXIT_RUNTIME;
            break;
        }
        json_decref(o);
        int bad = print_ids(stdout, ids, n_ids, 1);
        qhx_free(ids);
        if (bad) {
            fprintf(stderr, "qhx %s: cannot write the output\n", CMD);
            rc = QHX_EXIT_RUNTIME;
            break;
        }
    }
    if (rc == QHX_EXIT_OK && ferror(stdin)) {
        fprintf(stderr, "qhx %s: cannot read stdin\n", CMD);
        rc = QHX_EXIT_RUNTIME;
    }
    free(line);
    return rc;
}

int qhx_tokenize_parse_args(int argc, char **argv, qhx_tokenize_args *t) {
    memset(t, 0, sizeof *t);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (!strcmp(a, "--jsonl")) {
            t->jsonl = true;
            continue;
        }
        if (!strcmp(a, "--tokenizer") || !strcmp(a, "--save-binary")) {
            if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "%s needs a value", a);
            if (!strcmp(a, "--tokenizer")) t->path = argv[++i];
            else t->save = argv[++i];
            continue;
        }
        if (!strncmp(a, "--tokenizer=", 12)) {
            t->path = a + 12;
            continue;
        }
        return qhx_cli_usage_error(CMD, "unknown argument '%s'", a);
    }
    if (!t->path || !*t->path) return qhx_cli_usage_error(CMD, "missing --tokenizer PATH");
    if (t->save && t->jsonl) return qhx_cli_usage_error(CMD, "--save-binary and --jsonl do not go together");
    return -1;
}

int qhx_cmd_tokenize(int argc, char **argv) {
    qhx_tokenize_args t;
    int prc = qhx_tokenize_parse_args(argc, argv, &t);
    if (prc >= 0) return prc;
    const char *path = t.path, *save = t.save;
    int jsonl = t.jsonl;

    qhx_error err = {0};
    qhx_tok *tok = NULL;
    if (qhx_cli_load_tokenizer(path, &tok, &err) != QHX_OK) return qhx_cli_runtime_error(CMD, &err);
    int rc = QHX_EXIT_OK;
    if (save) {
        if (qhx_tok_save(tok, save, &err) != QHX_OK) rc = qhx_cli_runtime_error(CMD, &err);
    } else if (jsonl) {
        rc = run_jsonl(tok);
    } else {
        size_t len = 0;
        char *text = read_all(stdin, &len);
        int32_t *ids = NULL;
        size_t n = 0;
        if (!text) {
            fprintf(stderr, "qhx %s: cannot read stdin\n", CMD);
            rc = QHX_EXIT_RUNTIME;
        } else if (qhx_tok_encode_alloc(tok, text, len, &ids, &n, &err) != QHX_OK) {
            rc = qhx_cli_runtime_error(CMD, &err);
        } else if (print_ids(stdout, ids, n, 0) || fflush(stdout)) {
            fprintf(stderr, "qhx %s: cannot write the output\n", CMD);
            rc = QHX_EXIT_RUNTIME;
        }
        free(text);
        qhx_free(ids);
    }
    if (rc == QHX_EXIT_OK && fflush(stdout)) {
        fprintf(stderr, "qhx %s: cannot write the output\n", CMD);
        rc = QHX_EXIT_RUNTIME;
    }
    qhx_tok_free(tok);
    return rc;
}
