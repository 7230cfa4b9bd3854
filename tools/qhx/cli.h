/* cli.h: shared pieces of the qhx subcommands (exit codes, argument helpers). */
#ifndef QHX_CLI_H
#define QHX_CLI_H

#include "qhx.h"
#include "core/file.h"

#include <stdint.h>
#include <stdio.h>

/* Exit codes (documented in docs/robustness.md). */
enum {
    QHX_EXIT_OK = 0,
    QHX_EXIT_RUNTIME = 1,     /* bad input file, I/O, limits: one line on stderr */
    QHX_EXIT_USAGE = 2,       /* bad command line: one line + usage hint */
    QHX_EXIT_INTERRUPTED = 130
};

typedef int (*qhx_cli_fn)(int argc, char **argv);
struct qhx_cli_cmd {
    const char *name;
    qhx_cli_fn fn;
    const char *help;
};

#define QHX_CLI_ENTRY(name, fn, help) int fn(int argc, char **argv);
#include "commands.def"
#undef QHX_CLI_ENTRY

/* Print "qhx CMD: message" + a usage hint on one line; return QHX_EXIT_USAGE. */
int qhx_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "qhx CMD: <err->msg>" on one line (control characters as '?'; "interrupted: " first
 * when aborted); return QHX_EXIT_RUNTIME (or QHX_EXIT_INTERRUPTED if aborted). */
int qhx_cli_runtime_error(const char *cmd, const qhx_error *err);

/* Load the tokenizer named by --tokenizer: a tokenizer.json (or its binary form), a model
 * folder holding one, a manifest, or a bundle folder (the run plan's tokenizer artifact). */
struct qhx_tok;
qhx_status qhx_cli_load_tokenizer(const char *path, struct qhx_tok **out, qhx_error *err);

/* Strict number parsing: whole string, range-checked. Return 0 on success, -1 otherwise. */
int qhx_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int qhx_cli_parse_f64(const char *s, double lo, double hi, double *out);
/* A decimal integer in [0, 2^64 - 1] (a seed). 0 on success, -1 otherwise. */
int qhx_cli_parse_u64(const char *s, uint64_t *out);
/* --prefill-math: "default", "f32" or "int8" (qhx_prefill_math). 0 on success, -1 otherwise. */
int qhx_cli_parse_prefill_math(const char *s, qhx_prefill_math *out);

/* An output file that appears whole or not at all, by the library's one policy (qhx_out_open,
 * src/core/file.h: a temporary file beside path, renamed by commit; a device or a FIFO written in
 * place; a link's target written, the link kept). The CLI adds the signal path: the temporary
 * file being written is known to qhx_cli_out_unlink_live. Both commit and abort accept an
 * output that was never opened. */
typedef struct qhx_cli_out {
    FILE *f;          /* file.f while open */
    qhx_out_file file;
} qhx_cli_out;
qhx_status qhx_cli_out_open(qhx_cli_out *o /* OUT */, const char *path, qhx_error *err);
qhx_status qhx_cli_out_commit(qhx_cli_out *o, qhx_error *err);
void qhx_cli_out_abort(qhx_cli_out *o);
/* For a signal handler about to _exit: remove the temporary file of the output being written
 * and the staging folder being filled, if any (async-signal-safe). */
void qhx_cli_out_unlink_live(void);
/* The staging folder being filled (forge's staging callback), or NULL once it is gone. */
void qhx_cli_stage_set(const char *dir);

/* ---- stdout, checked ----------------------------------------------------------------------
 * Results go to stdout; a write that fails there (a full disk, a closed pipe with SIGPIPE
 * ignored) must end the command with exit 1 and one line, not be ignored. The first failure's
 * errno is kept. */
/* Flush stdout; 0, or -1 once any write or flush of it has failed. */
int qhx_cli_stdout_flush(void);
/* Whether a write or flush of stdout has failed so far. */
int qhx_cli_stdout_failed(void);
/* Print "qhx CMD: stdout: write failed: <reason>"; return QHX_EXIT_RUNTIME. */
int qhx_cli_stdout_error(const char *cmd);
/* At exit: flush and close stdout. A command that succeeded (rc 0) but whose output was lost
 * gets the error line and exit 1; otherwise rc is returned unchanged. */
int qhx_cli_stdout_close(const char *cmd, int rc);

#endif
