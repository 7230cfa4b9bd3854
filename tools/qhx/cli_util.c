/* cli_util: argument parsing helpers and error printing shared by the subcommands. */
#include "cli.h"

#include "core/alloc.h"
#include "core/file.h"
#include "io/manifest.h"
#include "text/tokenizer.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int qhx_cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "qhx %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (try 'qhx %s --help')\n", cmd);
    return QHX_EXIT_USAGE;
}

int qhx_cli_runtime_error(const char *cmd, const qhx_error *err) {
    fprintf(stderr, "qhx %s: %s\n", cmd, err && err->msg[0] ? err->msg : "failed");
    if (err && err->code == QHX_E_ABORTED) return QHX_EXIT_INTERRUPTED;
    return QHX_EXIT_RUNTIME;
}

int qhx_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int qhx_cli_parse_f64(const char *s, double lo, double hi, double *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* A manifest or bundle: the run plan knows where its tokenizer is. */
static qhx_status tokenizer_of_plan(const char *path, struct qhx_tok **out, qhx_error *err) {
    qhx_plan *plan = NULL;
    qhx_status rc = qhx_plan_open(path, &plan, err);
    if (rc == QHX_OK && !(plan->tokenizer.present && plan->tokenizer.path))
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: the run plan names no tokenizer", path);
    if (rc == QHX_OK) rc = qhx_tok_load(plan->tokenizer.path, out, err);
    qhx_plan_free(plan);
    return rc;
}

qhx_status qhx_cli_load_tokenizer(const char *path, struct qhx_tok **out, qhx_error *err) {
    *out = NULL;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    int is_json = n > 5 && !strcmp(base + n - 5, ".json");
    if (qhx_path_is_dir(path)) {
        char *tj = qhx_path_join(path, "tokenizer.json");
        char *tb = qhx_path_join(path, "tokenizer.qhxtok");
        int direct = (tj && qhx_path_is_file(tj)) || (tb && qhx_path_is_file(tb));
        qhx_free(tj);
        qhx_free(tb);
        return direct ? qhx_tok_load(path, out, err) : tokenizer_of_plan(path, out, err);
    }
    if (is_json && strcmp(base, "tokenizer.json")) {
        /* a manifest declares its format; anything else is taken as a tokenizer file */
        char *head = NULL;
        size_t len = 0;
        if (qhx_file_read_all(path, (size_t)1 << 20, &head, &len, NULL) == QHX_OK && strstr(head, "\"qhexrt/")) {
            qhx_free(head);
            return tokenizer_of_plan(path, out, err);
        }
        qhx_free(head);
    }
    return qhx_tok_load(path, out, err);
}
