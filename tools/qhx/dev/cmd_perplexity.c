/* qhx perplexity: the perplexity of a model over a text file, computed as llama.cpp's
 * llama-perplexity computes it, and the KL divergence of its distributions from a base run.
 *
 *   qhx perplexity -m MODEL -f FILE [--ctx N] [--stride N] [--batch N] [--chunks N]
 *                  [--kl-base FILE [--kl-divergence]] [--threads N] [--kv f32|f16|q8]
 *
 * The text is tokenized whole (no BOS: Qwen adds none). Without --stride it is cut into
 * consecutive windows of --ctx tokens, each evaluated from an empty state, and the loss counts
 * the predictions of the second half of each window (tokens ctx/2 + 1 .. ctx - 1, from the
 * logits after positions ctx/2 .. ctx - 2), so every scored token has at least ctx/2 tokens of
 * context. With --stride S (0 < S < ctx), windows of ctx tokens start every S tokens, as many as
 * llama-perplexity --ppl-stride takes (ceil((n - ctx) / S)), and each scores its last S
 * predictions. The figure is exp(mean NLL)
 * with the standard error of the mean carried through exp (llama.cpp's "PPL = x +/- y").
 *
 * --kl-base FILE alone saves the log-probabilities of every scored row (and the tokens) to FILE;
 * with --kl-divergence it reads FILE instead, checks it was made from the same tokens and
 * windows, and reports KL(base || this model) per row: mean with its standard error, quantiles,
 * the top-1 agreement, and ln(PPL / PPL(base)). */
#include "cli_dev.h"
#include "cli_dev_args.h"
#include "cli_run.h"

#include "core/alloc.h"
#include "core/file.h"
#include "core/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *CMD = "perplexity";

/* The base file (--kl-base): magic | i64 vocabulary, ctx, stride, window count, scored rows per
 * window, token count | the tokens (i32 each) | the scored rows' log-probabilities (f32, this
 * host's format) | SHA-256 of everything before it (32 bytes). A flipped bit anywhere is refused
 * before a row is compared, rather than giving a wrong table. Files of the first format (magic
 * QHXPPLB1, no checksum) cannot be checked, so they are refused with a line saying to make the
 * base again. */
#define BASE_MAGIC "QHXPPLB2"
#define BASE_MAGIC_V1 "QHXPPLB1"
#define BASE_HEADER_BYTES (8 + 6 * 8)
#define BASE_SHA_BYTES 32
#define MAX_CTX (1 << 20)

static void usage(FILE *f) {
    fprintf(f,
            "usage: qhx perplexity -m MODEL -f FILE [--ctx N] [--stride N] [--batch N] [--chunks N]\n"
            "                      [--kl-base FILE [--kl-divergence]] [--threads N] [--kv f32|f16|q8]\n"
            "  Perplexity over a text file as llama-perplexity computes it: windows of --ctx tokens,\n"
            "  each from an empty state, the loss over the second half of each window.\n"
            "  -m, --model PATH     the model (checkpoint folder, bundle or manifest)\n"
            "  -f, --file FILE      UTF-8 text (\"-\" for stdin)\n"
            "  -c, --ctx N          tokens per window (default 512)\n"
            "  --stride N           windows every N tokens, each scoring its last N predictions\n"
            "                       (llama-perplexity --ppl-stride; default 0: consecutive windows)\n"
            "  -b, --batch N        tokens per forward call while filling a window (default: ctx,\n"
            "                       at most 512)\n"
            "  --chunks N           evaluate at most the first N windows (default: all)\n"
            "  --kl-base FILE       save the scored rows' log-probabilities to FILE (the base run);\n"
            "                       with --kl-divergence, read FILE and report KL(base || model)\n"
            "  --kl-divergence      compare against --kl-base instead of writing it\n"
            "  -t, --threads N      worker threads (default 1)\n"
            "  --device D           %s\n"
            "  --kv f32|f16|q8      KV cache element type (default: the run plan's)\n", qhx_cli_device_help());
}

int qhx_perplexity_parse_args(int argc, char **argv, qhx_perplexity_args *a) {
    memset(a, 0, sizeof *a);
    a->ctx = 512;
    a->threads = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (!strcmp(o, "--kl-divergence")) {
            a->kl = true;
            continue;
        }
        if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "unknown option or missing value: '%s'", o);
        const char *v = argv[++i];
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "-f") || !strcmp(o, "--file")) a->file = v;
        else if (!strcmp(o, "--kl-base")) a->kl_base = v;
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx")) {
            if (qhx_cli_parse_i64(v, 4, MAX_CTX, &a->ctx)) return qhx_cli_usage_error(CMD, "--ctx: '%s' is not in [4, %d]", v, MAX_CTX);
        } else if (!strcmp(o, "--stride")) {
            if (qhx_cli_parse_i64(v, 0, MAX_CTX, &a->stride)) return qhx_cli_usage_error(CMD, "--stride: '%s' is not a count", v);
        } else if (!strcmp(o, "-b") || !strcmp(o, "--batch")) {
            if (qhx_cli_parse_i64(v, 1, MAX_CTX, &a->batch)) return qhx_cli_usage_error(CMD, "--batch: '%s' is not in [1, %d]", v, MAX_CTX);
        } else if (!strcmp(o, "--chunks")) {
            if (qhx_cli_parse_i64(v, 1, INT32_MAX, &a->chunks)) return qhx_cli_usage_error(CMD, "--chunks: '%s' is not a positive count", v);
        } else if (!strcmp(o, "--device")) {
            if (qhx_cli_check_device(CMD, v)) return QHX_EXIT_USAGE;
            a->device = v;
        } else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) {
            if (qhx_cli_parse_i64(v, 1, 512, &a->threads)) return qhx_cli_usage_error(CMD, "--threads: '%s' is not in [1, 512]", v);
        } else if (!strcmp(o, "--kv")) {
            if (qhx_cli_parse_kv(v, &a->kv)) return qhx_cli_usage_error(CMD, "--kv: '%s' is not f32, f16 or q8", v);
        } else
            return qhx_cli_usage_error(CMD, "unknown option '%s'", o);
    }
    if (!a->model) return qhx_cli_usage_error(CMD, "missing -m MODEL");
    if (!a->file) return qhx_cli_usage_error(CMD, "missing -f FILE");
    if (a->stride && a->stride >= a->ctx)
        return qhx_cli_usage_error(CMD, "--stride %lld must be smaller than --ctx %lld", (long long)a->stride, (long long)a->ctx);
    if (a->kl && !a->kl_base) return qhx_cli_usage_error(CMD, "--kl-divergence needs --kl-base FILE");
    if (!a->batch) a->batch = a->ctx < 512 ? a->ctx : 512;
    if (a->batch > a->ctx) a->batch = a->ctx; /* a window is all one forward pass can hold */
    return -1;
}

/* ---- windows ----------------------------------------------------------------------------- */

typedef struct ppl_plan {
    int64_t ctx, stride, n_win;
    int64_t first;  /* logits row of the first scored prediction in a window */
    int64_t scored; /* predictions scored per window */
    int64_t span;   /* tokens the windows cover, from the start of the text */
} ppl_plan;

static qhx_status plan_windows(const qhx_perplexity_args *a, int64_t n_tok, ppl_plan *p, qhx_error *err) {
    p->ctx = a->ctx;
    p->stride = a->stride;
    if (n_tok < a->ctx)
        return qhx_fail(err, QHX_E_ARG, "%s: %lld tokens, fewer than one window of --ctx %lld", a->file,
                        (long long)n_tok, (long long)a->ctx);
    if (a->stride) {
        /* llama-perplexity's count: ceil((n - ctx) / stride) windows (so more tokens than ctx) */
        if (n_tok == a->ctx)
            return qhx_fail(err, QHX_E_ARG, "%s: %lld tokens; --stride needs more than --ctx %lld", a->file,
                            (long long)n_tok, (long long)a->ctx);
        p->n_win = (n_tok - a->ctx + a->stride - 1) / a->stride;
        p->scored = a->stride;
    } else {
        p->n_win = n_tok / a->ctx;
        p->scored = a->ctx - 1 - a->ctx / 2;
    }
    if (a->chunks && p->n_win > a->chunks) p->n_win = a->chunks;
    p->first = a->ctx - 1 - p->scored;
    p->span = a->stride ? (p->n_win - 1) * a->stride + a->ctx : p->n_win * a->ctx;
    return QHX_OK;
}

static int64_t window_start(const ppl_plan *p, int64_t w) { return w * (p->stride ? p->stride : p->ctx); }

/* row (V) -> log-softmax in place (double accumulation), returns nothing */
static void log_softmax(float *row, int64_t V) {
    float mx = row[0];
    for (int64_t i = 1; i < V; i++)
        if (row[i] > mx) mx = row[i];
    double sum = 0.0;
    for (int64_t i = 0; i < V; i++) sum += exp((double)row[i] - mx);
    const double lz = mx + log(sum);
    for (int64_t i = 0; i < V; i++) row[i] = (float)((double)row[i] - lz);
}

static int64_t argmax(const float *row, int64_t V) {
    int64_t b = 0;
    for (int64_t i = 1; i < V; i++)
        if (row[i] > row[b]) b = i;
    return b;
}

/* ---- the base file ----------------------------------------------------------------------- */

static void put_i64(unsigned char *p, int64_t v) {
    for (int k = 0; k < 8; k++) p[k] = (unsigned char)((uint64_t)v >> (8 * k));
}

static int64_t get_i64(const unsigned char *p) {
    uint64_t v = 0;
    for (int k = 0; k < 8; k++) v |= (uint64_t)p[k] << (8 * k);
    return (int64_t)v;
}

static void header_fill(unsigned char *h, const ppl_plan *p, int64_t V) {
    memcpy(h, BASE_MAGIC, 8);
    put_i64(h + 8, V);
    put_i64(h + 16, p->ctx);
    put_i64(h + 24, p->stride);
    put_i64(h + 32, p->n_win);
    put_i64(h + 40, p->scored);
    put_i64(h + 48, p->span);
}

/* The base file's SHA-256 (its last 32 bytes) against its content, read once (f at byte 0 of a
 * file of size bytes; left just past the header). */
static qhx_status base_verify(FILE *f, const char *path, uint64_t size, qhx_error *err) {
    if (size < BASE_HEADER_BYTES + BASE_SHA_BYTES)
        return qhx_fail(err, QHX_E_FORMAT, "%s: %llu bytes, too short for a base file", path, (unsigned long long)size);
    const size_t chunk = (size_t)1 << 20;
    unsigned char *buf = qhx_malloc(chunk), digest[BASE_SHA_BYTES], stored[BASE_SHA_BYTES];
    if (!buf) return qhx_fail(err, QHX_E_NOMEM, "%s: out of memory", path);
    qhx_sha256 sha;
    qhx_sha256_init(&sha);
    qhx_status rc = QHX_OK;
    rewind(f);
    for (uint64_t left = size - BASE_SHA_BYTES; left && rc == QHX_OK;) {
        size_t n = left < chunk ? (size_t)left : chunk;
        if (fread(buf, 1, n, f) != n) rc = qhx_fail(err, QHX_E_IO, "%s: read failed (the file changed while read?)", path);
        qhx_sha256_update(&sha, buf, n);
        left -= n;
    }
    qhx_free(buf);
    if (rc) return rc;
    qhx_sha256_final(&sha, digest);
    if (fread(stored, 1, sizeof stored, f) != sizeof stored) return qhx_fail(err, QHX_E_IO, "%s: read failed", path);
    if (memcmp(digest, stored, sizeof digest))
        return qhx_fail(err, QHX_E_FORMAT, "%s: checksum mismatch (a corrupt or truncated base file): make it again "
                        "with --kl-base", path);
    if (fseek(f, BASE_HEADER_BYTES, SEEK_SET)) return qhx_fail(err, QHX_E_IO, "%s: cannot seek: %s", path, strerror(errno));
    return QHX_OK;
}

/* Open the base file and check that it was made with this vocabulary, these windows and these
 * tokens; it is then positioned at the first row. The size must be exactly what the header says
 * (a truncated or padded file is refused before anything is read). */
static qhx_status base_open(const char *path, const ppl_plan *p, int64_t V, const int32_t *toks, FILE **out,
                            qhx_error *err) {
    *out = NULL;
    /* non-blocking open, then the type: a FIFO or a device must not hang the command */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return qhx_fail_open(err, path, errno);
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return qhx_fail(err, QHX_E_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return qhx_fail_not_regular(err, path, st.st_mode);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return qhx_fail(err, QHX_E_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    unsigned char h[BASE_HEADER_BYTES], want[BASE_HEADER_BYTES];
    qhx_status rc = QHX_OK;
    if (fread(h, 1, sizeof h, f) != sizeof h || (memcmp(h, BASE_MAGIC, 8) && memcmp(h, BASE_MAGIC_V1, 8))) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: not a qhx perplexity base file (made by --kl-base without --kl-divergence)", path);
        goto out;
    }
    if (!memcmp(h, BASE_MAGIC_V1, 8)) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: a base file of an earlier qhexrt, without a checksum: make it again "
                      "(--kl-base without --kl-divergence)", path);
        goto out;
    }
    if ((rc = base_verify(f, path, (uint64_t)st.st_size, err))) goto out;
    header_fill(want, p, V);
    static const char *const field[6] = {"vocabulary", "ctx", "stride", "window count", "scored rows", "token count"};
    for (int k = 0; k < 6; k++)
        if (memcmp(h + 8 + 8 * k, want + 8 + 8 * k, 8)) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: its %s is %lld, this run's %lld (same text, --ctx, --stride, --chunks?)",
                          path, field[k], (long long)get_i64(h + 8 + 8 * k), (long long)get_i64(want + 8 + 8 * k));
            goto out;
        }
    /* the header matches this run, so these products are those of in-memory sizes */
    const double size = (double)BASE_HEADER_BYTES + 4.0 * (double)p->span +
                        4.0 * (double)p->n_win * (double)p->scored * (double)V + BASE_SHA_BYTES;
    if ((double)st.st_size != size) {
        rc = qhx_fail(err, QHX_E_FORMAT, "%s: %lld bytes, its header says %.0f", path, (long long)st.st_size, size);
        goto out;
    }
    for (int64_t i = 0; i < p->span; i++) {
        unsigned char b[4];
        if (fread(b, 1, 4, f) != 4) {
            rc = qhx_fail(err, QHX_E_IO, "%s: read failed", path);
            goto out;
        }
        int32_t t = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
        if (t != toks[i]) {
            rc = qhx_fail(err, QHX_E_FORMAT, "%s: token %lld is %d, this text's is %d (not the same text or tokenizer)",
                          path, (long long)i, t, toks[i]);
            goto out;
        }
    }
out:
    if (rc) fclose(f);
    else *out = f;
    return rc;
}

/* Write n bytes to the base file, into its checksum too. */
static bool base_put(FILE *f, qhx_sha256 *sha, const void *p, size_t n) {
    qhx_sha256_update(sha, p, n);
    return fwrite(p, 1, n, f) == n;
}

static qhx_status base_write_head(FILE *f, qhx_sha256 *sha, const char *path, const ppl_plan *p, int64_t V,
                                  const int32_t *toks, qhx_error *err) {
    unsigned char h[BASE_HEADER_BYTES];
    header_fill(h, p, V);
    qhx_sha256_init(sha);
    bool ok = base_put(f, sha, h, sizeof h);
    for (int64_t i = 0; ok && i < p->span; i++) {
        uint32_t t = (uint32_t)toks[i];
        unsigned char b[4] = {(unsigned char)t, (unsigned char)(t >> 8), (unsigned char)(t >> 16), (unsigned char)(t >> 24)};
        ok = base_put(f, sha, b, 4);
    }
    return ok ? QHX_OK : qhx_fail(err, QHX_E_IO, "%s: write failed: %s", path, strerror(errno));
}

/* The checksum after the last row. */
static qhx_status base_write_tail(FILE *f, qhx_sha256 *sha, const char *path, qhx_error *err) {
    unsigned char digest[BASE_SHA_BYTES];
    qhx_sha256_final(sha, digest);
    return fwrite(digest, 1, sizeof digest, f) == sizeof digest
               ? QHX_OK : qhx_fail(err, QHX_E_IO, "%s: write failed: %s", path, strerror(errno));
}

/* ---- statistics -------------------------------------------------------------------------- */

typedef struct ppl_stats {
    double nll, nll2;          /* sums over scored rows */
    int64_t count;
    double base_nll, dnll, dnll2; /* KL runs: base NLL sum, sums of (nll - base nll) and its square */
    double kl, kl2;
    int64_t same_top;
    double *kls;               /* (n_win * scored) KL values, for the quantiles */
} ppl_stats;

static double mean_err(double s, double s2, int64_t n, double *err) {
    double m = s / (double)n, var = s2 / (double)n - m * m;
    *err = n > 1 && var > 0 ? sqrt(var / (double)(n - 1)) : 0.0;
    return m;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double quantile(const double *sorted, int64_t n, double q) {
    double pos = q * (double)(n - 1);
    int64_t i = (int64_t)pos;
    if (i >= n - 1) return sorted[n - 1];
    return sorted[i] + (pos - (double)i) * (sorted[i + 1] - sorted[i]);
}

/* Score one window: rows (ctx, V) logits turned into log-probabilities in place; base rows read
 * from (or written to) the base file. */
static qhx_status score_window(float *rows, int64_t V, const int32_t *toks, const ppl_plan *p, FILE *base,
                               qhx_sha256 *sha, const char *base_path, bool kl, float *brow, ppl_stats *s,
                               qhx_error *err) {
    for (int64_t j = p->first; j < p->ctx - 1; j++) {
        float *r = rows + j * V;
        log_softmax(r, V);
        const int32_t tgt = toks[j + 1];
        const double nll = -(double)r[tgt];
        s->nll += nll;
        s->nll2 += nll * nll;
        if (base && !kl) {
            if (!base_put(base, sha, r, sizeof(float) * (size_t)V))
                return qhx_fail(err, QHX_E_IO, "%s: write failed: %s", base_path, strerror(errno));
        } else if (base) {
            if (fread(brow, sizeof(float), (size_t)V, base) != (size_t)V)
                return qhx_fail(err, QHX_E_IO, "%s: read failed", base_path);
            double d = 0.0;
            for (int64_t i = 0; i < V; i++) {
                if (!isfinite(brow[i]) || brow[i] > 1e-3f)
                    return qhx_fail(err, QHX_E_FORMAT, "%s: row %lld holds %g, not a log-probability", base_path,
                                    (long long)s->count, (double)brow[i]);
                d += exp((double)brow[i]) * ((double)brow[i] - (double)r[i]);
            }
            const double bn = -(double)brow[tgt];
            s->kls[s->count] = d;
            s->kl += d;
            s->kl2 += d * d;
            s->base_nll += bn;
            s->dnll += nll - bn;
            s->dnll2 += (nll - bn) * (nll - bn);
            s->same_top += argmax(brow, V) == argmax(r, V);
        }
        s->count++;
    }
    return QHX_OK;
}

static void progress(int64_t w, int64_t n, double ppl, double t0) {
    const int width = 30;
    int fill = (int)((double)width * (double)w / (double)n);
    double el = (double)qhx_cli_time_ns() / 1e9 - t0, eta = w ? el / (double)w * (double)(n - w) : 0.0;
    char bar[64];
    for (int k = 0; k < width; k++) bar[k] = k < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\rperplexity: [%s] %lld/%lld windows  PPL %.4f  %.0f s left ", bar, (long long)w, (long long)n,
            ppl, eta);
    if (w == n) fputc('\n', stderr);
}

static void report_kl(const ppl_stats *s, const char *base_path) {
    double e;
    const int64_t n = s->count;
    printf("KL divergence against %s (%lld rows)\n", base_path, (long long)n);
    double m = mean_err(s->dnll, s->dnll2, n, &e);
    printf("PPL(base)                 : %10.6f\n", exp(s->base_nll / (double)n));
    printf("Mean ln(PPL(Q)/PPL(base)) : %10.6f +/- %10.6f\n", m, e);
    m = mean_err(s->kl, s->kl2, n, &e);
    printf("Mean    KLD               : %10.6f +/- %10.6f\n", m, e);
    qsort(s->kls, (size_t)n, sizeof *s->kls, cmp_double);
    printf("Maximum KLD               : %10.6f\n", s->kls[n - 1]);
    printf("99.9%%   KLD               : %10.6f\n", quantile(s->kls, n, 0.999));
    printf("99.0%%   KLD               : %10.6f\n", quantile(s->kls, n, 0.99));
    printf("Median  KLD               : %10.6f\n", quantile(s->kls, n, 0.5));
    printf("Minimum KLD               : %10.6f\n", s->kls[0]);
    const double p = (double)s->same_top / (double)n;
    printf("Same top p                : %7.3f +/- %6.3f %%\n", 100.0 * p,
           n > 1 ? 100.0 * sqrt(p * (1.0 - p) / (double)(n - 1)) : 0.0);
}

/* ---- the command ------------------------------------------------------------------------- */

typedef struct ppl_run {
    qhx_model *m;
    qhx_session *s;
    int32_t *toks;
    float *rows, *brow;
    FILE *base;
    qhx_sha256 base_sha; /* of the base file being written */
    qhx_cli_out out;
    ppl_stats st;
} ppl_run;

static qhx_status run_windows(const qhx_perplexity_args *a, ppl_run *r, const ppl_plan *p, int64_t V, qhx_error *err) {
    const int tty = isatty(STDERR_FILENO);
    const double t0 = (double)qhx_cli_time_ns() / 1e9;
    printf("perplexity: %lld windows of %lld tokens (%lld scored each), batch %lld\n", (long long)p->n_win,
           (long long)p->ctx, (long long)p->scored, (long long)a->batch);
    for (int64_t w = 0; w < p->n_win; w++) {
        const int32_t *toks = r->toks + window_start(p, w);
        qhx_session_reset(r->s);
        for (int64_t off = 0; off < p->ctx; off += a->batch) {
            int64_t nb = p->ctx - off < a->batch ? p->ctx - off : a->batch;
            qhx_status rc = qhx_session_prefill(r->s, toks + off, nb, r->rows + off * V, err);
            if (rc) return rc;
        }
        qhx_status rc = score_window(r->rows, V, toks, p, r->base, &r->base_sha, a->kl_base, a->kl, r->brow, &r->st, err);
        if (rc) return rc;
        const double ppl = exp(r->st.nll / (double)r->st.count);
        if (tty) progress(w + 1, p->n_win, ppl, t0); /* a bar on a terminal, else llama's list */
        else printf("%s[%lld]%.4f", w ? "," : "", (long long)(w + 1), ppl);
    }
    if (!tty) printf("\n");
    return QHX_OK;
}

static qhx_status open_all(const qhx_perplexity_args *a, ppl_run *r, ppl_plan *p, int64_t *V, qhx_error *err) {
    char *text = NULL;
    size_t len, n_tok;
    qhx_status rc = qhx_cli_read_text(a->file, &text, &len, err);
    if (!rc) rc = qhx_text_check_utf8(strcmp(a->file, "-") ? a->file : "stdin", text, len, err);
    if (rc) {
        free(text);
        return rc;
    }
    qhx_model_params mp = qhx_model_default_params();
    mp.n_threads = (int)a->threads;
    mp.kv_cache = a->kv;
    mp.backend = a->device;
    qhx_cli_progress lp;
    qhx_cli_progress_attach(&mp, &lp);
    rc = qhx_model_open(a->model, &mp, &r->m, err);
    qhx_cli_progress_end(&lp);
    if (!rc) rc = qhx_cli_tokenize(r->m, text, &r->toks, &n_tok, err);
    free(text);
    if (rc) return rc;
    if ((rc = plan_windows(a, (int64_t)n_tok, p, err))) return rc;
    if (p->ctx > qhx_model_trained_context(r->m))
        return qhx_fail(err, QHX_E_LIMIT, "--ctx %lld is more than the model's context of %lld tokens",
                        (long long)p->ctx, (long long)qhx_model_trained_context(r->m));
    qhx_session_params sp = qhx_session_default_params(r->m);
    sp.n_ctx = p->ctx;
    sp.n_batch = a->batch;
    sp.kv_cache = a->kv;
    sp.abort_cb = qhx_run_interrupted;
    if ((rc = qhx_session_create(r->m, &sp, &r->s, err))) return rc;
    *V = qhx_session_n_vocab(r->s);
    size_t bytes;
    if (!qhx_size_mul((size_t)p->ctx, (size_t)*V * sizeof(float), &bytes) || !(r->rows = qhx_malloc(bytes)) ||
        !(r->brow = qhx_malloc((size_t)*V * sizeof(float))))
        return qhx_fail(err, QHX_E_NOMEM, "out of memory for %lld x %lld logits", (long long)p->ctx, (long long)*V);
    if (a->kl_base && a->kl) { /* checked whole before anything is printed */
        if ((rc = base_open(a->kl_base, p, *V, r->toks, &r->base, err))) return rc;
        if (!(r->st.kls = qhx_malloc((size_t)(p->n_win * p->scored) * sizeof(double))))
            return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    } else if (a->kl_base) {
        if ((rc = qhx_cli_out_open(&r->out, a->kl_base, err))) return rc;
        r->base = r->out.f;
        if ((rc = base_write_head(r->base, &r->base_sha, a->kl_base, p, *V, r->toks, err))) return rc;
    }
    printf("perplexity: %s: %zu tokens\n", a->file, n_tok);
    return QHX_OK;
}

int qhx_cmd_perplexity(int argc, char **argv) {
    qhx_perplexity_args a;
    int prc = qhx_perplexity_parse_args(argc, argv, &a);
    if (prc >= 0) return prc;
    qhx_error err = {0};
    ppl_run r;
    memset(&r, 0, sizeof r);
    ppl_plan p;
    int64_t V = 0;
    int rc = QHX_EXIT_RUNTIME;
    qhx_run_catch_sigint();
    if (open_all(&a, &r, &p, &V, &err) || run_windows(&a, &r, &p, V, &err)) goto fail;
    if (qhx_run_interrupted(NULL)) {
        qhx_fail(&err, QHX_E_ABORTED, "interrupted");
        goto fail;
    }
    if (a.kl_base && !a.kl && base_write_tail(r.base, &r.base_sha, a.kl_base, &err)) goto fail;
    double e, m = mean_err(r.st.nll, r.st.nll2, r.st.count, &e);
    const double ppl = exp(m);
    printf("Final estimate: PPL = %.4f +/- %.5f (%lld tokens scored, mean NLL %.6f)\n", ppl, e * ppl,
           (long long)r.st.count, m);
    if (a.kl_base && a.kl) report_kl(&r.st, a.kl_base);
    if (a.kl_base && !a.kl) {
        r.base = NULL;
        if (qhx_cli_out_commit(&r.out, &err)) goto fail;
        printf("perplexity: wrote the base log-probabilities to %s\n", a.kl_base);
    }
    rc = QHX_EXIT_OK;
    goto done;
fail:
    rc = qhx_cli_runtime_error(CMD, &err);
done:
    if (a.kl && r.base) fclose(r.base);
    qhx_cli_out_abort(&r.out);
    qhx_free(r.rows);
    qhx_free(r.brow);
    qhx_free(r.st.kls);
    qhx_session_free(r.s);
    qhx_model_free(r.m);
    free(r.toks);
    return rc;
}
