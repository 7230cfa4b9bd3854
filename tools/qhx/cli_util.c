/* cli_util: argument parsing helpers and error printing shared by the subcommands. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <math.h>
#include <pthread.h>
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

qhx_status qhx_cli_fail(qhx_error *err, qhx_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

uint64_t qhx_cli_time_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int qhx_cli_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

qhx_status qhx_cli_tokenize(const qhx_model *m, const char *text, qhx_token **ids, size_t *n, qhx_error *err) {
    *ids = NULL;
    *n = 0;
    size_t len = strlen(text), cap = len / 2 + 64, got = 0; /* a guess; the exact count on a retry */
    for (int attempt = 0; attempt < 2; attempt++) {
        qhx_token *buf = malloc(cap * sizeof *buf);
        if (!buf) return qhx_cli_fail(err, QHX_E_NOMEM, "out of memory");
        qhx_status rc = qhx_tokenize(m, text, len, buf, cap, &got, err);
        if (rc == QHX_OK) {
            *ids = buf;
            *n = got;
            return QHX_OK;
        }
        free(buf);
        if (rc != QHX_E_LIMIT || got <= cap) return rc;
        cap = got;
    }
    return qhx_cli_fail(err, QHX_E_INTERNAL, "tokenize: the count changed between two calls");
}

#define MAX_TEXT_BYTES ((size_t)64 << 20)

/* What a file that is not a regular file is: the library's words (qhx_file_kind, src/core/file.c;
 * this file uses the public API only). */
static const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a file";
}

/* A whole regular file of at most max bytes, NUL-terminated (owned: free). */
static qhx_status read_file(const char *path, size_t max, char **out, size_t *out_len, qhx_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return qhx_cli_fail(err, QHX_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return qhx_cli_fail(err, QHX_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return qhx_cli_fail(err, QHX_E_IO, "%s: not a regular file (%s)", path, file_kind(st.st_mode));
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return qhx_cli_fail(err, QHX_E_LIMIT, "%s: file has %lld bytes, the limit is %zu", path, (long long)st.st_size,
                            max);
    }
    size_t size = (size_t)st.st_size, got = 0;
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return qhx_cli_fail(err, QHX_E_NOMEM, "%s: cannot allocate %zu bytes", path, size + 1);
    }
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = errno;
            close(fd);
            free(buf);
            return qhx_cli_fail(err, QHX_E_IO, "%s: read failed at byte %zu: %s", path, got,
                                n == 0 ? "unexpected end of file" : strerror(e));
        }
        got += (size_t)n;
    }
    close(fd);
    buf[size] = '\0';
    *out = buf;
    *out_len = size;
    return QHX_OK;
}

qhx_status qhx_cli_read_text(const char *path, char **out, size_t *len, qhx_error *err) {
    *out = NULL;
    *len = 0;
    if (strcmp(path, "-")) return read_file(path, MAX_TEXT_BYTES, out, len, err);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) return qhx_cli_fail(err, QHX_E_NOMEM, "out of memory");
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_TEXT_BYTES) {
                free(buf);
                return qhx_cli_fail(err, QHX_E_LIMIT, "stdin: more than %zu bytes", MAX_TEXT_BYTES);
            }
            char *p = realloc(buf, cap * 2 + 1);
            if (!p) {
                free(buf);
                return qhx_cli_fail(err, QHX_E_NOMEM, "out of memory");
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, stdin);
        n += got;
        if (got) continue;
        if (ferror(stdin)) {
            free(buf);
            return qhx_cli_fail(err, QHX_E_IO, "stdin: read failed: %s", strerror(errno));
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
    if (!qhx_cli_is_file(path)) return QHX_OK;
    char magic[4] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(magic, 1, 4, f) : 0;
    if (f) fclose(f);
    if (ends_with(path, ".gguf") && (got < 4 || memcmp(magic, "GGUF", 4)))
        return qhx_cli_fail(err, QHX_E_FORMAT, "%s: not a GGUF file: it does not start with GGUF's magic", path);
    if (ends_with(path, ".safetensors"))
        return qhx_cli_fail(err, QHX_E_ARG,
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

int qhx_cli_check_needs(const char *cmd, const qhx_cli_needs *rules, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (rules[k].given && !rules[k].met)
            return qhx_cli_usage_error(cmd, "%s needs %s; without it, the option would do nothing", rules[k].option,
                                       rules[k].needs);
    return 0;
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

void qhx_cli_live_set(const char *tmp) {
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

int qhx_cli_check_device(const char *cmd, const char *v) {
    if (qhx_device_name_valid(v)) return 0;
    return qhx_cli_usage_error(cmd, "--device: '%s' is not a device of this build (%s; qhx devices lists this machine's)", v,
                               qhx_devices_choices());
}

static char device_help[256];
static void make_device_help(void) {
    snprintf(device_help, sizeof device_help, "where the model runs: %s (default cpu)", qhx_devices_choices());
}

const char *qhx_cli_device_help(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_device_help);
    return device_help;
}

double qhx_cli_round(double x, int decimals) {
    double scale = 1;
    for (int k = 0; k < decimals; k++) scale *= 10;
    double r = round(x * scale) / scale;
    return r == 0 ? 0 : r; /* no -0 */
}

bool qhx_cli_color_ok(int fd) {
    const char *no = getenv("NO_COLOR"), *term = getenv("TERM");
    if (no && *no) return false;
    if (term && !strcmp(term, "dumb")) return false;
    return isatty(fd) != 0;
}
