/* vl_cli: `qhx logits` and `qhx generate` for Qwen3-VL checkpoints, text alone or with one
 * image whose image-pad tokens are already expanded in the ids. */
#include "vl_cli.h"

#include "core/alloc.h"
#include "core/file.h"
#include "models/qwen3vl.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IDS_MAX_FILE ((size_t)64 << 20)
#define IDS_MAX ((int64_t)1 << 22)

int qhx_cli_parse_ids(const char *arg, int32_t **out, int64_t *n, char *msg, size_t msg_size) {
    *out = NULL;
    *n = 0;
    char *text = NULL;
    const char *s = arg;
    if (arg[0] == '@') {
        size_t len;
        qhx_error err;
        if (qhx_file_read_all(arg + 1, IDS_MAX_FILE, &text, &len, &err)) {
            snprintf(msg, msg_size, "%s", err.msg);
            return -1;
        }
        s = text;
    }
    int64_t cap = 64, cnt = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    int rc = -1;
    if (!ids) { snprintf(msg, msg_size, "out of memory"); goto done; }
    const char *p = s;
    for (;;) {
        while (*p && (isspace((unsigned char)*p) || *p == ',' || *p == '[' || *p == ']')) p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            snprintf(msg, msg_size, "--ids: bad token id near '%.20s'", p);
            goto done;
        }
        if (cnt == cap) {
            if (cap >= IDS_MAX) { snprintf(msg, msg_size, "--ids: more than %lld ids", (long long)IDS_MAX); goto done; }
            cap *= 2;
            int32_t *ni = realloc(ids, (size_t)cap * sizeof *ids);
            if (!ni) { snprintf(msg, msg_size, "out of memory"); goto done; }
            ids = ni;
        }
        ids[cnt++] = (int32_t)v;
        p = end;
    }
    if (!cnt) { snprintf(msg, msg_size, "--ids: no token ids"); goto done; }
    *out = ids;
    *n = cnt;
    ids = NULL;
    rc = 0;
done:
    free(ids);
    free(text);
    return rc;
}

int qhx_cli_is_qwen3vl(const char *model_dir) {
    char *p = qhx_path_join(model_dir, "config.json");
    int ok = p && qhx_qwen3vl_config_matches(p);
    qhx_free(p);
    return ok;
}

/* ---- shared option parsing --------------------------------------------------------------- */

typedef struct vl_opts {
    const char *model, *ids, *image, *out;
    int64_t prefill, n_predict, n_ctx;
    int greedy, ignore_eos, print_ids, help;
} vl_opts;

static int parse_opts(const char *cmd, int argc, char **argv, vl_opts *o) {
    memset(o, 0, sizeof *o);
    o->prefill = -1;
    o->n_predict = 32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { o->help = 1; return 0; }
        if (!strcmp(a, "--greedy")) { o->greedy = 1; continue; }
        if (!strcmp(a, "--ignore-eos")) { o->ignore_eos = 1; continue; }
        if (!strcmp(a, "--print-ids")) { o->print_ids = 1; continue; }
        if (i + 1 >= argc) return qhx_cli_usage_error(cmd, "missing value for %s", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--ids")) o->ids = v;
        else if (!strcmp(a, "--image")) o->image = v;
        else if (!strcmp(a, "--out") || !strcmp(a, "-o")) o->out = v;
        else if (!strcmp(a, "--prefill")) {
            if (qhx_cli_parse_i64(v, 1, IDS_MAX, &o->prefill)) return qhx_cli_usage_error(cmd, "--prefill: expected a positive count, got '%s'", v);
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (qhx_cli_parse_i64(v, 0, 1 << 20, &o->n_predict)) return qhx_cli_usage_error(cmd, "-n: expected a count, got '%s'", v);
        } else if (!strcmp(a, "--ctx") || !strcmp(a, "--n-ctx")) {
            if (qhx_cli_parse_i64(v, 1, 1 << 20, &o->n_ctx)) return qhx_cli_usage_error(cmd, "--ctx: expected a positive count, got '%s'", v);
        } else if (!strcmp(a, "--threads") || !strcmp(a, "-t") || !strcmp(a, "--isa")) {
            /* accepted for compatibility with the other families; this path is single-threaded */
        } else return qhx_cli_usage_error(cmd, "unknown option '%s'", a);
    }
    if (!o->model || !o->ids) return qhx_cli_usage_error(cmd, "-m MODEL and --ids are required");
    return 0;
}

/* Everything a run holds; freed by run_close. */
typedef struct vl_run {
    qhx_qwen3vl *m;
    qhx_vl_image im;
    qhx_vl_plan plan;
    qhx_vl_state *s;
    int32_t *ids;
    int64_t n;
} vl_run;

static void run_close(vl_run *r) {
    qhx_vl_state_free(r->s);
    qhx_vl_plan_deinit(&r->plan);
    qhx_vl_image_deinit(&r->im);
    qhx_qwen3vl_free(r->m);
    free(r->ids);
}

static int run_open(const char *cmd, const vl_opts *o, int64_t extra, vl_run *r, qhx_error *err) {
    memset(r, 0, sizeof *r);
    char msg[256];
    if (qhx_cli_parse_ids(o->ids, &r->ids, &r->n, msg, sizeof msg)) return qhx_cli_usage_error(cmd, "%s", msg);
    if (qhx_qwen3vl_open(o->model, &r->m, err)) return qhx_cli_runtime_error(cmd, err);
    if (o->image && qhx_qwen3vl_image_load(r->m, o->image, &r->im, err)) return qhx_cli_runtime_error(cmd, err);
    if (qhx_qwen3vl_plan(r->m, r->ids, r->n, o->image ? &r->im : NULL, &r->plan, err)) return qhx_cli_runtime_error(cmd, err);
    int64_t n_ctx = o->n_ctx ? o->n_ctx : r->n + extra;
    if (n_ctx < r->n + extra) {
        qhx_fail(err, QHX_E_LIMIT, "--ctx %lld is below the %lld tokens this run needs", (long long)n_ctx,
                 (long long)(r->n + extra));
        return qhx_cli_runtime_error(cmd, err);
    }
    if (qhx_vl_state_create(r->m, n_ctx, &r->s, err)) return qhx_cli_runtime_error(cmd, err);
    return 0;
}

/* ---- logits -------------------------------------------------------------------------------- */

int qhx_vl_cmd_logits(int argc, char **argv) {
    const char *cmd = "logits";
    vl_opts o;
    int rc = parse_opts(cmd, argc, argv, &o);
    if (rc) return rc;
    if (o.help) {
        printf("usage: qhx logits -m MODEL --ids IDS [--prefill N] [--image FILE] --out FILE\n"
               "  --ids IDS       token ids: \"1,2,3\", \"[1, 2, 3]\" or @FILE; with --image they hold\n"
               "                  <|vision_start|>, one image-pad id per image token, <|vision_end|>\n"
               "  --prefill N     run the first N ids as one batch, then the rest one at a time\n"
               "                  (default: all ids in one batch)\n"
               "  --image FILE    PNG or JPEG for the image-pad positions\n"
               "  --out FILE      float32 [n_ids, vocab]: the logits after every position\n");
        return QHX_EXIT_OK;
    }
    if (!o.out) return qhx_cli_usage_error(cmd, "--out FILE is required");
    qhx_error err = {0};
    vl_run r;
    if ((rc = run_open(cmd, &o, 0, &r, &err))) { run_close(&r); return rc; }
    int64_t V = r.m->cfg.vocab_size;
    int64_t pre = o.prefill > 0 && o.prefill < r.n ? o.prefill : r.n;
    float *logits = malloc((size_t)(r.n * V) * sizeof(float));
    if (!logits) { fprintf(stderr, "qhx %s: out of memory\n", cmd); run_close(&r); return QHX_EXIT_RUNTIME; }
    qhx_status st = qhx_qwen3vl_eval(r.m, r.s, r.ids, pre, &r.plan, 0, logits, QHX_VL_LOGITS_ALL, NULL, &err);
    for (int64_t t = pre; !st && t < r.n; t++)
        st = qhx_qwen3vl_eval(r.m, r.s, r.ids + t, 1, &r.plan, t, logits + t * V, QHX_VL_LOGITS_ALL, NULL, &err);
    if (st) {
        free(logits);
        run_close(&r);
        return qhx_cli_runtime_error(cmd, &err);
    }
    FILE *f = fopen(o.out, "wb");
    size_t cnt = (size_t)(r.n * V);
    int ok = f && fwrite(logits, sizeof(float), cnt, f) == cnt;
    if (f && fclose(f)) ok = 0;
    free(logits);
    run_close(&r);
    if (!ok) {
        fprintf(stderr, "qhx %s: cannot write %s\n", cmd, o.out);
        return QHX_EXIT_RUNTIME;
    }
    return QHX_EXIT_OK;
}

/* ---- generate ------------------------------------------------------------------------------ */

static int32_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i; /* strict: ties keep the lowest index */
    return (int32_t)best;
}

int qhx_vl_cmd_generate(int argc, char **argv) {
    const char *cmd = "generate";
    vl_opts o;
    int rc = parse_opts(cmd, argc, argv, &o);
    if (rc) return rc;
    if (o.help) {
        printf("usage: qhx generate -m MODEL --ids IDS [--image FILE] [-n N] [--greedy] [--ignore-eos] [--print-ids]\n"
               "  --ids IDS       prompt ids: \"1,2,3\", \"[1, 2, 3]\" or @FILE (image-pad ids expanded)\n"
               "  --image FILE    PNG or JPEG for the image-pad positions\n"
               "  -n N            tokens to generate (default 32)\n"
               "  --greedy        argmax decoding (the only mode of this path)\n"
               "  --ignore-eos    do not stop at the end-of-sequence id\n"
               "  --print-ids     print the generated ids, space-separated, on one line\n");
        return QHX_EXIT_OK;
    }
    qhx_error err = {0};
    vl_run r;
    if ((rc = run_open(cmd, &o, o.n_predict, &r, &err))) { run_close(&r); return rc; }
    int64_t V = r.m->cfg.vocab_size;
    float *logits = malloc((size_t)V * sizeof(float));
    if (!logits) { fprintf(stderr, "qhx %s: out of memory\n", cmd); run_close(&r); return QHX_EXIT_RUNTIME; }
    qhx_status st = qhx_qwen3vl_eval(r.m, r.s, r.ids, r.n, &r.plan, 0, logits, QHX_VL_LOGITS_LAST, NULL, &err);
    int64_t produced = 0;
    for (; !st && produced < o.n_predict; produced++) {
        int32_t tok = argmax(logits, V);
        printf(produced ? " %d" : "%d", tok);
        fflush(stdout);
        if (!o.ignore_eos && tok == r.m->cfg.eos_token_id) { produced++; break; }
        if (produced + 1 < o.n_predict)
            st = qhx_qwen3vl_eval(r.m, r.s, &tok, 1, NULL, 0, logits, QHX_VL_LOGITS_LAST, NULL, &err);
    }
    if (produced) printf("\n");
    free(logits);
    run_close(&r);
    if (st) return qhx_cli_runtime_error(cmd, &err);
    return QHX_EXIT_OK;
}
