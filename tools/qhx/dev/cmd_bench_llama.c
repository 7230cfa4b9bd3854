/* qhx bench in llama-bench's spelling: -p, -n, -t (comma lists), -r and -o md|json|csv.
 *   qhx bench -m MODEL [-p 512] [-n 128] [-t 4,8] [-r 5] [-o md|json|csv] [--device D]
 * One test per prompt size ("pp512": that many tokens prefilled into an empty session) and per
 * generation size ("tg128": that many tokens decoded one by one after a one-token context), for
 * each thread count; each test runs once untimed (warm-up, as llama-bench does), then -r times.
 * t/s is the mean of the runs' tokens per second, ± their sample standard deviation.
 * Token ids are pseudo-random (fixed seed): speed does not depend on them. The JSON and CSV
 * carry the fields of llama-bench's that mean something here, under its names. */
#include "cli_dev.h"

#include "core/dtype.h"
#include "core/pool.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "runtime/model.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CMD "bench"
#define MAX_LIST 16
#define MAX_REPS 1000

typedef struct int_list {
    int64_t v[MAX_LIST];
    int n;
} int_list;

typedef enum { OUT_MD, OUT_JSON, OUT_CSV } out_format;

typedef struct llama_args {
    const char *model, *device;
    int_list pp, tg, threads;
    int64_t reps;
    out_format out;
} llama_args;

/* One finished test: what llama-bench prints per row. */
typedef struct test_result {
    int64_t n_prompt, n_gen, threads;
    double avg_ns, stddev_ns, avg_ts, stddev_ts;
    double *samples_ns; /* reps of them (owned) */
    char time[32];      /* ISO 8601, UTC: when the test began */
} test_result;

typedef struct model_facts {
    char type[96];      /* "qwen3_5 4.27M f32" */
    double size_bytes, n_params;
    char backend[16];    /* llama-bench's column: the device's kind in capitals, "CPU" */
} model_facts;

static const char *const LLAMA_OPTS[] = {"-p", "--n-prompt", "-n", "--n-gen", "-t", "-r", "--repetitions", "-o", "--output"};

int qhx_bench_is_llama(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        for (size_t k = 0; k < sizeof LLAMA_OPTS / sizeof LLAMA_OPTS[0]; k++)
            if (!strcmp(argv[i], LLAMA_OPTS[k])) return 1;
    return 0;
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* "512" or "128,256,512": counts in [lo, hi], at most MAX_LIST. */
static int parse_list(const char *opt, const char *v, int64_t lo, int64_t hi, int_list *out) {
    char buf[256];
    if (!*v || strlen(v) >= sizeof buf) return qhx_cli_usage_error(CMD, "%s: '%s' is not a list like 128,256", opt, v);
    snprintf(buf, sizeof buf, "%s", v);
    out->n = 0;
    char *save = NULL;
    for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (out->n == MAX_LIST) return qhx_cli_usage_error(CMD, "%s: more than %d values", opt, MAX_LIST);
        if (qhx_cli_parse_i64(p, lo, hi, &out->v[out->n]))
            return qhx_cli_usage_error(CMD, "%s: '%s' is not a count in [%lld, %lld]", opt, p, (long long)lo, (long long)hi);
        out->n++;
    }
    if (!out->n || v[strlen(v) - 1] == ',' || v[0] == ',' || strstr(v, ",,"))
        return qhx_cli_usage_error(CMD, "%s: '%s' is not a list like 128,256", opt, v);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: qhx bench -m MODEL [-p LIST] [-n LIST] [-t LIST] [-r N] [-o md|json|csv] [--device D]\n"
               "  llama-bench's options (any of -p, -n, -t, -r, -o chooses this form):\n"
               "  -p, --n-prompt LIST   prompt sizes, e.g. 128,512 (default 512; 0: none)\n"
               "  -n, --n-gen LIST      generated tokens, e.g. 32,128 (default 128; 0: none)\n"
               "  -t, --threads LIST    thread counts (default: one per physical core)\n"
               "  -r, --repetitions N   timed runs per test after one warm-up (default 5)\n"
               "  -o, --output FORMAT   md (a table, default), json (an array) or csv\n"
               "  --device D            %s\n", qhx_cli_device_help());
}

static int parse_args(int argc, char **argv, llama_args *a) {
    memset(a, 0, sizeof *a);
    a->pp = (int_list){{512}, 1};
    a->tg = (int_list){{128}, 1};
    a->threads = (int_list){{0}, 1};
    a->reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        }
        if (i + 1 >= argc) return qhx_cli_usage_error(CMD, "'%s': unknown, or it needs a value", o);
        const char *v = argv[++i];
        int rc = 0;
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "-p") || !strcmp(o, "--n-prompt")) rc = parse_list(o, v, 0, 1 << 20, &a->pp);
        else if (!strcmp(o, "-n") || !strcmp(o, "--n-gen")) rc = parse_list(o, v, 0, 1 << 20, &a->tg);
        else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) rc = parse_list(o, v, 1, QHX_POOL_MAX_THREADS, &a->threads);
        else if (!strcmp(o, "-r") || !strcmp(o, "--repetitions")) {
            if (qhx_cli_parse_i64(v, 1, MAX_REPS, &a->reps))
                return qhx_cli_usage_error(CMD, "%s: '%s' is not in [1, %d]", o, v, MAX_REPS);
        } else if (!strcmp(o, "-o") || !strcmp(o, "--output")) {
            if (!strcmp(v, "md")) a->out = OUT_MD;
            else if (!strcmp(v, "json")) a->out = OUT_JSON;
            else if (!strcmp(v, "csv")) a->out = OUT_CSV;
            else return qhx_cli_usage_error(CMD, "%s: '%s' is not md, json or csv", o, v);
        } else if (!strcmp(o, "--device")) {
            if (qhx_cli_check_device(CMD, v)) return QHX_EXIT_USAGE;
            a->device = v;
        } else return qhx_cli_usage_error(CMD, "'%s' is not an option of the llama-bench form (qhx bench -m M --help)", o);
        if (rc) return rc;
    }
    if (!a->model) return qhx_cli_usage_error(CMD, "-m MODEL is required");
    int any = 0;
    for (int k = 0; k < a->pp.n; k++) any |= a->pp.v[k] > 0;
    for (int k = 0; k < a->tg.n; k++) any |= a->tg.v[k] > 0;
    if (!any) return qhx_cli_usage_error(CMD, "-p and -n are all 0: no test to run");
    return -1;
}

/* The kind of --device (its name before ':', cpu by default) in capitals. */
static void bench_backend_name(const char *device, char *out, size_t size) {
    const char *d = device ? device : "cpu";
    size_t i = 0;
    for (; d[i] && d[i] != ':' && i + 1 < size; i++) out[i] = (char)toupper((unsigned char)d[i]);
    out[i] = 0;
}

static void model_facts_of(const qhx_model *m, const char *device, model_facts *f) {
    const qhx_st_set *set = qhx_model_tensors(m);
    f->size_bytes = f->n_params = 0;
    const char *dtype = "?";
    for (int64_t i = 0; set && i < qhx_st_n_tensors(set); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        f->size_bytes += (double)t->size;
        f->n_params += (double)t->n_elements;
        if (strstr(t->name, "embed_tokens")) dtype = qhx_dtype_name(t->dtype);
    }
    const double p = f->n_params;
    char params[32];
    if (p >= 1e9) snprintf(params, sizeof params, "%.2fB", p / 1e9);
    else if (p >= 1e6) snprintf(params, sizeof params, "%.2fM", p / 1e6);
    else snprintf(params, sizeof params, "%.0fK", p / 1e3);
    snprintf(f->type, sizeof f->type, "%s %s %s", qhx_model_family_name(m), params, dtype);
    bench_backend_name(device, f->backend, sizeof f->backend);
}

static void mean_sd(const double *x, int64_t n, double *mean, double *sd) {
    double s = 0, q = 0;
    for (int64_t k = 0; k < n; k++) s += x[k];
    *mean = s / (double)n;
    for (int64_t k = 0; k < n; k++) q += (x[k] - *mean) * (x[k] - *mean);
    *sd = n > 1 ? sqrt(q / (double)(n - 1)) : 0.0;
}

/* One run of a test in a fresh session state: its time in ns, or < 0 on failure. */
static double run_once(qhx_session *s, const int32_t *ids, int64_t pp, int64_t tg, qhx_error *err) {
    qhx_session_reset(s);
    double t;
    if (pp > 0) {
        t = now_ns();
        if (qhx_session_prefill(s, ids, pp, NULL, err)) return -1;
        return now_ns() - t;
    }
    if (qhx_session_prefill(s, ids, 1, NULL, err)) return -1; /* the one-token context tg starts from */
    t = now_ns();
    for (int64_t k = 0; k < tg; k++)
        if (qhx_session_decode(s, ids[1 + k], err)) return -1;
    return now_ns() - t;
}

static int run_test(qhx_session *s, const int32_t *ids, int64_t pp, int64_t tg, int64_t threads, int64_t reps,
                    test_result *r, qhx_error *err) {
    memset(r, 0, sizeof *r);
    r->n_prompt = pp, r->n_gen = tg, r->threads = threads;
    time_t now = time(NULL);
    strftime(r->time, sizeof r->time, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    if (!(r->samples_ns = calloc((size_t)reps, sizeof *r->samples_ns))) return qhx_cli_fail(err, QHX_E_NOMEM, "out of memory");
    if (run_once(s, ids, pp, tg, err) < 0) return err->code; /* warm-up */
    double *ts = calloc((size_t)reps, sizeof *ts);
    if (!ts) return qhx_cli_fail(err, QHX_E_NOMEM, "out of memory");
    for (int64_t k = 0; k < reps; k++) {
        double ns = run_once(s, ids, pp, tg, err);
        if (ns < 0) {
            free(ts);
            return err->code;
        }
        r->samples_ns[k] = ns;
        ts[k] = (double)(pp + tg) / (ns / 1e9);
    }
    mean_sd(r->samples_ns, reps, &r->avg_ns, &r->stddev_ns);
    mean_sd(ts, reps, &r->avg_ts, &r->stddev_ts);
    free(ts);
    return QHX_OK;
}

static void print_md_head(void) {
    printf("| %-30s | %10s | %10s | %-10s | %7s | %13s | %20s |\n", "model", "size", "params", "backend", "threads", "test",
           "t/s");
    printf("| ------------------------------ | ---------: | ---------: | ---------- | ------: | ------------: | "
           "-------------------: |\n");
}

static void print_md_row(const model_facts *f, const test_result *r) {
    char size[32], params[32], test[32], ts[48];
    snprintf(size, sizeof size, f->size_bytes >= 1 << 30 ? "%.2f GiB" : "%.2f MiB",
             f->size_bytes / (f->size_bytes >= 1 << 30 ? (double)(1 << 30) : (double)(1 << 20)));
    if (f->n_params >= 1e9) snprintf(params, sizeof params, "%.2f B", f->n_params / 1e9);
    else snprintf(params, sizeof params, "%.2f M", f->n_params / 1e6);
    snprintf(test, sizeof test, r->n_prompt ? "pp%lld" : "tg%lld", (long long)(r->n_prompt ? r->n_prompt : r->n_gen));
    snprintf(ts, sizeof ts, "%.2f ± %.2f", r->avg_ts, r->stddev_ts);
    /* "±" is two bytes: widen the field by one so the column lines up on a terminal */
    printf("| %-30s | %10s | %10s | %-10s | %7lld | %13s | %21s |\n", f->type, size, params, f->backend,
           (long long)r->threads, test, ts);
}

static const char CSV_HEAD[] = "model_filename,model_type,model_size,model_n_params,backends,n_threads,use_mmap,"
                               "n_prompt,n_gen,test_time,avg_ns,stddev_ns,avg_ts,stddev_ts";

/* A CSV or JSON string field: the model path may hold quotes or backslashes. */
static void put_quoted(const char *s, int json) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"') fputs(json ? "\\\"" : "\"\"", stdout);
        else if (json && *s == '\\') fputs("\\\\", stdout);
        else if (json && (unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    putchar('"');
}

static void print_csv_row(const llama_args *a, const model_facts *f, const test_result *r) {
    put_quoted(a->model, 0);
    putchar(',');
    put_quoted(f->type, 0);
    printf(",%.0f,%.0f,\"%s\",%lld,0,%lld,%lld,\"%s\",%.0f,%.0f,%.6f,%.6f\n", f->size_bytes, f->n_params, f->backend,
           (long long)r->threads, (long long)r->n_prompt, (long long)r->n_gen, r->time, r->avg_ns, r->stddev_ns,
           r->avg_ts, r->stddev_ts);
}

static void print_json_row(const llama_args *a, const model_facts *f, const test_result *r, int reps, int first) {
    printf("%s  {\n    \"model_filename\": ", first ? "" : ",\n");
    put_quoted(a->model, 1);
    printf(",\n    \"model_type\": ");
    put_quoted(f->type, 1);
    printf(",\n    \"model_size\": %.0f,\n    \"model_n_params\": %.0f,\n    \"backends\": \"%s\",\n"
           "    \"n_threads\": %lld,\n    \"use_mmap\": false,\n    \"n_prompt\": %lld,\n    \"n_gen\": %lld,\n"
           "    \"test_time\": \"%s\",\n    \"avg_ns\": %.0f,\n    \"stddev_ns\": %.0f,\n    \"avg_ts\": %.6f,\n"
           "    \"stddev_ts\": %.6f,\n    \"samples_ns\": [",
           f->size_bytes, f->n_params, f->backend, (long long)r->threads, (long long)r->n_prompt, (long long)r->n_gen,
           r->time, r->avg_ns, r->stddev_ns, r->avg_ts, r->stddev_ts);
    for (int k = 0; k < reps; k++) printf("%s%.0f", k ? ", " : "", r->samples_ns[k]);
    printf("],\n    \"samples_ts\": [");
    for (int k = 0; k < reps; k++)
        printf("%s%.6f", k ? ", " : "", (double)(r->n_prompt + r->n_gen) / (r->samples_ns[k] / 1e9));
    printf("]\n  }");
}

static int64_t list_max(const int_list *l) {
    int64_t m = 0;
    for (int k = 0; k < l->n; k++) m = l->v[k] > m ? l->v[k] : m;
    return m;
}

int qhx_bench_llama(int argc, char **argv) {
    llama_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    const int64_t n_ctx = (list_max(&a.pp) > list_max(&a.tg) + 1 ? list_max(&a.pp) : list_max(&a.tg) + 1) + 1;
    int32_t *ids = malloc((size_t)n_ctx * sizeof *ids);
    if (!ids) return qhx_cli_usage_error(CMD, "out of memory for %lld ids", (long long)n_ctx);
    qhx_error err = {0};
    int first = 1;
    rc = QHX_EXIT_OK;
    if (a.out == OUT_JSON) printf("[\n");
    if (a.out == OUT_CSV) printf("%s\n", CSV_HEAD);
    for (int ti = 0; ti < a.threads.n && rc == QHX_EXIT_OK; ti++) {
        qhx_model_params mp = qhx_model_default_params();
        mp.n_threads = (int)a.threads.v[ti];
        mp.backend = a.device;
        mp.max_context = n_ctx;
        qhx_model *m = NULL;
        qhx_session *s = NULL;
        if (qhx_model_open(a.model, &mp, &m, &err)) {
            rc = qhx_cli_runtime_error(CMD, &err);
            break;
        }
        model_facts f;
        model_facts_of(m, a.device, &f);
        qhx_backend_info bi;
        qhx_model_backend_info(m, &bi);
        qhx_rng rng;
        qhx_rng_seed(&rng, 1234);
        const int64_t V = qhx_model_n_vocab(m);
        for (int64_t i = 0; i < n_ctx; i++) ids[i] = (int32_t)qhx_rng_below(&rng, (uint64_t)(V < 150000 ? V : 150000));
        qhx_session_params sp = qhx_session_default_params(m);
        sp.n_ctx = n_ctx;
        if (qhx_session_create(m, &sp, &s, &err)) rc = qhx_cli_runtime_error(CMD, &err);
        if (a.out == OUT_MD && ti == 0 && rc == QHX_EXIT_OK) print_md_head();
        for (int pass = 0; pass < 2 && rc == QHX_EXIT_OK; pass++) { /* the pp tests, then the tg tests */
            const int_list *l = pass ? &a.tg : &a.pp;
            for (int k = 0; k < l->n && rc == QHX_EXIT_OK; k++) {
                if (!l->v[k]) continue;
                test_result r;
                if (run_test(s, ids, pass ? 0 : l->v[k], pass ? l->v[k] : 0, bi.n_threads, a.reps, &r, &err))
                    rc = qhx_cli_runtime_error(CMD, &err);
                else if (a.out == OUT_MD) print_md_row(&f, &r);
                else if (a.out == OUT_CSV) print_csv_row(&a, &f, &r);
                else print_json_row(&a, &f, &r, (int)a.reps, first);
                first = 0;
                free(r.samples_ns);
                fflush(stdout);
            }
        }
        qhx_session_free(s);
        qhx_model_free(m);
    }
    if (a.out == OUT_JSON) printf("\n]\n");
    free(ids);
    return rc;
}
