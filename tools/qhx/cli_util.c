/* cli_util: argument parsing helpers and error printing shared by the subcommands. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
