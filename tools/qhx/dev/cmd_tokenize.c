/* qhx tokenize: text -> token ids with a model's tokenizer.
 *   qhx tokenize --tokenizer PATH              stdin (all of it, one text) -> ids on one line
 *   qhx tokenize --tokenizer PATH --jsonl      lines {"text": ...} -> lines {"ids": [...]}
 *   qhx tokenize --tokenizer PATH --save-binary FILE
 * PATH is a tokenizer.json, a tokenizer.qhxtok, or a model folder holding one. */
#include "cli_dev.h"
#include "cli_dev_args.h"

#include "core/alloc.h"
#include "text/tokenizer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "tokenize";

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx tokenize (-m MODEL | --tokenizer PATH) [--pieces | --jsonl | --save-binary FILE]\n"
            "  Reads UTF-8 text on stdin (all of it, newlines included, as one text) and prints\n"
            "  its token ids, space-separated, on one line (as encode(text,\n"
            "  add_special_tokens=False) of the Hugging Face tokenizers library).\n"
            "  -m, --model PATH    the model whose tokenizer to use (a manifest, a bundle or a\n"
            "                      checkpoint folder); the ids go back into qhx generate --ids\n"
            "  --tokenizer PATH    tokenizer.json, tokenizer.qhxtok, a model folder holding one, or a\n                      GGUF file (its tokenizer.ggml.* keys)\n"
            "  --pieces            one line per token: its id, a tab, and its text (\\n, \\t, \\\\ and\n"
            "                      \\xNN for control characters and bytes that are not whole UTF-8)\n"
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

/* Bytes of s[0..n) that are whole UTF-8 from the start (a token's text may end inside a
 * character that the next token completes). */
static size_t utf8_prefix(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!k || i + k > n) break;
        size_t j = 1;
        while (j < k && (s[i + j] & 0xC0) == 0x80) j++;
        if (j < k) break;
        i += k;
    }
    return i;
}

/* --pieces: each token's own text on its line, escaped so a line stays a line. */
static int print_pieces(FILE *out, const qhx_tok *tok, const int32_t *ids, size_t n, qhx_error *err) {
    for (size_t k = 0; k < n; k++) {
        char *text = NULL;
        size_t len = 0;
        if (qhx_tok_decode_alloc(tok, &ids[k], 1, 0, &text, &len, err)) return -1;
        fprintf(out, "%d\t", (int)ids[k]);
        size_t ok = utf8_prefix((const unsigned char *)text, len);
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)text[i];
            if (c == '\n') fputs("\\n", out);
            else if (c == '\t') fputs("\\t", out);
            else if (c == '\\') fputs("\\\\", out);
            else if (c < 0x20 || c == 0x7f || (i >= ok && c >= 0x80)) fprintf(out, "\\x%02X", c);
            else fputc(c, out);
        }
        fputc('\n', out);
        qhx_free(text);
    }
    return ferror(out) ? -1 : 0;
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
        if (!strcmp(a, "--pieces")) {
            t->pieces = true;
            continue;
        }
        bool is_path = !strcmp(a, "--tokenizer") || !strcmp(a, "-m") || !strcmp(a, "--model");
        if (is_path || !strcmp(a, "--save-binary")) {
            if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "%s needs a value", a);
            if (is_path && t->path) return qhx_cli_usage_error(CMD, "give one of -m MODEL and --tokenizer PATH, once");
            if (is_path) t->path = argv[++i];
            else t->save = argv[++i];
            continue;
        }
        static const char *const names[] = {"-m", "--model", "--tokenizer", "--jsonl", "--pieces", "--save-binary", "--help"};
        return qhx_cli_unknown_option(CMD, a, names, sizeof names / sizeof names[0]);
    }
    if (!t->path || !*t->path) return qhx_cli_usage_error(CMD, "missing -m MODEL (or --tokenizer PATH)");
    if ((t->save != NULL) + t->jsonl + t->pieces > 1)
        return qhx_cli_usage_error(CMD, "--save-binary, --jsonl and --pieces: choose one");
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
        } else if (t.pieces && print_pieces(stdout, tok, ids, n, &err)) {
            rc = err.msg[0] ? qhx_cli_runtime_error(CMD, &err) : QHX_EXIT_RUNTIME;
        } else if (!t.pieces && (print_ids(stdout, ids, n, 0) || fflush(stdout))) {
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
