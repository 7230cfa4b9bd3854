/* cli_util: argument parsing helpers and error printing shared by the subcommands. */
#include "cli.h"

#include "core/alloc.h"
#include "core/file.h"
#include "io/manifest.h"
#include "text/tokenizer.h"
#include "core/status.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Write s with control characters (a newline in an argument or a file name) as '?', so an
 * error stays on one line. */
static void put_one_line(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        fputc((c < 0x20 && c != '\t') || c == 0x7f ? '?' : c, f);
    }
}

int qhx_cli_usage_error(const char *cmd, const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) snprintf(msg, sizeof msg, "bad arguments");
    else if ((size_t)n >= sizeof msg) memcpy(msg + sizeof msg - 4, "...", 4);
    fprintf(stderr, "qhx %s: ", cmd);
    put_one_line(stderr, msg);
    fprintf(stderr, " (try 'qhx %s --help')\n", cmd);
    return QHX_EXIT_USAGE;
}

int qhx_cli_runtime_error(const char *cmd, const qhx_error *err) {
    fprintf(stderr, "qhx %s: ", cmd);
    if (err && err->code == QHX_E_ABORTED && !strstr(err->msg, "interrupted")) fputs("interrupted: ", stderr);
    put_one_line(stderr, err && err->msg[0] ? err->msg : "failed");
    fputc('\n', stderr);
    if (err && err->code == QHX_E_ABORTED) return QHX_EXIT_INTERRUPTED;
    return QHX_EXIT_RUNTIME;
}

#define MAX_TEXT_BYTES ((size_t)64 << 20)

qhx_status qhx_cli_read_text(const char *path, char **out, size_t *len, qhx_error *err) {
    *out = NULL;
    *len = 0;
    if (strcmp(path, "-")) return qhx_file_read_all(path, MAX_TEXT_BYTES, out, len, err);
    size_t cap = 1 << 16, n = 0;
    char *buf = qhx_malloc(cap + 1);
    if (!buf) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_TEXT_BYTES) {
                qhx_free(buf);
                return qhx_fail(err, QHX_E_LIMIT, "stdin: more than %zu bytes", MAX_TEXT_BYTES);
            }
            char *p = qhx_realloc(buf, cap * 2 + 1);
            if (!p) {
                qhx_free(buf);
                return qhx_fail(err, QHX_E_NOMEM, "out of memory");
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got) continue;
        if (ferror(stdin)) {
            qhx_free(buf);
            return qhx_fail(err, QHX_E_IO, "stdin: read failed: %s", strerror(errno));
        }
        break;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return QHX_OK;
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcasecmp(s + n - m, tail);
}

qhx_status qhx_cli_check_model_path(const char *path, qhx_error *err) {
    if (!qhx_path_is_file(path)) return QHX_OK;
    char magic[4] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(magic, 1, 4, f) : 0;
    if (f) fclose(f);
    if ((got == 4 && !memcmp(magic, "GGUF", 4)) || ends_with(path, ".gguf"))
        return qhx_fail(err, QHX_E_UNSUPPORTED,
                        "%s: GGUF is not supported: point -m at the Hugging Face folder, or convert with `qhx forge`", path);
    if (ends_with(path, ".safetensors"))
        return qhx_fail(err, QHX_E_ARG,
                        "%s: a single .safetensors file: pass its folder (config.json, tokenizer.json and the weights)", path);
    return QHX_OK;
}

/* Optimal string alignment distance (Levenshtein plus adjacent transpositions), which scores
 * the usual typos (a letter missing, doubled, swapped) as 1. Words longer than 63 bytes are
 * never close. */
static size_t edit_distance(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na > 63 || nb > 63) return SIZE_MAX;
    size_t d[64][64];
    for (size_t i = 0; i <= na; i++) d[i][0] = i;
    for (size_t j = 0; j <= nb; j++) d[0][j] = j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            size_t cost = a[i - 1] != b[j - 1], best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[na][nb];
}

const char *qhx_cli_closest(const char *word, const char *const *names, size_t n) {
    size_t len = strlen(word), limit = len / 3 > 2 ? len / 3 : 2, best = SIZE_MAX;
    const char *pick = NULL;
    for (size_t k = 0; k < n; k++) {
        size_t d = edit_distance(word, names[k]);
        if (d <= limit && d < best) best = d, pick = names[k];
    }
    return pick;
}

int qhx_cli_unknown_option(const char *cmd, const char *arg, const char *const *names, size_t n) {
    char name[64];
    size_t k = strcspn(arg, "=");
    snprintf(name, sizeof name, "%.*s", (int)(k < sizeof name ? k : sizeof name - 1), arg);
    const char *near = qhx_cli_closest(name, names, n);
    if (near) return qhx_cli_usage_error(cmd, "unknown option '%s' (did you mean '%s'?)", arg, near);
    return qhx_cli_usage_error(cmd, "unknown option '%s'", arg);
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

int qhx_cli_parse_u64(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') return -1; /* strtoull would take "-1" as 2^64 - 1 */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
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

int qhx_cli_parse_prefill_math(const char *s, qhx_prefill_math *out) {
    static const char *const names[] = {"default", "f32", "int8"};
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, names[i])) {
            *out = (qhx_prefill_math)i;
            return 0;
        }
    return -1;
}

int qhx_cli_parse_kv(const char *s, qhx_kv_type *out) {
    if (s && !strcmp(s, "f32")) *out = QHX_KV_F32;
    else if (s && !strcmp(s, "f16")) *out = QHX_KV_F16;
    else if (s && !strcmp(s, "q8")) *out = QHX_KV_Q8;
    else return -1;
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

/* ---- stdout, checked ----------------------------------------------------------------------- */

static int stdout_errno; /* the first failed write or flush of stdout; 0 while none has */

int qhx_cli_stdout_flush(void) {
    if (stdout_errno) return -1;
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        stdout_errno = errno ? errno : EIO;
        return -1;
    }
    return 0;
}

int qhx_cli_stdout_failed(void) { return stdout_errno != 0 || ferror(stdout); }

int qhx_cli_stdout_error(const char *cmd) {
    fprintf(stderr, "qhx %s: stdout: write failed: %s\n", cmd, strerror(stdout_errno ? stdout_errno : EIO));
    return QHX_EXIT_RUNTIME;
}

int qhx_cli_stdout_close(const char *cmd, int rc) {
    int failed = qhx_cli_stdout_flush() != 0;
    errno = 0;
    if (fclose(stdout) != 0 && !failed) {
        failed = 1;
        stdout_errno = errno ? errno : EIO;
    }
    if (failed && rc == QHX_EXIT_OK) return qhx_cli_stdout_error(cmd);
    return rc;
}

/* ---- whole-or-nothing output files --------------------------------------------------------- */

/* The temporary file being written (one at a time in this program), for the signal exit path:
 * a copy, so the handler never reads a name the library is freeing. Once renamed, unlinking
 * the old name finds nothing, so the copy may outlive the rename by a moment. */
static char live_tmp[4096];
static volatile sig_atomic_t live;

static void set_live(const char *tmp) {
    live = 0;
    if (!tmp || strlen(tmp) >= sizeof live_tmp) return;
    memcpy(live_tmp, tmp, strlen(tmp) + 1);
    live = 1;
}

/* A staging folder being filled (forge), for the same exit path. */
static char live_stage[4096];
static volatile sig_atomic_t stage_live;

void qhx_cli_stage_set(const char *dir) {
    stage_live = 0;
    if (!dir || strlen(dir) >= sizeof live_stage) return;
    memcpy(live_stage, dir, strlen(dir) + 1);
    stage_live = 1;
}

/* Remove the flat staging folder with raw system calls only (opendir allocates, which a signal
 * handler must not). */
static void remove_stage(void) {
    int fd = open(live_stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[4096];
        long n;
        int removed;
        do { /* a directory read while entries go may skip some: read again until none is left */
            removed = 0;
            lseek(fd, 0, SEEK_SET);
            while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
                for (long off = 0; off < n;) {
                    struct dirent64_raw {
                        uint64_t ino;
                        int64_t off;
                        unsigned short reclen;
                        unsigned char type;
                        char name[];
                    } *d = (struct dirent64_raw *)(buf + off);
                    if (strcmp(d->name, ".") && strcmp(d->name, "..") && unlinkat(fd, d->name, 0) == 0) removed = 1;
                    off += d->reclen;
                }
        } while (removed);
        close(fd);
    }
    rmdir(live_stage);
}

void qhx_cli_out_unlink_live(void) {
    if (live) unlink(live_tmp);
    if (stage_live) remove_stage();
}

qhx_status qhx_cli_out_open(qhx_cli_out *o, const char *path, qhx_error *err) {
    memset(o, 0, sizeof *o);
    qhx_status rc = qhx_out_open(&o->file, path, 0666, err);
    o->f = o->file.f;
    set_live(o->file.tmp);
    return rc;
}

qhx_status qhx_cli_out_commit(qhx_cli_out *o, qhx_error *err) {
    o->f = NULL;
    qhx_status rc = qhx_out_commit(&o->file, err);
    live = 0;
    return rc;
}

void qhx_cli_out_abort(qhx_cli_out *o) {
    o->f = NULL;
    qhx_out_abort(&o->file);
    live = 0;
}

/* ---- load progress line ---------------------------------------------------------------------- */

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Redraw at most 5 times a second; the last call (done >= total) always draws. */
static void progress_draw(void *user, uint64_t done, uint64_t total) {
    qhx_cli_progress *pr = user;
    double now = mono_s();
    if (!pr->tty || now - pr->t0 < 1.0) return;
    if (pr->shown && now - pr->last < 0.2 && done < total) return;
    if (total < done) total = done;
    fprintf(stderr, "\rloading weights: %.1f / %.1f GB (%d %%)", (double)done / 1e9, (double)total / 1e9,
            total ? (int)(100.0 * (double)done / (double)total) : 100);
    fflush(stderr);
    pr->shown = 1;
    pr->last = now;
}

void qhx_cli_progress_attach(qhx_model_params *mp, qhx_cli_progress *pr) {
    memset(pr, 0, sizeof *pr);
    pr->tty = isatty(STDERR_FILENO);
    pr->t0 = mono_s();
    mp->load_progress = progress_draw;
    mp->load_progress_user = pr;
}

void qhx_cli_progress_end(qhx_cli_progress *pr) {
    if (pr->shown) fprintf(stderr, ", %.1f s\n", mono_s() - pr->t0);
    pr->shown = 0;
}
