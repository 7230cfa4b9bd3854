/* qhx bench -m MODEL: load time, prefill and decode throughput of a model, with the machine's
 * streaming read bandwidth measured in the same run, so decode can be put against its
 * bandwidth roofline (weight bytes read per token / bandwidth).
 *
 * Per repetition: open the model (timed: load), prefill --pp tokens through the chunked prompt
 * path from an empty session (timed: prefill), fill the context up to --ctx tokens (default:
 * the prompt), then decode --tg tokens one at a time (timed: decode). Figures are medians over
 * the repetitions. Token ids are pseudo-random (fixed seed): speed does not depend on them. */
#include "cli_dev.h"

#include "core/alloc.h"
#include "core/pool.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "runtime/model.h"
#include "runtime/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#define CMD "bench"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* CPU seconds the process has used (all threads, user + system). */
static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- streaming read bandwidth -------------------------------------------------------------- */

#define BW_BYTES ((size_t)1 << 30) /* 1 GiB per pass */
#define BW_PIECE ((size_t)16 << 20)

typedef struct bw_job {
    const uint8_t *buf;
    qhx_kernels k;                       /* read_fold: the best streaming read the CPU has */
    uint64_t sink[QHX_POOL_MAX_THREADS]; /* keeps the loads */
} bw_job;

static void bw_task(void *ctx, int64_t task, int ti) {
    bw_job *j = ctx;
    j->sink[ti] ^= j->k.read_fold(j->buf + (size_t)task * BW_PIECE, BW_PIECE);
}

/* The best of `passes` streaming reads of 1 GiB by every thread of the pool, in GB/s (1e9). */
static double measure_bandwidth(qhx_pool *pool, int passes) {
    uint8_t *buf = mmap(NULL, BW_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) return 0.0;
#ifdef MADV_HUGEPAGE
    madvise(buf, BW_BYTES, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < BW_BYTES; i += 4096) buf[i] = (uint8_t)i; /* fault every page in */
    bw_job *j = qhx_aligned_alloc(sizeof *j);
    double best = 0.0;
    if (j) {
        memset(j, 0, sizeof *j);
        j->buf = buf;
        qhx_kern_select(QHX_ISA_BEST, &j->k);
        for (int p = 0; p < passes; p++) {
            double t = now_ms();
            qhx_pool_run(pool, bw_task, j, (int64_t)(BW_BYTES / BW_PIECE));
            t = now_ms() - t;
            double gbs = (double)BW_BYTES / (t * 1e6);
            if (gbs > best) best = gbs;
        }
        uint64_t x = 0; /* keep the loads */
        for (int i = 0; i < QHX_POOL_MAX_THREADS; i++) x ^= j->sink[i];
        if (x == 0x5a5a5a5a5a5a5a5aull) fprintf(stderr, " ");
        qhx_aligned_free(j);
    }
    munmap(buf, BW_BYTES);
    return best;
}

/* ---- what a decode step reads ---------------------------------------------------------------- */

static int starts_with(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* Bytes of the tensors a decode step streams: every decoder tensor and the lm-head (the
 * embedding when the head is tied); not the embedding lookup, the vision tower or MTP. */
static double decode_bytes(const qhx_model *m) {
    const qhx_st_set *set = qhx_model_tensors(m);
    if (!set) return 0.0;
    int tied = !qhx_st_find(set, "lm_head.weight");
    double total = 0.0;
    for (int64_t i = 0; i < qhx_st_n_tensors(set); i++) {
        const qhx_st_tensor *t = qhx_st_tensor_at(set, i);
        if (starts_with(t->name, "mtp.") || strstr(t->name, "visual.")) continue;
        if (strstr(t->name, "embed_tokens") && !tied) continue;
        total += (double)t->size;
    }
    return total;
}

/* ---- the vision encoder ---------------------------------------------------------------------- */

/* Time one image through qhx_model_image_load: file decode, preprocessing and the vision tower,
 * as a chat turn with that image pays it before its prompt. */
static qhx_status bench_image(const qhx_model *m, const char *path, double *ms, int64_t *tokens, int64_t *gh,
                              int64_t *gw, qhx_error *err) {
    if (!qhx_model_takes_images(m))
        return qhx_fail(err, QHX_E_UNSUPPORTED, "--image: the run plan of this %s model takes no images (host-op %s)",
                        qhx_model_family_title(m), qhx_model_host_op(m));
    qhx_image_embed im = {0};
    double t = now_ms();
    qhx_status st = qhx_model_image_load(m, path, 0, &im, err);
    *ms = now_ms() - t;
    *tokens = im.n_tokens;
    *gh = im.grid_h;
    *gw = im.grid_w;
    qhx_image_embed_deinit(&im);
    return st;
}

/* ---- the benchmark ------------------------------------------------------------------------- */

/* ---- the per-op profile of the decode step (--profile) ------------------------------------- */

static void add_profile(qhx_op_profile *sum, const qhx_op_profile *p) {
    for (int i = 0; i < QHX_PROF_COUNT; i++)
        sum->calls[i] += p->calls[i], sum->ns[i] += p->ns[i], sum->weight_bytes[i] += p->weight_bytes[i];
    for (int f = 0; f < QHX_W_COUNT; f++)
        sum->fmt_calls[f] += p->fmt_calls[f], sum->fmt_ns[f] += p->fmt_ns[f], sum->fmt_bytes[f] += p->fmt_bytes[f];
}

static const char *const FMT_NAMES[QHX_W_COUNT] = {"f32", "f16", "bf16", "w8", "q4", "q6", "q4a", "ggml"};

/* Per token: each op's calls and time, its share of the step, and for the linear ops the weight
 * bytes it streamed per second against the probe's bandwidth (what the op would take at the
 * probe's speed); what the ops do not cover is the host's part of the step. */
static void print_profile(const qhx_op_profile *p, double step_ms, int64_t tokens, double bw_gbs) {
    const double per = 1.0 / (double)tokens, step = step_ms * per;
    double ops_ms = 0.0, lin_ms = 0.0, lin_floor = 0.0;
    printf("  decode step (%lld over the reps), each: %.3f ms\n", (long long)tokens, step);
    printf("    %-14s %8s %10s %7s %10s%s\n", "op", "calls", "ms", "step %", "weight GB/s", bw_gbs > 0 ? " at probe ms" : "");
    for (int i = 0; i < QHX_PROF_COUNT; i++) {
        if (!p->calls[i]) continue;
        const double ms = (double)p->ns[i] / 1e6 * per, gb = (double)p->weight_bytes[i] * per / 1e9;
        ops_ms += ms;
        if (p->weight_bytes[i]) {
            lin_ms += ms;
            lin_floor += bw_gbs > 0 ? gb / bw_gbs * 1e3 : 0.0;
            printf("    %-14s %8.1f %10.3f %7.1f %10.2f", qhx_prof_op_name((qhx_prof_op)i), (double)p->calls[i] * per,
                   ms, 100.0 * ms / step, ms > 0 ? gb / (ms / 1e3) : 0.0);
            if (bw_gbs > 0) printf(" %10.3f", gb / bw_gbs * 1e3);
            printf("\n");
        } else {
            printf("    %-14s %8.1f %10.3f %7.1f\n", qhx_prof_op_name((qhx_prof_op)i), (double)p->calls[i] * per, ms,
                   100.0 * ms / step);
        }
    }
    printf("    %-14s %8s %10.3f %7.1f   (sampling, logits, the session's bookkeeping)\n", "outside ops", "",
           step - ops_ms, 100.0 * (step - ops_ms) / step);
    printf("  the linear ops by weight format (a call over several weights counts as its first one's):\n");
    for (int f = 0; f < QHX_W_COUNT; f++) {
        if (!p->fmt_calls[f]) continue;
        const double ms = (double)p->fmt_ns[f] / 1e6 * per, gb = (double)p->fmt_bytes[f] * per / 1e9;
        printf("    %-14s %8.1f %10.3f %7.1f %10.2f", FMT_NAMES[f], (double)p->fmt_calls[f] * per, ms, 100.0 * ms / step,
               ms > 0 ? gb / (ms / 1e3) : 0.0);
        if (bw_gbs > 0) printf(" %10.3f", gb / bw_gbs * 1e3);
        printf("\n");
    }
    if (bw_gbs > 0 && lin_ms > 0)
        printf("  linear ops: %.3f ms per token, %.3f ms of it the weights' bytes at the probe's %.2f GB/s (%.0f %%); "
               "the rest is arithmetic and dispatch\n",
               lin_ms, lin_floor, bw_gbs, 100.0 * lin_floor / lin_ms);
}

static void print_profile_json(const qhx_op_profile *p, double step_ms, int64_t tokens) {
    const double per = 1.0 / (double)tokens;
    double ops_ms = 0.0;
    printf(", \"profile\": [");
    for (int i = 0, first = 1; i < QHX_PROF_COUNT; i++) {
        if (!p->calls[i]) continue;
        const double ms = (double)p->ns[i] / 1e6 * per;
        ops_ms += ms;
        printf("%s{\"op\": \"%s\", \"calls_per_token\": %.2f, \"ms_per_token\": %.4f, \"weight_bytes_per_token\": %.0f}",
               first ? "" : ", ", qhx_prof_op_name((qhx_prof_op)i), (double)p->calls[i] * per, ms,
               (double)p->weight_bytes[i] * per);
        first = 0;
    }
    printf("], \"profile_step_ms\": %.4f, \"profile_outside_ops_ms\": %.4f", step_ms * per, step_ms * per - ops_ms);
}

static void usage(FILE *f) {
    fprintf(f, "usage: qhx bench -m MODEL [--pp N] [--tg N] [--ctx N] [--threads N] [--reps N]\n"
               "                 [--weights mmap|read] [--isa ISA[,ISA...]] [--image FILE]\n"
               "                 [--prefill-math default|f32|int8] [--decode-math default|f32|int8] [--streams LIST] [--profile] [--json]\n"
               "       qhx bench tokenizer ...\n"
               "  --pp N       prompt tokens for the prefill figure (default 512; 0: skip)\n"
               "  --tg N       tokens decoded one by one (default 128; 0: skip)\n"
               "  --ctx N      tokens of context before decoding (default: the prompt)\n"
               "  --ctx-compare A,B  decode at A and at B tokens of context in the same run: two\n"
               "               sessions filled to A and B, then --tg tokens each, decoded in\n"
               "               alternating rounds of 8 so both see the same machine load\n"
               "  --threads N  worker threads (default 0: one per physical core)\n"
            "  --device D   %s\n"
               "  --reps N     repetitions; figures are medians (default 3)\n"
               "  --weights    mmap (mapped, populated) or read (anonymous huge pages); default: the\n"
               "               library default\n"
               "  --prefill-math  w8/q4 prompt matmul with f32 or int8 activations (default: int8\n"
               "               for q4, f32 for w8)\n"
               "  --decode-math   q4 decode matvec with int8 activations or not (default: int8)\n"
               "  --bw-passes N  streaming passes of 1 GiB for the bandwidth (default 5 before and 3\n"
               "               after the runs, the best counts; 0: skip, no roofline)\n"
               "  --image FILE also time the vision encoder on FILE (Qwen3-VL models): decode,\n"
               "               preprocess and encode, median over the reps\n"
               "  --kv f32|f16|q8  KV cache element type (default: the run plan's, else f16)\n"
               "  --streams LIST  aggregate decode of several sessions instead (e.g. 1,2,4,8): per\n"
               "               count, that many sessions each prefilled with --pp ids, then --tg\n"
               "               steps decoding all of them at once (qhx_sessions_decode); counts\n"
               "               interleaved within each rep\n"
               "  --profile    also time each device op of the decode run (QHX_PROFILE): calls, ms\n"
               "               and share of a step per token, the linear ops' weight GB/s\n"
               "  --json       one JSON object instead of the table\n", qhx_cli_device_help());
}

static int bench_one(int argc, char **argv);

/* ---- --streams: aggregate decode of several sessions (qhx_sessions_decode) ------------------ */

#define MAX_STREAM_COUNTS 8
#define RMAX_STREAM_REPS 101

typedef struct streams_run {
    int64_t counts[MAX_STREAM_COUNTS];
    int n_counts;
    int64_t pp, tg, reps;
    int profile;
} streams_run;

/* "1,2,4,8" -> counts (1 .. QHX_MAX_BATCH each); -1 on a bad list. */
static int parse_streams(const char *v, streams_run *r) {
    r->n_counts = 0;
    const char *p = v;
    while (*p) {
        char item[16];
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof item || r->n_counts == MAX_STREAM_COUNTS) return -1;
        memcpy(item, p, n);
        item[n] = '\0';
        if (qhx_cli_parse_i64(item, 1, QHX_MAX_BATCH, &r->counts[r->n_counts++])) return -1;
        p += n;
        if (*p == ',') p++;
    }
    return r->n_counts > 0 ? 0 : -1;
}

/* N sessions, each prefilled with its own pp random ids, then tg decode steps over all of them
 * at once (one qhx_sessions_decode per step: the server's batched step without the HTTP). */
static qhx_status stream_round(qhx_model *m, int64_t N, const streams_run *r, qhx_rng *rng, double *ms,
                               qhx_op_profile *prof, qhx_error *err) {
    qhx_session *ss[QHX_MAX_BATCH] = {0};
    qhx_token tk[QHX_MAX_BATCH];
    const int64_t V = qhx_model_n_vocab(m), top = V < 150000 ? V : 150000;
    int32_t *ids = malloc((size_t)(r->pp > 0 ? r->pp : 1) * sizeof *ids);
    if (!ids) return qhx_fail(err, QHX_E_NOMEM, "out of memory");
    qhx_session_params sp = qhx_session_default_params(m);
    sp.n_ctx = r->pp + r->tg + 1;
    qhx_status st = QHX_OK;
    for (int64_t i = 0; i < N && st == QHX_OK; i++) {
        st = qhx_session_create(m, &sp, &ss[i], err);
        for (int64_t k = 0; k < r->pp; k++) ids[k] = (int32_t)qhx_rng_below(rng, (uint64_t)top);
        if (st == QHX_OK && r->pp > 0) st = qhx_session_prefill(ss[i], ids, r->pp, NULL, err);
    }
    qhx_op_profile pr;
    qhx_model_op_profile(m, &pr, true);
    const double t = now_ms();
    for (int64_t k = 0; k < r->tg && st == QHX_OK; k++) {
        for (int64_t i = 0; i < N; i++) tk[i] = (qhx_token)qhx_rng_below(rng, (uint64_t)top);
        st = qhx_sessions_decode(ss, tk, (size_t)N, NULL, err);
    }
    *ms = now_ms() - t;
    if (qhx_model_op_profile(m, &pr, true)) add_profile(prof, &pr);
    for (int64_t i = 0; i < N; i++) qhx_session_free(ss[i]);
    free(ids);
    return st;
}

static int bench_streams(const char *model, const qhx_model_params *mp, const streams_run *r, int json) {
    qhx_error err = {0};
    qhx_model *m = NULL;
    qhx_cli_progress lp;
    qhx_model_params p = *mp;
    qhx_cli_progress_attach(&p, &lp);
    qhx_status open_rc = qhx_model_open(model, &p, &m, &err);
    qhx_cli_progress_end(&lp);
    if (open_rc) return qhx_cli_runtime_error(CMD, &err);
    double agg[MAX_STREAM_COUNTS][RMAX_STREAM_REPS];
    qhx_op_profile prof[MAX_STREAM_COUNTS];
    double prof_ms[MAX_STREAM_COUNTS] = {0};
    memset(prof, 0, sizeof prof);
    qhx_rng rng;
    qhx_rng_seed(&rng, 1234);
    int rc = QHX_EXIT_OK;
    /* rounds outside, counts inside: every count sees the same stretch of machine load */
    for (int64_t rep = 0; rep < r->reps && rc == QHX_EXIT_OK; rep++)
        for (int c = 0; c < r->n_counts; c++) {
            double ms = 0.0;
            if (stream_round(m, r->counts[c], r, &rng, &ms, &prof[c], &err)) {
                rc = qhx_cli_runtime_error(CMD, &err);
                break;
            }
            agg[c][rep] = (double)(r->counts[c] * r->tg) / (ms / 1e3);
            prof_ms[c] += ms;
            if (!json)
                fprintf(stderr, "round %lld: %lld streams %.2f tok/s\n", (long long)rep + 1, (long long)r->counts[c],
                        agg[c][rep]);
        }
    qhx_backend_info bi;
    qhx_model_backend_info(m, &bi);
    if (rc == QHX_EXIT_OK) {
        double med[MAX_STREAM_COUNTS];
        for (int c = 0; c < r->n_counts; c++) med[c] = median(agg[c], (int)r->reps);
        if (json) {
            printf("{\"model\": \"%s\", \"isa\": \"%s\", \"threads\": %d, \"pp\": %lld, \"tg\": %lld, \"reps\": %lld, "
                   "\"streams\": [",
                   model, bi.isa, bi.n_threads, (long long)r->pp, (long long)r->tg, (long long)r->reps);
            for (int c = 0; c < r->n_counts; c++)
                printf("%s{\"n\": %lld, \"aggregate_tok_s\": %.3f}", c ? ", " : "", (long long)r->counts[c], med[c]);
            printf("]}\n");
        } else {
            printf("model %s, isa %s, %d threads, %lld prompt tokens per stream, %lld decode steps, %lld rounds "
                   "(medians)\n",
                   model, bi.isa, bi.n_threads, (long long)r->pp, (long long)r->tg, (long long)r->reps);
            printf("  %8s %16s %12s %14s\n", "streams", "aggregate tok/s", "per stream", "x first count");
            for (int c = 0; c < r->n_counts; c++)
                printf("  %8lld %16.2f %12.2f %14.2f\n", (long long)r->counts[c], med[c], med[c] / (double)r->counts[c],
                       med[0] > 0 ? med[c] / med[0] : 0.0);
            for (int c = 0; c < r->n_counts && r->profile; c++) {
                printf("  %lld streams:\n", (long long)r->counts[c]);
                print_profile(&prof[c], prof_ms[c], r->tg * r->reps, 0.0);
            }
        }
    }
    qhx_model_free(m);
    return rc;
}

/* --isa A,B,...: the whole benchmark once per instruction set (ref, avx2, avx512, neon, best), one
 * after the other in this process, so the kernel tables of one machine are compared in one run
 * (e.g. --isa avx2,avx512 on an AVX-512 CPU). */
int qhx_bench_is_llama(int argc, char **argv); /* cmd_bench_llama.c: llama-bench's -p -n -t -r -o */
int qhx_bench_llama(int argc, char **argv);

int qhx_bench_model(int argc, char **argv) {
    if (qhx_bench_is_llama(argc, argv)) return qhx_bench_llama(argc, argv);
    int at = -1;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--isa") && strchr(argv[i + 1], ',')) at = i + 1;
    if (at < 0) return bench_one(argc, argv);
    char list[128];
    if (strlen(argv[at]) >= sizeof list) return qhx_cli_usage_error(CMD, "--isa: list too long");
    snprintf(list, sizeof list, "%s", argv[at]);
    char **args = malloc((size_t)argc * sizeof *args);
    if (!args) return QHX_EXIT_RUNTIME;
    memcpy(args, argv, (size_t)argc * sizeof *args);
    int rc = QHX_EXIT_OK;
    for (char *save = NULL, *isa = strtok_r(list, ",", &save); isa && rc == QHX_EXIT_OK;
         isa = strtok_r(NULL, ",", &save)) {
        args[at] = isa;
        rc = bench_one(argc, args);
    }
    free(args);
    return rc;
}

static int bench_one(int argc, char **argv) {
    const char *model = NULL, *wname = "default", *isa_name = "best", *math_name = "default", *image = NULL;
    const char *dmath_name = "default";
    int64_t pp = 512, tg = 128, ctx = -1, threads = 0, reps = 3, bw_passes = 5, cmp_a = -1, cmp_b = -1;
    int json = 0, profile = 0;
    streams_run streams = {.n_counts = 0};
    qhx_op_profile prof = {0}; /* summed over the reps' decode runs */
    double prof_ms = 0.0;
    int64_t prof_tokens = 0;
    qhx_model_params mp = qhx_model_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return QHX_EXIT_OK;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has) {
            model = argv[++i];
        } else if (!strcmp(a, "--pp") && has) {
            if (qhx_cli_parse_i64(argv[++i], 0, 1 << 20, &pp)) return qhx_cli_usage_error(CMD, "--pp: bad count '%s'", argv[i]);
        } else if (!strcmp(a, "--tg") && has) {
            if (qhx_cli_parse_i64(argv[++i], 0, 1 << 20, &tg)) return qhx_cli_usage_error(CMD, "--tg: bad count '%s'", argv[i]);
        } else if (!strcmp(a, "--ctx") && has) {
            if (qhx_cli_parse_i64(argv[++i], 0, 1 << 22, &ctx)) return qhx_cli_usage_error(CMD, "--ctx: bad count '%s'", argv[i]);
        } else if (!strcmp(a, "--threads") && has) {
            if (qhx_cli_parse_i64(argv[++i], 0, QHX_POOL_MAX_THREADS, &threads))
                return qhx_cli_usage_error(CMD, "--threads: expected 0..%d, got '%s'", QHX_POOL_MAX_THREADS, argv[i]);
        } else if (!strcmp(a, "--reps") && has) {
            if (qhx_cli_parse_i64(argv[++i], 1, 1000, &reps)) return qhx_cli_usage_error(CMD, "--reps: bad count '%s'", argv[i]);
        } else if (!strcmp(a, "--weights") && has) {
            wname = argv[++i];
            if (!strcmp(wname, "mmap")) mp.weights = QHX_WEIGHTS_MMAP;
            else if (!strcmp(wname, "read")) mp.weights = QHX_WEIGHTS_READ;
            else if (!strcmp(wname, "default")) mp.weights = QHX_WEIGHTS_DEFAULT;
            else return qhx_cli_usage_error(CMD, "--weights: expected mmap or read, got '%s'", wname);
        } else if (!strcmp(a, "--isa") && has) {
            isa_name = argv[++i];
            if (!strcmp(isa_name, "ref")) mp.max_isa = QHX_ISA_REF;
            else if (!strcmp(isa_name, "avx2")) mp.max_isa = QHX_ISA_AVX2;
            else if (!strcmp(isa_name, "avx512")) mp.max_isa = QHX_ISA_AVX512;
            else if (!strcmp(isa_name, "neon")) mp.max_isa = QHX_ISA_NEON;
            else if (!strcmp(isa_name, "best")) mp.max_isa = QHX_ISA_BEST;
            else return qhx_cli_usage_error(CMD, "--isa: expected ref, avx2, avx512, neon or best, got '%s'", isa_name);
        } else if (!strcmp(a, "--prefill-math") && has) {
            math_name = argv[++i];
            if (qhx_cli_parse_prefill_math(math_name, &mp.prefill_math))
                return qhx_cli_usage_error(CMD, "--prefill-math: expected default, f32 or int8, got '%s'", math_name);
        } else if (!strcmp(a, "--decode-math") && has) {
            dmath_name = argv[++i];
            if (qhx_cli_parse_prefill_math(dmath_name, &mp.decode_math))
                return qhx_cli_usage_error(CMD, "--decode-math: expected default, f32 or int8, got '%s'", dmath_name);
        } else if (!strcmp(a, "--ctx-compare") && has) {
            const char *v = argv[++i], *comma = strchr(v, ',');
            char head[32];
            if (!comma || (size_t)(comma - v) >= sizeof head) return qhx_cli_usage_error(CMD, "--ctx-compare: expected A,B, got '%s'", v);
            memcpy(head, v, (size_t)(comma - v));
            head[comma - v] = '\0';
            if (qhx_cli_parse_i64(head, 1, 1 << 22, &cmp_a) || qhx_cli_parse_i64(comma + 1, 1, 1 << 22, &cmp_b))
                return qhx_cli_usage_error(CMD, "--ctx-compare: expected A,B, got '%s'", v);
        } else if (!strcmp(a, "--bw-passes") && has) {
            if (qhx_cli_parse_i64(argv[++i], 0, 100, &bw_passes)) return qhx_cli_usage_error(CMD, "--bw-passes: bad count '%s'", argv[i]);
        } else if (!strcmp(a, "--kv") && has) {
            if (qhx_cli_parse_kv(argv[++i], &mp.kv_cache)) return qhx_cli_usage_error(CMD, "--kv: '%s' is not f32, f16 or q8", argv[i]);
        } else if (!strcmp(a, "--image") && has) {
            image = argv[++i];
        } else if (!strcmp(a, "--device") && has) {
            if (qhx_cli_check_device(CMD, argv[++i])) return QHX_EXIT_USAGE;
            mp.backend = argv[i];
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--profile")) {
            profile = 1;
        } else if (!strcmp(a, "--streams") && has) {
            if (parse_streams(argv[++i], &streams))
                return qhx_cli_usage_error(CMD, "--streams: expected counts 1..%d like 1,2,4,8 (at most %d), got '%s'",
                                           QHX_MAX_BATCH, MAX_STREAM_COUNTS, argv[i]);
        } else {
            return qhx_cli_usage_error(CMD, "unknown or incomplete argument '%s'", a);
        }
    }
    if (!model) return qhx_cli_usage_error(CMD, "-m MODEL is required");
    if (streams.n_counts > 0) {
        if (cmp_a > 0 || image) return qhx_cli_usage_error(CMD, "--streams is a mode of its own: not with --ctx-compare or --image");
        if (tg < 1) return qhx_cli_usage_error(CMD, "--streams needs --tg > 0");
        if (reps > RMAX_STREAM_REPS) return qhx_cli_usage_error(CMD, "--streams: at most %d reps", RMAX_STREAM_REPS);
        if (profile) setenv("QHX_PROFILE", "1", 1);
        streams.pp = pp, streams.tg = tg, streams.reps = reps, streams.profile = profile;
        return bench_streams(model, &mp, &streams, json);
    }
    if (profile && (cmp_a > 0 || tg < 1)) return qhx_cli_usage_error(CMD, "--profile times the decode run: needs --tg > 0, not --ctx-compare");
    if (profile) setenv("QHX_PROFILE", "1", 1); /* read when the model loads its device */
    if (cmp_a > 0) { /* compare mode: no prompt figure; the decode figure is at A */
        pp = 0;
        ctx = cmp_a;
        if (tg < 1) return qhx_cli_usage_error(CMD, "--ctx-compare needs --tg > 0");
    }
    if (ctx < 0) ctx = pp;
    int64_t n_ctx = (pp > ctx ? pp : ctx) + tg;
    if (cmp_b + tg > n_ctx) n_ctx = cmp_b + tg;
    if (n_ctx < 1) n_ctx = 1;
    mp.n_threads = (int)threads;
    if (image) mp.vision = 1; /* a checkpoint folder opens with its tower (a Qwen3.5 one would not by default) */
    mp.max_context = n_ctx;

    qhx_error err = {0};
    int rc = QHX_EXIT_OK;
    double *load = calloc((size_t)reps, sizeof(double)), *pre = calloc((size_t)reps, sizeof(double));
    double *pre_cpu = calloc((size_t)reps, sizeof(double));
    double *dec = calloc((size_t)reps, sizeof(double)), *dec_b = calloc((size_t)reps, sizeof(double));
    double *vis = calloc((size_t)reps, sizeof(double));
    int64_t vis_tokens = 0, vis_grid_h = 0, vis_grid_w = 0;
    int32_t *ids = malloc((size_t)(n_ctx > 0 ? n_ctx : 1) * sizeof *ids);
    qhx_pool *bw_pool = NULL;
    if (!load || !pre || !pre_cpu || !dec || !dec_b || !vis || !ids) {
        fprintf(stderr, "qhx %s: out of memory\n", CMD);
        rc = QHX_EXIT_RUNTIME;
        goto out;
    }
    if (qhx_pool_create((int)threads, &bw_pool, &err)) {
        rc = qhx_cli_runtime_error(CMD, &err);
        goto out;
    }
    double bw = bw_passes ? measure_bandwidth(bw_pool, (int)bw_passes) : 0.0;

    double bytes = 0.0;
    int n_threads = 0;
    char isa_used[16] = "", family[32] = "";
    for (int64_t r = 0; r < reps; r++) {
        qhx_model *m = NULL;
        double t = now_ms();
        qhx_cli_progress lp;
        qhx_cli_progress_attach(&mp, &lp);
        qhx_status open_rc = qhx_model_open(model, &mp, &m, &err);
        qhx_cli_progress_end(&lp);
        if (open_rc) {
            rc = qhx_cli_runtime_error(CMD, &err);
            goto out;
        }
        load[r] = now_ms() - t;
        bytes = decode_bytes(m);
        qhx_backend_info bi;
        qhx_model_backend_info(m, &bi);
        n_threads = bi.n_threads;
        snprintf(isa_used, sizeof isa_used, "%s", bi.isa);
        snprintf(family, sizeof family, "%s", qhx_model_family_name(m));
        if (image && bench_image(m, image, &vis[r], &vis_tokens, &vis_grid_h, &vis_grid_w, &err)) {
            qhx_model_free(m);
            rc = qhx_cli_runtime_error(CMD, &err);
            goto out;
        }
        qhx_rng rng;
        qhx_rng_seed(&rng, 1234);
        int64_t V = qhx_model_n_vocab(m);
        for (int64_t i = 0; i < n_ctx; i++) ids[i] = (int32_t)qhx_rng_below(&rng, (uint64_t)(V < 150000 ? V : 150000));
        qhx_session *s = NULL;
        qhx_session_params sp = qhx_session_default_params(m);
        sp.n_ctx = n_ctx;
        if (qhx_session_create(m, &sp, &s, &err)) {
            qhx_model_free(m);
            rc = qhx_cli_runtime_error(CMD, &err);
            goto out;
        }
        qhx_status st = QHX_OK;
        qhx_session *s2 = NULL;
        if (cmp_a > 0) {
            /* two sessions at A and B tokens, decoded in alternating rounds of 8 tokens */
            if ((st = qhx_session_create(m, &sp, &s2, &err)) == QHX_OK &&
                (st = qhx_session_prefill(s, ids, cmp_a, NULL, &err)) == QHX_OK)
                st = qhx_session_prefill(s2, ids, cmp_b, NULL, &err);
            double ta = 0.0, tb = 0.0;
            for (int64_t k0 = 0; k0 < tg && st == QHX_OK; k0 += 8) {
                int64_t k1 = k0 + 8 < tg ? k0 + 8 : tg;
                t = now_ms();
                for (int64_t k = k0; k < k1 && st == QHX_OK; k++) st = qhx_session_decode(s, ids[cmp_a + k], &err);
                ta += now_ms() - t;
                t = now_ms();
                for (int64_t k = k0; k < k1 && st == QHX_OK; k++) st = qhx_session_decode(s2, ids[cmp_b + k], &err);
                tb += now_ms() - t;
            }
            dec[r] = (double)tg / (ta / 1e3);
            dec_b[r] = (double)tg / (tb / 1e3);
            qhx_session_free(s2);
            tg = -tg; /* skip the plain decode below */
        }
        if (pp > 0) {
            t = now_ms();
            double c = cpu_s();
            st = qhx_session_prefill(s, ids, pp, NULL, &err);
            pre[r] = (double)pp / ((now_ms() - t) / 1e3);
            /* per CPU second of each thread: the speed while our threads ran (a loaded machine
             * moves the wall figure with its neighbours; idle workers' brief spins count here) */
            pre_cpu[r] = (double)pp / ((cpu_s() - c) / n_threads);
        }
        /* context for decode: the prompt, or a fresh fill of ctx tokens */
        if (st == QHX_OK && ctx != pp && tg > 0) {
            qhx_session_reset(s);
            if (ctx > 0) st = qhx_session_prefill(s, ids, ctx, NULL, &err);
        }
        if (st == QHX_OK && tg > 0) {
            qhx_op_profile pr;
            qhx_model_op_profile(m, &pr, true); /* what the prefill ran is not the decode step's */
            t = now_ms();
            for (int64_t k = 0; k < tg && st == QHX_OK; k++) st = qhx_session_decode(s, ids[ctx + k], &err);
            const double ms = now_ms() - t;
            dec[r] = (double)tg / (ms / 1e3);
            if (profile && qhx_model_op_profile(m, &pr, true)) {
                add_profile(&prof, &pr);
                prof_ms += ms, prof_tokens += tg;
            }
        }
        if (tg < 0) tg = -tg;
        qhx_session_free(s);
        qhx_model_free(m);
        if (st) {
            rc = qhx_cli_runtime_error(CMD, &err);
            goto out;
        }
        if (!json && cmp_a > 0)
            fprintf(stderr, "rep %lld: load %.0f ms, decode %.2f tok/s at %lld context, %.2f tok/s at %lld\n",
                    (long long)r + 1, load[r], dec[r], (long long)cmp_a, dec_b[r], (long long)cmp_b);
        else if (!json)
            fprintf(stderr, "rep %lld: load %.0f ms, prefill %.2f tok/s, decode %.2f tok/s\n", (long long)r + 1,
                    load[r], pre[r], dec[r]);
    }
    double bw2 = bw_passes ? measure_bandwidth(bw_pool, bw_passes < 3 ? (int)bw_passes : 3) : 0.0;
    if (bw2 > bw) bw = bw2;

    double load_ms = median(load, (int)reps), pre_s = median(pre, (int)reps), dec_s = median(dec, (int)reps);
    double pre_cpu_s = median(pre_cpu, (int)reps);
    double dec_b_s = median(dec_b, (int)reps), vis_ms = median(vis, (int)reps);
    double achieved = bytes * dec_s / 1e9, ratio = bw > 0 ? achieved / bw : 0.0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = (double)ru.ru_maxrss / 1024.0;
    const char *wmode = mp.weights == QHX_WEIGHTS_MMAP ? "mmap" : mp.weights == QHX_WEIGHTS_READ ? "read" : "default";
    if (json) {
        printf("{\"model\": \"%s\", \"family\": \"%s\", \"isa\": \"%s\", \"threads\": %d, \"weights\": \"%s\", "
               "\"prefill_math\": \"%s\", \"decode_math\": \"%s\", "
               "\"pp\": %lld, \"tg\": %lld, \"ctx\": %lld, \"reps\": %lld, "
               "\"load_ms\": %.1f, \"prefill_tok_s\": %.3f, \"prefill_cpu_tok_s\": %.3f, \"decode_tok_s\": %.3f, "
               "\"bandwidth_gbs\": %.2f, "
               "\"decode_bytes_per_token\": %.0f, \"decode_gbs\": %.2f, \"roofline_ratio\": %.4f, "
               "\"peak_rss_mb\": %.1f",
               model, family, isa_used, n_threads, wmode, math_name, dmath_name, (long long)pp, (long long)tg, (long long)ctx, (long long)reps,
               load_ms, pre_s, pre_cpu_s, dec_s, bw, bytes, achieved, ratio, rss_mb);
        if (cmp_a > 0)
            printf(", \"ctx_a\": %lld, \"ctx_b\": %lld, \"decode_tok_s_a\": %.3f, \"decode_tok_s_b\": %.3f, "
                   "\"ratio_b_over_a\": %.4f",
                   (long long)cmp_a, (long long)cmp_b, dec_s, dec_b_s, dec_s > 0 ? dec_b_s / dec_s : 0.0);
        if (image)
            printf(", \"vision_ms\": %.1f, \"vision_tokens\": %lld, \"vision_grid\": [%lld, %lld]", vis_ms,
                   (long long)vis_tokens, (long long)vis_grid_h, (long long)vis_grid_w);
        if (prof_tokens > 0) print_profile_json(&prof, prof_ms, prof_tokens);
        printf("}\n");
    } else {
        printf("model %s (%s), isa %s, %d threads, weights %s, prefill math %s, decode math %s, %lld reps (medians)\n",
               model, family, isa_used, n_threads, wmode, math_name, dmath_name, (long long)reps);
        printf("  load                 %10.1f ms\n", load_ms);
        if (pp > 0)
            printf("  prefill (pp %lld)      %10.2f tok/s (%.2f per CPU second of each thread)\n", (long long)pp, pre_s,
                   pre_cpu_s);
        if (tg > 0) printf("  decode (tg %lld, ctx %lld) %8.2f tok/s\n", (long long)tg, (long long)ctx, dec_s);
        printf("  read bandwidth       %10.2f GB/s (best 1 GiB streaming read, all threads)\n", bw);
        printf("  bytes per token      %10.1f MB (decoder + lm-head)\n", bytes / 1e6);
        if (tg > 0) printf("  roofline             %10.1f %% (%.2f GB/s of weights)\n", 100.0 * ratio, achieved);
        if (cmp_a > 0)
            printf("  decode at %lld ctx %8.2f tok/s, at %lld ctx %.2f tok/s: ratio %.3f (alternating rounds)\n",
                   (long long)cmp_a, dec_s, (long long)cmp_b, dec_b_s, dec_s > 0 ? dec_b_s / dec_s : 0.0);
        if (image)
            printf("  vision encode        %10.1f ms (%lld x %lld patches -> %lld tokens; decode + preprocess + tower)\n",
                   vis_ms, (long long)vis_grid_h, (long long)vis_grid_w, (long long)vis_tokens);
        printf("  peak RSS             %10.1f MB\n", rss_mb);
        if (prof_tokens > 0) print_profile(&prof, prof_ms, prof_tokens, bw);
    }
out:
    qhx_pool_free(bw_pool);
    free(load);
    free(pre);
    free(pre_cpu);
    free(dec);
    free(dec_b);
    free(vis);
    free(ids);
    return rc;
}
