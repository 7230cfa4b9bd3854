/* cli.h: shared pieces of the qhx subcommands (exit codes, argument helpers).
 *
 * The product commands (generate, chat) and the plumbing they share (cli.h, cli_args.h,
 * cli_run.h, cli_model.h and their .c files, main.c) use the public API (qhx.h) only: that is
 * what keeps the library's public surface sufficient for a real front end, and CMake builds
 * them without src/ on the include path. Their own heap is libc's. The developer commands
 * (tools/qhx/dev, cli_dev.h) may use internal headers. */
#ifndef QHX_CLI_H
#define QHX_CLI_H

#include "qhx.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes (documented in docs/robustness.md). */
enum {
    QHX_EXIT_OK = 0,
    QHX_EXIT_RUNTIME = 1,     /* bad input file, I/O, limits: one line on stderr */
    QHX_EXIT_USAGE = 2,       /* bad command line: one line + usage hint */
    QHX_EXIT_INCOMPLETE = 3,  /* constrained output (--grammar, --json-schema, --json-object) cut by
                                 -n or the context before the grammar's end: printed, yet not valid */
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

/* Fill err (NULL allowed) with code and the formatted one-line message; return code. */
qhx_status qhx_cli_fail(qhx_error *err, qhx_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A monotonic clock in nanoseconds (timings of the speed line). */
uint64_t qhx_cli_time_ns(void);
/* x rounded to `decimals` places, for JSON a person reads: with JSON_REAL_PRECISION(15) in the
 * dump, 12.998857 ms prints as 12.999, not 12.998857000000001. */
double qhx_cli_round(double x, int decimals);
/* Colour on fd: a terminal, NO_COLOR unset or empty (no-color.org), TERM not "dumb". */
bool qhx_cli_color_ok(int fd);
#define QHX_CLI_COLOR_TEXT "\033[33m" /* the generated text under --color */
#define QHX_CLI_COLOR_OFF "\033[0m"
/* The flags every --json output of the CLI is dumped with (compact, 15 significant digits). */
#define QHX_CLI_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

/* Whether path is a regular file (stat follows links). */
int qhx_cli_is_file(const char *path);

/* Tokenize text (NUL-terminated) with the model's tokenizer into a new array (owned: free) of
 * *n ids. Errors as qhx_tokenize. */
qhx_status qhx_cli_tokenize(const qhx_model *m, const char *text, qhx_token **ids /* OUT */, size_t *n /* OUT */,
                            qhx_error *err);

/* Read a whole text: the file at path, or stdin for "-" (at most 64 MiB). *out is owned
 * (free) and NUL-terminated. */
qhx_status qhx_cli_read_text(const char *path, char **out /* OUT */, size_t *len /* OUT */, qhx_error *err);

/* Refuse, with advice, a -m path that is a kind of model qhexrt does not open: a GGUF file, or a
 * single .safetensors file (its folder is the checkpoint). QHX_OK for anything else (the model
 * loader judges it). */
qhx_status qhx_cli_check_model_path(const char *path, qhx_error *err);

/* "did you mean": the name in names[0..n) closest to word (edit distance, at most a third of
 * the word's length and at least 2), or NULL when none is close. */
const char *qhx_cli_closest(const char *word, const char *const *names, size_t n);
/* The usage error for an unknown option: "unknown option 'X'", with "(did you mean 'Y'?)"
 * when a name in names is close. Returns QHX_EXIT_USAGE. */
int qhx_cli_unknown_option(const char *cmd, const char *arg, const char *const *names, size_t n);

/* The rule for an option that only acts with another one (docs/robustness.md, "Options that
 * would do nothing"): given without it, the option is a usage error (exit 2) naming both, never
 * silently ignored. Each front end (generate, chat, serve) lists its dependent options as rules;
 * this is the one place that judges them. */
typedef struct qhx_cli_needs {
    const char *option; /* as written on the command line: "--draft" */
    bool given;
    const char *needs;  /* what makes it act, in words: "--spec mtp" */
    bool met;
} qhx_cli_needs;
/* The first rule given but not met as "OPTION needs NEEDS; without it, the option would do
 * nothing";
 * returns QHX_EXIT_USAGE then, else 0. */
int qhx_cli_check_needs(const char *cmd, const qhx_cli_needs *rules, size_t n);

/* Strict number parsing: whole string, range-checked. Return 0 on success, -1 otherwise. */
int qhx_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int qhx_cli_parse_f64(const char *s, double lo, double hi, double *out);
/* A decimal integer in [0, 2^64 - 1] (a seed). 0 on success, -1 otherwise. */
int qhx_cli_parse_u64(const char *s, uint64_t *out);
/* --prefill-math: "default", "f32" or "int8" (qhx_prefill_math). 0 on success, -1 otherwise. */
int qhx_cli_parse_prefill_math(const char *s, qhx_prefill_math *out);
/* --kv: "f32", "f16" or "q8" (qhx_kv_type). 0 on success, -1 otherwise. */
int qhx_cli_parse_kv(const char *s, qhx_kv_type *out);
/* --device VALUE: a device name of this build (qhx_device_name_valid: "cpu", "opencl",
 * "opencl:N"); 0, or a usage error naming the choices printed for cmd and QHX_EXIT_USAGE.
 * Whether this machine has such a device is the load's. */
int qhx_cli_check_device(const char *cmd, const char *v);
/* The text of --device in a usage: "where the model runs: cpu, opencl or opencl:N (default cpu)"
 * (the build's devices, qhx_devices_choices). */
const char *qhx_cli_device_help(void);

/* A load progress line on stderr ("loading weights: 1.2 / 4.8 GB (25 %)"), shown only when stderr
 * is a terminal and the load has taken more than a second. attach sets mp->load_progress to it
 * (pr must outlive qhx_model_open); end finishes the line, if one was shown, with the time. */
typedef struct qhx_cli_progress {
    double t0, last; /* start and last redraw, seconds */
    int tty, shown;
} qhx_cli_progress;
void qhx_cli_progress_attach(qhx_model_params *mp, qhx_cli_progress *pr /* OUT */);
void qhx_cli_progress_end(qhx_cli_progress *pr);

/* The signal path of the whole-or-nothing output files (qhx_cli_out, cli_dev.h): the temporary
 * file being written, or NULL once it is committed or aborted. */
void qhx_cli_live_set(const char *tmp);
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
